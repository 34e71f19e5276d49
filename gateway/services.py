"""What the edges (API, pages, reports, accounts) may use of a running gateway.

The composition root (:mod:`gateway.runtime`) builds one :class:`Services` and
puts it on ``app.state.services``; every route reaches it through
:data:`ServicesDep`. The edges therefore never import the runtime, never see the
pipeline's internals, and never guess with ``getattr`` what a gateway offers:
what is here is typed, and what can be missing says so with ``None``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated

from fastapi import Depends, Request

from alerts.manager import AlertManager
from alerts.models import Alert
from gateway.domain import Audience, ConfirmationSource, Finding
from gateway.ingest import MqttSource
from gateway.metrics import Metrics
from gateway.pipeline import Pipeline
from gateway.registry import SiteRegistry
from gateway.registry.models import SiteConfig
from gateway.rules.pack import RulePack
from gateway.rules.verdict import LedgerSource, NoConfirmations, Verdict, site_verdict
from gateway.settings import DetectorsSettings, MapSettings
from gateway.state.database import Database, SqliteDatabase
from gateway.state.deadletters import StateRepository
from gateway.state.findings import FindingRepository
from gateway.store.base import TimeSeriesStore


@dataclass(frozen=True)
class AlertActions:
    """The one place an alert is acknowledged, assigned or resolved by a person.

    Both ``/alerts/{id}/...`` (JSON) and ``/ui/alerts/{id}/...`` (page forms) call
    it; an unknown alert raises :class:`~gateway.errors.NotFound` and a change the
    alert's state does not allow raises ``InvalidTransition``, which the app's
    exception handlers (:mod:`gateway.problems`) answer with 404 and 409.
    """

    manager: AlertManager

    async def acknowledge(self, alert_id: str, *, by: str, note: str | None) -> Alert:
        """open -> acknowledged; an empty note counts as none."""
        return await self.manager.acknowledge(alert_id, by=by, note=note or None)

    async def assign(self, alert_id: str, *, assignee: str | None) -> Alert:
        """Who at public works handles it; blank unassigns."""
        return await self.manager.assign(alert_id, assignee=_blank_is_none(assignee))

    async def resolve(
        self, alert_id: str, *, by: str, admin: bool, note: str | None, confirm: bool
    ) -> Alert:
        """Resolved by hand by staff ``by``; an empty note counts as none. Public works
        may resolve only alerts addressed to public works (an ``admin`` any); an alert
        whose condition is still detected needs ``confirm`` (alerts.lifecycle)."""
        audience = None if admin else Audience.PUBLIC_WORKS
        return await self.manager.resolve(
            alert_id, by=by, note=note or None, audience=audience, confirm=confirm
        )


def _blank_is_none(text: str | None) -> str | None:
    stripped = (text or "").strip()
    return stripped or None


@dataclass(frozen=True)
class Ingest:
    """The live ingest path, read by ``/health`` (connection, write lag)."""

    source: MqttSource
    pipeline: Pipeline


@dataclass(frozen=True)
class Services:
    """Everything a route may read or act on, built once by the runtime.

    Of the settings, only what the edges read: the data folder (the demo's fault
    injection), the detectors' silence factor and the map's tile server.
    """

    data_dir: Path
    registry: SiteRegistry
    packs: Mapping[str, RulePack]
    store: TimeSeriesStore
    #: The SQLite file: the time-series store's, and the state's unless ``state_db``.
    db: SqliteDatabase
    findings: FindingRepository
    #: None when this app runs without alerting (a report-only or test app).
    alerts: AlertManager | None
    state: StateRepository
    metrics: Metrics = field(default_factory=Metrics)
    #: None when this app does not ingest (it reads a database others write).
    ingest: Ingest | None = None
    #: Inspections and observations that confirm (or refute) what telemetry suspects;
    #: none recorded where no case store is wired.
    confirmations: ConfirmationSource = field(default_factory=NoConfirmations)
    #: The enforcement ledger the reports read for sites with cases (issue 16.5).
    ledger: LedgerSource | None = None
    started_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    #: The state database when it is not ``db`` (``state_url``: PostgreSQL).
    state_db: Database | None = None
    detectors: DetectorsSettings = field(default_factory=DetectorsSettings)
    map: MapSettings = field(default_factory=MapSettings)

    @property
    def state_database(self) -> Database:
        """Where findings, alerts, accounts and cases live (what the repositories open)."""
        return self.db if self.state_db is None else self.state_db

    @property
    def alert_actions(self) -> AlertActions | None:
        """The alert actions, when alerting is wired."""
        return None if self.alerts is None else AlertActions(self.alerts)


def get_services(request: Request) -> Services:
    """The Services the lifespan put on ``app.state``."""
    services: Services = request.app.state.services
    return services


#: The one dependency through which routes reach the running gateway.
ServicesDep = Annotated[Services, Depends(get_services)]


async def current_verdict(
    services: Services, site: SiteConfig, now: datetime, findings: list[Finding] | None = None
) -> Verdict:
    """The site's one compliance verdict now (gateway.rules.verdict): the audit, its
    open findings with their level history, confirmations and waivers. The pages and
    the API read this; the reports compute the same verdict over a season."""
    if findings is None:
        findings = await services.findings.open_findings()
    mine = [f for f in findings if f.site_id == site.id]
    histories = await services.findings.level_histories([f.id for f in mine]) if mine else {}
    since = min((f.opened_at for f in mine), default=now)
    records = services.confirmations.confirmations(site.id, since, now + timedelta(seconds=1))
    return site_verdict(
        site,
        services.packs.get(site.jurisdiction),
        as_of=now,
        findings=mine,
        histories=histories,
        confirmations=records,
        since=since,
    )
