"""Assemble winter reports: stores, findings, audit, alerts and packs -> frozen data.

Everything is read through :class:`~gateway.reports.sources.ReportSources`, so
the SQLite and InfluxDB stores both work. The hourly arithmetic uses only the
day rollups (the 1-hour rollups' values, 24 to a row: a whole season of a site is
~450 rows instead of ~11,000), never raw points.

Where the water went, hour by hour (see ``docs/reports.md``):

* pit volume = primary pump cycles x the volume between the registered float
  marks (``pump_on_cm - pump_off_cm`` x pit area): what the pump lifted out;
* outlet volume = outlet flow integrated over time (the rollups' ``pumped_volume_l``);
* an hour is *unaccounted* when, over it and its two neighbours (a cycle can
  start in one hour and discharge in the next), the outlet saw less than
  ``ACCOUNTED_RATIO`` of the pit volume while both nodes reported and no frozen
  line was open: the shortfall of that hour is "suspected to the sanitary sewer"
  (``physics.unaccounted_litres`` on hourly sums, the shared water balance);
* the outlet volume goes where the installation is registered to go (grade or
  swale -> "grade", storm lateral -> "storm", sanitary -> "sanitary").
"""

from __future__ import annotations

import asyncio
import functools
import math
import statistics
from collections import defaultdict
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from alerts.lifecycle import TEST_RULE
from alerts.models import Alert
from gateway.contract import NodeKind
from gateway.domain import Citation, Confirmation, Finding, NotEvaluated
from gateway.registry.models import DischargeDestination, Installation, SiteConfig
from gateway.reports.models import (
    VOLUME_SLOT,
    AlertEntry,
    AlertSummary,
    Compliance,
    ComplianceStatus,
    Coverage,
    DayStats,
    FindingEntry,
    Gap,
    PenaltyEstimate,
    Recommendation,
    SiteInfo,
    SiteReport,
    SiteStatusRow,
    SiteTotals,
    SuspectedEntry,
    VillageReport,
    VillageTotals,
    WeekStats,
)
from gateway.reports.penalties import estimate_from_ledger, estimate_penalties
from gateway.reports.season import SeasonPeriod, season_period
from gateway.reports.sources import ReportSources
from gateway.rules.audit import FIELD_LABELS
from gateway.rules.detectors.sanitary import SanitaryDischargeDetector
from gateway.rules.detectors.silence import SensorSilenceDetector
from gateway.rules.detectors.weather import FrozenLineDetector, IcingRiskDetector
from gateway.rules.pack import RulePack
from gateway.rules.physics import pipe_can_ice, unaccounted_litres_each
from gateway.rules.thresholds import FREEZING_C, MIN_CYCLE_VOLUME_L
from gateway.rules.verdict import (
    CONFIRM_WITHIN,
    LedgerLine,
    LevelHistory,
    Verdict,
    VerdictStatus,
    level_spans,
    site_verdict,
)
from gateway.store.base import HourArray, NodeHours

HOUR = timedelta(hours=1)
BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]
#: Below this share of the period with readings, "no violation seen" is not a
#: statement of compliance: too much of the season went unwatched.
MIN_COVERAGE = 0.9
#: Findings about the monitoring itself, not about the property's discharge.
MONITORING_RULES = frozenset({SensorSilenceDetector.rule_id})
#: Icing levels that mean the walk or street could really ice (not just "watch").
ICING_LEVELS = frozenset({"warning", "violation"})
_SURFACE = (DischargeDestination.GRADE, DischargeDestination.SWALE)


def floor_hour(when: datetime) -> datetime:
    """The start of the UTC hour containing ``when``."""
    return when.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


@dataclass(slots=True)
class _Hours:
    """Every hour of a site's [start, start + n h), as columns (arrays) indexed by hour.

    Built from the day rollups laid end to end (``NodeHours``), so the sums below add
    the same hourly values in the same order as the 1-hour rollups did: the numbers
    are those of the hourly arithmetic, only without a Python float per hour (a
    season is 3,600 hours a column, a village 3.6 million). A NaN temperature is an
    hour without that reading.
    """

    start: datetime
    n: int
    reported: dict[str, BoolArray]  # per registered node: samples in the hour
    all_reported: BoolArray  # every registered node reported
    cycles: HourArray  # whole numbers
    on_s: HourArray
    backup_cycles: HourArray  # whole numbers
    pit_l: HourArray
    outlet_l: HourArray
    air_min: HourArray
    air_max: HourArray
    pipe_min: HourArray
    pit_seen: BoolArray
    outlet_seen: BoolArray

    def start_of(self, i: int) -> datetime:
        """When hour ``i`` starts."""
        return self.start + i * HOUR


def _add(columns: Sequence[HourArray], n: int) -> HourArray:
    """Per hour, the nodes' values added in node order from 0.0 (as ``sum(vals, 0.0)``
    added the hourly rollups: elementwise, the same float additions)."""
    if len(columns) == 1:
        return columns[0]
    out = np.zeros(n)
    for col in columns:
        out = out + col
    return out


def _extreme(columns: Sequence[HourArray], n: int, *, lowest: bool) -> HourArray:
    """Per hour, the nodes' smallest (largest) value, ignoring NaN (no reading); NaN
    where no node has one. Folded in node order keeping the first of equal values,
    as ``min``/``max`` over the real ones did (so 0.0 and -0.0 pick alike)."""
    if not columns:
        return np.full(n, math.nan)
    out = columns[0]
    for col in columns[1:]:
        better = col < out if lowest else col > out
        out = np.where(better | np.isnan(out), col, out)
    return out


