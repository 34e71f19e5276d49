"""Deadlines and states of a case, computed from its steps and the pack (pure).

Days are counted on the site's local calendar: "within thirty (30) days after
order issuance" (Edgar (f)(1)) makes the order's local date day 0 and the 30th
day after it the last day, due at the end of that local day. Plain date
arithmetic, so month ends and leap years need no special case (Jan 31 + 30 days is
Mar 1 in a leap year, Mar 2 otherwise), and an order issued at 21:00 local on
Nov 30 counts from Nov 30 even though it is already Dec 1 in UTC.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from gateway.cases.models import (
    Case,
    CaseState,
    Deadline,
    DeadlineStatus,
    Decision,
    Outcome,
    Step,
    StepKind,
)
from gateway.domain import Citation
from gateway.rules.pack import DeadlineSpec, Enforcement

#: Synthetic events beside the step kinds, for ``met_by`` and ``after`` in packs.
INSPECTION_PASSED = "inspection_passed"
INSPECTION_FAILED = "inspection_failed"


def local_day(ts: datetime, tz: ZoneInfo) -> date:
    """The calendar date of an instant at the site."""
    return ts.astimezone(tz).date()


def end_of_day(day: date, tz: ZoneInfo) -> datetime:
    """The instant a local day ends (the next local midnight), time-zone aware."""
    return datetime.combine(day + timedelta(days=1), time(), tz)


def add_days(start: date, days: int) -> date:
    """The last day of a period of ``days`` days counted after ``start``."""
    return start + timedelta(days=days)


def events(step: Step) -> set[str]:
    """The events a step stands for (its kind, plus pass/fail for inspection results)."""
    found = {step.kind.value}
    if step.kind is StepKind.INSPECTION_RESULT and step.inspection is not None:
        if step.inspection.outcome is Outcome.PASS:
            found.add(INSPECTION_PASSED)
        elif step.inspection.outcome is not None:
            found.add(INSPECTION_FAILED)
    return found


def _first_after(case: Case, anchor: Step, wanted: tuple[str, ...] | set[str]) -> Step | None:
    start = case.steps.index(anchor)
    return next((s for s in case.steps[start + 1 :] if events(s) & set(wanted)), None)


@dataclass(frozen=True, slots=True)
class _Due:
    day: date
    at: datetime
    suspended: bool = False
    note: str = ""


def _waiver_adjusted(
    case: Case, anchor: Step, due: _Due, tz: ZoneInfo, now: datetime
) -> _Due | None:
    """A pending waiver request suspends the clock; a denial resumes it with the days
    left at filing; a grant moves the deadline to the waiver's end (Edgar (f)(1), (f)(3)b)."""
    applied = _first_after(case, anchor, {StepKind.WAIVER_APPLIED.value})
    if applied is None or applied.at > now or local_day(applied.at, tz) > due.day:
        return None
    decided = _first_after(case, applied, {StepKind.WAIVER_DECIDED.value})
    if decided is None or decided.at > now or decided.waiver is None:
        return _Due(due.day, due.at, suspended=True, note="waiver or extension requested")
    if decided.waiver.decision is Decision.DENIED:
        left = (due.day - local_day(applied.at, tz)).days
        day = add_days(local_day(decided.at, tz), left)
        return _Due(day, end_of_day(day, tz), note=f"resumed after denial ({left} days left)")
    end = decided.waiver.end
    if end is None:  # the service refuses a grant without an end; stay suspended if one slips
        return _Due(due.day, due.at, suspended=True, note="waiver granted without an end")
    day = local_day(end - timedelta(microseconds=1), tz)
    note = "waiver expired: the clock reopened" if end <= now else "extended by waiver"
    return _Due(day, end, note=note)


def compute_deadline(
    case: Case, spec: DeadlineSpec, tz: ZoneInfo, now: datetime
) -> Deadline | None:
    """The deadline of one pack spec on this case at ``now`` (None if its step is absent)."""
    anchors = [s for s in case.steps if spec.after in events(s) and s.at <= now]
    if not anchors:
        return None
    anchor = anchors[-1]  # a re-served notice or re-issued order restarts the clock
    note = ""
    if spec.start == "due_on":
        if anchor.due_on is None:
            return None
        last = anchor.due_on - timedelta(days=1)  # "prior to issuance"
    else:
        assert spec.days is not None
        start = local_day(anchor.at, tz)
        if spec.start == "received":
            if anchor.service is not None and anchor.service.received_on is not None:
                start = anchor.service.received_on
            else:
                note = "receipt date not recorded; counted from service"
        last = add_days(start, int(spec.days.as_float))
    due = _Due(last, end_of_day(last, tz), note=note)
    cites: tuple[Citation, ...] = () if spec.citation is None else (spec.citation,)
    if spec.suspended_by_waiver:
        adjusted = _waiver_adjusted(case, anchor, due, tz, now)
        if adjusted is not None:
            due = adjusted
            if spec.suspension_citation is not None:
                cites += (spec.suspension_citation,)
    met = _first_after(case, anchor, spec.met_by)
    if met is not None and met.at <= now:
        status = DeadlineStatus.MET if met.at < due.at else DeadlineStatus.MET_LATE
    elif due.suspended:
        status = DeadlineStatus.SUSPENDED
    elif now < due.at:
        status = DeadlineStatus.OPEN
    else:
        status = DeadlineStatus.OVERDUE if spec.binding else DeadlineStatus.LAPSED
    return Deadline(
        id=spec.id,
        label=spec.label,
        party=spec.party,
        due_on=due.day,
        due_at=due.at,
        status=status,
        binding=spec.binding,
        citations=cites,
        anchor_step_id=anchor.id,
        note="; ".join(dict.fromkeys(n for n in (note, due.note) if n)),
    )


