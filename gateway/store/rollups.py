"""1-minute and 1-hour rollups per site and node, shared by both stores.

Dashboards and whole-season reports read these instead of raw points.

How they are kept current:

* Every write records which (site, node, minute) received samples in a small
  ``rollup_dirty`` table of the SQLite database (the SQLite store does it in the
  same transaction as the insert; the InfluxDB store just before the points reach
  the server, including spool replays). Late and replayed data is therefore
  rolled up like live data.
* :func:`refresh` (called by the stores' ``refresh_rollups``) recomputes each
  touched minute and its neighbours within :data:`MAX_HOLD_S` from the raw
  readings, then recomputes the touched hours from their 1-minute rollups.
  Recomputing a bucket replaces it, so refresh is idempotent. A mark is processed
  once every bucket it can influence has ended (``minute + hold < until``), so
  rollups lag real time by about ``MAX_HOLD_S`` + one minute.

Semantics (see :class:`gateway.store.base.Rollup`): per-field stats are over the
samples in the bucket; durations, cycles and volumes treat a sample's value as
holding until the next sample, at most :data:`MAX_HOLD_S` (a silent node is not
assumed to keep pumping), clipped to bucket edges, so they add up exactly.
"""

from __future__ import annotations

import asyncio
import logging
import math
import sqlite3
import sys
import time
from array import array
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

import numpy as np

from gateway.contract import FIELDS, NodeKind
from gateway.domain import Reading
from gateway.errors import SumpWatchError
from gateway.state.database import SqliteDatabase
from gateway.store.base import (
    DAY_SERIES,
    RESOLUTION_SECONDS,
    DayRollup,
    FieldStats,
    HourArray,
    NodeHours,
    Resolution,
    Rollup,
    SeriesQuery,
)

log = logging.getLogger(__name__)

#: Longest a sample's value is assumed to hold when integrating (s). Nodes report
#: every 5-30 s; past a few intervals of silence nothing is assumed.
MAX_HOLD_S = 120.0
#: Most minutes recomputed for one node in one query (bounds memory on backfills).
WINDOW_MINUTES = 360
STAT_SUFFIXES = ("count", "min", "max", "mean", "last")
#: Additive totals of a rollup, with whether they are whole numbers.
TOTALS: dict[str, bool] = {
    "pump_cycles": True,
    "pump_on_s": False,
    "backup_pump_cycles": True,
    "backup_pump_on_s": False,
    "pumped_volume_l": False,
}
KIND_FIELDS: dict[NodeKind, tuple[str, ...]] = {
    kind: tuple(name for name, spec in FIELDS.items() if spec.kind is kind) for kind in NodeKind
}


def stat_column(field_name: str, stat: str) -> str:
    """Column (SQLite) or field (InfluxDB) name of one statistic, e.g. ``level_cm_mean``."""
    return f"{field_name}_{stat}"


def rollup_columns(kind: NodeKind | None = None) -> tuple[str, ...]:
    """Value columns of a rollup row: ``samples``, the totals, then every field's stats."""
    names = KIND_FIELDS[kind] if kind is not None else tuple(FIELDS)
    stats = tuple(stat_column(f, s) for f in names for s in STAT_SUFFIXES)
    return ("samples", *TOTALS, *stats)


def rollup_values(rollup: Rollup) -> dict[str, float | int | None]:
    """A rollup as ``{column: value}`` over :func:`rollup_columns` of its kind."""
    values: dict[str, float | int | None] = {"samples": rollup.samples}
    for name in TOTALS:
        values[name] = getattr(rollup, name)
    for name in KIND_FIELDS[rollup.kind]:
        st = rollup.stats.get(name)
        for suffix in STAT_SUFFIXES:
            values[stat_column(name, suffix)] = None if st is None else getattr(st, suffix)
    return values


