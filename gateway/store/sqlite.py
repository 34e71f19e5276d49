"""The embedded default time-series store: one wide SQLite table of readings.

One row per message, one nullable column per contract field. The primary key is
the message identity (site, node, boot, seq), so ``INSERT OR IGNORE`` makes QoS 1
redeliveries harmless, and a node that reboots (new boot id) never collides with
its own earlier sequence numbers.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from gateway.contract import FIELDS, NodeKind
from gateway.domain import Reading
from gateway.store.base import SeriesQuery
from gateway.store.database import SqliteDatabase

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

SCHEMA = f"""
CREATE TABLE IF NOT EXISTS readings (
    site_id TEXT NOT NULL,
    node_id TEXT NOT NULL,
    boot TEXT NOT NULL,
    seq INTEGER NOT NULL,
    ts REAL NOT NULL,
    kind TEXT NOT NULL,
    received_at REAL NOT NULL,
    battery_v REAL,
    rssi_dbm REAL,
    {", ".join(f"{name} REAL" for name in _FIELD_NAMES)},
    PRIMARY KEY (site_id, node_id, boot, seq)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS readings_site_node_ts ON readings (site_id, node_id, ts);
"""

_INSERT = (
    f"INSERT OR IGNORE INTO readings ({', '.join(_COLUMNS)}) "
    f"VALUES ({', '.join('?' for _ in _COLUMNS)})"
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
        *(values.get(name) for name in _FIELD_NAMES),
    )


def _reading(row: sqlite3.Row) -> Reading:
    kind = NodeKind(row["kind"])
    values: dict[str, float | bool] = {}
    for name in _FIELD_NAMES:
        value = row[name]
        if value is None:
            continue
        spec = FIELDS[name]
        values[name] = bool(value) if spec.is_bool else float(value)
    return Reading(
        site_id=row["site_id"],
        node_id=row["node_id"],
        kind=kind,
        ts=from_epoch(row["ts"]),
        seq=row["seq"],
        boot=row["boot"],
        values=values,
        received_at=from_epoch(row["received_at"]),
        battery_v=row["battery_v"],
        rssi_dbm=row["rssi_dbm"],
    )


class SqliteStore:
    """Time-series store on the shared SQLite database."""

    name = "sqlite"

    def __init__(self, db: SqliteDatabase) -> None:
        self.db = db

    async def open(self) -> None:
        """Create the readings table."""
        await self.db.ensure_schema(SCHEMA)

    async def close(self) -> None:
        """Nothing to flush: every write is its own committed transaction."""

    async def write(self, readings: Sequence[Reading]) -> int:
        """Insert a batch in one transaction; duplicates are ignored."""
        rows = [_row(r) for r in readings]

        def run(conn: sqlite3.Connection) -> int:
            before = conn.total_changes
            conn.executemany(_INSERT, rows)
            return conn.total_changes - before

        return await self.db.write(run)

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
        sql = f"SELECT * FROM readings WHERE {' AND '.join(where)} ORDER BY ts LIMIT ?"
        args.append(query.limit)

        def run(conn: sqlite3.Connection) -> list[Reading]:
            return [_reading(row) for row in conn.execute(sql, args)]

        return await self.db.read(run)

    async def latest(self, site_id: str) -> dict[str, Reading]:
        """The newest reading per node of one site."""
        sql = (
            "SELECT r.* FROM readings r JOIN (SELECT node_id, MAX(ts) AS ts FROM readings "
            "WHERE site_id = ? GROUP BY node_id) m ON r.node_id = m.node_id AND r.ts = m.ts "
            "WHERE r.site_id = ?"
        )

        def run(conn: sqlite3.Connection) -> dict[str, Reading]:
            return {row["node_id"]: _reading(row) for row in conn.execute(sql, (site_id, site_id))}

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