def _hours(site: SiteConfig, nodes: Sequence[NodeHours], start: datetime, end: datetime) -> _Hours:
    """Every hour of [start, end) with what the site's registered nodes said in it."""
    band_l = (site.pit.pump_on_cm - site.pit.pump_off_cm) * site.pit.area_cm2 / 1000.0
    n = int((end - start) / HOUR)
    registered = [node.id for node in site.nodes]
    # Node order within an hour, as the hourly rollups were sorted.
    mine = sorted((h for h in nodes if h.node_id in registered), key=lambda h: h.node_id)

    def series(kind: NodeKind, name: str) -> list[HourArray]:
        return [h.series[name] for h in mine if h.kind is kind]

    def total(kind: NodeKind, name: str) -> HourArray:
        cols = series(kind, name)
        return _add(cols, n) if cols else np.zeros(n)

    none = np.zeros(n, dtype=bool)
    reported = dict.fromkeys(registered, none)
    for h in mine:
        reported[h.node_id] = h.series["samples"] > 0.0

    def seen(kind: NodeKind) -> BoolArray:
        cols = [reported[h.node_id] for h in mine if h.kind is kind]
        return np.logical_or.reduce(cols) if cols else none

    cycles = total(NodeKind.PIT, "pump_cycles")
    return _Hours(
        start=start,
        n=n,
        reported=reported,
        # With no registered node every hour counts as covered (nothing was missing).
        all_reported=np.logical_and.reduce(list(reported.values()))
        if reported
        else np.ones(n, dtype=bool),
        cycles=cycles,
        on_s=total(NodeKind.PIT, "pump_on_s"),
        backup_cycles=total(NodeKind.PIT, "backup_pump_cycles"),
        pit_l=cycles * band_l,
        outlet_l=total(NodeKind.DISCHARGE, "pumped_volume_l"),
        air_min=_extreme(series(NodeKind.AIR, "air_temp_c_min"), n, lowest=True),
        air_max=_extreme(series(NodeKind.AIR, "air_temp_c_max"), n, lowest=False),
        pipe_min=_extreme(series(NodeKind.DISCHARGE, "pipe_temp_c_min"), n, lowest=True),
        pit_seen=seen(NodeKind.PIT),
        outlet_seen=seen(NodeKind.DISCHARGE),
    )


def _overlaps(f: Finding, start: datetime, end: datetime) -> bool:
    return f.opened_at < end and (f.cleared_at is None or f.cleared_at > start)


def _intervals(findings: Iterable[Finding], through: datetime) -> list[tuple[datetime, datetime]]:
    return [(f.opened_at, f.cleared_at or through) for f in findings]


def _covers(intervals: Sequence[tuple[datetime, datetime]], start: datetime, end: datetime) -> bool:
    return any(a < end and b > start for a, b in intervals)


def _days_overlapped(
    intervals: Sequence[tuple[datetime, datetime]], period: SeasonPeriod, through: datetime
) -> set[date]:
    """Local days of the period (up to ``through``) that an interval overlaps."""
    tz = period.tz
    days: set[date] = set()
    for start, end in intervals:
        a, b = max(start, period.start), min(end, through)
        if b <= a:
            continue
        day = a.astimezone(tz).date()
        last = (b - timedelta(microseconds=1)).astimezone(tz).date()
        while day <= last:
            days.add(day)
            day += timedelta(days=1)
    return days


def _icing_intervals(
    findings: Iterable[Finding], histories: Mapping[str, LevelHistory], through: datetime
) -> list[tuple[datetime, datetime]]:
    """When icing findings were at a level that means real icing risk (from their history)."""
    return [
        (span.start, span.end)
        for f in findings
        if f.rule_id == IcingRiskDetector.rule_id
        for span in level_spans(f, histories.get(f.id), through)
        if span.level in ICING_LEVELS
    ]


def _frozen_line_spans(
    findings: Iterable[Finding], through: datetime
) -> list[tuple[datetime, datetime]]:
    """When a frozen-line finding was open: the line held the water back then."""
    return _intervals([f for f in findings if f.rule_id == FrozenLineDetector.rule_id], through)


def _coverage(site: SiteConfig, hours: _Hours) -> Coverage:
    node_ids = tuple(n.id for n in site.nodes)
    n = hours.n
    by_node = {
        nid: int(np.count_nonzero(hours.reported[nid])) / n if n else 0.0 for nid in node_ids
    }
    # A gap is a run of hours not covered: it starts where coverage turns off and ends
    # where it turns back on (or at the end), with every node missing at some hour of it.
    covered = hours.all_reported
    edges = np.flatnonzero(np.diff(np.concatenate(([True], covered, [True])))).tolist()
    gaps = [
        Gap(
            hours.start_of(a),
            hours.start_of(b),
            tuple(sorted(nid for nid in node_ids if not hours.reported[nid][a:b].all())),
        )
        for a, b in zip(edges[0::2], edges[1::2], strict=True)
    ]
    return Coverage(n, int(np.count_nonzero(covered)), by_node, tuple(gaps))


def _sanitary_hours(
    inst: Installation, hours: _Hours, blocked: Sequence[tuple[datetime, datetime]]
) -> HourArray:
    """Per hour, the pit volume the outlet did not account for (0 when accounted)."""
    if inst.destination is DischargeDestination.SANITARY:
        # Registered to the sanitary sewer: the outlet's volume already goes there.
        return np.zeros(hours.n)
    pit_l, outlet_l = hours.pit_l, hours.outlet_l
    pit_win, out_win = _three_hour_sums(pit_l), _three_hour_sums(outlet_l)
    # The sanitary physics finds the hour short over its window (asked of every hour at
    # once, in its array form), counted only where both nodes reported.
    out = unaccounted_litres_each(pit_l, outlet_l, pit_win, out_win)
    out[~(hours.pit_seen & hours.outlet_seen)] = 0.0
    if blocked:
        for i in np.flatnonzero(out).tolist():
            if _covers(blocked, hours.start_of(i), hours.start_of(i) + HOUR):
                out[i] = 0.0  # a frozen line holds the water back; it is not diverted
    return out


