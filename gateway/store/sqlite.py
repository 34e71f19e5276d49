"""The embedded default time-series store: one wide SQLite table of readings.

One row per message, one nullable column per contract field. The primary key is
the message identity (site, node, boot, seq), so ``INSERT OR IGNORE`` makes QoS 1
redeliveries harmless, and a node that reboots (new boot id) never collides with
its own earlier sequence numbers.
"""

from __future__ import annotations

import sqlite3
from array import array
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from itertools import groupby
from operator import itemgetter
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from gateway.contract import FIELDS, NodeKind
from gateway.domain import FindingEvent, Reading, StatusChange
from gateway.state.database import SqliteDatabase
from gateway.store import rollups as rollup_math
from gateway.store.base import (
    DAY_SERIES,
    DayRollup,
    FieldStats,
    NodeHours,
    Resolution,
    Rollup,
    SeriesQuery,
)

_T = TypeVar("_T")
_FIELD_NAMES = tuple(FIELDS)
_COLUMNS = (
    "site_id",
    "node_id",
    "boot",
    "seq",
    "ts",
    "kind",
    "received_at",
    "battery_v",
    "rssi_dbm",
    *_FIELD_NAMES,
)

_ROLLUP_VALUE_COLUMNS = rollup_math.rollup_columns()
_ROLLUP_COLUMNS = ("site_id", "node_id", "bucket", "kind", *_ROLLUP_VALUE_COLUMNS)

_INSERT = (
    f"INSERT OR IGNORE INTO readings ({', '.join(_COLUMNS)}) "
    f"VALUES ({', '.join('?' for _ in _COLUMNS)})"
)

_SELECT_IDENTITY = (
    f"SELECT {', '.join(_COLUMNS)} FROM readings "
    "WHERE site_id = ? AND node_id = ? AND boot = ? AND seq = ?"
)


#: A site's newest reading per node, in one statement: its node ids by skipping through
#: the (site, node, ts) index (a skip scan: SQLite has none of its own), then each
#: node's newest row by one seek of that index (named: the planner would otherwise scan
#: the node's rows by primary key). Among readings of the same ts the greatest
#: (boot, seq) comes first, as a descending scan of the index gives it.
_NEWEST_OF_SITE = (
    "WITH RECURSIVE nodes(id) AS ("
    " SELECT MIN(node_id) FROM readings WHERE site_id = ?1"
    " UNION ALL"
    " SELECT (SELECT MIN(node_id) FROM readings WHERE site_id = ?1 AND node_id > id)"
    " FROM nodes WHERE id IS NOT NULL"
    f") SELECT {', '.join('r.' + c for c in _COLUMNS)}"
    " FROM nodes JOIN readings r INDEXED BY readings_site_node_ts"
    " ON r.site_id = ?1 AND r.node_id = nodes.id"
    " AND r.ts = (SELECT MAX(ts) FROM readings WHERE site_id = ?1 AND node_id = nodes.id)"
    " WHERE nodes.id IS NOT NULL ORDER BY nodes.id, r.boot DESC, r.seq DESC"
)


def to_epoch(value: datetime) -> float:
    """Seconds since the epoch (the store's time unit)."""
    return value.timestamp()


def from_epoch(value: float) -> datetime:
    """An aware UTC datetime from epoch seconds."""
    return datetime.fromtimestamp(value, UTC)


def _row(reading: Reading) -> tuple[Any, ...]:
    values = reading.values
    return (
        reading.site_id,
        reading.node_id,
        reading.boot,
        reading.seq,
        reading.ts.timestamp(),
        reading.kind.value,
        reading.received_at.timestamp(),
        reading.battery_v,
        reading.rssi_dbm,
        *map(values.get, _FIELD_NAMES),  # C-level, not a generator per row (issue 17)
    )


#: Each contract field's position in a row of ``_COLUMNS``, and whether it is a boolean.
_FIELD_AT = tuple(
    (name, i, FIELDS[name].is_bool) for i, name in enumerate(_COLUMNS) if name in FIELDS
)
_SELECT_READINGS = f"SELECT {', '.join(_COLUMNS)} FROM readings"


