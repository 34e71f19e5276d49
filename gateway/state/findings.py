"""Findings in the state database: one row per finding (its latest state), an event log, and
frozen snapshots of the evidence at opening and at each level change."""

from __future__ import annotations

import builtins
import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from gateway.domain import Audience, Citation, Finding, FindingEvent, NotEvaluated, Severity
from gateway.state.database import Connection, Database, Row
from gateway.state.snapshots import (
    FindingSnapshot,
    SnapshotContext,
    canonical_json,
    content_hash,
    needs_snapshot,
    snapshot_content,
)

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


def _finding(row: Row) -> Finding:
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

    def __init__(self, db: Database) -> None:
        self.db = db

    async def open(self) -> None:
        """Make sure the schema is current (the tables come from the migrations)."""
        await self.db.migrate()

    async def apply(
        self, events: list[FindingEvent], contexts: Mapping[str, SnapshotContext] | None = None
    ) -> None:
        """Upsert each event's finding and log the event, in one transaction; an
        opening or a level change also stores a frozen snapshot (with the finding's
        entry of ``contexts``, by finding id, when the caller gathered one)."""
        if not events:
            return
        gathered = contexts or {}

        def run(conn: Connection) -> None:
            for e in events:
                f = e.finding
                if needs_snapshot(e, _stored_level(conn, f.id)):
                    _insert_snapshot(conn, e, gathered.get(f.id, SnapshotContext()))
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
            where.append(f"site_id IN ({','.join('?' * len(site_ids))})" if site_ids else "1 = 0")
            args.extend(sorted(site_ids))
        sql = f"SELECT {_COLUMNS} FROM findings"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY opened_at DESC, id LIMIT ?"
        args.append(limit)

        def run(conn: Connection) -> list[Finding]:
            return [_finding(r) for r in conn.execute(sql, args)]

        return await self.db.read(run)

    async def levels(self, finding_ids: builtins.list[str]) -> dict[str, str]:
        """The stored level of each finding that exists (to tell a level change)."""
        ids = sorted(set(finding_ids))
        if not ids:
            return {}

        def run(conn: Connection) -> dict[str, str]:
            rows = conn.execute(
                f"SELECT id, level FROM findings WHERE id IN ({','.join('?' * len(ids))})", ids
            )
            return {r["id"]: r["level"] for r in rows}

        return await self.db.read(run)

    async def snapshots(self, finding_id: str) -> builtins.list[FindingSnapshot]:
        """The frozen snapshots of one finding, oldest first."""

        def run(conn: Connection) -> builtins.list[FindingSnapshot]:
            rows = conn.execute(
                "SELECT seq, finding_id, change, at, severity, level, content, sha256"
                " FROM finding_snapshots WHERE finding_id = ? ORDER BY seq",
                (finding_id,),
            )
            return [_snapshot(r) for r in rows]

        return await self.db.read(run)

    async def get(self, finding_id: str) -> Finding | None:
        """One finding by id."""

        def run(conn: Connection) -> Finding | None:
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

        def run(conn: Connection) -> builtins.list[dict[str, Any]]:
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

        def run(conn: Connection) -> dict[str, builtins.list[tuple[datetime, str]]]:
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

    async def record_not_evaluated(self, span: NotEvaluated) -> None:
        """Store (or grow) a span of late readings the detectors did not judge.

        Bounds only widen and the count only grows, so records written out of
        order still end at the span's full extent."""

        def run(conn: Connection) -> None:
            conn.execute(
                "INSERT INTO not_evaluated (id, site_id, node_id, start_ts, end_ts, count) "
                "VALUES (?,?,?,?,?,?) ON CONFLICT(id) DO UPDATE SET "
                # CASE, not the two-argument MIN/MAX only SQLite has (PostgreSQL's are
                # LEAST/GREATEST, which SQLite lacks); the stored row is named in full
                # because PostgreSQL refuses a bare column here as ambiguous.
                "start_ts = CASE WHEN excluded.start_ts < not_evaluated.start_ts"
                " THEN excluded.start_ts ELSE not_evaluated.start_ts END, "
                "end_ts = CASE WHEN excluded.end_ts > not_evaluated.end_ts"
                " THEN excluded.end_ts ELSE not_evaluated.end_ts END, "
                "count = CASE WHEN excluded.count > not_evaluated.count"
                " THEN excluded.count ELSE not_evaluated.count END",
                (span.id, span.site_id, span.node_id, _ts(span.start), _ts(span.end), span.count),
            )

        await self.db.write(run)

    async def not_evaluated(
        self,
        site_id: str,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int = 500,
    ) -> builtins.list[NotEvaluated]:
        """A site's not-evaluated spans overlapping ``[since, until]``, oldest first."""
        where, args = ["site_id = ?"], [site_id]
        if since is not None:
            where.append("end_ts >= ?")
            args.append(_ts(since))
        if until is not None:
            where.append("start_ts <= ?")
            args.append(_ts(until))

        def run(conn: Connection) -> builtins.list[NotEvaluated]:
            rows = conn.execute(
                "SELECT id, site_id, node_id, start_ts, end_ts, count FROM not_evaluated "
                f"WHERE {' AND '.join(where)} ORDER BY start_ts LIMIT ?",
                (*args, limit),
            ).fetchall()
            return [_not_evaluated(r) for r in rows]

        return await self.db.read(run)


def _not_evaluated(row: Row) -> NotEvaluated:
    start, end = _parse(row["start_ts"]), _parse(row["end_ts"])
    assert start is not None and end is not None
    return NotEvaluated(row["id"], row["site_id"], row["node_id"], start, end, row["count"])


def _stored_level(conn: Connection, finding_id: str) -> str | None:
    row = conn.execute("SELECT level FROM findings WHERE id = ?", (finding_id,)).fetchone()
    return None if row is None else str(row["level"])


def _insert_snapshot(conn: Connection, event: FindingEvent, ctx: SnapshotContext) -> None:
    f = event.finding
    text = canonical_json(snapshot_content(f, event.change, ctx))
    conn.execute(
        "INSERT INTO finding_snapshots (finding_id, change, at, severity, level, content, sha256)"
        " VALUES (?,?,?,?,?,?,?)",
        (f.id, event.change.value, _ts(f.updated_at), f.severity.value, f.level, text,
         content_hash(text)),
    )  # fmt: skip


def _snapshot(row: Row) -> FindingSnapshot:
    at = _parse(row["at"])
    assert at is not None
    return FindingSnapshot(
        seq=row["seq"],
        finding_id=row["finding_id"],
        change=row["change"],
        at=at,
        severity=row["severity"],
        level=row["level"],
        content=row["content"],
        sha256=row["sha256"],
        data=json.loads(row["content"]),
    )