def _three_hour_sums(values: HourArray) -> HourArray:
    """Per hour, the sum over it and its two neighbours (a cycle can start in one hour
    and discharge in the next), from prefix sums taken left to right from 0.0 (an
    accumulation adds in order, unlike numpy's pairwise ``sum``)."""
    n = len(values)
    if n == 0:
        return np.zeros(0)
    prefix: HourArray = np.cumsum(np.concatenate(([0.0], values)))
    upper = np.concatenate((prefix[2:], prefix[n:]))  # prefix[min(n, i + 2)]
    lower = np.concatenate((prefix[:1], prefix[: n - 1]))  # prefix[max(0, i - 1)]
    return upper - lower


@dataclass(frozen=True, slots=True)
class _LocalDays:
    """The local days of a site's hours, and how to gather each day's hours at once.

    ``gather[d, k]`` is the index of day d's k-th hour where ``inside[d, k]`` (a day
    has 23 to 25 hours; the rest of its row points at its last hour and is masked).
    Shared by every site of a village (same season, same zone): read only.
    """

    days: tuple[tuple[date, int, int], ...]  # (day, first hour, end hour)
    firsts: IntArray
    ends: IntArray
    gather: IntArray
    inside: BoolArray


@functools.lru_cache(maxsize=64)
def _local_days(start: datetime, n: int, tz: tzinfo) -> _LocalDays:
    """The local days of the n hours from ``start`` (see :func:`_local_day_bounds`),
    computed once per season and zone."""
    days = _local_day_bounds(start, n, tz)
    firsts = np.array([a for _, a, _ in days], dtype=np.int64)
    ends = np.array([b for _, _, b in days], dtype=np.int64)
    width = int((ends - firsts).max()) if days else 0
    slot = np.arange(width)
    inside = slot < (ends - firsts)[:, None]
    gather = np.minimum(firsts[:, None] + slot, ends[:, None] - 1)
    for array in (firsts, ends, gather, inside):
        array.flags.writeable = False
    return _LocalDays(days, firsts, ends, gather, inside)


def _local_day_bounds(start: datetime, n: int, tz: tzinfo) -> tuple[tuple[date, int, int], ...]:
    """The local days of the n hours from ``start`` as (day, first hour, end hour): each
    hour belongs to the local date its start falls on.

    Found from each local midnight rather than by converting every hour (a season is
    3,600 of them); where a midnight does not exist (a DST jump at midnight) or the
    boundary does not check out, every hour is converted after all.
    """
    if n == 0:
        return ()
    base = start.timestamp()

    def day_of(i: int) -> date:
        return (start + i * HOUR).astimezone(tz).date()

    out: list[tuple[date, int, int]] = []
    day, first = day_of(0), 0
    while first < n:
        nxt = day + timedelta(days=1)
        midnight = datetime.combine(nxt, time(0), tzinfo=tz).timestamp()
        end = min(n, max(first + 1, math.ceil((midnight - base) / 3600)))
        after = day_of(end) if end < n else None
        if day_of(end - 1) != day or after == day:
            return tuple(_local_days_hour_by_hour(n, day_of))
        out.append((day, first, end))
        if after is not None:
            day = after
        first = end
    return tuple(out)


def _local_days_hour_by_hour(n: int, day_of: Callable[[int], date]) -> list[tuple[date, int, int]]:
    out: list[tuple[date, int, int]] = []
    for i in range(n):
        d = day_of(i)
        if out and out[-1][0] == d:
            out[-1] = (d, out[-1][1], i + 1)
        else:
            out.append((d, i, i + 1))
    return out


#: ``physics.pipe_can_ice`` over a column at once: the test is one comparison, which
#: numpy applies hour by hour (NaN compares false, as for a float); pinned equal to
#: the scalar calls by tests/test_reports_units.py.
_pipes_can_ice = cast(Callable[[HourArray], BoolArray], pipe_can_ice)


def _risk_hours(hours: _Hours, surface: bool) -> BoolArray:
    """Per hour: water flowed out while the air froze (it can ice where it lands) or
    while the outlet pipe was cold enough to hold ice (the frozen-line detectors' own
    test, ``physics.pipe_can_ice``: the line can freeze shut); a drip at the
    outlet is not a discharge. (NaN, no reading, compares false.)"""
    freezing = hours.air_min <= FREEZING_C if surface else np.zeros(hours.n, dtype=bool)
    risk: BoolArray = (hours.outlet_l >= MIN_CYCLE_VOLUME_L) & (
        freezing | _pipes_can_ice(hours.pipe_min)
    )
    return risk


def _day_sums(values: HourArray, local: _LocalDays) -> list[float]:
    """Each day's sum of ``values``, added left to right from 0.0 over the day's hours:
    one row per day (0.0, its hours, then 0.0 padding, which adds exactly), accumulated
    along the row. The same float additions as Python's ``sum`` over the hour slice, so
    the same numbers to the last bit (numpy's pairwise ``sum`` would round otherwise)."""
    rows = np.zeros((len(local.days), local.gather.shape[1] + 1))
    rows[:, 1:] = np.where(local.inside, values[local.gather], 0.0)
    sums: list[float] = np.cumsum(rows, axis=1)[:, -1].tolist()
    return sums


def _day_extremes(values: HourArray, local: _LocalDays, *, lowest: bool) -> list[float | None]:
    """Each day's smallest (largest) value, None where the day had no reading (NaN)."""
    if not local.days:
        return []
    filled = np.where(np.isnan(values), math.inf if lowest else -math.inf, values)
    if np.any((filled == 0.0) & np.signbit(filled)):
        # A -0.0: numpy's min picks another of two equal zeros than Python's (the first),
        # so such a column takes Python's, hour slice by hour slice.
        hourly = filled.tolist()
        pick = min if lowest else max
        found: list[float] = [pick(hourly[a:b]) for _, a, b in local.days]
    else:
        found = (np.minimum if lowest else np.maximum).reduceat(filled, local.firsts).tolist()
    return [None if math.isinf(v) else v for v in found]


