"""Issue 16.5: the surcharge and fine ledger, computed from case steps and the pack."""

from __future__ import annotations

import csv
import io
from dataclasses import replace
from datetime import UTC, date, datetime
from zoneinfo import ZoneInfo

import pytest

from gateway.cases.ledger import charges, reconcile, to_csv, total_cents
from gateway.cases.models import (
    Case,
    Charge,
    Decision,
    EntryKind,
    Inspection,
    LedgerEntry,
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
MAILED: dict[str, object] = {"service": Service(Party.OWNER, Method.FIRST_CLASS_MAIL)}


@pytest.fixture(scope="module")
def packs() -> dict[str, RulePack]:
    return load_packs()


def _at(y: int, m: int, d: int) -> datetime:
    return datetime(y, m, d, 10, tzinfo=CHICAGO)


def _case(
    *steps: tuple[StepKind, datetime, dict[str, object]],
    case_id: str = "c1",
    rule: str = "sanitary_discharge",
    jurisdiction: str = "edgar",
) -> Case:
    built = tuple(
        replace(Step(f"{case_id}-{i}", case_id, k, at, at, "clerk", "public_works"), **f)  # type: ignore[arg-type]
        for i, (k, at, f) in enumerate(steps)
    )
    return Case(case_id, "elm-16", jurisdiction, rule, Origin.FINDING, "t", built[0].at, built)


def _result(outcome: Outcome) -> dict[str, object]:
    return {"inspection": Inspection(outcome=outcome, inspector="inspector")}


def _months(found: list[Charge]) -> list[tuple[str, str]]:
    return [(c.period, c.basis) for c in found]


def test_edgar_surcharge_runs_from_the_order_month_to_the_verifying_inspection(
    packs: dict[str, RulePack],
) -> None:
    case = _case(
        (StepKind.OPENED, _at(2027, 1, 4), {}),
        (StepKind.ORDER, _at(2027, 1, 4), MAILED),
        (StepKind.INSPECTION_RESULT, _at(2027, 3, 10), _result(Outcome.PASS)),
    )
    found = charges([case], packs["edgar"].enforcement, CHICAGO, _at(2027, 6, 1))
    assert _months(found) == [
        ("2027-01", "ongoing"),
        ("2027-02", "ongoing"),
        ("2027-03", "ongoing"),
    ]
    assert all(c.amount_cents == 30000 for c in found)
    assert {c.section for c in found[0].citations} == {"(f)(4)a", "(f)(4)b"}


def test_proof_without_a_village_inspection_does_not_stop_the_surcharge(
    packs: dict[str, RulePack],
) -> None:
    case = _case(
        (StepKind.OPENED, _at(2027, 1, 4), {}),
        (StepKind.ORDER, _at(2027, 1, 4), MAILED),
        (StepKind.CORRECTION_PROOF, _at(2027, 2, 1), {}),
    )
    found = charges([case], packs["edgar"].enforcement, CHICAGO, _at(2027, 4, 15))
    assert [c.period for c in found] == ["2027-01", "2027-02", "2027-03", "2027-04"]


def test_a_suspected_finding_alone_costs_nothing(packs: dict[str, RulePack]) -> None:
    case = _case((StepKind.OPENED, _at(2027, 1, 4), {}), (StepKind.EPISODE, _at(2027, 1, 4), {}))
    assert charges([case], packs["edgar"].enforcement, CHICAGO, _at(2027, 6, 1)) == []


def test_a_failed_reinspection_is_surcharged_for_every_month_since_the_previous_inspection(
    packs: dict[str, RulePack],
) -> None:
    case = _case(
        (StepKind.OPENED, _at(2027, 1, 20), {}),
        (StepKind.INSPECTION_RESULT, _at(2027, 1, 20), _result(Outcome.PASS)),
        (StepKind.INSPECTION_RESULT, _at(2027, 6, 5), _result(Outcome.FAIL)),
    )
    found = charges([case], packs["edgar"].enforcement, CHICAGO, _at(2027, 6, 30))
    assert _months(found) == [
        ("2027-02", "lookback"),
        ("2027-03", "lookback"),
        ("2027-04", "lookback"),
        ("2027-05", "lookback"),
        ("2027-06", "ongoing"),
    ]
    assert found[0].citations[-1].quote.startswith("Any property found during any re-inspection")


def test_months_wholly_covered_by_a_granted_waiver_are_not_surcharged(
    packs: dict[str, RulePack],
) -> None:
    granted = WaiverTerms(
        decision=Decision.GRANTED,
        decider="engineer",
        start=datetime(2027, 2, 1, tzinfo=CHICAGO),
        end=datetime(2027, 6, 1, tzinfo=CHICAGO),
    )
    case = _case(
        (StepKind.OPENED, _at(2027, 1, 4), {}),
        (StepKind.ORDER, _at(2027, 1, 4), MAILED),
        (StepKind.WAIVER_APPLIED, _at(2027, 1, 10), {"waiver": WaiverTerms(grounds="g")}),
        (StepKind.WAIVER_DECIDED, _at(2027, 1, 30), {"waiver": granted}),
    )
    found = charges([case], packs["edgar"].enforcement, CHICAGO, _at(2027, 7, 15))
    assert [c.period for c in found] == ["2027-01", "2027-06", "2027-07"]


def test_two_cases_at_one_site_pay_one_surcharge_a_month(packs: dict[str, RulePack]) -> None:
    first = _case((StepKind.OPENED, _at(2027, 1, 4), {}), (StepKind.ORDER, _at(2027, 1, 4), MAILED))
    second = _case(
        (StepKind.OPENED, _at(2027, 1, 9), {}),
        (StepKind.OBSERVATION, _at(2027, 1, 9), {"confirms": True}),
        case_id="c2",
        rule="icing_risk",
    )
    found = charges([first, second], packs["edgar"].enforcement, CHICAGO, _at(2027, 2, 2))
    assert [c.period for c in found] == ["2027-01", "2027-02"]


def _citation(*days: date) -> dict[str, object]:
    return {"offense_days": days}


def test_local_law_fines_each_cited_day_first_then_subsequent_and_flags_a_third_in_a_year(
    packs: dict[str, RulePack],
) -> None:
    case = _case(
        (StepKind.OPENED, _at(2027, 3, 1), {}),
        (StepKind.CITATION, _at(2027, 3, 4), _citation(date(2027, 3, 1), date(2027, 3, 2))),
        (StepKind.CITATION, _at(2027, 3, 5), _citation(date(2027, 3, 3))),
        (StepKind.CITATION, _at(2028, 6, 11), _citation(date(2028, 6, 10))),
        jurisdiction="local-law-6-2024",
        rule="icing_risk",
    )
    found = charges([case], packs["local-law-6-2024"].enforcement, CHICAGO, _at(2028, 7, 1))
    assert [(c.period, c.amount_cents, c.max_cents, c.basis, c.referral) for c in found] == [
        ("2027-03-01", 5000, 25000, "first offense", False),
        ("2027-03-02", 10000, 25000, "later offense", False),
        ("2027-03-03", 10000, 25000, "later offense", True),
        ("2028-06-10", 10000, 25000, "later offense", False),
    ]
    assert "penalties B" in {c.section for c in found[2].citations}


def test_ord_247_counts_each_day_but_names_no_amount(packs: dict[str, RulePack]) -> None:
    case = _case(
        (StepKind.OPENED, _at(2027, 3, 1), {}),
        (StepKind.CITATION, _at(2027, 3, 4), _citation(date(2027, 3, 1), date(2027, 3, 2))),
        jurisdiction="sewer-ord-247",
    )
    found = charges([case], packs["sewer-ord-247"].enforcement, CHICAGO, _at(2027, 4, 1))
    assert [(c.period, c.amount_cents) for c in found] == [
        ("2027-03-01", None),
        ("2027-03-02", None),
    ]
    assert found[0].citations[-1].section == "(D)(4)(a)"


def test_a_pack_without_a_ledger_charges_nothing(packs: dict[str, RulePack]) -> None:
    case = _case((StepKind.OPENED, _at(2027, 1, 4), {}), jurisdiction="storm-ord-1991-43")
    assert charges([case], packs["storm-ord-1991-43"].enforcement, CHICAGO, _at(2027, 6, 1)) == []


def _post(lines: list[tuple[Charge, int | None]], start: int) -> list[LedgerEntry]:
    return [
        LedgerEntry(
            seq=start + i,
            key=c.key,
            site_id=c.site_id,
            case_id=c.case_id,
            kind=c.kind,
            period=c.period,
            amount_cents=c.amount_cents,
            max_cents=c.max_cents,
            basis=c.basis,
            citation="",
            posted_at=datetime(2027, 7, 1, tzinfo=UTC),
            corrects=corrects,
            referral=c.referral,
        )
        for i, (c, corrects) in enumerate(lines)
    ]


def test_a_recomputation_corrects_the_ledger_with_new_lines_only(
    packs: dict[str, RulePack],
) -> None:
    e = packs["edgar"].enforcement
    order = _case((StepKind.OPENED, _at(2027, 1, 4), {}), (StepKind.ORDER, _at(2027, 1, 4), MAILED))
    posted = _post(reconcile(charges([order], e, CHICAGO, _at(2027, 3, 2)), []), 1)
    assert [p.period for p in posted] == ["2027-01", "2027-02", "2027-03"]
    assert reconcile(charges([order], e, CHICAGO, _at(2027, 3, 2)), posted) == []

    # A waiver over February is recorded afterwards: February is reversed, not deleted.
    granted = WaiverTerms(
        decision=Decision.GRANTED,
        decider="engineer",
        start=datetime(2027, 2, 1, tzinfo=CHICAGO),
        end=datetime(2027, 3, 1, tzinfo=CHICAGO),
    )
    waived = _case(
        (StepKind.OPENED, _at(2027, 1, 4), {}),
        (StepKind.ORDER, _at(2027, 1, 4), MAILED),
        (StepKind.WAIVER_APPLIED, _at(2027, 1, 10), {"waiver": WaiverTerms(grounds="g")}),
        (StepKind.WAIVER_DECIDED, _at(2027, 1, 30), {"waiver": granted}),
    )
    fix = reconcile(charges([waived], e, CHICAGO, _at(2027, 3, 2)), posted)
    assert [(c.kind, c.period, c.amount_cents, corrects) for c, corrects in fix] == [
        (EntryKind.REVERSAL, "2027-02", -30000, 2)
    ]
    ledger = posted + _post(fix, 4)
    assert total_cents(ledger) == 60000

    rows = list(csv.DictReader(io.StringIO(to_csv(ledger))))
    assert [r["amount_usd"] for r in rows] == ["300.00", "300.00", "300.00", "-300.00"]
    assert rows[3]["corrects_line"] == "2" and rows[3]["kind"] == "reversal"
