"""The surcharge and fine ledger (16.5), computed from the cases of one site (pure).

Two kinds, chosen by the pack's ``[enforcement.ledger]``:

* ``monthly_surcharge`` (Edgar (f)(4)): one charge per calendar month (site's local
  calendar) in which the property was out of compliance on at least one day that no
  granted waiver covered. Non-compliance is *established* by a failed, refused or
  missed inspection, a confirming observation, a connection order, or a missed
  binding deadline; it ends with a passing village inspection ("with verification
  by Village inspection", (f)(4)b), not with the owner's proof alone. A re-inspection
  that finds a violation adds every month after the previous inspection's month up
  to its own ("all months between the two (2) most recent inspections"). One
  surcharge per site and month, however many cases are open.
* ``per_offense`` (L.L. 6-2024 penalties A-B, Ord. 247 (D)(4)(a)): one line per cited
  day ("each day ... a separate offense"), the site's first ever as a first offense,
  later ones as subsequent; a line is flagged for referral when it is the third or
  later within the pack's one-year window. Amounts are the text's minimum, with the
  maximum beside it: estimates, never a legal determination (a court fines on
  conviction). Ord. 247 names no amount (§ 51.99 is not in the text): None.

Posted lines are immutable: :func:`reconcile` turns a recomputation into new lines,
reversing what no longer holds.
"""

from __future__ import annotations

import csv
import io
import itertools
from collections.abc import Iterable
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

from gateway.cases.deadlines import INSPECTION_FAILED, compute_deadlines, events, local_day
from gateway.cases.models import (
    Case,
    Charge,
    DeadlineStatus,
    Decision,
    EntryKind,
    LedgerEntry,
    Outcome,
    Step,
    StepKind,
)
from gateway.domain import Citation
from gateway.rules.pack import Enforcement, LedgerSpec, Penalty

Month = tuple[int, int]


def _month(day: date) -> Month:
    return (day.year, day.month)


def _next_month(m: Month) -> Month:
    return (m[0] + 1, 1) if m[1] == 12 else (m[0], m[1] + 1)


def _months(first: Month, last: Month) -> list[Month]:
    found = []
    m = first
    while m <= last:
        found.append(m)
        m = _next_month(m)
    return found


def _cents(penalty: Penalty | None, which: str) -> int | None:
    number = None if penalty is None else getattr(penalty, which)
    return None if number is None else round(number.as_float * 100)


def _establishing(
    case: Case, enforcement: Enforcement, tz: ZoneInfo, now: datetime, after: datetime
) -> datetime:
    """When non-compliance was (next) established, at or after ``after``; max if never."""
    moments = []
    for step in case.steps:
        if step.at > now or step.at < after:
            continue
        ev = events(step)
        if (
            INSPECTION_FAILED in ev
            or step.kind is StepKind.ORDER
            or (step.kind is StepKind.OBSERVATION and step.confirms)
        ):
            moments.append(step.at)
    for d in compute_deadlines(case, enforcement, tz, now):
        if d.binding and d.status in (DeadlineStatus.OVERDUE, DeadlineStatus.MET_LATE):
            assert d.due_at is not None
            if d.due_at >= after:
                moments.append(d.due_at)  # (f)(4)a.3: corrections not made in time
    return min(moments, default=datetime.max.replace(tzinfo=tz))


def _verified(case: Case, after: datetime, now: datetime) -> Step | None:
    return next(
        (
            s
            for s in case.of_kind(StepKind.INSPECTION_RESULT)
            if after <= s.at <= now and s.inspection and s.inspection.outcome is Outcome.PASS
        ),
        None,
    )


def _waived_days(case: Case, tz: ZoneInfo) -> set[date]:
    """Local days wholly inside a granted waiver (the text allows the discharge then)."""
    days: set[date] = set()
    for step in case.of_kind(StepKind.WAIVER_DECIDED):
        w = step.waiver
        if w is None or w.decision is not Decision.GRANTED or w.end is None:
            continue
        start = w.start or step.at
        day = local_day(start, tz)
        if start.astimezone(tz).time() != datetime.min.time():
            day += timedelta(days=1)  # a part day is not wholly waived
        while datetime.combine(day + timedelta(days=1), datetime.min.time(), tz) <= w.end:
            days.add(day)
            day += timedelta(days=1)
    return days


