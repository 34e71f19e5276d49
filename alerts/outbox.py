"""The alert outbox in the state database: every SQL statement of the alerts package.

Row mapping, queries and writes as plain functions of a ``Connection`` (either backend's), so
the manager composes them inside one transaction (a finding event's alert change
and every notification it causes commit together: the ``notifications`` table is
the outbox). The tables come from the state migrations (gateway/state/migrations).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from alerts.lifecycle import SYSTEM, AlertHistoryRow, HistoryEntry, Notified, Step, Tracked
from alerts.models import (
    Alert,
    AlertQuery,
    AlertState,
    DeliveryAttempt,
    Notification,
    NotificationStatus,
    Reason,
)
from alerts.policy import Target
from gateway.domain import Finding, Severity
from gateway.state.database import Connection, Row

#: How long a claimed notification stays with its claimer before another gateway
#: may take it back (the alert config's send timeout is far shorter).
CLAIM_LEASE = timedelta(minutes=10)


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


def alert_from_row(row: Row) -> Alert:
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
        clock_started_at=_dt(row["clock_started_at"]),
    )


def notification_from_row(row: Row) -> Notification:
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


def attempt_from_row(row: Row) -> DeliveryAttempt:
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


def get_alert(conn: Connection, alert_id: str, *, for_update: bool = False) -> Alert | None:
    """One alert by id (``for_update``, PostgreSQL: locked until the transaction ends)."""
    lock = " FOR UPDATE" if for_update else ""
    row = conn.execute(f"SELECT * FROM alerts WHERE id = ?{lock}", (alert_id,)).fetchone()
    return None if row is None else alert_from_row(row)


def query_alerts(conn: Connection, q: AlertQuery) -> list[Alert]:
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


def site_alerts(conn: Connection, site_id: str) -> list[Alert]:
    """The alerts of a site that are not resolved (for its retained MQTT state)."""
    rows = conn.execute(
        "SELECT * FROM alerts WHERE site_id = ? AND state != 'resolved' ORDER BY opened_at",
        (site_id,),
    ).fetchall()
    return [alert_from_row(r) for r in rows]


def notifications_of(conn: Connection, alert_id: str) -> list[Notification]:
    """Every notification of an alert, oldest first."""
    rows = conn.execute(
        "SELECT * FROM notifications WHERE alert_id = ? ORDER BY created_at, id", (alert_id,)
    ).fetchall()
    return [notification_from_row(r) for r in rows]


def recent_notifications(conn: Connection, limit: int) -> list[Notification]:
    """The newest notifications of every alert (the local outbox an admin reads)."""
    rows = conn.execute(
        "SELECT * FROM notifications ORDER BY created_at DESC, id LIMIT ?", (limit,)
    ).fetchall()
    return [notification_from_row(r) for r in rows]


def attempts(
    conn: Connection,
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


def record_history(
    conn: Connection, alert_id: str, entries: Sequence[HistoryEntry], now: datetime
) -> None:
    """Append the steps of one decision to the alert's history."""
    conn.executemany(
        "INSERT INTO alert_history (alert_id, at, step, actor, note, condition_persisted)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        [(alert_id, ts(now), e.step.value, e.actor, e.note, int(e.condition_persisted))
         for e in entries],
    )  # fmt: skip


def history_of(conn: Connection, alert_ids: Sequence[str]) -> list[AlertHistoryRow]:
    """The history of these alerts, oldest first."""
    if not alert_ids:
        return []
    marks = ",".join("?" * len(alert_ids))
    rows = conn.execute(
        f"SELECT * FROM alert_history WHERE alert_id IN ({marks}) ORDER BY id", tuple(alert_ids)
    ).fetchall()
    return [
        AlertHistoryRow(
            alert_id=r["alert_id"],
            at=_req_dt(r["at"]),
            entry=HistoryEntry(
                Step(r["step"]), r["actor"], r["note"], bool(r["condition_persisted"])
            ),
        )
        for r in rows
    ]


# -- the alert row ---------------------------------------------------------------------

_ALERT_COLUMNS = (
    "id", "site_id", "jurisdiction", "rule_id", "finding_id", "state", "severity", "level",
    "notified_severity", "notified_level", "title", "action", "audience", "citations",
    "evidence", "opened_at", "updated_at", "finding_cleared_at", "acknowledged_at",
    "acknowledged_by", "ack_note", "resolved_at", "resolved_by", "resolve_note", "assignee",
    "escalate_at", "escalated_at", "next_repeat_at", "repeats", "flaps", "clock_started_at",
)  # fmt: skip


def _json(value: Mapping[str, Any]) -> str:
    return json.dumps(dict(value), default=str, sort_keys=True)