def _day_counts(values: npt.NDArray[Any], local: _LocalDays) -> list[int]:
    """Each day's sum of whole-number ``values`` (counts, flags) from one prefix sum:
    exact, as every partial sum of whole numbers is."""
    if not local.days:
        return []
    prefix = np.cumsum(np.concatenate(([0], values)))
    counts: list[int] = (prefix[local.ends] - prefix[local.firsts]).astype(np.int64).tolist()
    return counts


#: A day's unaccounted hours, air minimum and maximum, pipe minimum, freezing and risk
#: hours, in ``DayStats``' order.
_Counted = tuple[int, float | None, float | None, float | None, int, int]
#: A local day's columns (see :func:`_day_columns`).
_DayColumns = tuple[tuple[date, int, int], int, int, float, int, float, float, float, _Counted]


def _day_columns(
    hours: _Hours, sanitary: HourArray, surface: bool, local: _LocalDays
) -> Iterator[_DayColumns]:
    """Per local day: (the day and its hours, then the day's covered hours, cycles,
    pump seconds, backup cycles, pit, outlet and unaccounted litres, and as one tuple
    its unaccounted hours, air minimum and maximum, pipe minimum, freezing and risk
    hours: ``DayStats``' order), each column computed over every day at once rather
    than sliced day by day."""
    return zip(
        local.days,
        _day_counts(hours.all_reported, local),
        _day_counts(hours.cycles, local),
        _day_sums(hours.on_s, local),
        _day_counts(hours.backup_cycles, local),
        _day_sums(hours.pit_l, local),
        _day_sums(hours.outlet_l, local),
        _day_sums(sanitary, local),
        zip(
            _day_counts(sanitary > 0, local),
            _day_extremes(hours.air_min, local, lowest=True),
            _day_extremes(hours.air_max, local, lowest=False),
            _day_extremes(hours.pipe_min, local, lowest=True),
            _day_counts(hours.air_min <= FREEZING_C, local),
            _day_counts(_risk_hours(hours, surface), local),
            strict=True,
        ),
        strict=True,
    )


def _days(
    inst: Installation,
    period: SeasonPeriod,
    hours: _Hours,
    sanitary: HourArray,
    icing_days: set[date],
    verdict: Verdict,
) -> list[DayStats]:
    dest = inst.destination
    surface = dest in _SURFACE
    violation_days = set(verdict.confirmed_days)
    suspected_days = set(verdict.suspected_days)
    columns = _day_columns(hours, sanitary, surface, _local_days(hours.start, hours.n, period.tz))
    sanitary_dest = dest is DischargeDestination.SANITARY
    storm_dest = dest is DischargeDestination.STORM_LATERAL
    # Positionally, in the fields' order: 150 a site, 150,000 a village. ``counted`` is
    # the day's unaccounted hours, air and pipe extremes, freezing and risk hours.
    return [
        DayStats(
            day,
            b - a,
            covered,
            cycles,
            on_s,
            backup,
            pit,
            out,
            out if surface else 0.0,  # grade_l
            out if storm_dest else 0.0,  # storm_l
            sus + (out if sanitary_dest else 0.0),  # sanitary_l
            *counted,
            day in icing_days,
            day in violation_days,
            day in suspected_days,
        )
        for (day, a, b), covered, cycles, on_s, backup, pit, out, sus, counted in columns
    ]


def _totals(days: Sequence[DayStats]) -> SiteTotals:
    return SiteTotals(
        pump_cycles=sum(d.pump_cycles for d in days),
        pump_on_h=sum(d.pump_on_s for d in days) / 3600.0,
        pit_volume_l=sum(d.pit_volume_l for d in days),
        outlet_volume_l=sum(d.outlet_volume_l for d in days),
        grade_l=sum(d.grade_l for d in days),
        storm_l=sum(d.storm_l for d in days),
        sanitary_l=sum(d.sanitary_l for d in days),
        freezing_hours=sum(d.freezing_hours for d in days),
        freezing_risk_hours=sum(d.freezing_risk_hours for d in days),
        freezing_risk_days=sum(1 for d in days if d.freezing_risk_hours > 0),
        icing_days=sum(1 for d in days if d.icing),
        violation_days=sum(1 for d in days if d.violation),
        suspected_days=sum(1 for d in days if d.suspected),
    )


def _dated_citations(
    f: Finding, pack: RulePack | None, days: Iterable[date]
) -> tuple[Citation, ...]:
    """The finding's citations that apply on its days (Edgar (e)(1)b only in season)."""
    if pack is None or not f.citations or not pack.rule(f.rule_id).enforced:
        return tuple(f.citations)
    return _unique_citations(c for day in sorted(days) for c in pack.citations_on(f.rule_id, day))


def _finding_entries(
    findings: Sequence[Finding],
    period: SeasonPeriod,
    through: datetime,
    pack: RulePack | None,
    frozen: Mapping[str, Mapping[str, Any]],
) -> list[FindingEntry]:
    out = []
    for f in sorted(findings, key=lambda f: (f.opened_at, f.rule_id)):
        days = _days_overlapped(_intervals([f], through), period, through)
        out.append(
            FindingEntry(
                rule_id=f.rule_id,
                title=f.title,
                level=f.level,
                severity=f.severity.value,
                opened_at=f.opened_at,
                cleared_at=f.cleared_at,
                enforced=bool(f.citations),
                # As frozen by the period's end (15.5); live only where nothing was frozen.
                evidence=dict(frozen.get(f.id, f.evidence)),
                citations=_dated_citations(f, pack, days) if days else tuple(f.citations),
                action=f.action,
                days=len(days),
            )
        )
    return out


