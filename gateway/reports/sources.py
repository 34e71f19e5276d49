"""What a report reads, as small interfaces, and how to get them from a Runtime.

The assemble step only sees :class:`ReportSources`: the site registry, the rule
packs, a :class:`~gateway.store.base.TimeSeriesStore` (either backend), and
optionally a findings repository and an alert source. A source that is missing
is reported as "not available" in the document rather than shown as "none".
"""

from __future__ import annotations

import builtins
import inspect
import sqlite3
from collections.abc import Awaitable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from alerts.models import Alert, AlertQuery
from gateway.domain import Confirmation, ConfirmationSource, Finding
from gateway.errors import StoreError
from gateway.registry.models import SiteRegistry
from gateway.rules.pack import RulePack, load_packs
from gateway.store.base import TimeSeriesStore
from gateway.store.database import SqliteDatabase

#: Most alerts (findings) one site can have in a season before the list is cut.
MAX_ALERTS = 10_000
MAX_FINDINGS = 100_000


class FindingSource(Protocol):
    """The findings repository (``gateway.rules.repository.FindingRepository``)."""

    def list(
        self,
        *,
        site_id: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> Awaitable[list[Finding]] | list[Finding]:
        """Findings of a site that were open at some time in [since, until)."""


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
        from alerts.store import query_alerts

        def run(conn: sqlite3.Connection) -> list[Alert]:
            exists = conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'alerts'"
            ).fetchone()
            return query_alerts(conn, query) if exists else []

        return await self.db.read(run)


class OpenedFindings:
    """The SQLite findings repository, its tables created on first use.

    For runtimes that do not hold a repository of their own: the report reads
    the same ``findings`` table the gateway writes.
    """

    def __init__(self, db: SqliteDatabase) -> None:
        from gateway.rules.repository import FindingRepository

        self.repo = FindingRepository(db)
        self._opened = False

    async def list(
        self,
        *,
        site_id: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> list[Finding]:
        """Findings of a site open at some time in [since, until)."""
        if not self._opened:
            await self.repo.open()
            self._opened = True
        return await self.repo.list(site_id=site_id, since=since, until=until, limit=MAX_FINDINGS)

    async def level_histories(
        self, finding_ids: builtins.list[str]
    ) -> dict[str, builtins.list[tuple[datetime, str]]]:
        """Each finding's ``(at, level)`` events, oldest first."""
        if not self._opened:
            await self.repo.open()
            self._opened = True
        return await self.repo.level_histories(finding_ids)


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

    async def levels_of(self, findings: list[Finding]) -> dict[str, list[tuple[datetime, str]]]:
        """Level histories of the findings, where the findings source keeps them.

        A source without histories gives none; the verdict then takes each finding's
        last level for its whole span and the report says so.
        """
        getter = getattr(self.findings, "level_histories", None)
        if getter is None or not findings:
            return {}
        result = getter([f.id for f in findings])
        if inspect.isawaitable(result):
            result = await result
        return dict(result)

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
        lister = self.findings.list
        kwargs: dict[str, Any] = {"site_id": site_id, "since": since, "until": until}
        if "limit" in inspect.signature(lister).parameters:
            kwargs["limit"] = MAX_FINDINGS  # a repository's default page is far smaller
        result = lister(**kwargs)
        if inspect.isawaitable(result):
            result = await result
        return [f for f in result if f.site_id == site_id]

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


def sources_from_runtime(runtime: Any) -> ReportSources:
    """The sources of a running gateway (``request.app.state.runtime``).

    Reads ``packs``, ``findings`` and ``alerts`` from the runtime (attribute or
    ``extras`` entry) when it has them; otherwise loads the packs from settings
    and reads findings and alerts from the shared SQLite database.
    """

    def part(name: str) -> Any:
        value = getattr(runtime, name, None)
        if value is None:
            value = getattr(runtime, "extras", {}).get(name)
        return value

    packs = part("packs")
    if packs is None:
        packs = load_packs(runtime.settings.rule_packs_dir)
    findings = part("findings")
    if findings is None or not hasattr(findings, "list"):
        findings = OpenedFindings(runtime.db)
    alerts = part("alerts")
    if alerts is None or not hasattr(alerts, "list_alerts"):
        alerts = SqliteAlerts(runtime.db)
    return ReportSources(
        registry=runtime.registry,
        packs=packs,
        store=runtime.store,
        findings=findings,
        alerts=alerts,
        confirmations=confirmation_source(runtime),
    )


def confirmation_source(runtime: Any) -> ConfirmationSource:
    """The runtime's confirmation store when one is wired (``confirmations``), else
    :class:`~gateway.rules.verdict.NoConfirmations`: nothing records them yet."""
    from gateway.rules.verdict import NoConfirmations

    found = getattr(runtime, "confirmations", None)
    if found is None:
        found = getattr(runtime, "extras", {}).get("confirmations")
    if found is None or not hasattr(found, "confirmations"):
        return NoConfirmations()
    source: ConfirmationSource = found
    return source