def _reading(row: Sequence[Any]) -> Reading:
    """A stored row (the ``_COLUMNS``, by position: a plain tuple, not a ``sqlite3.Row``
    looked up by name ~40 times; the console reads 3,000 of them at once)."""
    values: dict[str, float | bool] = {}
    for name, i, is_bool in _FIELD_AT:
        value = row[i]
        if value is not None:
            values[name] = bool(value) if is_bool else float(value)
    return Reading(
        site_id=row[0],
        node_id=row[1],
        kind=NodeKind(row[5]),
        ts=from_epoch(row[4]),
        seq=row[3],
        boot=row[2],
        values=values,
        received_at=from_epoch(row[6]),
        battery_v=row[7],
        rssi_dbm=row[8],
    )


def _tuples(cursor: sqlite3.Cursor) -> sqlite3.Cursor:
    """The cursor with plain tuple rows (the connections make ``sqlite3.Row``s)."""
    cursor.row_factory = None
    return cursor


class SqliteStore:
    """Time-series store on the shared SQLite database."""

    name = "sqlite"

    def __init__(self, db: SqliteDatabase) -> None:
        self.db = db
        self.dirty = rollup_math.DirtyLog(db)

    async def open(self) -> None:
        """Check the schema and mark readings a crash left out of the rollups."""
        await self.db.migrate()
        await self.dirty.open()
        await self.db.write(_mark_unrolled_readings)

    async def close(self) -> None:
        """Nothing to flush: every write is its own committed transaction."""

    def stats(self) -> dict[str, float]:
        """No gauges of its own: the database is a local file."""
        return {}

    async def write(self, readings: Sequence[Reading]) -> int:
        """Insert a batch in one transaction; duplicates are ignored.

        The minutes the batch touches are marked for the next rollup refresh in the
        same transaction.
        """
        rows = [_row(r) for r in readings]
        marks = rollup_math.dirty_keys(readings)

        def run(conn: sqlite3.Connection) -> int:
            before = conn.total_changes
            conn.executemany(_INSERT, rows)
            new = conn.total_changes - before
            rollup_math.DirtyLog.mark_in(conn, marks)
            return new

        return await self.db.write(run)

    async def reused(self, readings: Sequence[Reading]) -> list[Reading]:
        """Readings whose identity is stored with other device time or values.

        Runs only when a batch had duplicates (redeliveries are rare), so the
        insert path stays one ``executemany``. ``received_at`` is not compared: a
        redelivery arrives later with the same content.
        """
        content = slice(4, None)
        skip = _COLUMNS.index("received_at") - 4

        def same(a: Sequence[Any], b: Sequence[Any]) -> bool:
            return all(x == y for i, (x, y) in enumerate(zip(a, b, strict=True)) if i != skip)

        def run(conn: sqlite3.Connection) -> list[Reading]:
            out = []
            for reading in readings:
                row = _row(reading)
                stored = conn.execute(_SELECT_IDENTITY, row[:4]).fetchone()
                if stored is not None and not same(tuple(stored)[content], row[content]):
                    out.append(reading)
            return out

        return await self.db.read(run)

    async def readings(self, query: SeriesQuery) -> list[Reading]:
        """Readings of a site in device-time order."""
        where = ["site_id = ?"]
        args: list[Any] = [query.site_id]
        if query.node_id is not None:
            where.append("node_id = ?")
            args.append(query.node_id)
        if query.start is not None:
            where.append("ts >= ?")
            args.append(to_epoch(query.start))
        if query.end is not None:
            where.append("ts < ?")
            args.append(to_epoch(query.end))
        if query.fields:
            # Only rows that carry at least one of the wanted fields.
            where.append("(" + " OR ".join(f"{f} IS NOT NULL" for f in query.fields) + ")")
        sql = f"{_SELECT_READINGS} WHERE {' AND '.join(where)} ORDER BY ts LIMIT ?"
        args.append(query.limit)

        def run(conn: sqlite3.Connection) -> list[Reading]:
            return [_reading(row) for row in _tuples(conn.execute(sql, args))]

        return await self.db.read(run)

    async def latest(self, site_id: str) -> dict[str, Reading]:
        """The newest reading per node of one site."""
        sql = (
            f"SELECT {', '.join('r.' + c for c in _COLUMNS)} FROM readings r "
            "JOIN (SELECT node_id, MAX(ts) AS ts FROM readings "
            "WHERE site_id = ? GROUP BY node_id) m ON r.node_id = m.node_id AND r.ts = m.ts "
            "WHERE r.site_id = ?"
        )

        def run(conn: sqlite3.Connection) -> dict[str, Reading]:
            rows = _tuples(conn.execute(sql, (site_id, site_id)))
            return {row[1]: _reading(row) for row in rows}

        return await self.db.read(run)

    async def latest_of(self, site_ids: Sequence[str]) -> dict[str, dict[str, Reading]]:
        """The newest reading per node of each site, in one read.

        Per site one statement (``_NEWEST_OF_SITE``): its node ids by skipping through
        the (site, node, ts) index and each node's newest row by one index seek, so the
        cost does not grow with how many readings a node has (the single-site query
        groups all of them); one statement a site, not one a node (issue 17 item 5).
        """
        ids = list(dict.fromkeys(site_ids))

        def run(conn: sqlite3.Connection) -> dict[str, dict[str, Reading]]:
            out: dict[str, dict[str, Reading]] = {}
            for site_id in ids:
                latest = out[site_id] = {}
                for row in _tuples(conn.execute(_NEWEST_OF_SITE, (site_id,))):
                    if row[1] not in latest:  # the first of a node's newest readings
                        latest[row[1]] = _reading(row)
            return out

        return await self.db.read(run)

    async def count(self, site_id: str | None = None) -> int:
        """Number of stored readings."""

        def run(conn: sqlite3.Connection) -> int:
            if site_id is None:
                return int(conn.execute("SELECT COUNT(*) FROM readings").fetchone()[0])
            row = conn.execute("SELECT COUNT(*) FROM readings WHERE site_id = ?", (site_id,))
            return int(row.fetchone()[0])

        return await self.db.read(run)

    async def healthy(self) -> bool:
        """A write transaction can be opened."""

        def run(conn: sqlite3.Connection) -> bool:
            conn.execute("SELECT 1")
            return True

        try:
            return await self.db.write(run)
        except Exception:
            return False

    async def write_events(
        self, statuses: Sequence[StatusChange] = (), findings: Sequence[FindingEvent] = ()
    ) -> None:
        """Nothing to do: statuses and findings live in the state tables already."""

    async def rollups(
        self,
        site_id: str,
        resolution: Resolution,
        start: datetime,
        end: datetime,
        node_id: str | None = None,
    ) -> list[Rollup]:
        """Stored rollups whose bucket starts in [start, end), by start then node."""
        table = _rollup_table(resolution)
        sql = (
            f"SELECT {', '.join(_ROLLUP_COLUMNS)} FROM {table} "
            "WHERE site_id = ? AND bucket >= ? AND bucket < ?"
        )
        args: list[Any] = [site_id, start.timestamp(), end.timestamp()]
        if node_id is not None:
            sql += " AND node_id = ?"
            args.append(node_id)
        sql += " ORDER BY bucket, node_id"

        def run(conn: sqlite3.Connection) -> list[Rollup]:
            cursor = conn.execute(sql, args)
            cursor.row_factory = None  # plain tuples: a season report reads ~10k rows a site
            starts: dict[int, datetime] = {}
            out = []
            for row in cursor:
                bucket = row[2]
                start_at = starts.get(bucket)
                if start_at is None:
                    start_at = starts[bucket] = from_epoch(bucket)
                out.append(_decode_rollup(row, resolution, start_at))
            return out

        return await self.db.read(run)

    async def save_rollups(self, rollups: Sequence[Rollup]) -> None:
        """Insert or replace rollups (one transaction per call)."""
        by_table: dict[str, list[tuple[Any, ...]]] = {}
        for r in rollups:
            values = rollup_math.rollup_values(r)
            row = (
                r.site_id,
                r.node_id,
                int(r.start.timestamp()),
                r.kind.value,
                *(values.get(name) for name in _ROLLUP_VALUE_COLUMNS),
            )
            by_table.setdefault(_rollup_table(r.resolution), []).append(row)

        def run(conn: sqlite3.Connection) -> None:
            for table, rows in by_table.items():
                conn.executemany(
                    f"INSERT OR REPLACE INTO {table} ({', '.join(_ROLLUP_COLUMNS)}) "
                    f"VALUES ({', '.join('?' for _ in _ROLLUP_COLUMNS)})",
                    rows,
                )
            # Same transaction: a day rollup is never left behind its hours.
            _mark_days(conn, by_table.get("rollup_1h", ()))

        if by_table:
            await self.db.write(run)

    async def refresh_rollups(self, until: datetime | None = None) -> int:
        """Recompute the rollup buckets that new readings touched (see ``rollups``),
        then the day rollups of the hours that changed."""
        written = await rollup_math.refresh(self, self.dirty, until)
        while await self.db.write(lambda conn: _reduce_due_days(conn, None, _DAYS_PER_TX)):
            pass  # a backlog (a migrated database) in short transactions: ingest goes on
        return written

    async def day_rollups(self, site_id: str, start: datetime, end: datetime) -> list[DayRollup]:
        """A site's day rollups of the UTC days overlapping [start, end), by day then node.

        Days the rollup job has not reduced yet are reduced first (one write, only when
        there are any), so the answer always matches the 1-hour rollups.
        """
        args = (
            site_id,
            rollup_math.floor_to(start.timestamp(), rollup_math.DAY_S),
            end.timestamp(),
        )

        def run(conn: sqlite3.Connection) -> list[DayRollup]:
            cursor = conn.execute(_SELECT_DAYS, args)
            cursor.row_factory = None
            days: dict[int, datetime] = {}
            return [_decode_day(row, days) for row in cursor]

        return await self._reduced(site_id, run)

    async def hour_series(self, site_id: str, start: datetime, hours: int) -> list[NodeHours]:
        """A site's day rollups as hourly series (see ``TimeSeriesStore.hour_series``).

        Each node's blobs of a series are joined and read as one array of doubles,
        so a site-season is ~10 array copies, not ~1,800 small arrays and ~450 objects
        (issue 17 item 5: this read was the largest part of a village report).
        """
        base = start.timestamp()
        args = (site_id, rollup_math.floor_to(base, rollup_math.DAY_S), base + 3600 * hours)

        def run(conn: sqlite3.Connection) -> list[NodeHours]:
            cursor = conn.execute(_SELECT_NODE_DAYS, args)
            cursor.row_factory = None
            return _node_hours(cursor.fetchall(), base, hours)

        return await self._reduced(site_id, run)

    async def _reduced(self, site_id: str, read: Callable[[sqlite3.Connection], _T]) -> _T:
        """``read(conn)`` of a site's day rollups once none of its days is still marked:
        the marked ones are reduced first (one write, only when there are any), so the
        answer always matches the 1-hour rollups."""

        def run(conn: sqlite3.Connection) -> tuple[_T] | None:
            due = "SELECT 1 FROM rollup_1d_dirty WHERE site_id = ? LIMIT 1"
            if conn.execute(due, (site_id,)).fetchone() is not None:
                return None
            return (read(conn),)

        found = await self.db.read(run)
        if found is None:
            await self.db.write(lambda conn: _reduce_due_days(conn, site_id, None))
            return await self.db.read(read)
        return found[0]


