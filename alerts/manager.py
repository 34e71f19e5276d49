"""The alert manager: findings in, durable notifications out.

Everything a finding event changes (the alert row and every notification it causes)
is written in ONE transaction before anything is sent: the ``notifications`` table is
the outbox. :meth:`AlertManager.run` then delivers due notifications with retries
(exponential backoff + jitter), repeats unacknowledged critical homeowner alerts and
escalates ordinance violations to public works after the pack's grace period.

Delivery is at-least-once: a row is marked ``sending`` (and an attempt recorded)
before the channel is called and ``sent`` after. A crash in between leaves it
``sending``; :meth:`open` puts it back to ``pending`` and it is sent again. Per
channel, docs/alerts.md says what a receiver sees in that window.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import sqlite3
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from alerts import outbox as store
from alerts.channels import Channel
from alerts.channels.apprise import AppriseChannel, redact
from alerts.channels.email import EmailChannel
from alerts.channels.mqtt import MqttChannel, Publisher, alerts_topic
from alerts.channels.webhook import WebhookChannel
from alerts.config import AlertsConfig
from alerts.models import (
    Alert,
    AlertQuery,
    AlertState,
    DeliveryAttempt,
    DeliveryResult,
    InvalidTransition,
    Notification,
    NotificationStatus,
    Reason,
)
from alerts.policy import (
    Target,
    backoff_delay,
    homeowner_targets,
    is_material,
    max_severity,
    public_works_targets,
    quiet_until,
)
from alerts.render import render, site_state
from gateway.domain import Audience, Finding, FindingChange, FindingEvent, Severity
from gateway.errors import NotFound
from gateway.registry.models import SiteRegistry
from gateway.state.database import SqliteDatabase

log = logging.getLogger(__name__)

GracePeriod = Callable[[str, str], timedelta | None]

SYSTEM = "system"
"""``resolved_by`` of an alert resolved because its finding cleared."""

_HUMAN_REASONS = (Reason.OPENED, Reason.RAISED, Reason.REPEAT, Reason.ESCALATED)


def _utcnow() -> datetime:
    return datetime.now(UTC)


def _new_id() -> str:
    return uuid.uuid4().hex


@dataclass(frozen=True, slots=True)
class _Claimed:
    notification: Notification
    attempt_id: int
    alert: Alert
    site_alerts: tuple[Alert, ...]


class AlertManager:
    """Raises alerts from findings, keeps their lifecycle and delivers notifications."""

    def __init__(
        self,
        *,
        db: SqliteDatabase,
        registry: SiteRegistry,
        config: AlertsConfig,
        mqtt: Publisher | None = None,
        clock: Callable[[], datetime] = _utcnow,
        grace_period: GracePeriod | None = None,
        channels: Mapping[str, Channel] | None = None,
    ) -> None:
        self.db = db
        self.registry = registry
        self.config = config
        self._clock = clock
        self._grace = grace_period
        self._mqtt = mqtt if config.mqtt.enabled else None
        self.channels: dict[str, Channel] = {
            "webhook": WebhookChannel(config.webhook),
            "apprise": AppriseChannel(),
        }
        if config.smtp is not None:
            self.channels["email"] = EmailChannel(config.smtp)
        if self._mqtt is not None:
            self.channels["mqtt"] = MqttChannel(self._mqtt, config.mqtt.qos)
        self.channels.update(channels or {})
        self._wake = asyncio.Event()
        self._in_flight: set[str] = set()

    # ------------------------------------------------------------------ lifecycle

    async def open(self) -> None:
        """Create the tables and requeue deliveries a crash left in ``sending``."""
        await self.db.migrate()
        now = store.ts(self._clock())

        def recover(conn: sqlite3.Connection) -> int:
            conn.execute(
                "UPDATE delivery_attempts SET finished_at = ?, ok = 0, "
                "detail = 'interrupted: outcome unknown, will retry' "
                "WHERE finished_at IS NULL",
                (now,),
            )
            cur = conn.execute(
                "UPDATE notifications SET status = 'pending', next_attempt_at = ? "
                "WHERE status = 'sending'",
                (now,),
            )
            return cur.rowcount

        requeued = await self.db.write(recover)
        if requeued:
            log.warning("alerts: %d deliveries interrupted by a restart will be retried", requeued)

    async def close(self) -> None:
        """Put deliveries cut short by cancellation back in the queue."""
        if not self._in_flight:
            return
        ids, self._in_flight = list(self._in_flight), set()
        now = store.ts(self._clock())

        def requeue(conn: sqlite3.Connection) -> None:
            conn.executemany(
                "UPDATE notifications SET status = 'pending', next_attempt_at = ? "
                "WHERE id = ? AND status = 'sending'",
                [(now, i) for i in ids],
            )
            conn.executemany(
                "UPDATE delivery_attempts SET finished_at = ?, ok = 0, "
                "detail = 'cancelled: outcome unknown, will retry' "
                "WHERE notification_id = ? AND finished_at IS NULL",
                [(now, i) for i in ids],
            )

        await self.db.write(requeue)

    # ------------------------------------------------------------------ events

    async def on_events(self, events: Sequence[FindingEvent]) -> None:
        """Apply finding events: open, update, resolve or re-open alerts, queue notifications."""
        if not events:
            return
        now = self._clock()
        grace = {
            (self._jurisdiction(e.finding.site_id), e.finding.rule_id): self._grace_for(
                self._jurisdiction(e.finding.site_id), e.finding.rule_id
            )
            for e in events
        }

        def apply(conn: sqlite3.Connection) -> None:
            for event in events:
                self._apply(conn, event, now, grace)

        await self.db.write(apply)
        self._wake.set()

    def _jurisdiction(self, site_id: str) -> str:
        site = self.registry.get(site_id)
        return site.jurisdiction if site is not None else ""

    def _grace_for(self, jurisdiction: str, rule_id: str) -> timedelta | None:
        return None if self._grace is None else self._grace(jurisdiction, rule_id)

    def _apply(
        self,
        conn: sqlite3.Connection,
        event: FindingEvent,
        now: datetime,
        grace: Mapping[tuple[str, str], timedelta | None],
    ) -> None:
        f = event.finding
        alert, notified = self._find(conn, f, now)
        if event.change is FindingChange.CLEARED:
            if alert is None:
                return
            if alert.state is AlertState.RESOLVED:
                if alert.finding_cleared_at is None:
                    store.update_alert(conn, alert.id, finding_cleared_at=store.ts(now))
                return
            self._resolve(
                conn, alert, now, by=SYSTEM, note="condition cleared", delay=self.config.flap_window
            )
            store.update_alert(conn, alert.id, finding_cleared_at=store.ts(f.cleared_at or now))
            return
        if alert is None:
            self._create(conn, f, now, grace)
            return
        self._follow(conn, alert, notified, f, now, grace)

    def _find(
        self, conn: sqlite3.Connection, f: Finding, now: datetime
    ) -> tuple[Alert | None, tuple[Severity, str]]:
        """The alert that follows this finding: the same finding, or the same (site, rule)
        still active or auto-resolved within the flap window."""
        flap_start = store.ts(now - self.config.flap_window)
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
                (f.site_id, f.rule_id, SYSTEM, flap_start),
            ).fetchone()
        if row is None:
            return None, (Severity.INFO, "")
        return store.alert_from_row(row), (
            Severity(row["notified_severity"]),
            row["notified_level"],
        )

    def _create(
        self,
        conn: sqlite3.Connection,
        f: Finding,
        now: datetime,
        grace: Mapping[tuple[str, str], timedelta | None],
    ) -> None:
        jurisdiction = self._jurisdiction(f.site_id)
        alert = Alert(
            id=_new_id(),
            site_id=f.site_id,
            jurisdiction=jurisdiction,
            rule_id=f.rule_id,
            finding_id=f.id,
            state=AlertState.OPEN,
            severity=f.severity,
            level=f.level,
            title=f.title,
            action=f.action,
            audience=tuple(a.value for a in f.audience),
            citations=_citations(f),
            evidence=dict(f.evidence),
            opened_at=now,
            updated_at=now,
        )
        conn.execute(
            "INSERT INTO alerts (id, site_id, jurisdiction, rule_id, finding_id, state, severity,"
            " level, notified_severity, notified_level, title, action, audience, citations,"
            " evidence, opened_at, updated_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                alert.id,
                alert.site_id,
                alert.jurisdiction,
                alert.rule_id,
                alert.finding_id,
                alert.state.value,
                alert.severity.value,
                alert.level,
                alert.severity.value,
                alert.level,
                alert.title,
                alert.action,
                json.dumps(list(alert.audience)),
                json.dumps(list(alert.citations)),
                _json(alert.evidence),
                store.ts(now),
                store.ts(now),
            ),
        )
        if Audience.HOMEOWNER.value in alert.audience:
            self._queue(conn, alert, self._homeowner(alert), Reason.OPENED, now)
            if alert.severity is Severity.CRITICAL:
                store.update_alert(
                    conn, alert.id, next_repeat_at=store.ts(now + self.config.repeat_interval)
                )
        if self._goes_to_public_works(alert):
            period = grace.get((jurisdiction, alert.rule_id))
            if period is None or period <= timedelta(0):
                self._escalate(conn, alert, now, Reason.OPENED)
            else:
                # The grace period runs from when the condition was first detected.
                start = min(f.opened_at, now)
                store.update_alert(conn, alert.id, escalate_at=store.ts(start + period))
        self._queue_state(conn, alert, now)

    def _follow(
        self,
        conn: sqlite3.Connection,
        alert: Alert,
        notified: tuple[Severity, str],
        f: Finding,
        now: datetime,
        grace: Mapping[tuple[str, str], timedelta | None],
    ) -> None:
        """An update or re-open of the finding an alert follows."""
        material = is_material(notified[0], notified[1], f.severity, f.level)
        fields: dict[str, Any] = {
            "finding_id": f.id,
            "severity": f.severity.value,
            "level": f.level,
            "title": f.title,
            "action": f.action,
            "evidence": _json(f.evidence),
            "audience": json.dumps([a.value for a in f.audience]),
            "citations": json.dumps(list(_citations(f))),
            "updated_at": store.ts(now),
        }
        state = alert.state
        reopened = False
        if state is AlertState.RESOLVED:
            flapped = alert.resolved_by == SYSTEM
            if not (flapped or material):
                # Resolved by hand while the finding is still open: stays resolved
                # unless it gets worse.
                store.update_alert(conn, alert.id, **fields)
                return
            reopened = True
            state = AlertState.ACKNOWLEDGED if alert.acknowledged_at else AlertState.OPEN
            fields.update(
                state=state.value,
                resolved_at=None,
                resolved_by=None,
                resolve_note=None,
                finding_cleared_at=None,
            )
            if flapped:
                fields["flaps"] = alert.flaps + 1
            self._undo_resolve(conn, alert)
        severity_changed = f.severity is not alert.severity or f.level != alert.level
        if material:
            fields["notified_severity"] = max_severity(notified[0], f.severity).value
            fields["notified_level"] = f.level
            if state is AlertState.ACKNOWLEDGED and f.severity is Severity.CRITICAL:
                # An acknowledgement covers what was acknowledged: worse than that
                # (now critical) needs a new one, and the reminders start again.
                state = AlertState.OPEN
                fields.update(
                    state=state.value, acknowledged_at=None, acknowledged_by=None, ack_note=None
                )
        store.update_alert(conn, alert.id, **fields)
        updated = replace(
            alert,
            state=state,
            severity=f.severity,
            level=f.level,
            title=f.title,
            action=f.action,
            evidence=dict(f.evidence),
            audience=tuple(a.value for a in f.audience),
            citations=_citations(f),
        )
        homeowner = Audience.HOMEOWNER.value in updated.audience
        if material:
            if homeowner:
                self._queue(conn, updated, self._homeowner(updated), Reason.RAISED, now)
            if alert.escalated_at is not None:
                self._queue(conn, updated, self._public_works(updated), Reason.RAISED, now)
        if (
            homeowner
            and state is AlertState.OPEN
            and updated.severity is Severity.CRITICAL
            and (alert.next_repeat_at is None or material)
        ):
            store.update_alert(
                conn, alert.id, next_repeat_at=store.ts(now + self.config.repeat_interval)
            )
        if (
            self._goes_to_public_works(updated)
            and alert.escalate_at is None
            and alert.escalated_at is None
        ):
            period = grace.get((alert.jurisdiction, alert.rule_id))
            if period is None or period <= timedelta(0):
                self._escalate(conn, updated, now, Reason.OPENED)
            else:
                store.update_alert(
                    conn, alert.id, escalate_at=store.ts(min(f.opened_at, now) + period)
                )
        if material or reopened or severity_changed:
            self._queue_state(conn, updated, now)

    @staticmethod
    def _goes_to_public_works(alert: Alert) -> bool:
        """Only ordinance violations (with a citation) addressed to public works."""
        return alert.is_ordinance and Audience.PUBLIC_WORKS.value in alert.audience

    def _escalate(
        self, conn: sqlite3.Connection, alert: Alert, now: datetime, reason: Reason
    ) -> None:
        routing = self.config.jurisdiction(alert.jurisdiction)
        fields: dict[str, Any] = {"escalated_at": store.ts(now)}
        if alert.assignee is None and routing.default_assignee:
            fields["assignee"] = routing.default_assignee
        store.update_alert(conn, alert.id, **fields)
        self._queue(conn, alert, self._public_works(alert), reason, now)

    def _homeowner(self, alert: Alert) -> list[Target]:
        site = self.registry.get(alert.site_id)
        return homeowner_targets(site.contacts) if site is not None else []

    def _public_works(self, alert: Alert) -> list[Target]:
        routing = self.config.jurisdiction(alert.jurisdiction)
        return public_works_targets(routing, alert.rule_id, alert.severity)

    def _queue(
        self,
        conn: sqlite3.Connection,
        alert: Alert,
        targets: Iterable[Target],
        reason: Reason,
        now: datetime,
        delay: timedelta = timedelta(0),
    ) -> None:
        """Write notifications (the outbox) in the caller's transaction."""
        site = self.registry.get(alert.site_id)
        rows = []
        for t in targets:
            not_before = now + delay
            if alert.severity is not Severity.CRITICAL and site is not None:
                # Quiet hours hold back non-critical messages only.
                until = quiet_until(not_before, t.quiet_hours, site.tz)
                if until is not None:
                    not_before = until
            rows.append(
                (
                    _new_id(),
                    alert.id,
                    alert.site_id,
                    t.audience,
                    t.channel,
                    t.recipient,
                    t.name,
                    t.units,
                    reason.value,
                    alert.severity.value,
                    store.ts(now),
                    store.ts(not_before),
                    NotificationStatus.PENDING.value,
                    store.ts(not_before),
                )
            )
        conn.executemany(
            "INSERT INTO notifications (id, alert_id, site_id, audience, channel, recipient,"
            " recipient_name, units, reason, severity, created_at, not_before, status,"
            " next_attempt_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )

    def _queue_state(self, conn: sqlite3.Connection, alert: Alert, now: datetime) -> None:
        """Queue a retained-state publish for the alert's site (coalesced per site)."""
        if self._mqtt is None:
            return
        topic = alerts_topic(self.config.mqtt.topic_prefix, alert.site_id)
        pending = conn.execute(
            "SELECT 1 FROM notifications WHERE channel = 'mqtt' AND recipient = ?"
            " AND status = 'pending' AND attempts = 0",
            (topic,),
        ).fetchone()
        if pending is not None:
            return  # an unsent publish renders the site's state at send time anyway
        target = Target("site", "mqtt", topic, alert.site_id)
        self._queue(conn, alert, [target], Reason.STATE, now)

    def _resolve(
        self,
        conn: sqlite3.Connection,
        alert: Alert,
        now: datetime,
        *,
        by: str,
        note: str | None,
        delay: timedelta = timedelta(0),
    ) -> None:
        store.update_alert(
            conn,
            alert.id,
            state=AlertState.RESOLVED.value,
            resolved_at=store.ts(now),
            resolved_by=by,
            resolve_note=note,
            next_repeat_at=None,
            updated_at=store.ts(now),
            # escalate_at is kept: a violation that flaps back keeps its original deadline.
        )
        # Messages not yet out are moot now; remember when, so a re-open can revive them.
        conn.execute(
            "UPDATE notifications SET status = 'cancelled', cancelled_at = ?,"
            " last_error = 'alert resolved before delivery'"
            " WHERE alert_id = ? AND status = 'pending' AND reason IN (?, ?, ?, ?)",
            (store.ts(now), alert.id, *(r.value for r in _HUMAN_REASONS)),
        )
        # Tell whoever was told (or may have been: 'sending' or tried).
        told = conn.execute(
            "SELECT DISTINCT audience, channel, recipient, recipient_name, units"
            " FROM notifications WHERE alert_id = ? AND channel != 'mqtt' AND reason != ?"
            " AND (status IN ('sent', 'sending') OR attempts > 0)",
            (alert.id, Reason.RESOLVED.value),
        ).fetchall()
        targets = [
            Target(r["audience"], r["channel"], r["recipient"], r["recipient_name"], r["units"])
            for r in told
        ]
        resolved = replace(alert, state=AlertState.RESOLVED)
        self._queue(conn, resolved, targets, Reason.RESOLVED, now, delay)
        self._queue_state(conn, resolved, now)

    def _undo_resolve(self, conn: sqlite3.Connection, alert: Alert) -> None:
        """A flap: drop the pending 'resolved' messages, revive what the resolve cancelled."""
        conn.execute(
            "UPDATE notifications SET status = 'cancelled', last_error = 'alert re-opened'"
            " WHERE alert_id = ? AND reason = ? AND status = 'pending'",
            (alert.id, Reason.RESOLVED.value),
        )
        if alert.resolved_at is not None:
            conn.execute(
                "UPDATE notifications SET status = 'pending', cancelled_at = NULL,"
                " last_error = NULL WHERE alert_id = ? AND status = 'cancelled'"
                " AND cancelled_at = ?",
                (alert.id, store.ts(alert.resolved_at)),
            )

    # ------------------------------------------------------------------ operator actions

    async def acknowledge(self, alert_id: str, *, by: str, note: str | None = None) -> Alert:
        """open -> acknowledged: stops the reminders (not the escalation)."""
        now = self._clock()

        def run(conn: sqlite3.Connection) -> Alert:
            alert = self._require(conn, alert_id)
            if alert.state is not AlertState.OPEN:
                raise InvalidTransition(f"alert {alert_id} is {alert.state}, not open")
            store.update_alert(
                conn,
                alert_id,
                state=AlertState.ACKNOWLEDGED.value,
                acknowledged_at=store.ts(now),
                acknowledged_by=by,
                ack_note=note,
                next_repeat_at=None,
                updated_at=store.ts(now),
            )
            conn.execute(
                "UPDATE notifications SET status = 'cancelled', cancelled_at = ?,"
                " last_error = 'acknowledged before delivery'"
                " WHERE alert_id = ? AND status = 'pending' AND reason = ?",
                (store.ts(now), alert_id, Reason.REPEAT.value),
            )
            updated = self._require(conn, alert_id)
            self._queue_state(conn, updated, now)
            return updated

        return await self._write(run)

    async def assign(self, alert_id: str, *, assignee: str | None) -> Alert:
        """Set (or clear) who at public works handles the alert."""
        now = self._clock()

        def run(conn: sqlite3.Connection) -> Alert:
            self._require(conn, alert_id)
            store.update_alert(conn, alert_id, assignee=assignee, updated_at=store.ts(now))
            return self._require(conn, alert_id)

        return await self._write(run)

    async def resolve(self, alert_id: str, *, by: str, note: str | None = None) -> Alert:
        """Resolve by hand (with a note); the people already told are told it is resolved."""
        now = self._clock()

        def run(conn: sqlite3.Connection) -> Alert:
            alert = self._require(conn, alert_id)
            if alert.state is AlertState.RESOLVED:
                raise InvalidTransition(f"alert {alert_id} is already resolved")
            self._resolve(conn, alert, now, by=by, note=note)
            return self._require(conn, alert_id)

        return await self._write(run)

    async def _write(self, fn: Callable[[sqlite3.Connection], Alert]) -> Alert:
        alert = await self.db.write(fn)
        self._wake.set()
        return alert

    @staticmethod
    def _require(conn: sqlite3.Connection, alert_id: str) -> Alert:
        alert = store.get_alert(conn, alert_id)
        if alert is None:
            raise NotFound(f"no alert with id {alert_id!r}")
        return alert

    # ------------------------------------------------------------------ queries

    async def get(self, alert_id: str) -> Alert:
        """One alert, or NotFound."""
        return await self.db.read(lambda conn: self._require(conn, alert_id))

    async def list_alerts(self, query: AlertQuery = AlertQuery()) -> list[Alert]:
        """Alerts matching the filters, newest first."""
        return await self.db.read(lambda conn: store.query_alerts(conn, query))

    async def notifications(self, alert_id: str) -> list[Notification]:
        """The notifications of an alert (with their outbox status), oldest first."""
        return await self.db.read(lambda conn: store.notifications_of(conn, alert_id))

    async def deliveries(
        self, *, alert_id: str | None = None, limit: int = 500
    ) -> list[DeliveryAttempt]:
        """The delivery log (attempts and results), newest first; Apprise URLs redacted."""
        rows = await self.db.read(lambda conn: store.attempts(conn, alert_id=alert_id, limit=limit))
        return [
            replace(a, recipient=redact(a.recipient)) if a.channel == "apprise" else a for a in rows
        ]

    # ------------------------------------------------------------------ the loop

    async def run(self) -> None:
        """Deliver, repeat and escalate until cancelled."""
        while True:
            try:
                await self.run_once()
            except asyncio.CancelledError:
                raise
            except Exception:
                # One bad pass (e.g. the database briefly locked) must not stop alerting.
                log.exception("alerts: delivery pass failed; retrying")
            self._wake.clear()
            # asyncio.timeout, not wait_for: on Python 3.11 wait_for around an
            # Event.wait() can swallow the cancellation that stops this loop.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.config.poll_interval_s):
                    await self._wake.wait()

    async def run_once(self) -> int:
        """One pass: due escalations and reminders, then due deliveries. Returns sends made."""
        now = self._clock()
        await self.db.write(lambda conn: self._due_escalations_and_repeats(conn, now))
        claimed = await self.db.write(lambda conn: self._claim(conn, now))
        if not claimed:
            return 0
        limit = asyncio.Semaphore(self.config.max_concurrent_sends)

        async def deliver(item: _Claimed) -> None:
            async with limit:
                result = await self._send(item)
            await self.db.write(lambda conn: self._record(conn, item, result))
            self._in_flight.discard(item.notification.id)

        await asyncio.gather(*(deliver(c) for c in claimed))
        return len(claimed)

    def _due_escalations_and_repeats(self, conn: sqlite3.Connection, now: datetime) -> None:
        stamp = store.ts(now)
        for row in conn.execute(
            "SELECT * FROM alerts WHERE state != 'resolved' AND escalated_at IS NULL"
            " AND escalate_at IS NOT NULL AND escalate_at <= ?",
            (stamp,),
        ).fetchall():
            alert = store.alert_from_row(row)
            self._escalate(conn, alert, now, Reason.ESCALATED)
            self._queue_state(conn, alert, now)
        for row in conn.execute(
            "SELECT * FROM alerts WHERE state = 'open' AND next_repeat_at IS NOT NULL"
            " AND next_repeat_at <= ?",
            (stamp,),
        ).fetchall():
            alert = store.alert_from_row(row)
            if alert.severity is not Severity.CRITICAL:
                store.update_alert(conn, alert.id, next_repeat_at=None)
                continue
            self._queue(conn, alert, self._homeowner(alert), Reason.REPEAT, now)
            repeats = alert.repeats + 1
            more = self.config.repeat_max is None or repeats < self.config.repeat_max
            store.update_alert(
                conn,
                alert.id,
                repeats=repeats,
                next_repeat_at=store.ts(now + self.config.repeat_interval) if more else None,
            )

    def _claim(self, conn: sqlite3.Connection, now: datetime) -> list[_Claimed]:
        """Mark due notifications 'sending' and open an attempt for each (before sending)."""
        stamp = store.ts(now)
        rows = conn.execute(
            "SELECT * FROM notifications WHERE status = 'pending' AND next_attempt_at <= ?"
            " ORDER BY next_attempt_at LIMIT ?",
            (stamp, self.config.max_concurrent_sends * 4),
        ).fetchall()
        claimed = []
        site_cache: dict[str, tuple[Alert, ...]] = {}
        for row in rows:
            n = store.notification_from_row(row)
            attempt = n.attempts + 1
            conn.execute(
                "UPDATE notifications SET status = 'sending', attempts = ? WHERE id = ?",
                (attempt, n.id),
            )
            cur = conn.execute(
                "INSERT INTO delivery_attempts (notification_id, attempt, started_at)"
                " VALUES (?, ?, ?)",
                (n.id, attempt, stamp),
            )
            alert = self._require(conn, n.alert_id)
            if n.channel == "mqtt" and n.site_id not in site_cache:
                site_cache[n.site_id] = tuple(store.site_alerts(conn, n.site_id))
            claimed.append(
                _Claimed(
                    replace(n, status=NotificationStatus.SENDING, attempts=attempt),
                    int(cur.lastrowid or 0),
                    alert,
                    site_cache.get(n.site_id, ()),
                )
            )
            self._in_flight.add(n.id)
        return claimed

    async def _send(self, item: _Claimed) -> DeliveryResult:
        n = item.notification
        channel = self.channels.get(n.channel)
        if channel is None:
            return DeliveryResult(False, f"channel {n.channel!r} is not configured", permanent=True)
        now = self._clock()
        message = render(
            item.alert, n, self.registry.get(n.site_id), public_url=self.config.public_url, now=now
        )
        if n.channel == "mqtt":
            message = replace(message, payload=site_state(n.site_id, item.site_alerts, now))
        try:
            async with asyncio.timeout(self.config.send_timeout_s):
                return await channel.send(message)
        except TimeoutError:
            return DeliveryResult(False, f"timed out after {self.config.send_timeout_s:g} s")
        except Exception as exc:
            # A channel bug must not kill the loop; it is recorded and retried.
            log.exception("alerts: channel %s raised", n.channel)
            return DeliveryResult(False, f"channel error: {exc!r}")

    def _record(self, conn: sqlite3.Connection, item: _Claimed, result: DeliveryResult) -> None:
        now = self._clock()
        n = item.notification
        conn.execute(
            "UPDATE delivery_attempts SET finished_at = ?, ok = ?, detail = ? WHERE id = ?",
            (store.ts(now), int(result.ok), result.detail, item.attempt_id),
        )
        if result.ok:
            conn.execute(
                "UPDATE notifications SET status = 'sent', sent_at = ?, last_error = NULL"
                " WHERE id = ?",
                (store.ts(now), n.id),
            )
        elif result.permanent or n.attempts >= self.config.retry.max_attempts:
            conn.execute(
                "UPDATE notifications SET status = 'failed', last_error = ? WHERE id = ?",
                (result.detail, n.id),
            )
        else:
            retry_at = now + backoff_delay(n.attempts, self.config.retry)
            conn.execute(
                "UPDATE notifications SET status = 'pending', next_attempt_at = ?,"
                " last_error = ? WHERE id = ?",
                (store.ts(retry_at), result.detail, n.id),
            )


def _citations(f: Finding) -> tuple[dict[str, str], ...]:
    return tuple({"file": c.file, "section": c.section, "quote": c.quote} for c in f.citations)


def _json(value: Mapping[str, Any]) -> str:
    return json.dumps(dict(value), default=str, sort_keys=True)
