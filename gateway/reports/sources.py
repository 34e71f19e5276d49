"""What a report reads, as small interfaces, and how to get them from the Services.

The assemble step only sees :class:`ReportSources`: the site registry, the rule
packs, a :class:`~gateway.store.base.TimeSeriesStore` (either backend), and
optionally a findings repository and an alert source. A source that is missing
is reported as "not available" in the document rather than shown as "none".
"""

from __future__ import annotations

import builtins
import sqlite3
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from alerts.models import Alert, AlertQuery
from gateway.domain import Confirmation, ConfirmationSource, Finding, NotEvaluated
from gateway.errors import StoreError
from gateway.registry.models import SiteRegistry
from gateway.rules.pack import RulePack
from gateway.rules.verdict import LedgerLine, LedgerSource
from gateway.services import Services
from gateway.state.database import SqliteDatabase
from gateway.state.snapshots import FindingSnapshot
from gateway.store.base import TimeSeriesStore

#: Most alerts (findings) one site can have in a season before the list is cut.
MAX_ALERTS = 10_000
MAX_FINDINGS = 100_000


class FindingSource(Protocol):
    """The findings repository (``gateway.state.findings.FindingRepository``)."""

    async def list(
        self,
        *,
        site_id: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int = ...,
    ) -> list[Finding]:
        """Findings of a site that were open at some time in [since, until)."""

    async def level_histories(
        self, finding_ids: builtins.list[str]
    ) -> dict[str, builtins.list[tuple[datetime, str]]]:
        """Each finding's ``(at, level)`` events, oldest first."""


class SnapshotSource(Protocol):
    """Where the frozen snapshots of findings are kept (the findings repository)."""

    async def snapshots(self, finding_id: str) -> builtins.list[FindingSnapshot]:
        """The snapshots of one finding, oldest first."""


def snapshot_as_of(snapshots: Iterable[FindingSnapshot], at: datetime) -> FindingSnapshot | None:
    """The snapshot in force at ``at``: the latest taken at or before it (issue 15.5:
    a document for a past period shows what the system saw then, not the finding's
    evidence as it was overwritten since)."""
    before = [s for s in snapshots if s.at <= at]
    return max(before, key=lambda s: (s.at, s.seq)) if before else None


class NotEvaluatedSource(Protocol):
    """Where spans of late readings no detector judged are kept (the findings repository)."""

    async def not_evaluated(
        self,
        site_id: str,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int = ...,
    ) -> builtins.list[NotEvaluated]:
        """A site's not-evaluated spans overlapping [since, until], oldest first."""


class AlertSource(Protocol):
    """Anything that lists alerts (``alerts.manager.AlertManager`` does)."""

    async def list_alerts(self, query: AlertQuery = ...) -> list[Alert]:
        """Alerts matching the filters."""


class SqliteAlerts:
    """Alerts read straight from the alert tables (for the CLI, without a manager)."""

    def __init__(self, db: SqliteDatabase) -> None:
        self.db = db

    async def list_alerts(self, query: AlertQuery = AlertQuery()) -> list[Alert]:
        """Alerts matching the filters; none when alerting never created its tables."""
        from alerts.outbox import query_alerts

        def run(conn: sqlite3.Connection) -> list[Alert]:
            exists = conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'alerts'"
            ).fetchone()
            return query_alerts(conn, query) if exists else []

        return await self.db.read(run)


@dataclass(frozen=True)
class ReportSources:
    """Everything the assemble step reads."""

    registry: SiteRegistry
    packs: dict[str, RulePack]
    store: TimeSeriesStore
    findings: FindingSource | None = None
    alerts: AlertSource | None = None
    #: Inspections and observations that confirm or refute what telemetry suspects.
    confirmations: ConfirmationSource | None = None
    #: Spans of late readings that were stored but not judged (issue 20.10).
    not_evaluated: NotEvaluatedSource | None = None
    #: Frozen finding snapshots: a report shows the evidence as of its period's end.
    snapshots: SnapshotSource | None = None
    #: The enforcement ledger: sites with cases are estimated from its posted lines.
    ledger: LedgerSource | None = None

    async def ledger_of(self, site_id: str) -> builtins.list[LedgerLine] | None:
        """The site's posted ledger lines; None without a ledger or without a case."""
        if self.ledger is None:
            return None
        return await self.ledger.ledger_lines(site_id)

    async def frozen_evidence_of(
        self, findings: builtins.list[Finding], until: datetime
    ) -> dict[str, Mapping[str, Any]]:
        """Each finding's evidence as frozen at or before ``until`` (findings without
        a snapshot source, or without a snapshot by then, are left out)."""
        if self.snapshots is None:
            return {}
        out: dict[str, Mapping[str, Any]] = {}
        for f in findings:
            snap = snapshot_as_of(await self.snapshots.snapshots(f.id), until)
            if snap is not None:
                out[f.id] = snap.data.get("finding", {}).get("evidence", {})
        return out

    async def levels_of(self, findings: list[Finding]) -> dict[str, list[tuple[datetime, str]]]:
        """Level histories of the findings, where the findings source keeps them.

        A source without histories gives none; the verdict then takes each finding's
        last level for its whole span and the report says so.
        """
        if self.findings is None or not findings:
            return {}
        return await self.findings.level_histories([f.id for f in findings])

    def confirmations_of(
        self, site_id: str, since: datetime, until: datetime
    ) -> list[Confirmation]:
        """Confirming or refuting records of one site in [since, until)."""
        if self.confirmations is None:
            return []
        return self.confirmations.confirmations(site_id, since, until)

    async def findings_of(self, site_id: str, since: datetime, until: datetime) -> list[Finding]:
        """Findings of one site overlapping [since, until) (empty without a repository)."""
        if self.findings is None:
            return []
        # A repository's default page is far smaller than a season.
        found = await self.findings.list(
            site_id=site_id, since=since, until=until, limit=MAX_FINDINGS
        )
        return [f for f in found if f.site_id == site_id]

    async def not_evaluated_of(
        self, site_id: str, since: datetime, until: datetime
    ) -> list[NotEvaluated]:
        """Late-reading spans of one site overlapping [since, until) (empty without a source)."""
        if self.not_evaluated is None:
            return []
        return await self.not_evaluated.not_evaluated(
            site_id, since=since, until=until, limit=MAX_FINDINGS
        )

    async def alerts_of(self, site_id: str, since: datetime, until: datetime) -> list[Alert]:
        """Alerts of one site raised in [since, until) (empty without a source)."""
        if self.alerts is None:
            return []
        try:
            return await self.alerts.list_alerts(
                AlertQuery(site_id=site_id, since=since, until=until, limit=MAX_ALERTS)
            )
        except StoreError:
            return []


def sources_from_services(services: Services) -> ReportSources:
    """The sources of a running gateway: its packs and findings, and its alerts, or
    the alert tables in the shared database when this app runs without alerting."""
    alerts: AlertSource = services.alerts or SqliteAlerts(services.db)
    return ReportSources(
        registry=services.registry,
        packs=dict(services.packs),
        store=services.store,
        findings=services.findings,
        alerts=alerts,
        confirmations=services.confirmations,
        not_evaluated=services.findings,
        snapshots=services.findings,
        ledger=services.ledger,
    )
