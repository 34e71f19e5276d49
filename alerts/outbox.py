"""The alert outbox in SQLite: tables, row mapping and the small queries the manager
runs inside its transactions (plain functions of a ``sqlite3.Connection``)."""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime
from typing import Any

from alerts.models import (
    Alert,
    AlertQuery,
    AlertState,
    DeliveryAttempt,
    Notification,
    NotificationStatus,
    Reason,
)
from gateway.domain import Severity


def ts(value: datetime) -> str:
    """A timestamp as stored: UTC ISO 8601 with microseconds, so text order is time order."""
    if value.tzinfo is None:
        raise ValueError("naive datetime")
    return value.astimezone(UTC).isoformat(timespec="microseconds")


def opt_ts(value: datetime | None) -> str | None:
    """:func:`ts` of an optional timestamp."""
    return None if value is None else ts(value)


def _dt(value: str | None) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value)


def _req_dt(value: str) -> datetime:
    return datetime.fromisoformat(value)


def alert_from_row(row: sqlite3.Row) -> Alert:
    """Map an ``alerts`` row."""
    return Alert(
        id=row["id"],
        site_id=row["site_id"],
        jurisdiction=row["jurisdiction"],
        rule_id=row["rule_id"],
        finding_id=row["finding_id"],
        state=AlertState(row["state"]),
        severity=Severity(row["severity"]),
        level=row["level"],
        title=row["title"],
        action=row["action"],
        audience=tuple(json.loads(row["audience"])),
        citations=tuple(json.loads(row["citations"])),
        evidence=json.loads(row["evidence"]),
        opened_at=_req_dt(row["opened_at"]),
        updated_at=_req_dt(row["updated_at"]),
        finding_cleared_at=_dt(row["finding_cleared_at"]),
        acknowledged_at=_dt(row["acknowledged_at"]),
        acknowledged_by=row["acknowledged_by"],
        ack_note=row["ack_note"],
        resolved_at=_dt(row["resolved_at"]),
        resolved_by=row["resolved_by"],
        resolve_note=row["resolve_note"],
        assignee=row["assignee"],
        escalate_at=_dt(row["escalate_at"]),
        escalated_at=_dt(row["escalated_at"]),
        next_repeat_at=_dt(row["next_repeat_at"]),
        repeats=row["repeats"],
        flaps=row["flaps"],
    )


def notification_from_row(row: sqlite3.Row) -> Notification:
    """Map a ``notifications`` row."""
    return Notification(
        id=row["id"],
        alert_id=row["alert_id"],
        site_id=row["site_id"],
        audience=row["audience"],
        channel=row["channel"],
        recipient=row["recipient"],
        recipient_name=row["recipient_name"],
        reason=Reason(row["reason"]),
        severity=Severity(row["severity"]),
        created_at=_req_dt(row["created_at"]),
        not_before=_req_dt(row["not_before"]),
        status=NotificationStatus(row["status"]),
        attempts=row["attempts"],
        next_attempt_at=_dt(row["next_attempt_at"]),
        sent_at=_dt(row["sent_at"]),
        last_error=row["last_error"],
        units=row["units"],
    )


def attempt_from_row(row: sqlite3.Row) -> DeliveryAttempt:
    """Map a ``delivery_attempts`` row joined with its notification."""
    return DeliveryAttempt(
        id=row["id"],
        notification_id=row["notification_id"],
        attempt=row["attempt"],
        started_at=_req_dt(row["started_at"]),
        finished_at=_dt(row["finished_at"]),
        ok=None if row["ok"] is None else bool(row["ok"]),
        detail=row["detail"],
        alert_id=row["alert_id"],
        channel=row["channel"],
        recipient=row["recipient"],
    )


def get_alert(conn: sqlite3.Connection, alert_id: str) -> Alert | None:
    """One alert by id."""
    row = conn.execute("SELECT * FROM alerts WHERE id = ?", (alert_id,)).fetchone()
    return None if row is None else alert_from_row(row)


def query_alerts(conn: sqlite3.Connection, q: AlertQuery) -> list[Alert]:
    """Alerts matching the filters, newest first. ``since``/``until`` bound ``opened_at``."""
    where, args = [], []
    for column, value in (
        ("site_id", q.site_id),
        ("jurisdiction", q.jurisdiction),
        ("state", q.state.value if q.state else None),
        ("severity", q.severity.value if q.severity else None),
        ("rule_id", q.rule_id),
    ):
        if value is not None:
            where.append(f"{column} = ?")
            args.append(value)
    if q.since is not None:
        where.append("opened_at >= ?")
        args.append(ts(q.since))
    if q.until is not None:
        where.append("opened_at < ?")
        args.append(ts(q.until))
    sql = "SELECT * FROM alerts"
    if where:
        sql += " WHERE " + " AND ".join(where)
    sql += " ORDER BY opened_at DESC, id LIMIT ? OFFSET ?"
    rows = conn.execute(sql, (*args, q.limit, q.offset)).fetchall()
    return [alert_from_row(r) for r in rows]


def site_alerts(conn: sqlite3.Connection, site_id: str) -> list[Alert]:
    """The alerts of a site that are not resolved (for its retained MQTT state)."""
    rows = conn.execute(
        "SELECT * FROM alerts WHERE site_id = ? AND state != 'resolved' ORDER BY opened_at",
        (site_id,),
    ).fetchall()
    return [alert_from_row(r) for r in rows]


def update_alert(conn: sqlite3.Connection, alert_id: str, **fields: Any) -> None:
    """Set columns of one alert (values already in storage form)."""
    cols = ", ".join(f"{k} = ?" for k in fields)
    conn.execute(f"UPDATE alerts SET {cols} WHERE id = ?", (*fields.values(), alert_id))


def notifications_of(conn: sqlite3.Connection, alert_id: str) -> list[Notification]:
    """Every notification of an alert, oldest first."""
    rows = conn.execute(
        "SELECT * FROM notifications WHERE alert_id = ? ORDER BY created_at, id", (alert_id,)
    ).fetchall()
    return [notification_from_row(r) for r in rows]


def attempts(
    conn: sqlite3.Connection,
    *,
    alert_id: str | None = None,
    notification_id: str | None = None,
    limit: int = 500,
) -> list[DeliveryAttempt]:
    """Delivery attempts, newest first, optionally of one alert or notification."""
    sql = (
        "SELECT d.*, n.alert_id, n.channel, n.recipient FROM delivery_attempts d "
        "JOIN notifications n ON n.id = d.notification_id"
    )
    where, args = [], []
    if alert_id is not None:
        where.append("n.alert_id = ?")
        args.append(alert_id)
    if notification_id is not None:
        where.append("d.notification_id = ?")
        args.append(notification_id)
    if where:
        sql += " WHERE " + " AND ".join(where)
    sql += " ORDER BY d.id DESC LIMIT ?"
    return [attempt_from_row(r) for r in conn.execute(sql, (*args, limit)).fetchall()]
