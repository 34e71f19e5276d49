"""Issue 16.2: due and overdue case deadlines drive public-works alerts (real AlertManager)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from alerts.config import AlertsConfig
from alerts.manager import AlertManager
from alerts.models import AlertQuery, AlertState
from gateway.cases.escalation import DeadlineWatch
from gateway.cases.models import Method, Origin, Party, Service, StepKind
from gateway.cases.repository import CaseRepository
from gateway.cases.service import Actor, CaseService
from gateway.registry import load_registry
from gateway.rules.pack import load_packs
from gateway.settings import REPO_DIR
from gateway.state.database import SqliteDatabase

SITES = REPO_DIR / "deploy" / "sites.example.toml"
CLERK = Actor("edgar-pw", "public_works")


@dataclass
class Clock:
    now: datetime

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
async def parts(tmp_path: Path) -> AsyncIterator[tuple[CaseService, AlertManager, Clock]]:
    db = SqliteDatabase(tmp_path / "gw.sqlite")
    await db.open()
    clock = Clock(datetime(2027, 1, 4, 15, tzinfo=UTC))
    registry = load_registry(SITES)
    repo = CaseRepository(db)
    await repo.open()
    alerts = AlertManager(db=db, registry=registry, config=AlertsConfig(), clock=clock)
    await alerts.open()
    yield CaseService(repo, registry, load_packs(), clock=clock), alerts, clock
    await alerts.close()
    await db.close()


async def test_an_overdue_order_alerts_public_works_and_the_alert_resolves_when_met(
    parts: tuple[CaseService, AlertManager, Clock],
) -> None:
    service, alerts, clock = parts
    watch = DeadlineWatch(service, alerts.on_events)
    case = await service.open_case("elm-16", "sanitary_discharge", Origin.COMPLAINT, CLERK)
    order = service.new_step(StepKind.ORDER, service=Service(Party.OWNER, Method.IN_PERSON))
    await service.record(case.id, order, CLERK)
    assert await watch.check() == []  # 30 days to go: nothing to escalate

    clock.now = datetime(2027, 2, 3, 15, tzinfo=UTC)  # the last day (Chicago)
    [due] = await watch.check()
    assert (due.finding.rule_id, due.finding.level) == ("case_deadline.correct", "due_today")

    clock.now = datetime(2027, 2, 4, 15, tzinfo=UTC)
    [overdue] = await watch.check()
    assert overdue.finding.level == "overdue"
    [alert] = await alerts.list_alerts(AlertQuery(site_id="elm-16"))
    assert alert.audience == ("public_works",)
    assert alert.escalated_at is not None  # straight to public works: no grace on a deadline
    assert alert.citations[0]["section"] == "(f)(1)"
    assert alert.level == "overdue"

    clock.now += timedelta(days=2)
    proof = service.new_step(StepKind.CORRECTION_PROOF, note="plumber's certificate")
    await service.record(case.id, proof, Actor("elm16", "homeowner"))
    [cleared] = await watch.check()
    assert cleared.finding.cleared_at == clock.now
    [alert] = await alerts.list_alerts(AlertQuery(site_id="elm-16"))
    assert (alert.state, alert.resolved_by) == (AlertState.RESOLVED, "system")