def _noncompliant_days(
    case: Case, enforcement: Enforcement, tz: ZoneInfo, now: datetime
) -> set[date]:
    days: set[date] = set()
    cursor = datetime.min.replace(tzinfo=tz)
    while True:  # each period from establishment to the next verification
        start = _establishing(case, enforcement, tz, now, cursor)
        if start > now:
            break
        stop = _verified(case, start, now)
        last = local_day(stop.at, tz) - timedelta(days=1) if stop else local_day(now, tz)
        day = local_day(start, tz)
        while day <= last:
            days.add(day)
            day += timedelta(days=1)
        if stop is None:
            break
        cursor = stop.at + timedelta(microseconds=1)
    return days - _waived_days(case, tz)


def _lookback_months(case: Case, tz: ZoneInfo, now: datetime) -> set[Month]:
    """Months after the previous inspection's month through a failing re-inspection's."""
    results = [
        s
        for s in case.of_kind(StepKind.INSPECTION_RESULT)
        if s.at <= now
        and s.inspection is not None
        and s.inspection.outcome in (Outcome.PASS, Outcome.FAIL)
    ]
    months: set[Month] = set()
    for previous, current in itertools.pairwise(results):
        assert current.inspection is not None
        if current.inspection.outcome is Outcome.FAIL:
            first = _next_month(_month(local_day(previous.at, tz)))
            months.update(_months(first, _month(local_day(current.at, tz))))
    return months


def surcharges(
    cases: Iterable[Case], enforcement: Enforcement, tz: ZoneInfo, now: datetime
) -> list[Charge]:
    """Edgar-style monthly surcharges of one site (one per month across its cases)."""
    spec = enforcement.ledger
    assert spec is not None and spec.kind == "monthly_surcharge"
    charged: dict[Month, Charge] = {}
    for case in sorted(cases, key=lambda c: c.opened_at):
        ongoing = {_month(d) for d in _noncompliant_days(case, enforcement, tz, now)}
        lookback = _lookback_months(case, tz, now) - ongoing
        for months, basis, cite in (
            (ongoing, "ongoing", spec.stop_citation),
            (lookback, "lookback", spec.lookback_citation),
        ):
            for m in sorted(months):
                if m not in charged:
                    charged[m] = _surcharge(case, spec, m, basis, cite)
    return [charged[m] for m in sorted(charged)]


def _surcharge(case: Case, spec: LedgerSpec, m: Month, basis: str, cite: Citation | None) -> Charge:
    period = f"{m[0]:04d}-{m[1]:02d}"
    penalty = spec.penalty
    cites = (penalty.citations if penalty else ()) + ((cite,) if cite else ())
    return Charge(
        key=f"surcharge:{case.site_id}:{period}",
        site_id=case.site_id,
        case_id=case.id,
        kind=EntryKind.SURCHARGE,
        period=period,
        amount_cents=_cents(penalty, "min_usd"),
        max_cents=_cents(penalty, "max_usd"),
        basis=basis,
        citations=cites,
    )


def fines(cases: Iterable[Case], enforcement: Enforcement) -> list[Charge]:
    """Per-offense fines of one site: each cited day one offense (first vs later)."""
    spec = enforcement.ledger
    assert spec is not None and spec.kind == "per_offense"
    offenses: dict[date, Case] = {}
    for case in cases:
        for step in case.of_kind(StepKind.CITATION):
            for day in step.offense_days:
                offenses.setdefault(day, case)  # one offense per day per site
    referral = spec.referral_penalty
    after = referral.after_violations if referral else None
    window = referral.within_days if referral else None
    days = sorted(offenses)
    found = []
    for i, day in enumerate(days):
        penalty = spec.first_penalty if i == 0 else spec.later_penalty
        flagged = False
        if after is not None and window is not None:
            since = day - timedelta(days=int(window.as_float) - 1)
            flagged = sum(1 for d in days[: i + 1] if d >= since) >= int(after.as_float)
        case = offenses[day]
        cites = (penalty.citations if penalty else ()) + (
            (spec.each_day_citation,) if spec.each_day_citation else ()
        )
        if flagged and referral is not None:
            cites += referral.citations
        found.append(
            Charge(
                key=f"fine:{case.site_id}:{day.isoformat()}",
                site_id=case.site_id,
                case_id=case.id,
                kind=EntryKind.FINE,
                period=day.isoformat(),
                amount_cents=_cents(penalty, "min_usd"),
                max_cents=_cents(penalty, "max_usd"),
                basis="first offense" if i == 0 else "later offense",
                citations=cites,
                referral=flagged,
            )
        )
    return found


