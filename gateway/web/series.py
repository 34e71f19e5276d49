"""Chart data for the homeowner dashboard, from rollups, in the person's units.

Ranges: the last 24 h (1-minute rollups), 7 days (1-hour rollups) and the winter
season of the site's rule pack (1-hour rollups reduced to days). The newest
minutes and hours, which stored rollups have not reached yet, are computed from
raw readings (:func:`gateway.web.sources.minute_rollups`), so a chart ends now.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from datetime import UTC, date, datetime, timedelta
from typing import Literal

from pydantic import BaseModel

from gateway.contract import NodeKind
from gateway.domain import Reading
from gateway.registry import SiteConfig
from gateway.services import Services
from gateway.store.base import Rollup
from gateway.store.rollups import compose, floor_to
from gateway.web import sources
from gateway.web.units import UnitSystem, convert, rounded, unit

Range = Literal["24h", "7d", "season"]
RANGES: tuple[Range, ...] = ("24h", "7d", "season")

#: Chart field -> (quantity for units, label). Order is the legend order.
FIELD_CHARTS: dict[str, tuple[str, str, str]] = {
    "level_cm": ("level", "level", "Pit level"),
    "flow_lpm": ("flow", "flow", "Outlet flow"),
    "pressure_kpa": ("pressure", "pressure", "Line pressure"),
    "pipe_temp_c": ("temperature", "temperature", "Outlet pipe"),
    "air_temp_c": ("temperature", "temperature", "Outdoor air"),
    "water_temp_c": ("temperature", "temperature", "Pit water"),
}
Points = list[tuple[int, float]]


class Series(BaseModel):
    """One line of a chart: ``points`` are ``[epoch ms, value]`` in display units."""

    key: str
    label: str
    points: Points


class Mark(BaseModel):
    """A horizontal reference line (the pit's float marks)."""

    label: str
    value: float


class Chart(BaseModel):
    """A line chart or (``bars``) a bar chart."""

    unit: str
    series: list[Series] = []
    marks: list[Mark] = []
    bars: Points = []
    bucket: str = ""
    #: The y axis spans at least this much (display units), so sensor noise on a
    #: quiet line is not blown up to fill the chart (-0.1 psi "pressure").
    min_span: float = 0.0
    #: The quantity cannot be negative: the axis starts at zero.
    from_zero: bool = False
    #: Whole numbers only (counts).
    integer: bool = False


class FindingSpan(BaseModel):
    """A finding's time on the charts' time axis (shaded)."""

    start_ms: int
    end_ms: int
    title: str
    severity: str


class NotEvaluatedSpan(BaseModel):
    """Readings that arrived behind their node's newest: charted, but no detector
    judged them (shaded grey on the charts' time axis)."""

    start_ms: int
    end_ms: int
    node_id: str
    count: int


class ChartsView(BaseModel):
    """Every chart of one range."""

    range: Range
    timezone: str
    units: UnitSystem
    start_ms: int
    end_ms: int
    has_data: bool
    charts: dict[str, Chart]
    findings: list[FindingSpan] = []
    not_evaluated: list[NotEvaluatedSpan] = []


#: Smallest y span per quantity, in stored (metric) units.
MIN_SPAN: dict[str, float] = {"level": 10.0, "flow": 20.0, "pressure": 35.0, "temperature": 10.0}


def min_span(quantity: str, units: UnitSystem) -> float:
    """The quantity's smallest y span in display units (a difference, so no offset)."""
    span = convert(quantity, MIN_SPAN[quantity], units) - convert(quantity, 0.0, units)
    return round(span, 1)


def _ms(value: datetime) -> int:
    return int(value.timestamp() * 1000)


def season_start(site: SiteConfig, now: datetime, services: Services) -> datetime:
    """Start of the current (or last) winter season of the site's pack, local midnight."""
    pack = sources.pack_of(services, site)
    month, day = pack.season.start if pack is not None else (11, 15)
    today = now.astimezone(site.tz).date()
    start = date(today.year, month, day)
    if start > today:
        start = date(today.year - 1, month, day)
    return datetime(start.year, start.month, start.day, tzinfo=site.tz)


def _hours(minutes: Iterable[Rollup]) -> list[Rollup]:
    groups: dict[int, list[Rollup]] = defaultdict(list)
    for r in minutes:
        groups[floor_to(r.start.timestamp(), 3600)].append(r)
    return [
        compose(parts, "1h", datetime.fromtimestamp(start, UTC))
        for start, parts in sorted(groups.items())
    ]


async def _hourly(
    services: Services, site: SiteConfig, start: datetime, end: datetime
) -> dict[str, list[Rollup]]:
    """Stored hours, then the hours after them composed from 1-minute rollups."""
    by_node = await sources.hour_rollups(services, site, start, end)
    newest = max((rs[-1].end for rs in by_node.values() if rs), default=None)
    # Without any stored hour (rollups not refreshed yet) only the last day is
    # computed from raw readings, to bound the work of one request.
    tail_start = newest or max(start, end - timedelta(hours=24))
    tail = await sources.minute_rollups(services, site, tail_start, end)
    for node_id, minutes in tail.items():
        by_node.setdefault(node_id, []).extend(_hours(minutes))
    return by_node


def _local_days(rollups: Iterable[Rollup], site: SiteConfig) -> list[Rollup]:
    groups: dict[date, list[Rollup]] = defaultdict(list)
    for r in rollups:
        groups[r.start.astimezone(site.tz).date()].append(r)
    return [
        compose(parts, "1h", datetime(d.year, d.month, d.day, tzinfo=site.tz))
        for d, parts in sorted(groups.items())
    ]


def _series(
    rollups: dict[str, list[Rollup]], site: SiteConfig, units: UnitSystem, with_max: bool
) -> dict[str, list[Series]]:
    """Mean (and for long ranges, highest level) per bucket, grouped by chart."""
    charts: dict[str, list[Series]] = defaultdict(list)
    for node in site.nodes:
        rows = rollups.get(node.id, [])
        for name, (chart, quantity, label) in FIELD_CHARTS.items():
            if FIELDS_OF_KIND.get(name) is not node.kind:
                continue
            points = [
                (_ms(r.start), v)
                for r in rows
                if name in r.stats
                and (v := rounded(quantity, r.stats[name].mean, units)) is not None
            ]
            if not points:
                continue
            charts[chart].append(Series(key=name, label=label, points=points))
            if with_max and name == "level_cm":
                highs = [
                    (_ms(r.start), v)
                    for r in rows
                    if name in r.stats
                    and (v := rounded(quantity, r.stats[name].max, units)) is not None
                ]
                charts[chart].append(
                    Series(key="level_cm_max", label="Highest level", points=highs)
                )
    return charts


FIELDS_OF_KIND: dict[str, NodeKind] = {
    "level_cm": NodeKind.PIT,
    "water_temp_c": NodeKind.PIT,
    "flow_lpm": NodeKind.DISCHARGE,
    "pressure_kpa": NodeKind.DISCHARGE,
    "pipe_temp_c": NodeKind.DISCHARGE,
    "air_temp_c": NodeKind.AIR,
}


def _cycle_bars(
    rollups: dict[str, list[Rollup]], site: SiteConfig, per: Literal["hour", "day"]
) -> Points:
    pit = site.node_of_kind(NodeKind.PIT)
    counts: dict[int, float] = defaultdict(float)
    for r in rollups.get(pit.id, []) if pit else []:
        if per == "hour":
            key = floor_to(r.start.timestamp(), 3600) * 1000
        else:
            d = r.start.astimezone(site.tz).date()
            key = _ms(datetime(d.year, d.month, d.day, tzinfo=site.tz))
        counts[key] += r.pump_cycles
    # A cycle split across two rollup buckets counts half in each: a person counts
    # whole cycles, so each bar is rounded to the nearest whole one.
    return sorted((k, float(round(v))) for k, v in counts.items())


async def _finding_spans(
    services: Services, site: SiteConfig, start: datetime, end: datetime
) -> list[FindingSpan]:
    """Findings open at any time in [start, end], clipped to it."""
    found = await services.findings.list(site_id=site.id, since=start, until=end, limit=200)
    return [
        FindingSpan(
            start_ms=_ms(max(f.opened_at, start)),
            end_ms=_ms(min(f.cleared_at or end, end)),
            title=f.title,
            severity=f.severity.value,
        )
        for f in found
    ]


async def _not_evaluated_spans(
    services: Services, site: SiteConfig, start: datetime, end: datetime
) -> list[NotEvaluatedSpan]:
    """Late-reading spans overlapping [start, end], clipped to it."""
    found = await services.findings.not_evaluated(site.id, since=start, until=end, limit=200)
    return [
        NotEvaluatedSpan(
            start_ms=_ms(max(s.start, start)),
            end_ms=_ms(min(s.end, end)),
            node_id=s.node_id,
            count=s.count,
        )
        for s in found
    ]


async def _range_rollups(
    services: Services, site: SiteConfig, range_: Range, now: datetime
) -> tuple[datetime, dict[str, list[Rollup]], Literal["hour", "day"]]:
    """The range's start, its rollups by node and the cycle bars' bucket."""
    if range_ == "24h":
        start = now - timedelta(hours=24)
        return start, await sources.minute_rollups(services, site, start, now), "hour"
    start = now - timedelta(days=7) if range_ == "7d" else season_start(site, now, services)
    rollups = await _hourly(services, site, start, now)
    if range_ == "7d":  # a week of hourly bars (168) still reads
        return start, rollups, "hour"
    # A season is counted per day.
    return start, {node: _local_days(rows, site) for node, rows in rollups.items()}, "day"


def _line_chart(
    kind: str,
    lines: dict[str, list[Series]],
    units: UnitSystem,
    from_zero: bool = False,
    marks: list[Mark] | None = None,
) -> Chart:
    return Chart(
        unit=unit(kind, units),
        series=lines.get(kind, []),
        min_span=min_span(kind, units),
        from_zero=from_zero,
        marks=marks or [],
    )


def _level_marks(site: SiteConfig, units: UnitSystem) -> list[Mark]:
    pit = site.pit
    return [
        Mark(label="Alarm", value=rounded("level", pit.alarm_cm, units) or 0),
        Mark(label="Pump on", value=rounded("level", pit.pump_on_cm, units) or 0),
        Mark(label="Pump off", value=rounded("level", pit.pump_off_cm, units) or 0),
    ]


async def charts_view(
    services: Services,
    site: SiteConfig,
    range_: Range,
    units: UnitSystem,
    now: datetime | None = None,
) -> ChartsView:
    """Every chart of the dashboard for one range."""
    now = now or datetime.now(UTC)
    start, rollups, per = await _range_rollups(services, site, range_, now)
    lines = _series(rollups, site, units, with_max=range_ != "24h")
    charts = {
        "level": _line_chart(
            "level", lines, units, from_zero=True, marks=_level_marks(site, units)
        ),
        "cycles": Chart(
            unit="cycles",
            bars=_cycle_bars(rollups, site, per),
            bucket=per,
            min_span=4,
            from_zero=True,
            integer=True,
        ),
        "flow": _line_chart("flow", lines, units, from_zero=True),
        "pressure": _line_chart("pressure", lines, units, from_zero=True),
        "temperature": _line_chart("temperature", lines, units),
    }
    return ChartsView(
        range=range_,
        timezone=site.timezone,
        units=units,
        start_ms=_ms(start),
        end_ms=_ms(now),
        has_data=any(rows for rows in rollups.values()),
        charts=charts,
        findings=await _finding_spans(services, site, start, now),
        not_evaluated=await _not_evaluated_spans(services, site, start, now),
    )


def live_points(readings: Iterable[Reading], units: UnitSystem) -> dict[str, Points]:
    """New raw readings as chart points by series key, for live updates of the 24 h view."""
    out: dict[str, Points] = defaultdict(list)
    for r in readings:
        for name, value in r.values.items():
            spec = FIELD_CHARTS.get(name)
            if spec is None or isinstance(value, bool):
                continue
            v = rounded(spec[1], float(value), units)
            if v is not None:
                out[name].append((_ms(r.ts), v))
    return dict(out)
