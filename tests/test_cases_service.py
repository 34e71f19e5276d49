"""Issue 16: cases over real SQLite: intake, one case per problem, roles, pack steps, ledger."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from gateway.cases.deadlines import Bucket
from gateway.cases.models import (
    CaseState,
    ChecklistResult,
    Decision,
    Inspection,
    Method,
    Origin,
    Outcome,
    Party,
    Service,
    StepKind,
    WaiverTerms,
)
from gateway.cases.repository import CaseRepository
from gateway.cases.service import Actor, CaseError, CaseForbidden, CaseService
from gateway.domain import (
    Audience,
    ConfirmationKind,
    ConfirmationSource,
    Finding,
    FindingChange,
    FindingEvent,
    Severity,
)
from gateway.errors import StoreError
from gateway.registry import load_registry
from gateway.rules.pack import load_packs
from gateway.settings import REPO_DIR
from gateway.state.database import Connection, Database

SITES = REPO_DIR / "deploy" / "sites.example.toml"
CLERK = Actor("edgar-pw", "public_works")
OWNER = Actor("elm16", "homeowner")
MAILED = Service(Party.OWNER, Method.FIRST_CLASS_MAIL)


@dataclass
class Clock:
    now: datetime

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def db(state_db: Database) -> Database:
    """The state database, on SQLite and on PostgreSQL (each test runs on both)."""
    return state_db


@pytest.fixture
def clock() -> Clock:
    return Clock(datetime(2027, 1, 4, 15, tzinfo=UTC))


@pytest.fixture
async def service(db: Database, clock: Clock) -> CaseService:
    repo = CaseRepository(db)
    await repo.open()
    return CaseService(repo, load_registry(SITES), load_packs(), clock=clock)


def _episode(n: int, at: datetime, site: str = "elm-16") -> FindingEvent:
    finding = Finding(
        id=f"f-{n}",
        rule_id="sanitary_discharge",
        site_id=site,
        severity=Severity.CRITICAL,
        title="Sump water is going into the sanitary sewer",
        opened_at=at,
        updated_at=at,
        level="violation",
        audience=(Audience.HOMEOWNER, Audience.PUBLIC_WORKS),
    )
    return FindingEvent(FindingChange.OPENED, finding)


async def test_an_intermittent_hose_across_three_episodes_is_one_case_that_escalates(
    service: CaseService, clock: Clock
) -> None:
    # Three storms, each episode cleared within days: one case, not three fresh graces.
    for n, day in enumerate((4, 18, 30)):
        clock.now = datetime(2027, 1, day, 15, tzinfo=UTC)
        await service.on_events([_episode(n, clock.now)])
        await service.on_events([_episode(n, clock.now)])  # a repeated event adds nothing
    [case] = await service.repo.list_cases(frozenset({"elm-16"}))
    assert case.episodes == 3
    assert service.view(case).state is CaseState.SUSPECTED  # telemetry alone only suspects

    clock.now = datetime(2027, 2, 1, 15, tzinfo=UTC)
    order = service.new_step(StepKind.ORDER, service=MAILED)
    case = await service.record(case.id, order, CLERK)
    view = service.view(case)
    assert view.state is CaseState.CORRECTION_DUE
    assert view.bucket == Bucket.WAITING_ON_OWNER

    clock.now = datetime(2027, 3, 4, 15, tzinfo=UTC)  # Mar 3 was the 30th day
    await service.on_events([_episode(3, clock.now)])  # a fourth episode: same case
    [case] = await service.repo.list_cases(frozenset({"elm-16"}))
    view = service.view(case)
    assert case.episodes == 4
    assert view.bucket == Bucket.OVERDUE
    assert [d.status.value for d in view.deadlines if d.id == "correct"] == ["overdue"]


async def test_a_closed_case_is_not_reopened_by_a_new_episode(
    service: CaseService, clock: Clock
) -> None:
    await service.on_events([_episode(1, clock.now)])
    [case] = await service.repo.list_cases(frozenset({"elm-16"}))
    await service.record(case.id, service.new_step(StepKind.CLOSED, note="fixed"), CLERK)
    clock.now += timedelta(days=40)
    await service.on_events([_episode(2, clock.now)])
    cases = await service.repo.list_cases(frozenset({"elm-16"}))
    assert [c.is_closed for c in cases] == [True, False]


async def test_a_homeowner_may_only_request_inspection_send_proof_or_apply_for_a_waiver(
    service: CaseService,
) -> None:
    await service.on_events([_episode(1, service.clock())])
    [case] = await service.repo.list_cases(frozenset({"elm-16"}))
    assert set(service.offered(case, OWNER)) == {
        StepKind.INSPECTION_REQUESTED,
        StepKind.CORRECTION_PROOF,
        StepKind.WAIVER_APPLIED,
    }
    with pytest.raises(CaseForbidden):
        await service.record(case.id, service.new_step(StepKind.ORDER, service=MAILED), OWNER)
    case = await service.record(case.id, service.new_step(StepKind.INSPECTION_REQUESTED), OWNER)
    assert (case.steps[-1].actor, case.steps[-1].actor_role) == ("elm16", "homeowner")


async def test_a_pack_without_a_waiver_clause_does_not_offer_one(service: CaseService) -> None:
    case = await service.open_case("main-101", "icing_risk", Origin.OBSERVATION, CLERK)
    assert StepKind.WAIVER_APPLIED not in service.offered(case, CLERK)
    assert StepKind.ORDER not in service.offered(case, CLERK)
    with pytest.raises(CaseError, match="provides no such step"):
        step = service.new_step(StepKind.WAIVER_APPLIED, waiver=WaiverTerms(grounds="cost"))
        await service.record(case.id, step, CLERK)


async def test_an_order_must_be_served_as_the_text_allows(service: CaseService) -> None:
    case = await service.open_case("elm-16", "sanitary_discharge", Origin.COMPLAINT, CLERK)
    with pytest.raises(CaseError, match="on whom and how"):
        await service.record(case.id, service.new_step(StepKind.ORDER), CLERK)
    notice_on_occupant = Service(Party.OCCUPANT, Method.IN_PERSON)
    with pytest.raises(CaseError, match="allows service on"):
        step = service.new_step(StepKind.NOTICE, service=notice_on_occupant)
        await service.record(case.id, step, CLERK)
    order = service.new_step(StepKind.ORDER, service=notice_on_occupant)
    case = await service.record(case.id, order, CLERK)
    assert case.steps[-1].service == notice_on_occupant


async def test_a_waiver_grant_needs_an_end(service: CaseService, clock: Clock) -> None:
    case = await service.open_case("elm-16", "sanitary_discharge", Origin.COMPLAINT, CLERK)
    applied = service.new_step(
        StepKind.WAIVER_APPLIED, waiver=WaiverTerms(grounds="no storm sewer")
    )
    case = await service.record(case.id, applied, OWNER)
    open_ended = WaiverTerms(decision=Decision.GRANTED, decider="engineer")
    with pytest.raises(CaseError, match="limited time"):
        await service.record(
            case.id, service.new_step(StepKind.WAIVER_DECIDED, waiver=open_ended), CLERK
        )


async def test_an_inspection_result_is_checked_against_the_packs_checklist(
    service: CaseService,
) -> None:
    case = await service.open_case("elm-16", "sanitary_discharge", Origin.INSPECTION, CLERK)
    bad = Inspection(outcome=Outcome.FAIL, items=(ChecklistResult("no_such_item", False),))
    with pytest.raises(CaseError, match="checklist"):
        await service.record(
            case.id, service.new_step(StepKind.INSPECTION_RESULT, inspection=bad), CLERK
        )
    good = Inspection(
        outcome=Outcome.FAIL,
        inspector="J. Inspector",
        items=(ChecklistResult("no_sanitary_destination", False, "hose into laundry tub"),),
    )
    case = await service.record(
        case.id, service.new_step(StepKind.INSPECTION_RESULT, inspection=good), CLERK
    )
    assert service.view(case).state is CaseState.INSPECTED_FAIL


async def test_observations_and_inspections_are_confirmations_for_the_verdicts(
    service: CaseService, db: Database, clock: Clock
) -> None:
    seen = clock.now - timedelta(hours=2)
    await service.open_case(
        "elm-16",
        "icing_risk",
        Origin.OBSERVATION,
        CLERK,
        at=seen,
        confirms=True,
        note="ice on walk",
    )
    found = service.repo.confirmations("elm-16", seen - timedelta(days=1), clock.now)
    assert [(c.kind, c.confirms, c.rule_id, c.note) for c in found] == [
        (ConfirmationKind.OBSERVATION, True, "icing_risk", "ice on walk")
    ]
    assert service.repo.confirmations("oak-5", seen - timedelta(days=1), clock.now) == []
    reopened = CaseRepository(db)
    await reopened.open()  # loaded back from the database
    assert reopened.confirmations("elm-16", seen, clock.now) == found


async def test_steps_and_ledger_lines_cannot_be_changed_in_the_database(
    service: CaseService, db: Database, clock: Clock
) -> None:
    case = await service.open_case("elm-16", "sanitary_discharge", Origin.COMPLAINT, CLERK)
    await service.record(case.id, service.new_step(StepKind.ORDER, service=MAILED), CLERK)
    clock.now += timedelta(days=45)
    lines = await service.post_ledger("elm-16")
    assert [(e.period, e.amount_cents) for e in lines] == [("2027-01", 30000), ("2027-02", 30000)]
    assert await service.post_ledger("elm-16") == lines  # posting again adds nothing
    for sql in ("UPDATE case_steps SET note = 'x'", "DELETE FROM case_ledger"):

        def change(conn: Connection, sql: str = sql) -> None:
            conn.execute(sql)

        with pytest.raises((StoreError, sqlite3.Error), match=r"append-only|immutable"):
            await db.write(change)


async def test_the_edgar_worked_example_in_the_docs(service: CaseService, clock: Clock) -> None:
    # docs/enforcement.md, "Village of Edgar: a hose into the laundry tub".
    chicago = ZoneInfo("America/Chicago")

    def at(month: int, day: int) -> datetime:
        return datetime(2027, month, day, 10, tzinfo=chicago)

    for n, day in enumerate((4, 18, 30)):
        clock.now = at(1, day)
        await service.on_events([_episode(n, clock.now)])
    [case] = await service.repo.list_cases(frozenset({"elm-16"}))
    owner_in_person = Service(Party.OWNER, Method.IN_PERSON)
    failed = Inspection(
        outcome=Outcome.FAIL,
        inspector="J. Ruiz",
        items=(ChecklistResult("no_sanitary_destination", False, "hose into laundry tub"),),
    )
    granted = WaiverTerms(
        decision=Decision.GRANTED,
        decider="Village Engineer",
        start=datetime(2027, 2, 25, tzinfo=chicago),
        end=datetime(2027, 5, 1, tzinfo=chicago),
    )
    steps = [
        (at(2, 1), CLERK, service.new_step(StepKind.NOTICE, at(2, 1), service=owner_in_person)),
        (
            at(2, 10),
            CLERK,
            service.new_step(StepKind.INSPECTION_RESULT, at(2, 10), inspection=failed),
        ),
        (
            at(2, 12),
            CLERK,
            service.new_step(
                StepKind.ORDER,
                at(2, 12),
                service=Service(Party.OWNER, Method.FIRST_CLASS_MAIL, date(2027, 2, 15)),
            ),
        ),
        (
            at(2, 20),
            OWNER,
            service.new_step(
                StepKind.WAIVER_APPLIED, at(2, 20), waiver=WaiverTerms(grounds="no storm lateral")
            ),
        ),
        (at(2, 25), CLERK, service.new_step(StepKind.WAIVER_DECIDED, at(2, 25), waiver=granted)),
    ]
    for when, who, step in steps:
        clock.now = when
        case = await service.record(case.id, step, who)
        if step.kind is StepKind.ORDER:
            due = {d.id: d.due_on for d in service.view(case).deadlines}
            assert due == {
                "schedule_inspection": date(2027, 3, 3),
                "correct": date(2027, 3, 14),
                "apply_for_waiver": date(2027, 3, 2),
            }
    clock.now = at(5, 3)
    assert service.view(case).state is CaseState.CORRECTION_DUE
    passed = Inspection(outcome=Outcome.PASS, inspector="J. Ruiz")
    clock.now = at(5, 20)
    case = await service.record(
        case.id, service.new_step(StepKind.INSPECTION_RESULT, at(5, 20), inspection=passed), CLERK
    )
    correct = next(d for d in service.view(case).deadlines if d.id == "correct")
    assert (correct.due_on, correct.status.value) == (date(2027, 4, 30), "met_late")
    clock.now = at(6, 30)
    lines = await service.post_ledger("elm-16")
    assert [(e.period, e.amount_cents) for e in lines] == [("2027-02", 30000), ("2027-05", 30000)]


async def test_a_rescheduled_inspection_keeps_the_latest_appointment_until_the_result(
    service: CaseService, clock: Clock
) -> None:
    case = await service.open_case("elm-16", "sanitary_discharge", Origin.COMPLAINT, CLERK)
    first = clock.now + timedelta(days=7)
    second = clock.now + timedelta(days=9)
    for when in (first, second):
        step = service.new_step(
            StepKind.INSPECTION_SCHEDULED, inspection=Inspection(scheduled_for=when)
        )
        case = await service.record(case.id, step, CLERK)
    view = service.view(case)
    assert (view.state, view.appointment) == (CaseState.INSPECTION_SCHEDULED, second)
    clock.now = second
    no_show = Inspection(outcome=Outcome.NO_SHOW, inspector="J. Ruiz")
    case = await service.record(
        case.id, service.new_step(StepKind.INSPECTION_RESULT, inspection=no_show), CLERK
    )
    view = service.view(case)
    assert (view.state, view.appointment) == (CaseState.INSPECTED_FAIL, None)
    # Edgar (f)(4)a.2: a missed inspection is itself non-compliance, surcharged.
    lines = await service.post_ledger("elm-16")
    assert [e.period for e in lines] == ["2027-01"]
    # It confirms nothing about the problem itself.
    source: ConfirmationSource = service
    assert source.confirmations("elm-16", clock.now - timedelta(days=30), clock.now) == []


async def test_a_granted_waiver_is_offered_to_the_detectors_in_the_registrys_shape(
    service: CaseService, clock: Clock
) -> None:
    case = await service.open_case("elm-16", "sanitary_discharge", Origin.COMPLAINT, CLERK)
    applied = service.new_step(StepKind.WAIVER_APPLIED, waiver=WaiverTerms(grounds="no sewer"))
    case = await service.record(case.id, applied, OWNER)
    end = clock.now + timedelta(days=60)
    granted = WaiverTerms(
        decision=Decision.GRANTED, decider="engineer", conditions="to grade", end=end
    )
    await service.record(case.id, service.new_step(StepKind.WAIVER_DECIDED, waiver=granted), CLERK)
    [waiver] = service.repo.waivers("elm-16")
    tz = ZoneInfo("America/Chicago")
    assert waiver.rule == "sanitary_discharge"
    assert waiver.covers_at(clock.now + timedelta(days=1), tz)
    assert not waiver.covers_at(end, tz)
    assert "conditions: to grade" in waiver.reference