_COL = {name: i for i, name in enumerate(_ROLLUP_COLUMNS)}
#: Per node kind: (field, index of its count column) and the totals' indices, so a
#: row is decoded by position (the equivalent of rollups.rollup_from_values).
_KIND_STATS = {
    kind: tuple(
        (name, _COL[rollup_math.stat_column(name, "count")])
        for name in rollup_math.KIND_FIELDS[kind]
    )
    for kind in NodeKind
}
_KINDS = {kind.value: kind for kind in NodeKind}
_SAMPLES, _CYCLES, _ON_S, _B_CYCLES, _B_ON_S, _VOLUME = (
    _COL[name]
    for name in (
        "samples",
        "pump_cycles",
        "pump_on_s",
        "backup_pump_cycles",
        "backup_pump_on_s",
        "pumped_volume_l",
    )
)


def _decode_rollup(row: tuple[Any, ...], resolution: Resolution, start: datetime) -> Rollup:
    kind = _KINDS[row[3]]
    stats: dict[str, FieldStats] = {}
    for name, i in _KIND_STATS[kind]:
        count = row[i]
        if count:
            # count, min, max, mean, last are adjacent columns (STAT_SUFFIXES order).
            stats[name] = FieldStats(
                int(count),
                float(row[i + 1]),
                float(row[i + 2]),
                float(row[i + 3]),
                float(row[i + 4]),
            )
    return Rollup(
        site_id=row[0],
        node_id=row[1],
        kind=kind,
        resolution=resolution,
        start=start,
        samples=int(row[_SAMPLES] or 0),
        stats=stats,
        pump_cycles=round(row[_CYCLES] or 0.0),
        pump_on_s=float(row[_ON_S] or 0.0),
        backup_pump_cycles=round(row[_B_CYCLES] or 0.0),
        backup_pump_on_s=float(row[_B_ON_S] or 0.0),
        pumped_volume_l=float(row[_VOLUME] or 0.0),
    )


