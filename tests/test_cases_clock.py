"""Issue 15.7 / 16.2: one clock. The alert, the case deadlines and the penalty estimate
agree on when a violation's clock starts: the first episode of the season year until
a case records an order, then the order (Edgar (f)(1) "within thirty (30) days after
order issuance"). Escalation to public works follows the case deadlines for a rule
whose pack has an order step. Real SQLite, real AlertManager and case service.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from alerts.config import AlertsConfig
from alerts.manager import AlertManager
from alerts.models import Alert, AlertQuery
from alerts.policy import compliance_clock_start, violation_clock_start
from gateway.cases.escalation import DeadlineWatch, has_order_step
from gateway.cases.models import Method, Party, Service, StepKind
from gateway.cases.repository import CaseRepository
from gateway.cases.service import Actor, CaseService
from gateway.domain import Audience, Finding, FindingChange, FindingEvent, Severity
from gateway.registry import load_registry
from gateway.rules.pack import load_packs
from gateway.settings import REPO_DIR
from gateway.state.database import SqliteDatabase

SITES = REPO_DIR / "deploy" / "sites.example.toml"
CLERK = Actor("edgar-pw", "public_works")
CHICAGO = ZoneInfo("America/Chicago")
PACKS = load_packs()
DETECTED = datetime(2027, 1, 4, 15, tzinfo=UTC)
ORDERED = datetime(2027, 2, 12, 16, tzinfo=UTC)  # 10:00 in Edgar


@dataclass
class Clock:
    now: datetime

    def __call__(self) -> datetime:
        return self.now


@dataclass
class Parts:
    service: CaseService
    alerts: AlertManager
    clock: Clock


@pytest.fixture
async def parts(tmp_path: Path) -> AsyncIterator[Parts]:
    db = SqliteDatabase(tmp_path / "gw.sqlite")
    await db.open()
    clock = Clock(DETECTED)
    repo = CaseRepository(db)
    await repo.open()
    registry = load_registry(SITES).amended(repo)
    alerts = AlertManager(
        db=db,
        registry=registry,
        config=AlertsConfig(),
        clock=clock,
        grace_period=lambda j, rule: PACKS[j].grace_period(rule),
        season_start=lambda j: PACKS[j].season.start,
        order_date=repo.order_date,
        follows_case=lambda j, rule: has_order_step(PACKS[j], rule),
    )
    await alerts.open()
    yield Parts(CaseService(repo, registry, PACKS, clock=clock), alerts, clock)
    await alerts.close()
    await db.close()


def _hose(at: datetime) -> Finding:
    return Finding(
        id="f-1", rule_id="sanitary_discharge", site_id="elm-16", severity=Severity.CRITICAL,
        title="Sump water is going into the sanitary sewer", opened_at=DETECTED, updated_at=at,
        level="violation", audience=(Audience.HOMEOWNER, Audience.PUBLIC_WORKS),
        citations=PACKS["edgar"].rule("sanitary_discharge").citations,
    )  # fmt: skip


async def _detector_alert(p: Parts) -> Alert:
    found = await p.alerts.list_alerts(AlertQuery(site_id="elm-16"))
    [alert] = [a for a in found if a.rule_id == "sanitary_discharge"]
    return alert


def test_the_compliance_clock_is_the_order_once_there_is_one() -> None:
    earlier = [datetime(2026, 12, 1, tzinfo=UTC)]
    kw = {"tz": CHICAGO, "season_start": (11, 15)}
    assert compliance_clock_start(DETECTED, earlier, **kw) == violation_clock_start(  # type: ignore[arg-type]
        DETECTED,
        earlier,
        **kw,  # type: ignore[arg-type]
    )
    assert compliance_clock_start(DETECTED, earlier, order_at=ORDERED, **kw) == ORDERED  # type: ignore[arg-type]


async def test_the_alert_the_case_deadline_and_the_ledger_start_the_clock_at_the_order(
    parts: Parts,
) -> None:
    p = parts
    opened = FindingEvent(FindingChange.OPENED, _hose(DETECTED))
    await p.alerts.on_events([opened])
    await p.service.on_events([opened])
    alert = await _detector_alert(p)
    # Before an order: the first episode of the season year; no escalation by age.
    assert alert.clock_started_at == DETECTED
    assert alert.escalate_at is None and alert.escalated_at is None

    p.clock.now = ORDERED
    [case] = await p.service.repo.list_cases(frozenset({"elm-16"}))
    order = p.service.new_step(StepKind.ORDER, service=Service(Party.OWNER, Method.IN_PERSON))
    await p.service.record(case.id, order, CLERK)
    await p.alerts.on_events([FindingEvent(FindingChange.UPDATED, _hose(ORDERED))])
    alert = await _detector_alert(p)
    view = p.service.view(await p.service.repo.get(case.id))
    [correct] = [d for d in view.deadlines if d.id == "correct"]
    ledger = await p.service.post_ledger("elm-16")

    ordered_day = ORDERED.astimezone(CHICAGO).date()
    assert alert.clock_started_at == ORDERED  # the alert's clock
    assert correct.due_on == ordered_day + timedelta(days=30)  # (f)(1), day 0 the order
    assert ledger[0].period == f"{ordered_day:%Y-%m}"  # the surcharge's first month
    assert alert.escalate_at is None


async def test_escalation_to_public_works_follows_the_case_deadline_not_the_alerts_age(
    parts: Parts,
) -> None:
    p = parts
    watch = DeadlineWatch(p.service, p.alerts.on_events)
    opened = FindingEvent(FindingChange.OPENED, _hose(DETECTED))
    await p.alerts.on_events([opened])
    await p.service.on_events([opened])

    # 30 days after detection: under the old grace the alert would escalate now.
    p.clock.now = DETECTED + timedelta(days=31)
    await p.alerts.run_once()
    assert (await _detector_alert(p)).escalated_at is None
    assert await watch.check() == []  # no order yet: no deadline runs

    p.clock.now = ORDERED
    [case] = await p.service.repo.list_cases(frozenset({"elm-16"}))
    order = p.service.new_step(StepKind.ORDER, service=Service(Party.OWNER, Method.IN_PERSON))
    await p.service.record(case.id, order, CLERK)
    p.clock.now = ORDERED + timedelta(days=31)  # past the (f)(1) 30 days
    await p.alerts.run_once()
    [overdue] = await watch.check()
    assert (overdue.finding.rule_id, overdue.finding.level) == ("case_deadline.correct", "overdue")
    found = await p.alerts.list_alerts(AlertQuery(site_id="elm-16"))
    [deadline_alert] = [a for a in found if a.rule_id == "case_deadline.correct"]
    assert deadline_alert.escalated_at is not None
    assert (await _detector_alert(p)).escalated_at is None  # one escalation, the case's


async def test_a_rule_without_an_order_step_still_goes_to_public_works_at_once(
    parts: Parts,
) -> None:
    cites = PACKS["edgar"].rule("icing_risk").citations
    icing = replace(_hose(DETECTED), id="f-2", rule_id="icing_risk", citations=cites)
    assert not has_order_step(PACKS["edgar"], "icing_risk")  # (f)(4)c: a citation
    await parts.alerts.on_events([FindingEvent(FindingChange.OPENED, icing)])
    [alert] = await parts.alerts.list_alerts(AlertQuery(site_id="elm-16"))
    assert alert.escalated_at == DETECTED
