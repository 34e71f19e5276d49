"""Findings in SQLite: one row per finding (its latest state) plus an event log."""

from __future__ import annotations

import builtins
import json
import sqlite3
from datetime import UTC, datetime
from typing import Any

from gateway.domain import Audience, Citation, Finding, FindingEvent, Severity
from gateway.store.database import SqliteDatabase

SCHEMA = """
CREATE TABLE IF NOT EXISTS findings (
    id TEXT PRIMARY KEY,
    rule_id TEXT NOT NULL,
    site_id TEXT NOT NULL,
    severity TEXT NOT NULL,
    level TEXT NOT NULL DEFAULT '',
    title TEXT NOT NULL,
    opened_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    cleared_at TEXT,
    audience TEXT NOT NULL,
    evidence TEXT NOT NULL,
    citations TEXT NOT NULL,
    action TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS findings_site_opened ON findings (site_id, opened_at);
CREATE INDEX IF NOT EXISTS findings_opened ON findings (opened_at);
CREATE INDEX IF NOT EXISTS findings_open ON findings (cleared_at) WHERE cleared_at IS NULL;
CREATE TABLE IF NOT EXISTS finding_events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    finding_id TEXT NOT NULL,
    change TEXT NOT NULL,
    at TEXT NOT NULL,
    severity TEXT NOT NULL,
    level TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS finding_events_finding ON finding_events (finding_id, seq)
"""

_COLUMNS = (
    "id, rule_id, site_id, severity, level, title, opened_at, updated_at, cleared_at, "
    "audience, evidence, citations, action"
)


def _ts(value: datetime) -> str:
    """Fixed-width UTC text, so SQL string order is time order."""
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse(text: str | None) -> datetime | None:
    if text is None:
        return None
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)


def _row(f: Finding) -> tuple[Any, ...]:
    return (
        f.id,
        f.rule_id,
        f.site_id,
        f.severity.value,
        f.level,
        f.title,
        _ts(f.opened_at),
        _ts(f.updated_at),
        None if f.cleared_at is None else _ts(f.cleared_at),
        json.dumps([a.value for a in f.audience]),
        json.dumps(dict(f.evidence), default=str),
        json.dumps([[c.file, c.section, c.quote] for c in f.citations]),
        f.action,
    )


def _finding(row: sqlite3.Row) -> Finding:
    opened = _parse(row["opened_at"])
    updated = _parse(row["updated_at"])
    assert opened is not None and updated is not None
    return Finding(
        id=row["id"],
        rule_id=row["rule_id"],
        site_id=row["site_id"],
        severity=Severity(row["severity"]),
        title=row["title"],
        opened_at=opened,
        updated_at=updated,
        cleared_at=_parse(row["cleared_at"]),
        level=row["level"],
        audience=tuple(Audience(a) for a in json.loads(row["audience"])),
        evidence=json.loads(row["evidence"]),
        citations=tuple(Citation(*c) for c in json.loads(row["citations"])),
        action=row["action"],
    )