def _alerts(alerts: Sequence[Alert]) -> tuple[list[AlertEntry], AlertSummary]:
    entries = [
        AlertEntry(
            rule_id=a.rule_id,
            title=a.title,
            severity=a.severity.value,
            state=a.state.value,
            opened_at=a.opened_at,
            acknowledged_at=a.acknowledged_at,
            acknowledged_by=a.acknowledged_by,
            resolved_at=a.resolved_at,
            resolved_by=a.resolved_by,
            resolve_note=a.resolve_note,
            condition_persisted=a.condition_persists,
        )
        for a in sorted(alerts, key=lambda a: a.opened_at)
        if a.rule_id != TEST_RULE  # an administrator's test message is not an alert of the site
    ]
    waits = [e.time_to_ack for e in entries if e.time_to_ack is not None]
    seconds = [w.total_seconds() for w in waits]
    summary = AlertSummary(
        count=len(entries),
        acknowledged=len(waits),
        median_time_to_ack=timedelta(seconds=statistics.median(seconds)) if seconds else None,
        longest_time_to_ack=max(waits) if waits else None,
    )
    return entries, summary


def _unique_citations(items: Iterable[Citation]) -> tuple[Citation, ...]:
    out: list[Citation] = []
    for c in items:
        if c not in out:
            out.append(c)
    return tuple(out)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _not_checked(verdict: Verdict) -> str:
    fields = sorted({FIELD_LABELS.get(a.field, a.field) for a in verdict.not_checked})
    return (
        f"{_plural(len(verdict.not_checked), 'requirement')} not checked because the "
        f"registry does not record {'; '.join(fields)}"
    )


def _violation(verdict: Verdict, totals: SiteTotals, suspected: str, watched: str) -> Compliance:
    """Not in compliance: what is confirmed, what fails, and what is only suspected."""
    parts = []
    if verdict.confirmed:
        titles = "; ".join(sorted({s.title for s in verdict.confirmed}))
        parts.append(
            f"{_plural(len(verdict.confirmed), 'confirmed violation')} on "
            f"{_plural(totals.violation_days, 'day')}: {titles}"
        )
    if verdict.failed:
        parts.append(
            f"the registered installation fails "
            f"{_plural(len(verdict.failed), 'requirement')} of the rule pack"
        )
    if verdict.suspected:
        parts.append(suspected)
    cites = _unique_citations(
        [c for s in verdict.confirmed for c in s.citations]
        + [c for a in verdict.failed for c in a.citations]
    )
    return Compliance(
        ComplianceStatus.VIOLATION,
        "Not in compliance: " + "; and ".join(parts) + f". ({watched}.)",
        cites,
    )


def _attention(
    concerns: list[FindingEntry], verdict: Verdict, totals: SiteTotals, watched: str
) -> Compliance:
    """No violation, but findings, advisories or water not seen at the outlet."""
    advisories = verdict.advisories
    parts = []
    if concerns:
        parts.append(
            f"{len(concerns)} finding(s) without a cited violation ("
            + ", ".join(sorted({f.title for f in concerns}))
            + ")"
        )
    unseen_l: float | None = None
    if totals.sanitary_l > 0 and not any(
        f.rule_id == SanitaryDischargeDetector.rule_id for f in concerns
    ):
        unseen_l = totals.sanitary_l  # worded by the renderer, in the reader's units
        parts.append(f"{VOLUME_SLOT} of pumped water not seen at the outlet")
    if advisories:
        parts.append(f"{len(advisories)} advisory installation item(s)")
    if verdict.not_checked:
        parts.append(_not_checked(verdict))
    return Compliance(
        ComplianceStatus.ATTENTION,
        "No violation of the ordinance was found, but the season shows "
        + "; ".join(parts)
        + f". ({watched}.)",
        volume_l=unseen_l,
    )


def _compliance(
    coverage: Coverage,
    findings: Sequence[FindingEntry],
    verdict: Verdict,
    totals: SiteTotals,
    findings_available: bool,
) -> Compliance:
    """The statement, from the one verdict (gateway.rules.verdict) plus the data coverage."""
    watched = f"{coverage.share:.0%} of the period had readings from every sensor"
    suspected = (
        f"telemetry suspects a violation on {_plural(totals.suspected_days, 'day')} "
        f"({', '.join(sorted({s.title for s in verdict.suspected}))}), not confirmed by an "
        "inspection or a dated observation"
    )
    if verdict.status is VerdictStatus.VIOLATION:
        return _violation(verdict, totals, suspected, watched)
    if verdict.status is VerdictStatus.SUSPECTED:
        return Compliance(
            ComplianceStatus.SUSPECTED,
            f"Suspected violation: {suspected}. A violation needs a confirming record. "
            f"({watched}.)",
            _unique_citations(c for s in verdict.suspected for c in s.citations),
        )
    if not findings_available:
        return Compliance(
            ComplianceStatus.INSUFFICIENT_DATA,
            f"No statement of compliance: findings were not available to this report ({watched}).",
        )
    concerns = [f for f in findings if f.rule_id not in MONITORING_RULES]
    if concerns or verdict.advisories or totals.sanitary_l > 0:
        return _attention(concerns, verdict, totals, watched)
    if coverage.share < MIN_COVERAGE:
        return Compliance(
            ComplianceStatus.INSUFFICIENT_DATA,
            f"No violation was found in the monitored hours, but only {watched}; "
            "compliance cannot be stated for the gaps listed under Data coverage.",
        )
    if verdict.status is VerdictStatus.NOT_CHECKED:
        return Compliance(
            ComplianceStatus.NOT_CHECKED,
            f"No violation found; {_not_checked(verdict)}. ({watched}.)",
        )
    return Compliance(
        ComplianceStatus.COMPLIANT,
        f"In compliance: no violation of {verdict.pack_name} was found and every applicable "
        f"requirement was checked and met ({watched}).",
    )


_STEPS = {
    "order": Recommendation.ORDER,
    "citation": Recommendation.CITATION,
    "notice": Recommendation.NOTICE,
    "inspection": Recommendation.INSPECTION,
}


