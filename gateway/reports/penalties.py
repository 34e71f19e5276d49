"""Penalty estimates from a pack's penalty provisions and a site's violation days.

Pure functions. The amounts come from the pack (every one cited); the days come
from the site's verdict (``gateway.rules.verdict``): a *violation day* is a local
day of a confirmed spell at level ``violation`` (from the level history, confirmed
by an inspection or a dated observation). Reports apply the same provisions to the
suspected days separately ("if confirmed"). The result is an estimate shown with
its citations, never a legal determination: the village imposes penalties after
its own notice, inspection and process.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import date, timedelta

from gateway.reports.models import PenaltyEstimate, PenaltyLine
from gateway.rules.pack import Penalty, RulePack
from gateway.rules.verdict import LedgerLine

DISCLAIMER = (
    "Estimate only, not a legal determination: computed from the monitoring findings "
    "and the amounts in the ordinance text. Penalties are imposed by the village after "
    "its own notice, inspection and process."
)


LEDGER_DISCLAIMER = (
    "Estimate only, not a legal determination: the lines the village's case ledger has "
    "posted for this season (from the recorded notices, orders, inspections and citations "
    "and the amounts in the ordinance text). Penalties are imposed by the village after "
    "its own notice, inspection and process."
)


def _in_period(period: str, first: date, last: date) -> bool:
    """A ledger period (a month ``YYYY-MM`` or a day) that falls in ``[first, last]``."""
    if len(period) == len("YYYY-MM"):
        month = date.fromisoformat(period + "-01")
        return date(first.year, first.month, 1) <= month <= last
    return first <= date.fromisoformat(period) <= last


def estimate_from_ledger(lines: Sequence[LedgerLine], first: date, last: date) -> PenaltyEstimate:
    """The estimate of a site with enforcement cases: its posted ledger lines of the
    season's days (months that overlap it), reversals included, so the report's total
    is the ledger's (issue 16.5). Edgar (f)(4) surcharges run from the month the
    non-compliance is established to the verification inspection; L.L. 6-2024 fines
    are per cited day; the ledger has already applied both."""
    kept = [line for line in lines if _in_period(line.period, first, last)]
    out = tuple(
        PenaltyLine(
            penalty_id=f"ledger:{line.kind}",
            summary=f"Ledger line {line.line}: {line.kind} for {line.period}",
            per="month" if len(line.period) == len("YYYY-MM") else "day",
            count=1,
            basis=line.basis
            + (f" (corrects line {line.corrects})" if line.corrects is not None else "")
            + (" - misdemeanor referral to consider" if line.referral else "")
            + (f"; {line.citation}" if line.citation else ""),
            min_usd=None if line.amount_cents is None else line.amount_cents / 100,
            max_usd=None if line.max_cents is None else line.max_cents / 100,
            additive=line.amount_cents is not None or line.max_cents is not None,
            citations=(),  # the line's own citation text is in its basis
        )
        for line in kept
    )
    charged = [line for line in kept if line.kind != "reversal"]
    return PenaltyEstimate(
        lines=out,
        min_usd=sum(line.amount_cents or 0 for line in kept) / 100,
        max_usd=sum(
            line.max_cents if line.max_cents is not None else line.amount_cents or 0
            for line in kept
        )
        / 100,
        violation_days=len({line.period for line in charged if len(line.period) > 7}),
        violation_months=tuple(
            _month_label((int(p[:4]), int(p[5:7])))
            for p in sorted({line.period for line in charged if len(line.period) == 7})
        ),
        disclaimer=LEDGER_DISCLAIMER,
    )


def _amount(p: Penalty, count: int) -> tuple[float | None, float | None]:
    lo = None if p.min_usd is None else p.min_usd.as_float * count
    hi = None if p.max_usd is None else p.max_usd.as_float * count
    return lo, hi


def _range_text(p: Penalty) -> str:
    if p.min_usd is None and p.max_usd is None:
        return "no amount in the text"
    lo = p.min_usd.as_float if p.min_usd is not None else None
    hi = p.max_usd.as_float if p.max_usd is not None else None
    if lo is not None and hi is not None and lo != hi:
        return f"${lo:,.0f} to ${hi:,.0f} per {p.per}"
    return f"${(lo if lo is not None else hi):,.0f} per {p.per}"


def _months(days: Iterable[date]) -> list[tuple[int, int]]:
    return sorted({(d.year, d.month) for d in days})


def _month_label(ym: tuple[int, int]) -> str:
    return date(ym[0], ym[1], 1).strftime("%b %Y")


def most_within(days: Iterable[date], window_days: int) -> int:
    """The most violation days that fall inside any window of ``window_days`` days."""
    ordered = sorted(set(days))
    best, lo = 0, 0
    for hi, day in enumerate(ordered):
        while day - ordered[lo] >= timedelta(days=window_days):
            lo += 1
        best = max(best, hi - lo + 1)
    return best


def _line(
    p: Penalty, count: int, basis: str, *, additive: bool, amounts: bool = True
) -> PenaltyLine:
    lo, hi = _amount(p, count) if amounts else (None, None)
    return PenaltyLine(
        penalty_id=p.id,
        summary=p.summary,
        per=p.per,
        count=count,
        basis=basis,
        min_usd=lo,
        max_usd=hi,
        additive=additive and (lo is not None or hi is not None),
        citations=p.citations,
    )


def _provision_line(
    p: Penalty,
    days: list[date],
    months: Sequence[tuple[int, int]],
    ladder: list[Penalty],
    violations: int,
) -> PenaltyLine:
    """One provision applied to the sorted violation days (see :func:`estimate_penalties`)."""
    rate = _range_text(p)
    if p.per == "month":
        names = ", ".join(_month_label(m) for m in months) or "none"
        basis = f"{len(months)} month(s) with a violation day ({names}); {rate}"
        return _line(p, len(months), basis, additive=True)
    if p.per == "year":
        years = sorted({d.year for d in days})
        return _line(p, len(years), f"{len(years)} year(s); {rate}", additive=True)
    if p.per == "day":
        return _day_line(p, len(days), ladder, rate)
    if p.after_violations is not None:
        return _threshold_line(p, days, rate)
    return _line(p, violations, f"{violations} violation finding(s); {rate}", additive=False)


def _day_line(p: Penalty, n: int, ladder: list[Penalty], rate: str) -> PenaltyLine:
    if len(ladder) > 1 and p is ladder[0]:
        count = min(n, 1)
        basis = f"first violation day (first offense); {rate}"
    elif len(ladder) > 1:
        later = ladder.index(p) == len(ladder) - 1
        count = max(n - 1, 0) if later else 0
        basis = f"{count} further violation day(s), each a separate offense; {rate}"
    else:
        count = n
        basis = f"{n} violation day(s), each day a separate offense; {rate}"
    return _line(p, count, basis, additive=True)


def _threshold_line(p: Penalty, days: list[date], rate: str) -> PenaltyLine:
    assert p.after_violations is not None
    threshold = int(p.after_violations.as_float)
    window = int(p.within_days.as_float) if p.within_days is not None else 365
    count = most_within(days, window)
    reached = count >= threshold
    # L.L. 6-2024 penalties B: "a fine ... or imprisonment ... or by both such
    # fine and imprisonment": keep the "or both" (review §7).
    jail = f" or up to {p.jail_days.as_float:g} days in jail, or both" if p.jail_days else ""
    if reached:
        basis = (
            f"{count} violation days within {window} days reach the threshold of "
            f"{threshold}: if convicted, {rate}{jail}"
        )
    else:
        basis = f"{count} of {threshold} violations within {window} days: not reached"
    return _line(p, count, basis, additive=False, amounts=reached)


def estimate_penalties(
    pack: RulePack | None, violation_days: Iterable[date], violations: int
) -> PenaltyEstimate:
    """Apply every penalty provision of ``pack`` to the violation days of one site.

    ``violations`` is the number of distinct violation findings (for provisions
    charged per violation without a day rule). Provisions by ``per``:

    * ``month``: each calendar month with a violation day (Edgar (f)(4): a
      surcharge on every monthly bill while out of compliance);
    * ``day``: each violation day is a separate offense; when a pack lists
      several per-day provisions they form a ladder in pack order (first offense,
      then second or later offenses: L.L. 6-2024 penalties A);
    * ``violation`` with ``after_violations``: a threshold (three or more within
      a year: a misdemeanor), shown beside the total, not added to it;
    * ``violation`` without one, or a provision without amounts: listed with its
      citation, no amount.
    """
    days = sorted(set(violation_days))
    months = _months(days)
    if pack is None:
        return PenaltyEstimate((), 0.0, 0.0, len(days), (), DISCLAIMER)
    ladder = [p for p in pack.penalties if p.per == "day"]
    lines = [_provision_line(p, days, months, ladder, violations) for p in pack.penalties]
    lo = sum(line.min_usd or 0.0 for line in lines if line.additive)
    hi = sum(line.max_usd or 0.0 for line in lines if line.additive)
    return PenaltyEstimate(
        lines=tuple(lines),
        min_usd=lo,
        max_usd=hi,
        violation_days=len(days),
        violation_months=tuple(_month_label(m) for m in months),
        disclaimer=DISCLAIMER,
    )