#: Most day rollups reduced in one write transaction by the rollup job.
_DAYS_PER_TX = 500
_DAY_COLUMNS = ("site_id", "node_id", "day", "kind", *(f"{name}_h" for name in DAY_SERIES))
_SELECT_DAYS = (
    f"SELECT {', '.join(_DAY_COLUMNS)} FROM rollup_1d "
    "WHERE site_id = ? AND day >= ? AND day < ? ORDER BY day, node_id"
)
#: The same rows by node then day (a node's days end to end; the primary key's order).
_SELECT_NODE_DAYS = (
    f"SELECT {', '.join(_DAY_COLUMNS)} FROM rollup_1d "
    "WHERE site_id = ? AND day >= ? AND day < ? ORDER BY node_id, day"
)
_BLOB_OF = {name: 4 + i for i, name in enumerate(DAY_SERIES)}
_UPSERT_DAY = (
    f"INSERT OR REPLACE INTO rollup_1d ({', '.join(_DAY_COLUMNS)}) "
    f"VALUES ({', '.join('?' for _ in _DAY_COLUMNS)})"
)


def _mark_days(conn: sqlite3.Connection, hour_rows: Sequence[tuple[Any, ...]]) -> None:
    """Mark the days of written 1-hour rollup rows (site, node, bucket, ...) for reduction."""
    days = {(row[0], row[1], rollup_math.floor_to(row[2], rollup_math.DAY_S)) for row in hour_rows}
    conn.executemany(
        "INSERT OR IGNORE INTO rollup_1d_dirty (site_id, node_id, day) VALUES (?, ?, ?)",
        sorted(days),
    )