def _recommendation(verdict: Verdict, totals: SiteTotals) -> tuple[Recommendation, str]:
    """The village's first step as the pack's text provides it, and why (cited)."""
    step = verdict.next_step
    if step is not None:
        deadline = f" within {step.deadline_days} days" if step.deadline_days else ""
        cite = f" [{step.citation}]" if step.citation else ""
        return (
            _STEPS[step.step],
            f"{verdict.next_step_reason}; {step.summary}{deadline}{cite}",
        )
    if verdict.failed:
        return (
            Recommendation.INSPECTION,
            f"installation fails {_plural(len(verdict.failed), 'requirement')}",
        )
    if totals.sanitary_l > 0:
        return Recommendation.INSPECTION, "pumped water not seen at the outlet"
    return Recommendation.NONE, ""


@dataclass(frozen=True, slots=True)
class SiteInputs:
    """Everything one property report is computed from, as read from the sources."""

    site: SiteConfig
    pack: RulePack | None
    period: SeasonPeriod
    through: datetime
    now: datetime
    #: The site's day rollups as hourly series from the period's start to ``through``.
    hours: Sequence[NodeHours]
    findings: Sequence[Finding]
    alerts: Sequence[Alert]
    findings_available: bool
    alerts_available: bool
    histories: Mapping[str, LevelHistory] = field(default_factory=dict)
    confirmations: Sequence[Confirmation] = ()
    histories_available: bool = True
    #: Spans of late readings that were stored but not judged by any detector.
    not_evaluated: Sequence[NotEvaluated] = ()
    #: Each finding's evidence frozen at or before the period's end (by finding id).
    frozen_evidence: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    #: The site's posted enforcement ledger; None: no case, the telemetry estimate stands.
    ledger: Sequence[LedgerLine] | None = None


async def read_site_inputs(
    sources: ReportSources, site_id: str, season: str, *, now: datetime | None = None
) -> SiteInputs:
    """Read one property's season from the sources (the only I/O of a report)."""
    now = now or datetime.now(UTC)
    site = sources.registry.require(site_id)
    pack = sources.packs.get(site.jurisdiction)
    period = season_period(season, pack, site.timezone)
    through = min(period.end, max(period.start, floor_hour(now)))
    # Independent reads at once: the database has several reader threads, and SQLite
    # works without the GIL, so they overlap (a village report makes 5,000 of them).
    hours, found, alerts, not_evaluated = await asyncio.gather(
        sources.store.hour_series(site.id, period.start, int((through - period.start) / HOUR)),
        sources.findings_of(site.id, period.start, through),
        sources.alerts_of(site.id, period.start, through),
        sources.not_evaluated_of(site.id, period.start, through),
    )
    findings = [f for f in found if _overlaps(f, period.start, through)]
    histories, frozen_evidence, ledger = await asyncio.gather(
        sources.levels_of(findings),
        sources.frozen_evidence_of(findings, through),
        sources.ledger_of(site.id),
    )
    confirmations = sources.confirmations_of(site.id, period.start, through + CONFIRM_WITHIN)
    return SiteInputs(
        site=site,
        pack=pack,
        period=period,
        through=through,
        now=now,
        hours=hours,
        findings=findings,
        alerts=alerts,
        findings_available=sources.findings is not None,
        alerts_available=sources.alerts is not None,
        histories=histories,
        confirmations=confirmations,
        histories_available=not findings or bool(histories),
        not_evaluated=not_evaluated,
        frozen_evidence=frozen_evidence,
        ledger=ledger,
    )


def not_an_inspection(pack: RulePack | None) -> list[str]:
    """The property report's first notes (review O6): monitoring is not the proof the
    texts accept, e.g. Edgar (f)(4)b "appropriate proof ... with verification by
    Village inspection" or (f)(2)a's licensed plumber's certificate."""
    notes = ["Not an inspection: this report establishes neither compliance nor a violation."]
    steps = pack.enforcement.steps if pack is not None else {}
    proofs = [steps[name] for name in ("inspection", "correction_proof") if name in steps]
    if proofs:
        named = "; or ".join(f"{p.label.lower()} ({p.citation.section})" for p in proofs)
        notes.append(f"Proof under the ordinance: {named}.")
    return notes


def _input_notes(inputs: SiteInputs) -> list[str]:
    """What the reader must know about the report's own inputs (season, packs, sources)."""
    site, pack, period, through = inputs.site, inputs.pack, inputs.period, inputs.through
    notes: list[str] = not_an_inspection(pack)
    if period.is_default:
        notes.append(
            "The rule pack sets no winter season; the report uses Nov 15 - Apr 15. "
            + (period.note or "")
        )
    if through < period.end:
        local = through.astimezone(period.tz)
        notes.append(f"Season in progress: data up to {local:%Y-%m-%d %H:%M} ({site.timezone}).")
    if pack is None:
        notes.append(f"No rule pack for jurisdiction {site.jurisdiction!r}: nothing is cited.")
    if not inputs.findings_available:
        notes.append("Findings were not available to this report (no findings repository).")

    if inputs.findings and not inputs.histories_available:
        notes.append(
            "The findings source keeps no level history: each finding's last level is taken "
            "for its whole span."
        )
    return notes


def _installation_note(changes: Sequence[date], audited_on: date) -> list[str]:
    if not changes:
        return []
    return [
        "The installation record changed on "
        + ", ".join(f"{d:%Y-%m-%d}" for d in changes)
        + f"; the audit uses the record in force on {audited_on:%Y-%m-%d} and lists "
        "what each earlier record of the season failed or left unchecked."
    ]


def _penalties(
    inputs: SiteInputs, verdict: Verdict, days: Sequence[DayStats], notes: list[str]
) -> tuple[PenaltyEstimate, PenaltyEstimate | None]:
    """The estimate (the ledger's where the site has cases) and, when violations are only
    suspected, what it would be were they confirmed."""
    pack, period = inputs.pack, inputs.period
    in_period = {d.day for d in days}
    confirmed_days = [d for d in verdict.confirmed_days if d in in_period]
    suspected_days = [d for d in verdict.suspected_days if d in in_period]
    penalties = estimate_penalties(pack, confirmed_days, len(verdict.confirmed))
    if inputs.ledger is not None:  # a site with cases: the ledger speaks (16.5)
        penalties = estimate_from_ledger(inputs.ledger, period.first_day, period.last_day)
        notes.append(
            "Penalty estimate: the posted lines of the site's case ledger for this season "
            "(an estimate, not a legal determination)."
        )
    if not suspected_days:
        return penalties, None
    return penalties, estimate_penalties(
        pack, confirmed_days + suspected_days, len(verdict.confirmed) + len(verdict.suspected)
    )