class FindingRepository:
    """Stores finding events and answers queries for the API and reports."""

    def __init__(self, db: SqliteDatabase) -> None:
        self.db = db

    async def open(self) -> None:
        """Create the tables if needed."""
        await self.db.ensure_schema(SCHEMA)

    async def apply(self, events: list[FindingEvent]) -> None:
        """Upsert each event's finding and log the event, in one transaction."""
        if not events:
            return

        def run(conn: sqlite3.Connection) -> None:
            for e in events:
                f = e.finding
                conn.execute(
                    f"INSERT INTO findings ({_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?) "
                    "ON CONFLICT(id) DO UPDATE SET severity=excluded.severity, "
                    "level=excluded.level, updated_at=excluded.updated_at, "
                    "cleared_at=excluded.cleared_at, evidence=excluded.evidence, "
                    "citations=excluded.citations, action=excluded.action",
                    _row(f),
                )
                at = f.cleared_at if f.cleared_at is not None else f.updated_at
                conn.execute(
                    "INSERT INTO finding_events (finding_id, change, at, severity, level) "
                    "VALUES (?,?,?,?,?)",
                    (f.id, e.change.value, _ts(at), f.severity.value, f.level),
                )

        await self.db.write(run)

    async def list(
        self,
        site_id: str | None = None,
        rule_id: str | None = None,
        open_only: bool = False,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int = 500,
        site_ids: frozenset[str] | None = None,
    ) -> list[Finding]:
        """Findings, newest first. ``since``/``until`` keep findings open at any time
        in that span; ``site_ids`` (a caller's scope) limits the sites."""
        where: list[str] = []
        args: list[Any] = []
        if site_id is not None:
            where.append("site_id = ?")
            args.append(site_id)
        if rule_id is not None:
            where.append("rule_id = ?")
            args.append(rule_id)
        if open_only:
            where.append("cleared_at IS NULL")
        if since is not None:
            where.append("(cleared_at IS NULL OR cleared_at >= ?)")
            args.append(_ts(since))
        if until is not None:
            where.append("opened_at <= ?")
            args.append(_ts(until))
        if site_ids is not None:
            where.append(f"site_id IN ({','.join('?' * len(site_ids))})" if site_ids else "0")
            args.extend(sorted(site_ids))
        sql = f"SELECT {_COLUMNS} FROM findings"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY opened_at DESC, id LIMIT ?"
        args.append(limit)

        def run(conn: sqlite3.Connection) -> list[Finding]:
            return [_finding(r) for r in conn.execute(sql, args)]

        return await self.db.read(run)

    async def get(self, finding_id: str) -> Finding | None:
        """One finding by id."""

        def run(conn: sqlite3.Connection) -> Finding | None:
            row = conn.execute(
                f"SELECT {_COLUMNS} FROM findings WHERE id = ?", (finding_id,)
            ).fetchone()
            return None if row is None else _finding(row)

        return await self.db.read(run)

    async def open_findings(self) -> builtins.list[Finding]:
        """Every finding not yet cleared (for ``RulesEngine.restore`` after a restart)."""
        return await self.list(open_only=True, limit=1_000_000)

    async def history(self, finding_id: str) -> builtins.list[dict[str, Any]]:
        """The events of one finding, oldest first."""

        def run(conn: sqlite3.Connection) -> builtins.list[dict[str, Any]]:
            rows = conn.execute(
                "SELECT change, at, severity, level FROM finding_events "
                "WHERE finding_id = ? ORDER BY seq",
                (finding_id,),
            )
            return [
                {"change": r["change"], "at": _parse(r["at"]), "severity": r["severity"],
                 "level": r["level"]}
                for r in rows
            ]  # fmt: skip

        return await self.db.read(run)

    async def level_histories(
        self, finding_ids: builtins.list[str]
    ) -> dict[str, builtins.list[tuple[datetime, str]]]:
        """Each finding's level over time: ``(at, level)`` per event, oldest first.

        Reports count violation days from this, not from a finding's last level.
        """
        if not finding_ids:
            return {}

        def run(conn: sqlite3.Connection) -> dict[str, builtins.list[tuple[datetime, str]]]:
            out: dict[str, builtins.list[tuple[datetime, str]]] = {i: [] for i in finding_ids}
            for start in range(0, len(finding_ids), 500):
                chunk = finding_ids[start : start + 500]
                rows = conn.execute(
                    "SELECT finding_id, at, level FROM finding_events WHERE finding_id IN "
                    f"({','.join('?' * len(chunk))}) ORDER BY finding_id, seq",
                    chunk,
                )
                for r in rows:
                    at = _parse(r["at"])
                    assert at is not None
                    out[r["finding_id"]].append((at, r["level"]))
            return out

        return await self.db.read(run)