def _alert_values(a: Alert, notified: Notified) -> tuple[Any, ...]:
    return (
        a.id, a.site_id, a.jurisdiction, a.rule_id, a.finding_id, a.state.value,
        a.severity.value, a.level, notified.severity.value, notified.level, a.title, a.action,
        json.dumps(list(a.audience)), json.dumps(list(a.citations)), _json(a.evidence),
        ts(a.opened_at), ts(a.updated_at), opt_ts(a.finding_cleared_at),
        opt_ts(a.acknowledged_at), a.acknowledged_by, a.ack_note, opt_ts(a.resolved_at),
        a.resolved_by, a.resolve_note, a.assignee, opt_ts(a.escalate_at),
        opt_ts(a.escalated_at), opt_ts(a.next_repeat_at), a.repeats, a.flaps,
        opt_ts(a.clock_started_at),
    )  # fmt: skip


def notified_of(conn: Connection, alert_id: str) -> Notified:
    """What was notified of a stored alert."""
    row = conn.execute(
        "SELECT notified_severity, notified_level FROM alerts WHERE id = ?", (alert_id,)
    ).fetchone()
    return Notified(Severity(row[0]), row[1])


def save_alert(conn: Connection, alert: Alert, notified: Notified | None) -> None:
    """Insert or rewrite an alert row (``notified`` None: keep the stored one)."""
    if notified is None:
        notified = notified_of(conn, alert.id)
    updates = ", ".join(f"{c} = excluded.{c}" for c in _ALERT_COLUMNS[1:])
    conn.execute(
        f"INSERT INTO alerts ({', '.join(_ALERT_COLUMNS)})"
        f" VALUES ({', '.join('?' * len(_ALERT_COLUMNS))})"
        f" ON CONFLICT (id) DO UPDATE SET {updates}",
        _alert_values(alert, notified),
    )


def following(conn: Connection, f: Finding, flap_start: datetime) -> Tracked | None:
    """The alert that follows this finding: the same finding, or the same (site, rule)
    still active or auto-resolved since ``flap_start``."""
    # The same finding instance, while it has not cleared (finding ids may be
    # reused by a later instance; that one goes through the flap-window match).
    row = conn.execute(
        "SELECT * FROM alerts WHERE finding_id = ? AND finding_cleared_at IS NULL"
        " ORDER BY opened_at DESC LIMIT 1",
        (f.id,),
    ).fetchone()
    if row is None:
        row = conn.execute(
            "SELECT * FROM alerts WHERE site_id = ? AND rule_id = ? AND ("
            " state != 'resolved' OR (resolved_by = ? AND resolved_at >= ?))"
            " ORDER BY opened_at DESC LIMIT 1",
            (f.site_id, f.rule_id, SYSTEM, ts(flap_start)),
        ).fetchone()
    if row is None:
        return None
    notified = Notified(Severity(row["notified_severity"]), row["notified_level"])
    return Tracked(alert_from_row(row), notified)


def episode_starts(conn: Connection, site_id: str, rule_id: str, since: datetime) -> list[datetime]:
    """When earlier ordinance episodes of a rule at a site started their clocks
    (alerts opened since ``since``; an alert from before migration 3 counts from
    its opening)."""
    rows = conn.execute(
        "SELECT COALESCE(clock_started_at, opened_at) FROM alerts"
        " WHERE site_id = ? AND rule_id = ? AND citations != '[]' AND opened_at >= ?",
        (site_id, rule_id, ts(since)),
    ).fetchall()
    return [_req_dt(r[0]) for r in rows]


#: Rows a gateway sharing the state (PostgreSQL) takes to act on: another gateway
#: acting at the same moment passes over them (and sees them done once committed).
SKIP_LOCKED = " FOR UPDATE SKIP LOCKED"


def due_escalations(conn: Connection, now: datetime, *, skip_locked: bool = False) -> list[Alert]:
    """Unresolved alerts whose escalation deadline has passed (``skip_locked``: as in
    :func:`claim`, so two gateways never escalate one alert twice)."""
    rows = conn.execute(
        "SELECT * FROM alerts WHERE state != 'resolved' AND escalated_at IS NULL"
        " AND escalate_at IS NOT NULL AND escalate_at <= ?" + (SKIP_LOCKED if skip_locked else ""),
        (ts(now),),
    ).fetchall()
    return [alert_from_row(r) for r in rows]