def _site_info(site: SiteConfig, pack: RulePack | None, inst: Installation) -> SiteInfo:
    return SiteInfo(
        site_id=site.id,
        name=site.name,
        address=site.address,
        jurisdiction=site.jurisdiction,
        pack_name=pack.name if pack is not None else site.jurisdiction,
        destination="not_recorded" if inst.destination is None else inst.destination.value,
        timezone=site.timezone,
    )


def _suspected_entries(verdict: Verdict) -> tuple[SuspectedEntry, ...]:
    return tuple(
        SuspectedEntry(
            rule_id=s.rule_id,
            title=s.title,
            start=s.start,
            end=s.end,
            days=len(s.days),
            confidence=s.confidence,
            citations=s.citations,
        )
        for s in verdict.suspected
    )


def build_site_report(inputs: SiteInputs) -> SiteReport:
    """The property report from its inputs: pure arithmetic, no I/O."""
    site, pack, period, through = inputs.site, inputs.pack, inputs.period, inputs.through
    notes = _input_notes(inputs)
    # The season as it was: the installation record and waivers in force on its last
    # day considered, so recording a later fix does not rewrite this report.
    as_of = max(period.start, through - timedelta(seconds=1))
    audited_on = as_of.astimezone(period.tz).date()
    inst = site.installation_on(audited_on)
    notes += _installation_note(site.installation_changes(period.first_day, audited_on), audited_on)
    hours = _hours(site, inputs.hours, period.start, through)
    raw_findings = inputs.findings
    verdict = site_verdict(
        site,
        pack,
        as_of=as_of,
        findings=raw_findings,
        histories=inputs.histories,
        confirmations=inputs.confirmations,
        since=period.start,
        audit_from=period.first_day,
    )
    icing_days = _days_overlapped(
        _icing_intervals(raw_findings, inputs.histories, through), period, through
    )
    sanitary = _sanitary_hours(inst, hours, _frozen_line_spans(raw_findings, through))
    days = _days(inst, period, hours, sanitary, icing_days, verdict)
    totals = _totals(days)
    coverage = _coverage(site, hours)
    findings = _finding_entries(raw_findings, period, through, pack, inputs.frozen_evidence)
    alerts, alert_summary = _alerts(inputs.alerts)
    penalties, if_confirmed = _penalties(inputs, verdict, days, notes)
    compliance = _compliance(coverage, findings, verdict, totals, inputs.findings_available)
    recommendation, reason = _recommendation(verdict, totals)
    return SiteReport(
        site=_site_info(site, pack, inst),
        period=period,
        through=through,
        generated_at=inputs.now,
        coverage=coverage,
        days=tuple(days),
        totals=totals,
        findings=tuple(findings),
        findings_available=inputs.findings_available,
        audit=verdict.audit,
        alerts=tuple(alerts),
        alert_summary=alert_summary,
        alerts_available=inputs.alerts_available,
        penalties=penalties,
        compliance=compliance,
        recommendation=recommendation,
        notes=tuple(notes),
        penalties_if_confirmed=if_confirmed,
        suspected=_suspected_entries(verdict),
        next_step=reason,
        audited_on=audited_on,
        not_evaluated=tuple(inputs.not_evaluated),
    )


async def assemble_site_report(
    sources: ReportSources,
    site_id: str,
    season: str,
    *,
    now: datetime | None = None,
) -> SiteReport:
    """The winter report of one property for the season ``"2026-2027"``.

    ``now`` (default: the current time) cuts a season still in progress: data up
    to the last full hour is used and the report says so. The arithmetic runs on
    a worker thread so a report never stalls the gateway's event loop.
    """
    inputs = await read_site_inputs(sources, site_id, season, now=now)
    return await asyncio.to_thread(build_site_report, inputs)


def status_row(report: SiteReport) -> SiteStatusRow:
    """The village-table line of a property report."""
    t = report.totals
    return SiteStatusRow(
        site_id=report.site.site_id,
        name=report.site.name,
        address=report.site.address,
        jurisdiction=report.site.jurisdiction,
        status=report.compliance.status,
        recommendation=report.recommendation,
        reason=report.next_step,
        coverage=report.coverage.share,
        outlet_volume_l=t.outlet_volume_l,
        pit_volume_l=t.pit_volume_l,
        sanitary_l=t.sanitary_l,
        icing_days=t.icing_days,
        violation_days=t.violation_days,
        audit_failures=sum(1 for a in report.audit if a.status == "fail"),
        alerts=report.alert_summary.count,
        unacknowledged=report.alert_summary.count - report.alert_summary.acknowledged,
        estimate_min_usd=report.penalties.min_usd,
        estimate_max_usd=report.penalties.max_usd,
        suspected_days=t.suspected_days,
        not_checked=sum(1 for a in report.audit if a.status == "unknown"),
    )


def _priority_key(row: SiteStatusRow) -> tuple[int, float, int, int, int, str]:
    rank = {
        Recommendation.ORDER: 0,
        Recommendation.CITATION: 0,
        Recommendation.NOTICE: 1,
        Recommendation.INSPECTION: 1,
        Recommendation.NONE: 2,
    }
    return (
        rank[row.recommendation],
        -row.sanitary_l,
        -row.violation_days,
        -row.suspected_days,
        -row.audit_failures,
        row.site_id,
    )


class _WeekAcc:
    __slots__ = ("freezing", "icing", "outlet", "pit", "sanitary", "violators")

    def __init__(self) -> None:
        self.pit = self.outlet = self.sanitary = 0.0
        self.icing = self.freezing = 0
        self.violators: set[str] = set()