def charges(
    cases: list[Case], enforcement: Enforcement, tz: ZoneInfo, now: datetime
) -> list[Charge]:
    """What the ledger of one site should hold at ``now`` (empty without a ledger)."""
    if enforcement.ledger is None:
        return []
    if enforcement.ledger.kind == "monthly_surcharge":
        return surcharges(cases, enforcement, tz, now)
    return fines(cases, enforcement)


def _net(entries: list[LedgerEntry]) -> dict[str, tuple[int | None, LedgerEntry]]:
    """Per key: the amount standing after corrections, and the last line."""
    net: dict[str, tuple[int | None, LedgerEntry]] = {}
    for e in entries:
        if e.kind is EntryKind.REVERSAL:
            net.pop(e.key, None)
        else:
            net[e.key] = (e.amount_cents, e)
    return net


def reconcile(computed: list[Charge], posted: list[LedgerEntry]) -> list[tuple[Charge, int | None]]:
    """New lines to post: ``(charge, corrects)``; a reversal has kind REVERSAL.

    A key whose standing line differs from the computation (amount, basis or
    referral) is reversed and posted again; a key no longer computed is reversed.
    """
    net = _net(posted)
    wanted = {c.key: c for c in computed}
    out: list[tuple[Charge, int | None]] = []
    for key, (_amount, last) in sorted(net.items()):
        charge = wanted.get(key)
        same = charge is not None and (
            charge.amount_cents == last.amount_cents
            and charge.basis == last.basis
            and charge.referral == last.referral
        )
        if not same:
            out.append((_reversal(last), last.seq))
    for key, charge in wanted.items():
        standing = net.get(key)
        if standing is None or any(r[1] == standing[1].seq for r in out):
            out.append((charge, None))
    return out


def _reversal(entry: LedgerEntry) -> Charge:
    return Charge(
        key=entry.key,
        site_id=entry.site_id,
        case_id=entry.case_id,
        kind=EntryKind.REVERSAL,
        period=entry.period,
        amount_cents=None if entry.amount_cents is None else -entry.amount_cents,
        max_cents=None if entry.max_cents is None else -entry.max_cents,
        basis=f"reverses line {entry.seq}",
        citations=(),
    )


def total_cents(entries: Iterable[LedgerEntry]) -> int:
    """The sum of posted amounts (lines without an amount count 0)."""
    return sum(e.amount_cents or 0 for e in entries)


CSV_COLUMNS = (
    "line",
    "posted_at",
    "site_id",
    "case_id",
    "kind",
    "period",
    "amount_usd",
    "max_usd",
    "basis",
    "corrects_line",
    "referral",
    "citation",
)


def _usd(cents: int | None) -> str:
    return "" if cents is None else f"{cents / 100:.2f}"


def to_csv(entries: Iterable[LedgerEntry]) -> str:
    """The ledger for the utility billing system: one row per posted line, in order."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for e in entries:
        writer.writerow(
            (
                e.seq,
                e.posted_at.isoformat(),
                e.site_id,
                e.case_id,
                e.kind.value,
                e.period,
                _usd(e.amount_cents),
                _usd(e.max_cents),
                e.basis,
                "" if e.corrects is None else e.corrects,
                "yes" if e.referral else "",
                e.citation,
            )
        )
    return buf.getvalue()
