"""Dead-letter and node-status tables of the state database (SQLite or PostgreSQL)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

from gateway.domain import DeadLetter, StatusChange
from gateway.state.database import Connection, Database, Dialect

#: The epoch hour of ``received_at`` (positive, so truncation is the floor): SQLite's
#: CAST truncates, PostgreSQL's rounds, so each dialect says it its own way.
_HOUR: Final[dict[Dialect, str]] = {
    "sqlite": "CAST(received_at / 3600 AS INTEGER)",
    "postgresql": "CAST(FLOOR(received_at / 3600) AS BIGINT)",
}


def from_epoch(value: float) -> datetime:
    """An aware UTC datetime from the epoch seconds these tables store."""
    return datetime.fromtimestamp(value, UTC)


@dataclass(frozen=True, slots=True)
class NodeStatus:
    """The last availability a node announced."""

    site_id: str
    node_id: str
    online: bool
    changed_at: datetime


def insert_deadletters(conn: Connection, letters: Sequence[DeadLetter]) -> None:
    """Insert dead letters inside the caller's transaction."""
    conn.executemany(
        "INSERT INTO deadletters (received_at, topic, payload, reason, detail) VALUES (?,?,?,?,?)",
        [(d.received_at.timestamp(), d.topic, d.payload, d.reason, d.detail) for d in letters],
    )


def upsert_statuses(conn: Connection, changes: Sequence[StatusChange]) -> None:
    """Record node availability inside the caller's transaction."""
    conn.executemany(
        "INSERT INTO node_status (site_id, node_id, online, changed_at) VALUES (?,?,?,?) "
        "ON CONFLICT (site_id, node_id) DO UPDATE SET online = excluded.online, "
        "changed_at = excluded.changed_at",
        [(c.site_id, c.node_id, int(c.online), c.received_at.timestamp()) for c in changes],
    )


class StateRepository:
    """Dead letters and node availability."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def open(self) -> None:
        """Make sure the schema is current (the tables come from the migrations)."""
        await self.db.migrate()

    async def save(self, letters: Sequence[DeadLetter], statuses: Sequence[StatusChange]) -> None:
        """Store dead letters and status changes in one transaction."""

        def run(conn: Connection) -> None:
            insert_deadletters(conn, letters)
            upsert_statuses(conn, statuses)

        await self.db.write(run)

    async def deadletters(
        self, *, reason: str | None = None, limit: int = 100, offset: int = 0
    ) -> list[DeadLetter]:
        """Newest dead letters first."""
        sql = "SELECT * FROM deadletters"
        args: list[object] = []
        if reason is not None:
            sql += " WHERE reason = ?"
            args.append(reason)
        sql += " ORDER BY id DESC LIMIT ? OFFSET ?"
        args += [limit, offset]

        def run(conn: Connection) -> list[DeadLetter]:
            return [
                DeadLetter(
                    topic=r["topic"],
                    payload=bytes(r["payload"]),
                    reason=r["reason"],
                    detail=r["detail"],
                    received_at=from_epoch(r["received_at"]),
                    id=r["id"],
                )
                for r in conn.execute(sql, args)
            ]

        return await self.db.read(run)

    async def deadletter_counts(self) -> dict[str, int]:
        """How many dead letters per reason."""

        def run(conn: Connection) -> dict[str, int]:
            rows = conn.execute("SELECT reason, COUNT(*) FROM deadletters GROUP BY reason")
            return {reason: int(n) for reason, n in rows}

        return await self.db.read(run)

    async def deadletters_per_hour(self, since: datetime) -> list[tuple[int, str, int]]:
        """``(epoch hour, reason, count)`` of dead letters received since ``since``,
        newest hour first."""
        sql = (
            f"SELECT {_HOUR[self.db.dialect]} AS hour, reason, COUNT(*) FROM deadletters"
            " WHERE received_at >= ? GROUP BY hour, reason ORDER BY hour DESC"
        )

        def run(conn: Connection) -> list[tuple[int, str, int]]:
            rows = conn.execute(sql, (since.timestamp(),))
            return [(int(h), str(r), int(n)) for h, r, n in rows]

        return await self.db.read(run)

    async def statuses(self, site_id: str | None = None) -> list[NodeStatus]:
        """Known node availability."""
        sql = "SELECT * FROM node_status"
        args: tuple[str, ...] = ()
        if site_id is not None:
            sql += " WHERE site_id = ?"
            args = (site_id,)

        def run(conn: Connection) -> list[NodeStatus]:
            return [
                NodeStatus(
                    r["site_id"], r["node_id"], bool(r["online"]), from_epoch(r["changed_at"])
                )
                for r in conn.execute(sql, args)
            ]

        return await self.db.read(run)