def _reduce_due_days(conn: sqlite3.Connection, site_id: str | None, limit: int | None) -> int:
    """Recompute marked days (of one site, or any) from their 1-hour rollups; return how many.

    Runs in the writer's transaction, so a mark is deleted together with the row it
    produced and an hour saved meanwhile marks its day again.
    """
    sql = "SELECT site_id, node_id, day FROM rollup_1d_dirty"
    args: list[Any] = []
    if site_id is not None:
        sql += " WHERE site_id = ?"
        args.append(site_id)
    if limit is not None:
        sql += " LIMIT ?"
        args.append(limit)
    marks = conn.execute(sql, args).fetchall()
    for site, node, day in marks:
        cursor = conn.execute(
            f"SELECT {', '.join(_ROLLUP_COLUMNS)} FROM rollup_1h "
            "WHERE site_id = ? AND node_id = ? AND bucket >= ? AND bucket < ?",
            (site, node, day, day + rollup_math.DAY_S),
        )
        cursor.row_factory = None
        hours = [_decode_rollup(row, "1h", from_epoch(row[2])) for row in cursor]
        conn.execute(
            "DELETE FROM rollup_1d WHERE site_id = ? AND node_id = ? AND day = ?", (site, node, day)
        )
        for d in rollup_math.reduce_days(hours):
            conn.execute(_UPSERT_DAY, _day_row(d))
        conn.execute(
            "DELETE FROM rollup_1d_dirty WHERE site_id = ? AND node_id = ? AND day = ?",
            (site, node, day),
        )
    return len(marks)