def compute_deadlines(
    case: Case, enforcement: Enforcement, tz: ZoneInfo, now: datetime
) -> list[Deadline]:
    """Every deadline the pack sets that a step of this case has started."""
    found = [compute_deadline(case, spec, tz, now) for spec in enforcement.deadlines]
    return [d for d in found if d is not None]


def appointment(case: Case) -> datetime | None:
    """The inspection appointment still ahead of a result (the latest one: a
    reschedule is another ``inspection_scheduled`` step)."""
    latest = case.last(StepKind.INSPECTION_SCHEDULED)
    if latest is None or latest.inspection is None:
        return None
    if _first_after(case, latest, {StepKind.INSPECTION_RESULT.value}) is not None:
        return None
    return latest.inspection.scheduled_for


def waiver_windows(case: Case) -> list[tuple[datetime, datetime]]:
    """The ``[start, end)`` periods of granted waivers."""
    windows = []
    for step in case.of_kind(StepKind.WAIVER_DECIDED):
        w = step.waiver
        if w is not None and w.decision is Decision.GRANTED and w.end is not None:
            windows.append((w.start or step.at, w.end))
    return windows


def _milestone_state(step: Step, now: datetime) -> CaseState | None:
    kind = step.kind
    if kind is StepKind.WAIVER_DECIDED and step.waiver is not None:
        if step.waiver.decision is Decision.GRANTED:
            end = step.waiver.end
            in_force = end is None or now < end
            return CaseState.WAIVER_GRANTED if in_force else CaseState.CORRECTION_DUE
        return None  # denied: the step before it decides
    if kind is StepKind.INSPECTION_RESULT and step.inspection is not None:
        passed = step.inspection.outcome is Outcome.PASS
        return CaseState.INSPECTED_PASS if passed else CaseState.INSPECTED_FAIL
    if kind is StepKind.OBSERVATION:
        return CaseState.CONFIRMED if step.confirms else None
    return {
        StepKind.CLOSED: CaseState.CLOSED,
        StepKind.WAIVER_APPLIED: CaseState.WAIVER_REQUESTED,
        StepKind.INSPECTION_SCHEDULED: CaseState.INSPECTION_SCHEDULED,
        StepKind.INSPECTION_REQUESTED: CaseState.INSPECTION_REQUESTED,
        StepKind.CORRECTION_PROOF: CaseState.PROOF_SUBMITTED,
        StepKind.ORDER: CaseState.CORRECTION_DUE,
        StepKind.NOTICE: CaseState.NOTICE_SERVED,
        StepKind.CITATION: CaseState.CITED,
        StepKind.REFERRAL: CaseState.CITED,
    }.get(kind)


def case_state(case: Case, now: datetime) -> CaseState:
    """The state the latest milestone step puts the case in (16.1)."""
    state = CaseState.SUSPECTED
    for step in case.steps:
        if step.at > now:
            continue
        denied = step.waiver is not None and step.waiver.decision is Decision.DENIED
        if step.kind is StepKind.WAIVER_DECIDED and denied:
            # Back to where the case stood before the request.
            state = _state_before_waiver(case, step, now)
            continue
        found = _milestone_state(step, now)
        if found is not None:
            state = found
    return state


def _state_before_waiver(case: Case, denial: Step, now: datetime) -> CaseState:
    before = case.steps[: case.steps.index(denial)]
    state = CaseState.SUSPECTED
    for step in before:
        if step.kind in (StepKind.WAIVER_APPLIED, StepKind.WAIVER_DECIDED):
            continue
        found = _milestone_state(step, now)
        if found is not None:
            state = found
    return state


class Bucket:
    """The public-works queue's groups (16.7)."""

    DUE_TODAY = "due_today"
    OVERDUE = "overdue"
    WAITING_ON_OWNER = "waiting_on_owner"
    WAITING_ON_INSPECTION = "waiting_on_inspection"
    OTHER = "other"


_INSPECTION_STATES = {
    CaseState.INSPECTION_REQUESTED,
    CaseState.INSPECTION_SCHEDULED,
    CaseState.PROOF_SUBMITTED,
    CaseState.WAIVER_REQUESTED,
}


def bucket(state: CaseState, deadlines: list[Deadline], today: date) -> str:
    """Which queue group a case belongs to today."""
    live = [d for d in deadlines if d.binding]
    if any(d.status is DeadlineStatus.OVERDUE for d in live):
        return Bucket.OVERDUE
    if any(d.status is DeadlineStatus.OPEN and d.due_on == today for d in live):
        return Bucket.DUE_TODAY
    if state in _INSPECTION_STATES:
        return Bucket.WAITING_ON_INSPECTION
    if any(d.status is DeadlineStatus.OPEN and d.party == "owner" for d in live):
        return Bucket.WAITING_ON_OWNER
    if state in (CaseState.NOTICE_SERVED, CaseState.CORRECTION_DUE, CaseState.INSPECTED_FAIL):
        return Bucket.WAITING_ON_OWNER
    return Bucket.OTHER