def due_repeats(conn: Connection, now: datetime, *, skip_locked: bool = False) -> list[Alert]:
    """Open alerts whose reminder is due, and alerts resolved by hand whose condition
    is still detected (they re-open: alerts.lifecycle.repeat_due); ``skip_locked`` as
    in :func:`due_escalations`."""
    rows = conn.execute(
        "SELECT * FROM alerts WHERE next_repeat_at IS NOT NULL AND next_repeat_at <= ?"
        " AND (state = 'open' OR (state = 'resolved' AND finding_cleared_at IS NULL"
        " AND resolved_by IS NOT NULL AND resolved_by != ?))"
        + (SKIP_LOCKED if skip_locked else ""),
        (ts(now), SYSTEM),
    ).fetchall()
    return [alert_from_row(r) for r in rows]


# -- notifications (the outbox) ----------------------------------------------------------


def queue(
    conn: Connection,
    alert: Alert,
    rows: Iterable[tuple[str, Target, Reason, datetime]],
    now: datetime,
) -> None:
    """Insert notifications ``(id, target, reason, not_before)`` of ``alert``."""
    conn.executemany(
        "INSERT INTO notifications (id, alert_id, site_id, audience, channel, recipient,"
        " recipient_name, units, reason, severity, created_at, not_before, status,"
        " next_attempt_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (nid, alert.id, alert.site_id, t.audience, t.channel, t.recipient, t.name, t.units,
             reason.value, alert.severity.value, ts(now), ts(not_before),
             NotificationStatus.PENDING.value, ts(not_before))
            for nid, t, reason, not_before in rows
        ],
    )  # fmt: skip


def cancel_pending(
    conn: Connection, alert_id: str, reasons: Sequence[Reason], why: str, now: datetime
) -> None:
    """Cancel an alert's pending notifications for ``reasons``, remembering when (so a
    re-open can revive exactly those)."""
    marks = ",".join("?" * len(reasons))
    conn.execute(
        "UPDATE notifications SET status = 'cancelled', cancelled_at = ?, last_error = ?"
        f" WHERE alert_id = ? AND status = 'pending' AND reason IN ({marks})",
        (ts(now), why, alert_id, *(r.value for r in reasons)),
    )


def undo_resolve(conn: Connection, alert_id: str, resolved_at: datetime | None) -> None:
    """A flap: drop the pending 'resolved' messages, revive what the resolve cancelled."""
    conn.execute(
        "UPDATE notifications SET status = 'cancelled', last_error = 'alert re-opened'"
        " WHERE alert_id = ? AND reason = ? AND status = 'pending'",
        (alert_id, Reason.RESOLVED.value),
    )
    if resolved_at is not None:
        conn.execute(
            "UPDATE notifications SET status = 'pending', cancelled_at = NULL,"
            " last_error = NULL WHERE alert_id = ? AND status = 'cancelled'"
            " AND cancelled_at = ?",
            (alert_id, ts(resolved_at)),
        )


def told(conn: Connection, alert_id: str) -> list[Target]:
    """Whoever was told of an alert (or may have been: 'sending' or tried), MQTT aside."""
    rows = conn.execute(
        "SELECT DISTINCT audience, channel, recipient, recipient_name, units"
        " FROM notifications WHERE alert_id = ? AND channel != 'mqtt' AND reason != ?"
        " AND (status IN ('sent', 'sending') OR attempts > 0)",
        (alert_id, Reason.RESOLVED.value),
    ).fetchall()
    return [
        Target(r["audience"], r["channel"], r["recipient"], r["recipient_name"], r["units"])
        for r in rows
    ]


def state_publish_pending(conn: Connection, topic: str) -> bool:
    """True when an unsent retained-state publish for ``topic`` is already queued."""
    row = conn.execute(
        "SELECT 1 FROM notifications WHERE channel = 'mqtt' AND recipient = ?"
        " AND status = 'pending' AND attempts = 0",
        (topic,),
    ).fetchone()
    return row is not None


# -- delivery bookkeeping ----------------------------------------------------------------


