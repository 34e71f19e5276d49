"""Issue 16: deadlines come from each pack's [enforcement] section, on the site's calendar."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from gateway.cases.deadlines import (
    Bucket,
    bucket,
    case_state,
    compute_deadlines,
    end_of_day,
)
from gateway.cases.models import (
    Case,
    CaseState,
    Deadline,
    DeadlineStatus,
    Decision,
    Inspection,
    Method,
    Origin,
    Outcome,
    Party,
    Service,
    Step,
    StepKind,
    WaiverTerms,
)
from gateway.rules.pack import RulePack, load_packs

CHICAGO = ZoneInfo("America/Chicago")
NEW_YORK = ZoneInfo("America/New_York")


@pytest.fixture(scope="module")
def packs() -> dict[str, RulePack]:
    return load_packs()


def _step(kind: StepKind, at: datetime, n: int, **fields: object) -> Step:
    base = Step(f"s{n}", "c1", kind, at, at, "clerk", "public_works")
    return replace(base, **fields)  # type: ignore[arg-type]


def _case(*steps: tuple[StepKind, datetime, dict[str, object]]) -> Case:
    built = tuple(_step(k, at, i, **f) for i, (k, at, f) in enumerate(steps))
    return Case(
        "c1", "elm-16", "edgar", "sanitary_discharge", Origin.FINDING, "t", built[0].at, built
    )


def _local(y: int, m: int, d: int, h: int = 12, tz: ZoneInfo = CHICAGO) -> datetime:
    return datetime(y, m, d, h, tzinfo=tz)


MAILED_TO_OWNER: dict[str, object] = {"service": Service(Party.OWNER, Method.FIRST_CLASS_MAIL)}


def _by_id(deadlines: list[Deadline]) -> dict[str, Deadline]:
    return {d.id: d for d in deadlines}


def _deadlines(pack: RulePack, case: Case, now: datetime) -> dict[str, Deadline]:
    return _by_id(compute_deadlines(case, pack.enforcement, CHICAGO, now))


def test_edgar_order_gives_thirty_days_to_correct_from_issuance_with_its_citation(
    packs: dict[str, RulePack],
) -> None:
    order = _local(2026, 12, 1)
    case = _case((StepKind.OPENED, order, {}), (StepKind.ORDER, order, MAILED_TO_OWNER))
    correct = _deadlines(packs["edgar"], case, order)["correct"]
    assert correct.due_on == date(2026, 12, 31)
    assert correct.due_at == datetime(2027, 1, 1, tzinfo=CHICAGO)
    assert correct.status is DeadlineStatus.OPEN
    assert correct.citations[0].section == "(f)(1)"


def test_thirty_days_across_february_depend_on_the_leap_year(packs: dict[str, RulePack]) -> None:
    for year, due in ((2028, date(2028, 3, 1)), (2027, date(2027, 3, 2))):
        order = _local(year, 1, 31)
        case = _case((StepKind.OPENED, order, {}), (StepKind.ORDER, order, MAILED_TO_OWNER))
        assert _deadlines(packs["edgar"], case, order)["correct"].due_on == due


def test_a_deadline_counts_from_the_local_date_not_the_utc_date(
    packs: dict[str, RulePack],
) -> None:
    # 21:30 on Nov 30 in Wisconsin is already Dec 1 in UTC.
    order = datetime(2026, 12, 1, 3, 30, tzinfo=UTC)
    case = _case((StepKind.OPENED, order, {}), (StepKind.ORDER, order, MAILED_TO_OWNER))
    assert _deadlines(packs["edgar"], case, order)["correct"].due_on == date(2026, 12, 30)
    # The same instant for a site in New York (22:30 on Nov 30 there as well).
    ny = _by_id(compute_deadlines(case, packs["edgar"].enforcement, NEW_YORK, order))
    assert ny["correct"].due_at == datetime(2026, 12, 31, tzinfo=NEW_YORK)


def test_the_end_of_a_local_day_across_daylight_saving_is_local_midnight() -> None:
    # Mar 14 2027 is the spring-forward day in the US: that day is 23 hours long.
    assert end_of_day(date(2027, 3, 14), CHICAGO) == datetime(2027, 3, 15, tzinfo=CHICAGO)
    # Same-zone subtraction in Python is wall-clock; in UTC the day is 23 hours.
    start = end_of_day(date(2027, 3, 13), CHICAGO).astimezone(UTC)
    assert end_of_day(date(2027, 3, 14), CHICAGO).astimezone(UTC) - start == timedelta(hours=23)


def test_a_deadline_passes_at_the_end_of_its_last_local_day(packs: dict[str, RulePack]) -> None:
    order = _local(2026, 12, 1)
    case = _case((StepKind.OPENED, order, {}), (StepKind.ORDER, order, MAILED_TO_OWNER))
    last_minute = datetime(2026, 12, 31, 23, 59, tzinfo=CHICAGO)
    assert _deadlines(packs["edgar"], case, last_minute)["correct"].status is DeadlineStatus.OPEN
    next_day = datetime(2027, 1, 1, 0, 0, tzinfo=CHICAGO)
    assert _deadlines(packs["edgar"], case, next_day)["correct"].status is DeadlineStatus.OVERDUE


def test_edgar_notice_gives_thirty_days_to_schedule_an_inspection(
    packs: dict[str, RulePack],
) -> None:
    notice = _local(2027, 2, 1)
    case = _case((StepKind.OPENED, notice, {}), (StepKind.NOTICE, notice, MAILED_TO_OWNER))
    found = _deadlines(packs["edgar"], case, notice)["schedule_inspection"]
    assert found.due_on == date(2027, 3, 3)
    assert found.citations[0].section == "(f)(2)a"
    requested = _local(2027, 2, 20)
    case = replace(case, steps=(*case.steps, _step(StepKind.INSPECTION_REQUESTED, requested, 9)))
    assert (
        _deadlines(packs["edgar"], case, requested)["schedule_inspection"].status
        is DeadlineStatus.MET
    )


def test_waiver_application_window_counts_from_receipt_of_the_order(
    packs: dict[str, RulePack],
) -> None:
    order = _local(2027, 4, 1)
    received: dict[str, object] = {
        "service": Service(Party.OCCUPANT, Method.FIRST_CLASS_MAIL, date(2027, 4, 5))
    }
    case = _case((StepKind.OPENED, order, {}), (StepKind.ORDER, order, received))
    window = _deadlines(packs["edgar"], case, order)["apply_for_waiver"]
    assert window.due_on == date(2027, 4, 20)
    assert window.citations[0].section == "(f)(3)b"
    assert not window.binding
    later = _deadlines(packs["edgar"], case, _local(2027, 4, 21))["apply_for_waiver"]
    assert later.status is DeadlineStatus.LAPSED  # a window, not a violation


def test_without_a_receipt_date_the_window_counts_from_service_and_says_so(
    packs: dict[str, RulePack],
) -> None:
    order = _local(2027, 4, 1)
    case = _case((StepKind.OPENED, order, {}), (StepKind.ORDER, order, MAILED_TO_OWNER))
    window = _deadlines(packs["edgar"], case, order)["apply_for_waiver"]
    assert window.due_on == date(2027, 4, 16)
    assert "receipt date not recorded" in window.note


def test_a_new_residence_is_inspected_before_its_certificate_of_occupancy(
    packs: dict[str, RulePack],
) -> None:
    asked = _local(2027, 5, 3)
    case = _case(
        (StepKind.OPENED, asked, {}),
        (StepKind.OCCUPANCY_REQUESTED, asked, {"due_on": date(2027, 6, 1)}),
    )
    found = _deadlines(packs["edgar"], case, asked)["inspect_before_occupancy"]
    assert found.due_on == date(2027, 5, 31)
    assert found.party == "village"
    assert packs["edgar"].enforcement.steps["occupancy_inspection"].citation.section == "(f)(2)c"


def test_local_law_has_no_order_no_waiver_and_no_deadlines(packs: dict[str, RulePack]) -> None:
    ll6 = packs["local-law-6-2024"].enforcement
    assert ll6.procedure == "citation"
    assert not ll6.offers("order") and not ll6.offers("notice") and not ll6.offers("waiver")
    assert ll6.offers("citation") and ll6.offers("misdemeanor_referral")
    assert ll6.deadlines == ()
    assert packs["storm-ord-1991-43"].enforcement.steps == {}


def test_a_pending_waiver_request_suspends_the_correction_clock(
    packs: dict[str, RulePack],
) -> None:
    order = _local(2027, 1, 4)
    applied = _local(2027, 1, 10)
    case = _case(
        (StepKind.OPENED, order, {}),
        (StepKind.ORDER, order, MAILED_TO_OWNER),
        (StepKind.WAIVER_APPLIED, applied, {"waiver": WaiverTerms(grounds="hardship")}),
    )
    found = _deadlines(packs["edgar"], case, _local(2027, 3, 1))["correct"]
    assert found.status is DeadlineStatus.SUSPENDED
    assert found.citations[-1].section == "(f)(1)"
    assert case_state(case, _local(2027, 3, 1)) is CaseState.WAIVER_REQUESTED


def test_a_denied_waiver_resumes_the_clock_with_the_days_left_at_filing(
    packs: dict[str, RulePack],
) -> None:
    order = _local(2027, 1, 4)  # due Feb 3; filed Jan 10 with 24 days left
    denied = WaiverTerms(decision=Decision.DENIED, decider="engineer")
    case = _case(
        (StepKind.OPENED, order, {}),
        (StepKind.ORDER, order, MAILED_TO_OWNER),
        (StepKind.WAIVER_APPLIED, _local(2027, 1, 10), {"waiver": WaiverTerms(grounds="g")}),
        (StepKind.WAIVER_DECIDED, _local(2027, 2, 15), {"waiver": denied}),
    )
    found = _deadlines(packs["edgar"], case, _local(2027, 2, 15))["correct"]
    assert found.due_on == date(2027, 3, 11)
    assert case_state(case, _local(2027, 2, 15)) is CaseState.CORRECTION_DUE


def test_a_granted_waiver_then_expired_reopens_the_case_clock(packs: dict[str, RulePack]) -> None:
    order = _local(2027, 1, 4)
    end = datetime(2027, 6, 1, tzinfo=CHICAGO)
    granted = WaiverTerms(
        decision=Decision.GRANTED, decider="engineer", start=_local(2027, 1, 20), end=end
    )
    case = _case(
        (StepKind.OPENED, order, {}),
        (StepKind.ORDER, order, MAILED_TO_OWNER),
        (StepKind.WAIVER_APPLIED, _local(2027, 1, 10), {"waiver": WaiverTerms(grounds="g")}),
        (StepKind.WAIVER_DECIDED, _local(2027, 1, 20), {"waiver": granted}),
    )
    during = _local(2027, 5, 31)
    assert case_state(case, during) is CaseState.WAIVER_GRANTED
    assert _deadlines(packs["edgar"], case, during)["correct"].status is DeadlineStatus.OPEN

    after = _local(2027, 6, 1)
    correct = _deadlines(packs["edgar"], case, after)["correct"]
    assert case_state(case, after) is CaseState.CORRECTION_DUE
    assert correct.status is DeadlineStatus.OVERDUE
    assert correct.due_at == end
    assert "clock reopened" in correct.note


def test_an_overdue_order_puts_the_case_in_the_overdue_queue(packs: dict[str, RulePack]) -> None:
    order = _local(2027, 1, 4)
    case = _case((StepKind.OPENED, order, {}), (StepKind.ORDER, order, MAILED_TO_OWNER))
    due_day = _local(2027, 2, 3, 8)
    found = compute_deadlines(case, packs["edgar"].enforcement, CHICAGO, due_day)
    assert bucket(case_state(case, due_day), found, date(2027, 2, 3)) == Bucket.DUE_TODAY
    later = _local(2027, 2, 4)
    found = compute_deadlines(case, packs["edgar"].enforcement, CHICAGO, later)
    assert bucket(case_state(case, later), found, date(2027, 2, 4)) == Bucket.OVERDUE


def test_an_inspection_refusal_is_its_own_outcome_and_fails_the_case(
    packs: dict[str, RulePack],
) -> None:
    at = _local(2027, 2, 1)
    refused = Inspection(outcome=Outcome.REFUSED, inspector="inspector")
    case = _case(
        (StepKind.OPENED, at, {}), (StepKind.INSPECTION_RESULT, at, {"inspection": refused})
    )
    assert case_state(case, at) is CaseState.INSPECTED_FAIL
    cite = packs["edgar"].enforcement.steps["inspection"].refusal_citation
    assert cite is not None and cite.section == "(f)(4)a.2"