#: Sites of a village report assembled at once: one's reads overlap another's arithmetic.
#: Small, so memory stays flat (each report is reduced to its row and dropped).
VILLAGE_CONCURRENCY = 4


async def _site_reports(
    sources: ReportSources, sites: Sequence[SiteConfig], season: str, now: datetime
) -> AsyncIterator[tuple[SiteConfig, SiteReport]]:
    """Each site's report, in the order of ``sites`` (the village sums add in that
    order, so they are the same to the last bit), a few assembled at a time."""
    for i in range(0, len(sites), VILLAGE_CONCURRENCY):
        chunk = sites[i : i + VILLAGE_CONCURRENCY]
        reports = await asyncio.gather(
            *(assemble_site_report(sources, site.id, season, now=now) for site in chunk)
        )
        for site, report in zip(chunk, reports, strict=True):
            yield site, report


def _week_of(day: date) -> date:
    return day - timedelta(days=day.weekday())


@dataclass(slots=True)
class _Seasons:
    """The span the village's sites' seasons cover, and each pack's season, described."""

    first_day: date | None = None
    last_day: date | None = None
    through: datetime | None = None
    described: dict[str, str] = field(default_factory=dict)

    def add(self, report: SiteReport, key: str) -> None:
        p = report.period
        self.first_day = p.first_day if self.first_day is None else min(self.first_day, p.first_day)
        self.last_day = p.last_day if self.last_day is None else max(self.last_day, p.last_day)
        self.through = report.through if self.through is None else max(self.through, report.through)
        if key not in self.described:
            cites = ", ".join(dict.fromkeys(str(c) for c in p.citations))
            self.described[key] = f"{key}: {p.describe()}" + (f" [{cites}]" if cites else "")


def _add_days(weeks: dict[date, _WeekAcc], site_id: str, days: Iterable[DayStats]) -> None:
    for d in days:
        acc = weeks[_week_of(d.day)]
        acc.pit += d.pit_volume_l
        acc.outlet += d.outlet_volume_l
        acc.sanitary += d.sanitary_l
        acc.icing += int(d.icing)
        acc.freezing += d.freezing_risk_hours
        if d.violation:
            acc.violators.add(site_id)


def _week_rows(weeks: Mapping[date, _WeekAcc]) -> tuple[WeekStats, ...]:
    return tuple(
        WeekStats(
            week_start=w,
            pit_volume_l=a.pit,
            outlet_volume_l=a.outlet,
            sanitary_l=a.sanitary,
            icing_site_days=a.icing,
            sites_in_violation=len(a.violators),
            freezing_risk_hours=a.freezing,
        )
        for w, a in sorted(weeks.items())
    )


def _village_totals(rows: Sequence[SiteStatusRow]) -> VillageTotals:
    return VillageTotals(
        sites=len(rows),
        pit_volume_l=sum(r.pit_volume_l for r in rows),
        outlet_volume_l=sum(r.outlet_volume_l for r in rows),
        sanitary_l=sum(r.sanitary_l for r in rows),
        icing_days=sum(r.icing_days for r in rows),
        violation_days=sum(r.violation_days for r in rows),
        sites_in_violation=sum(1 for r in rows if r.status is ComplianceStatus.VIOLATION),
        sites_compliant=sum(1 for r in rows if r.status is ComplianceStatus.COMPLIANT),
    )


def _scope_sites(
    sources: ReportSources, jurisdiction: str | None, site_ids: Sequence[str] | None
) -> list[SiteConfig]:
    if site_ids is not None:
        return [sources.registry.require(s) for s in site_ids]
    if jurisdiction is not None:
        return sources.registry.in_jurisdiction(jurisdiction)
    return list(sources.registry)


async def assemble_village_report(
    sources: ReportSources,
    season: str,
    *,
    jurisdiction: str | None = None,
    site_ids: Sequence[str] | None = None,
    now: datetime | None = None,
) -> VillageReport:
    """Every site's status, totals, the sites to inspect or order first, and weekly sums.

    Sites are those of ``jurisdiction`` (a village = a rule pack id), or
    ``site_ids``, or every registered site. Each site is assembled over its own
    pack's season and reduced at once, so memory stays flat for 1,000 sites.
    """
    now = now or datetime.now(UTC)
    sites = _scope_sites(sources, jurisdiction, site_ids)
    rows: list[SiteStatusRow] = []
    weeks: dict[date, _WeekAcc] = defaultdict(_WeekAcc)
    spans = _Seasons()
    async for site, report in _site_reports(sources, sites, season, now):
        rows.append(status_row(report))
        site_pack = sources.packs.get(site.jurisdiction)
        spans.add(report, site_pack.id if site_pack is not None else site.jurisdiction)
        _add_days(weeks, site.id, report.days)
    rows.sort(key=lambda r: r.site_id)
    priority = tuple(
        sorted((r for r in rows if r.recommendation is not Recommendation.NONE), key=_priority_key)
    )
    scope = jurisdiction or ("selected sites" if site_ids is not None else "all sites")
    pack = sources.packs.get(jurisdiction) if jurisdiction else None
    fallback = season_period(season, None, "UTC")
    return VillageReport(
        title=f"Winter monitoring report {season}: " + (pack.name if pack else scope),
        scope=scope,
        season_label=fallback.label,
        first_day=spans.first_day or fallback.first_day,
        last_day=spans.last_day or fallback.last_day,
        seasons=tuple(spans.described.values()),
        through=spans.through or fallback.start,
        generated_at=now,
        rows=tuple(rows),
        totals=_village_totals(rows),
        priority=priority,
        weeks=_week_rows(weeks),
        notes=() if rows else ("No site matches this report's scope.",),
        timezone=_one_zone(sites),
        village=pack.name if pack else scope,
    )


def _one_zone(sites: Iterable[SiteConfig]) -> str:
    """The sites' one time zone (a village's sites share one); UTC if they differ."""
    zones = {s.timezone for s in sites}
    return zones.pop() if len(zones) == 1 else "UTC"