def recover_interrupted(
    conn: Connection, now: datetime, *, owner: str | None = None, skip_locked: bool = False
) -> int:
    """After a crash: close open attempts and put 'sending' rows back to 'pending'.

    ``owner`` None: every such row (a lone gateway). With gateways sharing the outbox,
    only rows whose claim has run out (``next_attempt_at``, see :func:`claim`) or
    that ``owner`` claimed (its open attempt says so); the others are in flight at
    a gateway that is alive. ``owner=""``: expired claims only. ``skip_locked`` (as
    in :func:`claim`): rows another gateway is claiming or recovering are left to it."""
    args: tuple[str, ...] = ()
    sending = "status = 'sending'"
    if owner is not None:
        sending += (
            " AND (next_attempt_at < ? OR id IN (SELECT notification_id FROM delivery_attempts"
            " WHERE finished_at IS NULL AND detail = ?))"
        )
        args = (ts(now), _claimed_by(owner))
    # Chosen first: closing the attempts below changes what the condition sees.
    lock = SKIP_LOCKED if skip_locked else ""
    rows = conn.execute(f"SELECT id FROM notifications WHERE {sending}{lock}", args)
    ids = [r[0] for r in rows]
    conn.executemany(
        "UPDATE delivery_attempts SET finished_at = ?, ok = 0, "
        "detail = 'interrupted: outcome unknown, will retry' "
        "WHERE finished_at IS NULL AND notification_id = ?",
        [(ts(now), i) for i in ids],
    )
    conn.executemany(
        "UPDATE notifications SET status = 'pending', next_attempt_at = ? WHERE id = ?",
        [(ts(now), i) for i in ids],
    )
    return len(ids)


def _claimed_by(owner: str) -> str:
    """An open attempt's detail: who holds the claim (replaced by the outcome)."""
    return f"claimed by {owner}"


def requeue(conn: Connection, ids: Sequence[str], now: datetime) -> None:
    """Put deliveries cut short by cancellation back in the queue."""
    conn.executemany(
        "UPDATE notifications SET status = 'pending', next_attempt_at = ? "
        "WHERE id = ? AND status = 'sending'",
        [(ts(now), i) for i in ids],
    )
    conn.executemany(
        "UPDATE delivery_attempts SET finished_at = ?, ok = 0, "
        "detail = 'cancelled: outcome unknown, will retry' "
        "WHERE notification_id = ? AND finished_at IS NULL",
        [(ts(now), i) for i in ids],
    )


def claim(
    conn: Connection,
    now: datetime,
    limit: int,
    *,
    skip_locked: bool = False,
    lease: timedelta = CLAIM_LEASE,
    owner: str = "gateway",
) -> list[tuple[Notification, int]]:
    """Mark due notifications 'sending' and open an attempt for each (before sending).

    On SQLite the write transaction already excludes every other claimer. On
    PostgreSQL (``skip_locked``) gateways on several hosts claim at once: each locks
    the rows it takes and passes over rows another holds, so every notification is
    claimed (and sent) by one gateway, and none waits for another's batch.

    A 'sending' row's ``next_attempt_at`` is when its claim runs out (``now + lease``,
    longer than any send may take): past it, the claimer is presumed dead and any
    gateway may put the row back (:func:`recover_interrupted`). The open attempt
    names ``owner``, so the same gateway restarted takes its own claims back at once."""
    stamp = ts(now)
    rows = conn.execute(
        "SELECT * FROM notifications WHERE status = 'pending' AND next_attempt_at <= ?"
        " ORDER BY next_attempt_at LIMIT ?" + (SKIP_LOCKED if skip_locked else ""),
        (stamp, limit),
    ).fetchall()
    claimed = []
    for row in rows:
        n = notification_from_row(row)
        attempt = n.attempts + 1
        conn.execute(
            "UPDATE notifications SET status = 'sending', attempts = ?, next_attempt_at = ?"
            " WHERE id = ?",
            (attempt, ts(now + lease), n.id),
        )
        opened = conn.execute(
            "INSERT INTO delivery_attempts (notification_id, attempt, started_at, detail)"
            " VALUES (?, ?, ?, ?) RETURNING id",
            (n.id, attempt, stamp, _claimed_by(owner)),
        ).fetchone()
        sending = replace(n, status=NotificationStatus.SENDING, attempts=attempt)
        claimed.append((sending, int(opened[0])))
    return claimed


def record_attempt(
    conn: Connection,
    notification_id: str,
    attempt_id: int,
    *,
    ok: bool,
    detail: str,
    now: datetime,
    retry_at: datetime | None,
) -> None:
    """Close an attempt: sent, retried at ``retry_at``, or failed for good (None)."""
    conn.execute(
        "UPDATE delivery_attempts SET finished_at = ?, ok = ?, detail = ? WHERE id = ?",
        (ts(now), int(ok), detail, attempt_id),
    )
    if ok:
        conn.execute(
            "UPDATE notifications SET status = 'sent', sent_at = ?, last_error = NULL WHERE id = ?",
            (ts(now), notification_id),
        )
    elif retry_at is None:
        conn.execute(
            "UPDATE notifications SET status = 'failed', last_error = ? WHERE id = ?",
            (detail, notification_id),
        )
    else:
        conn.execute(
            "UPDATE notifications SET status = 'pending', next_attempt_at = ?,"
            " last_error = ? WHERE id = ?",
            (ts(retry_at), detail, notification_id),
        )