def rollup_from_values(
    site_id: str,
    node_id: str,
    kind: NodeKind,
    resolution: Resolution,
    start: datetime,
    values: Mapping[str, Any],
) -> Rollup:
    """The inverse of :func:`rollup_values` (absent totals read as zero)."""
    stats: dict[str, FieldStats] = {}
    for name in KIND_FIELDS[kind]:
        count = values.get(stat_column(name, "count"))
        if not count:
            continue
        lo, hi, mean, last = (float(values[stat_column(name, s)]) for s in STAT_SUFFIXES[1:])
        stats[name] = FieldStats(int(count), lo, hi, mean, last)

    def total(name: str) -> float:
        return float(values.get(name) or 0.0)

    return Rollup(
        site_id=site_id,
        node_id=node_id,
        kind=kind,
        resolution=resolution,
        start=start,
        samples=int(values.get("samples") or 0),
        stats=stats,
        pump_cycles=round(total("pump_cycles")),
        pump_on_s=total("pump_on_s"),
        backup_pump_cycles=round(total("backup_pump_cycles")),
        backup_pump_on_s=total("backup_pump_on_s"),
        pumped_volume_l=total("pumped_volume_l"),
    )


def floor_to(epoch_s: float, width_s: int) -> int:
    """Start of the bucket (epoch seconds) that contains ``epoch_s``."""
    return int(epoch_s // width_s) * width_s


# -- computing ------------------------------------------------------------------------


class _Acc:
    """Accumulates one bucket."""

    __slots__ = ("covered", "cycles", "fields", "samples", "totals")

    def __init__(self) -> None:
        self.samples = 0
        self.covered = 0.0
        self.fields: dict[str, list[float]] = {}
        self.totals: dict[str, float] = dict.fromkeys(TOTALS, 0.0)


def compute_minutes(
    readings: Sequence[Reading], minutes: Iterable[int], *, max_hold_s: float = MAX_HOLD_S
) -> list[Rollup]:
    """1-minute rollups of one node for the given bucket starts (epoch seconds).

    ``readings`` must be that node's readings in time order, covering at least
    ``[min(minutes) - max_hold_s, max(minutes) + 60 + max_hold_s)`` so that held
    values reaching into the buckets and the transitions at their edges are seen.
    Buckets with neither samples nor held values are left out.
    """
    targets = set(minutes)
    if not readings or not targets:
        return []
    accs: dict[int, _Acc] = {}

    def acc(bucket: int) -> _Acc:
        a = accs.get(bucket)
        if a is None:
            a = accs[bucket] = _Acc()
        return a

    times = [r.ts.timestamp() for r in readings]
    for i, reading in enumerate(readings):
        t = times[i]
        bucket = floor_to(t, 60)
        if bucket in targets:
            # A transition counts only when the previous sample is recent enough to trust.
            prev = readings[i - 1] if i > 0 and t - times[i - 1] <= max_hold_s else None
            _add_sample(acc(bucket), reading, prev)
        # The value holds over [t, end): distribute it over the buckets it spans.
        end = t + max_hold_s
        if i + 1 < len(readings):
            end = min(end, times[i + 1])
        _spread_hold(acc, targets, reading, t, end)
    first = readings[0]
    return [
        _minute_rollup(first, bucket, accs[bucket])
        for bucket in sorted(accs)
        if accs[bucket].samples or accs[bucket].covered
    ]


def _add_sample(a: _Acc, reading: Reading, prev: Reading | None) -> None:
    """Count one sample in its bucket, and the pump starts since ``prev``."""
    a.samples += 1
    for name, value in reading.values.items():
        a.fields.setdefault(name, []).append(float(value))
    if prev is None:
        return
    if reading.values.get("pump_on") and prev.values.get("pump_on") is False:
        a.totals["pump_cycles"] += 1
    if reading.values.get("backup_pump_on") and prev.values.get("backup_pump_on") is False:
        a.totals["backup_pump_cycles"] += 1


def _spread_hold(
    acc: Callable[[int], _Acc], targets: set[int], reading: Reading, t: float, end: float
) -> None:
    """Add run time and pumped volume held over [t, end) to the buckets it spans."""
    rates = {
        "pump_on_s": 1.0 if reading.values.get("pump_on") else 0.0,
        "backup_pump_on_s": 1.0 if reading.values.get("backup_pump_on") else 0.0,
        "pumped_volume_l": float(reading.values.get("flow_lpm", 0.0)) / 60.0,
    }
    b = floor_to(t, 60)
    while b < end:
        lo, hi = max(t, b), min(end, b + 60)
        if hi > lo and b in targets:
            a = acc(b)
            a.covered += hi - lo
            for name, rate in rates.items():
                if rate:
                    a.totals[name] += rate * (hi - lo)
        b += 60


def _minute_rollup(first: Reading, bucket: int, a: _Acc) -> Rollup:
    stats = {
        name: FieldStats(len(vals), min(vals), max(vals), sum(vals) / len(vals), vals[-1])
        for name, vals in a.fields.items()
    }
    return Rollup(
        site_id=first.site_id,
        node_id=first.node_id,
        kind=first.kind,
        resolution="1m",
        start=datetime.fromtimestamp(bucket, UTC),
        samples=a.samples,
        stats=stats,
        pump_cycles=int(a.totals["pump_cycles"]),
        pump_on_s=a.totals["pump_on_s"],
        backup_pump_cycles=int(a.totals["backup_pump_cycles"]),
        backup_pump_on_s=a.totals["backup_pump_on_s"],
        pumped_volume_l=a.totals["pumped_volume_l"],
    )


def compose(parts: Sequence[Rollup], resolution: Resolution, start: datetime) -> Rollup:
    """One coarser rollup from the finer ones inside it (in time order)."""
    first = parts[0]
    stats: dict[str, FieldStats] = {}
    for name in KIND_FIELDS[first.kind]:
        pieces = [p.stats[name] for p in parts if name in p.stats]
        if not pieces:
            continue
        count = sum(s.count for s in pieces)
        stats[name] = FieldStats(
            count=count,
            min=min(s.min for s in pieces),
            max=max(s.max for s in pieces),
            mean=sum(s.mean * s.count for s in pieces) / count,
            last=pieces[-1].last,
        )
    return Rollup(
        site_id=first.site_id,
        node_id=first.node_id,
        kind=first.kind,
        resolution=resolution,
        start=start,
        samples=sum(p.samples for p in parts),
        stats=stats,
        pump_cycles=sum(p.pump_cycles for p in parts),
        pump_on_s=sum(p.pump_on_s for p in parts),
        backup_pump_cycles=sum(p.backup_pump_cycles for p in parts),
        backup_pump_on_s=sum(p.backup_pump_on_s for p in parts),
        pumped_volume_l=sum(p.pumped_volume_l for p in parts),
    )


# -- days -----------------------------------------------------------------------------

DAY_S = 86_400
NAN = float("nan")
#: The extremes a day rollup keeps, per node kind: (series, field, statistic).
_DAY_EXTREMES: dict[NodeKind, tuple[tuple[str, str, str], ...]] = {
    NodeKind.PIT: (),
    NodeKind.DISCHARGE: (("pipe_temp_c_min", "pipe_temp_c", "min"),),
    NodeKind.AIR: (
        ("air_temp_c_min", "air_temp_c", "min"),
        ("air_temp_c_max", "air_temp_c", "max"),
    ),
}
#: The totals a day rollup keeps, per node kind (the others are always 0 for that kind).
_DAY_TOTALS: dict[NodeKind, tuple[str, ...]] = {
    NodeKind.PIT: ("pump_cycles", "pump_on_s", "backup_pump_cycles"),
    NodeKind.DISCHARGE: ("pumped_volume_l",),
    NodeKind.AIR: (),
}


def day_series(kind: NodeKind) -> tuple[str, ...]:
    """The :data:`DAY_SERIES` a node of ``kind`` has (in column order)."""
    own = {"samples", *_DAY_TOTALS[kind], *(name for name, _f, _s in _DAY_EXTREMES[kind])}
    return tuple(name for name in DAY_SERIES if name in own)


def reduce_days(hourly: Iterable[Rollup]) -> list[DayRollup]:
    """Day rollups from 1-hour rollups (any order), by day then node.

    Pure copies of the hourly values into 24-slot arrays, no arithmetic, so anything
    summed from the days equals the same sum over the hours.
    """
    days: dict[tuple[int, str], tuple[Rollup, dict[str, array[float]]]] = {}
    for r in hourly:
        epoch = int(r.start.timestamp())
        key = (floor_to(epoch, DAY_S), r.node_id)
        entry = days.get(key)
        if entry is None:
            entry = days[key] = (r, _empty_day(r.kind))
        _put_hour(entry[1], r, (epoch - key[0]) // 3600)
    return [
        DayRollup(first.site_id, first.node_id, first.kind, datetime.fromtimestamp(day, UTC), hours)
        for (day, _node), (first, hours) in sorted(days.items())
    ]


def _empty_day(kind: NodeKind) -> dict[str, array[float]]:
    return {name: array("d", [hour_fill(name)]) * 24 for name in day_series(kind)}


_EXTREME_SERIES = frozenset(name for ex in _DAY_EXTREMES.values() for name, _f, _s in ex)


def hour_fill(name: str) -> float:
    """What an hour without a rollup holds in day series ``name``: NaN for an extreme
    (no reading), 0 for a count or a total (nothing happened)."""
    return NAN if name in _EXTREME_SERIES else 0.0


def _put_hour(hours: dict[str, array[float]], r: Rollup, k: int) -> None:
    hours["samples"][k] = r.samples
    for name in _DAY_TOTALS[r.kind]:
        hours[name][k] = getattr(r, name)
    for name, field_name, stat in _DAY_EXTREMES[r.kind]:
        st = r.stats.get(field_name)
        hours[name][k] = NAN if st is None else getattr(st, stat)


def place_days(
    days: Sequence[int], values: HourArray, base: float, n: int, fill: float
) -> HourArray:
    """One series of a node's days laid out over the n hours from ``base`` (epoch s).

    ``days`` are the days' starts (UTC midnights, ascending) and ``values`` their 24
    hourly values, a row each. Hour i gets the value of the rollup starting in
    ``[base + i h, base + (i + 1) h)``, ``fill`` where no day has one. The days go
    into a grid of whole days (a missing day is a row of ``fill``), which is then one
    contiguous run of hours: copies only, so every value stays the rollup's own.
    """
    out = np.full(n, fill)
    if not len(days) or n <= 0:
        return out
    first = days[0]
    rows = (np.asarray(days, dtype=np.int64) - first) // DAY_S
    grid = np.full((int(rows[-1]) + 1, 24), fill)
    grid[rows] = values
    flat = grid.ravel()
    o = int((first - base) // 3600)  # the hour index of the first day's first hour
    lo, hi = max(0, -o), min(flat.size, n - o)
    if lo < hi:
        out[o + lo : o + hi] = flat[lo:hi]
    return out


def lay_out(
    node_id: str,
    kind: NodeKind,
    days: Sequence[int],
    rows: Callable[[str, float], HourArray],
    base: float,
    n: int,
) -> NodeHours:
    """A node's :class:`NodeHours` from its days' starts and, per series of its kind,
    ``rows(name, fill)``: the days' 24 values each (``fill`` where a day has none)."""
    series = {}
    for name in day_series(kind):
        fill = hour_fill(name)
        series[name] = place_days(days, rows(name, fill), base, n, fill)
    return NodeHours(node_id, kind, series)


def hours_of_days(days: Iterable[DayRollup], start: datetime, n: int) -> list[NodeHours]:
    """Day rollups (any order) as hourly series over the n hours from ``start``, by
    node id; a node's kind is that of its first day."""
    of_node: dict[str, list[DayRollup]] = defaultdict(list)
    for d in days:
        of_node[d.node_id].append(d)
    out = []
    for node_id in sorted(of_node):
        ds = sorted(of_node[node_id], key=lambda d: d.day)

        def rows(name: str, fill: float, ds: list[DayRollup] = ds) -> HourArray:
            empty = array("d", [fill]) * 24
            return np.array([d.hours.get(name, empty) for d in ds], dtype=np.float64)

        starts = [int(d.day.timestamp()) for d in ds]
        out.append(lay_out(node_id, ds[0].kind, starts, rows, start.timestamp(), n))
    return out


_BIG_ENDIAN = sys.byteorder == "big"


def pack_hours(values: array[float]) -> bytes:
    """24 hourly values as stored: little-endian float64 whatever the machine."""
    if _BIG_ENDIAN:
        values = array("d", values)
        values.byteswap()
    return values.tobytes()


def unpack_hours(blob: bytes) -> array[float]:
    """The inverse of :func:`pack_hours`."""
    values = array("d")
    values.frombytes(blob)
    if _BIG_ENDIAN:
        values.byteswap()
    return values


# -- dirty marks ---------------------------------------------------------------------

DirtyKey = tuple[str, str, str, int]  # site_id, node_id, kind, minute (epoch s)

_MARK = (
    "INSERT INTO rollup_dirty (site_id, node_id, kind, minute, gen) VALUES (?, ?, ?, ?, ?) "
    "ON CONFLICT (site_id, node_id, minute) DO UPDATE SET gen = excluded.gen"
)


def dirty_keys(readings: Iterable[Reading]) -> set[DirtyKey]:
    """The (site, node, kind, minute) marks a batch of readings sets."""
    return {(r.site_id, r.node_id, r.kind.value, floor_to(r.ts.timestamp(), 60)) for r in readings}


class DirtyLog:
    """The ``rollup_dirty`` table: which minutes got new samples since the last refresh.

    Each mark carries a generation; a refresh deletes only the generations it read,
    so a mark set again while a refresh runs is not lost.
    """

    def __init__(self, db: SqliteDatabase) -> None:
        self.db = db

    async def open(self) -> None:
        """Make sure the schema is current (the table comes from the migrations)."""
        await self.db.migrate()

    @staticmethod
    def mark_in(conn: sqlite3.Connection, keys: Iterable[DirtyKey]) -> None:
        """Set marks inside the caller's write transaction."""
        gen = time.time_ns()
        conn.executemany(_MARK, [(*key, gen) for key in keys])

    async def mark(self, keys: Iterable[DirtyKey]) -> None:
        """Set marks in their own transaction."""
        keys = list(keys)
        if keys:
            await self.db.write(lambda conn: self.mark_in(conn, keys))

    async def due(self, before_minute: int) -> list[tuple[DirtyKey, int]]:
        """Marks of minutes earlier than ``before_minute``, with their generations."""

        def run(conn: sqlite3.Connection) -> list[tuple[DirtyKey, int]]:
            rows = conn.execute(
                "SELECT site_id, node_id, kind, minute, gen FROM rollup_dirty WHERE minute < ?",
                (before_minute,),
            )
            return [((r[0], r[1], r[2], int(r[3])), int(r[4])) for r in rows]

        return await self.db.read(run)

    async def clear(self, marks: Sequence[tuple[DirtyKey, int]]) -> None:
        """Delete marks that still carry the generation that was processed."""
        rows = [(k[0], k[1], k[3], gen) for k, gen in marks]

        def run(conn: sqlite3.Connection) -> None:
            conn.executemany(
                "DELETE FROM rollup_dirty WHERE site_id = ? AND node_id = ? AND minute = ? "
                "AND gen = ?",
                rows,
            )

        if rows:
            await self.db.write(run)


# -- refresh -------------------------------------------------------------------------


class RollupBackend(Protocol):
    """What :func:`refresh` needs from a store."""

    async def readings(self, query: SeriesQuery) -> list[Reading]:
        """Raw readings (see TimeSeriesStore.readings)."""

    async def rollups(
        self,
        site_id: str,
        resolution: Resolution,
        start: datetime,
        end: datetime,
        node_id: str | None = None,
    ) -> list[Rollup]:
        """Stored rollups (see TimeSeriesStore.rollups)."""

    async def save_rollups(self, rollups: Sequence[Rollup]) -> None:
        """Insert or replace rollups by (site, node, resolution, start)."""


@dataclass(frozen=True, slots=True)
class _Window:
    site_id: str
    node_id: str
    minutes: frozenset[int]


def _windows(marks: Iterable[DirtyKey], hold_minutes: int) -> list[_Window]:
    """Affected minutes per node, split into windows of at most WINDOW_MINUTES."""
    per_node: dict[tuple[str, str], set[int]] = defaultdict(set)
    for site_id, node_id, _kind, minute in marks:
        for k in range(-hold_minutes, hold_minutes + 1):
            per_node[(site_id, node_id)].add(minute + 60 * k)
    windows = []
    for (site_id, node_id), minutes in sorted(per_node.items()):
        ordered = sorted(minutes)
        for i in range(0, len(ordered), WINDOW_MINUTES):
            windows.append(_Window(site_id, node_id, frozenset(ordered[i : i + WINDOW_MINUTES])))
    return windows


async def refresh(
    backend: RollupBackend,
    dirty: DirtyLog,
    until: datetime | None = None,
    *,
    max_hold_s: float = MAX_HOLD_S,
) -> int:
    """Recompute rollups for the due dirty marks; return the 1-minute buckets written."""
    now = (until or datetime.now(UTC)).timestamp()
    hold_minutes = math.ceil(max_hold_s / 60)
    # A mark is due once every bucket it can influence has ended.
    marks = await dirty.due(floor_to(now, 60) - 60 * hold_minutes)
    if not marks:
        return 0
    written = 0
    hours: set[tuple[str, str, int]] = set()
    for window in _windows((key for key, _gen in marks), hold_minutes):
        lo, hi = min(window.minutes), max(window.minutes) + 60
        readings = await backend.readings(
            SeriesQuery(
                site_id=window.site_id,
                node_id=window.node_id,
                start=datetime.fromtimestamp(lo - max_hold_s, UTC),
                end=datetime.fromtimestamp(hi + max_hold_s, UTC),
                limit=10**9,
            )
        )
        rollups = compute_minutes(readings, window.minutes, max_hold_s=max_hold_s)
        await backend.save_rollups(rollups)
        written += len(rollups)
        hours.update((window.site_id, window.node_id, floor_to(m, 3600)) for m in window.minutes)
    for site_id, node_id, hour in sorted(hours):
        start = datetime.fromtimestamp(hour, UTC)
        end = datetime.fromtimestamp(hour + RESOLUTION_SECONDS["1h"], UTC)
        parts = await backend.rollups(site_id, "1m", start, end, node_id=node_id)
        if parts:
            await backend.save_rollups([compose(parts, "1h", start)])
    await dirty.clear(marks)
    return written


class _Refreshable(Protocol):
    async def refresh_rollups(self, until: datetime | None = None) -> int:
        """See TimeSeriesStore.refresh_rollups."""


async def refresh_forever(store: _Refreshable, interval_s: float = 60.0) -> None:
    """Refresh a store's rollups every ``interval_s`` until cancelled (an app task).

    A failed refresh (e.g. InfluxDB unreachable) keeps its marks and is retried on
    the next round.
    """
    while True:
        try:
            await store.refresh_rollups()
        except SumpWatchError as exc:
            log.warning("rollup refresh failed (%s); retrying in %.0f s", exc, interval_s)
        await asyncio.sleep(interval_s)