def _day_row(d: DayRollup) -> tuple[Any, ...]:
    blobs = (d.hours.get(name) for name in DAY_SERIES)
    return (
        d.site_id,
        d.node_id,
        int(d.day.timestamp()),
        d.kind.value,
        *(None if b is None else rollup_math.pack_hours(b) for b in blobs),
    )


def _decode_day(row: tuple[Any, ...], days: dict[int, datetime]) -> DayRollup:
    """A stored day; ``days`` caches the day's datetime across the nodes of a read."""
    unpack = rollup_math.unpack_hours
    hours = {
        name: unpack(blob)
        for name, blob in zip(DAY_SERIES, row[4:], strict=True)
        if blob is not None
    }
    day = days.get(row[2])
    if day is None:
        day = days[row[2]] = from_epoch(row[2])
    return DayRollup(row[0], row[1], _KINDS[row[3]], day, hours)


def _node_hours(rows: Sequence[tuple[Any, ...]], base: float, n: int) -> list[NodeHours]:
    """Rows of ``_SELECT_NODE_DAYS`` as each node's hourly series over n hours from
    ``base``; a node's kind is that of its first day, as ``rollups.hours_of_days``."""
    out = []
    for node_id, group in groupby(rows, key=itemgetter(1)):
        days = list(group)

        def blob_rows(
            name: str, fill: float, days: list[tuple[Any, ...]] = days
        ) -> npt.NDArray[np.float64]:
            col = _BLOB_OF[name]
            empty = rollup_math.pack_hours(array("d", [fill]) * 24)
            joined = b"".join(empty if d[col] is None else d[col] for d in days)
            return np.frombuffer(joined, dtype="<f8").reshape(-1, 24)

        out.append(
            rollup_math.lay_out(
                node_id, _KINDS[days[0][3]], [d[2] for d in days], blob_rows, base, n
            )
        )
    return out


def _mark_unrolled_readings(conn: sqlite3.Connection) -> None:
    """A database from before rollups existed: mark all its minutes once."""
    if conn.execute("SELECT 1 FROM rollup_1m LIMIT 1").fetchone() is not None:
        return
    if conn.execute("SELECT 1 FROM rollup_dirty LIMIT 1").fetchone() is not None:
        return
    conn.execute(
        "INSERT OR IGNORE INTO rollup_dirty (site_id, node_id, kind, minute, gen) "
        "SELECT site_id, node_id, kind, CAST(ts / 60 AS INTEGER) * 60, 0 FROM readings "
        "GROUP BY site_id, node_id, CAST(ts / 60 AS INTEGER)"
    )


def _rollup_table(resolution: Resolution) -> str:
    if resolution not in ("1m", "1h"):
        raise ValueError(f"unknown rollup resolution {resolution!r}")
    return f"rollup_{resolution}"
