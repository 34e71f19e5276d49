"""The alert manager: findings in, durable notifications out.

Three parts, each in its own module:

* :mod:`alerts.lifecycle` decides (pure): what an event does to an alert and which
  notifications it causes;
* :mod:`alerts.outbox` stores (all SQL): the decision and every notification it
  causes are written in ONE transaction before anything is sent;
* :mod:`alerts.delivery` sends: due notifications with retries (backoff + jitter).

This class ties them together: it looks up what a decision needs (the site, the
routing, the grace period, earlier episodes of the violation), turns audiences into
recipients (quiet hours held back for non-critical messages), and runs the loop
that also repeats unacknowledged critical alerts and escalates violations.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from alerts import lifecycle, outbox
from alerts.channels import Channel
from alerts.channels.apprise import AppriseChannel, redact
from alerts.channels.email import EmailChannel
from alerts.channels.mqtt import MqttChannel, Publisher, alerts_topic
from alerts.channels.webhook import WebhookChannel
from alerts.config import AlertsConfig
from alerts.delivery import Delivery
from alerts.lifecycle import AlertHistoryRow, Decision, Escalation, Policy, To
from alerts.models import Alert, AlertQuery, DeliveryAttempt, Notification, Reason
from alerts.policy import (
    DEFAULT_SEASON_START,
    Target,
    compliance_clock_start,
    homeowner_targets,
    public_works_targets,
    quiet_until,
)
from alerts.render import render
from alerts.sites import Sites
from gateway.domain import Audience, FindingEvent, Severity
from gateway.errors import NotFound
from gateway.state.database import Connection, Database

log = logging.getLogger(__name__)

GracePeriod = Callable[[str, str], timedelta | None]
SeasonStart = Callable[[str], tuple[int, int]]
#: (site id, rule id) -> when the open case of that violation was ordered, if it was.
OrderDate = Callable[[str, str], datetime | None]
#: (jurisdiction, rule id) -> True when public works hears of it through case deadlines.
FollowsCase = Callable[[str, str], bool]

SYSTEM = lifecycle.SYSTEM

#: How far back earlier episodes of a violation are looked up (longer than a season year).
_EPISODE_LOOKBACK = timedelta(days=400)


def _utcnow() -> datetime:
    return datetime.now(UTC)


def _new_id() -> str:
    return uuid.uuid4().hex


class AlertManager:
    """Raises alerts from findings, keeps their lifecycle and delivers notifications."""

    def __init__(
        self,
        *,
        db: Database,
        registry: Sites,
        config: AlertsConfig,
        mqtt: Publisher | None = None,
        clock: Callable[[], datetime] = _utcnow,
        grace_period: GracePeriod | None = None,
        channels: Mapping[str, Channel] | None = None,
        season_start: SeasonStart | None = None,
        order_date: OrderDate | None = None,
        follows_case: FollowsCase | None = None,
        ordinances: Mapping[str, str] | None = None,
        owner: str = "gateway",
    ) -> None:
        """``ordinances``: each ordinance text's title by file (from the rule packs), so
        messages name the ordinance, not its file (issue 20.3)."""
        self.db = db
        self.registry = registry
        self.config = config
        self._clock = clock
        self._grace = grace_period
        self._season_start = season_start
        self._order_date = order_date
        self._follows_case = follows_case
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
        self.policy = Policy(config.flap_window, config.repeat_interval, config.repeat_max)
        self.ordinances: Mapping[str, str] = ordinances or {}
        self.delivery = Delivery(
            db, registry, config, self.channels, clock, self.ordinances, owner=owner
        )
        self._wake = asyncio.Event()

    # ------------------------------------------------------------------ lifecycle

    async def open(self) -> None:
        """Check the schema and requeue deliveries a crash left in ``sending``."""
        await self.db.migrate()
        requeued = await self.delivery.recover()
        if requeued:
            log.warning("alerts: %d deliveries interrupted by a restart will be retried", requeued)

    async def close(self) -> None:
        """Put deliveries cut short by cancellation back in the queue."""
        await self.delivery.close()

    # ------------------------------------------------------------------ events

    async def on_events(self, events: Sequence[FindingEvent]) -> None:
        """Apply finding events: open, update, resolve or re-open alerts, queue notifications."""
        if not events:
            return
        now = self._clock()

        def apply(conn: Connection) -> None:
            for event in events:
                self._apply(conn, event, now)

        await self.db.write(apply)
        self._wake.set()

    def _apply(self, conn: Connection, event: FindingEvent, now: datetime) -> None:
        f = event.finding
        tracked = outbox.following(conn, f, now - self.config.flap_window)
        jurisdiction = self._jurisdiction(f.site_id)
        escalation = Escalation(
            grace=None if self._grace is None else self._grace(jurisdiction, f.rule_id),
            clock_start=self._clock_start(conn, f.site_id, f.rule_id, f.opened_at, now),
            default_assignee=self.config.jurisdiction(jurisdiction).default_assignee,
            by_case=self._follows_case is not None and self._follows_case(jurisdiction, f.rule_id),
        )
        decision = lifecycle.on_event(
            tracked,
            event,
            now,
            self.policy,
            new_id=_new_id(),
            jurisdiction=jurisdiction,
            escalation=escalation,
        )
        self._store(conn, decision, now)

    def _clock_start(
        self, conn: Connection, site_id: str, rule_id: str, opened: datetime, now: datetime
    ) -> datetime:
        """The violation's one clock (issue 15.7, 16.2): the case's order once there is
        one, else its first episode this season year."""
        site = self.registry.get(site_id)
        tz = site.tz if site is not None else ZoneInfo("UTC")
        start = DEFAULT_SEASON_START
        if self._season_start is not None and site is not None:
            start = self._season_start(site.jurisdiction)
        earlier = outbox.episode_starts(conn, site_id, rule_id, now - _EPISODE_LOOKBACK)
        ordered = None if self._order_date is None else self._order_date(site_id, rule_id)
        return compliance_clock_start(
            min(opened, now), earlier, tz=tz, season_start=start, order_at=ordered
        )

    def _jurisdiction(self, site_id: str) -> str:
        site = self.registry.get(site_id)
        return site.jurisdiction if site is not None else ""

    # ------------------------------------------------------------------ writing a decision

    def _store(self, conn: Connection, decision: Decision, now: datetime) -> None:
        """Write a decision in the caller's transaction (the outbox)."""
        alert = decision.alert
        if alert is None:
            return
        if decision.revive_resolved_at is not None:
            outbox.undo_resolve(conn, alert.id, decision.revive_resolved_at)
        outbox.save_alert(conn, alert, decision.notified)
        outbox.record_history(conn, alert.id, decision.history, now)
        if decision.cancel is not None:
            outbox.cancel_pending(conn, alert.id, decision.cancel.reasons, decision.cancel.why, now)
        for send in decision.sends:
            self._queue(conn, alert, self._targets(conn, alert, send.to), send.reason, now,
                        send.delay)  # fmt: skip
        if decision.publish_state:
            self._queue_state(conn, alert, now)

    def _targets(self, conn: Connection, alert: Alert, to: To) -> list[Target]:
        if to is To.HOMEOWNER:
            site = self.registry.get(alert.site_id)
            return homeowner_targets(site.contacts) if site is not None else []
        if to is To.PUBLIC_WORKS:
            routing = self.config.jurisdiction(alert.jurisdiction)
            return public_works_targets(routing, alert.rule_id, alert.severity)
        return outbox.told(conn, alert.id)

    def _queue(
        self,
        conn: Connection,
        alert: Alert,
        targets: Sequence[Target],
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
            rows.append((_new_id(), t, reason, not_before))
        outbox.queue(conn, alert, rows, now)

    def _queue_state(self, conn: Connection, alert: Alert, now: datetime) -> None:
        """Queue a retained-state publish for the alert's site (coalesced per site)."""
        if self._mqtt is None:
            return
        topic = alerts_topic(self.config.mqtt.topic_prefix, alert.site_id)
        if outbox.state_publish_pending(conn, topic):
            return  # an unsent publish renders the site's state at send time anyway
        self._queue(conn, alert, [Target("site", "mqtt", topic, alert.site_id)], Reason.STATE, now)

    # ------------------------------------------------------------------ operator actions

    async def acknowledge(self, alert_id: str, *, by: str, note: str | None = None) -> Alert:
        """open -> acknowledged: stops the reminders (not the escalation)."""
        now = self._clock()
        return await self._act(alert_id, lambda a: lifecycle.acknowledge(a, now, by=by, note=note))

    async def assign(self, alert_id: str, *, assignee: str | None) -> Alert:
        """Set (or clear) who at public works handles the alert."""
        now = self._clock()
        return await self._act(alert_id, lambda a: lifecycle.assign(a, now, assignee=assignee))

    async def resolve(
        self,
        alert_id: str,
        *,
        by: str,
        note: str | None = None,
        audience: Audience | None = None,
        confirm: bool = False,
    ) -> Alert:
        """Resolve by hand (with a note); the people already told are told it is resolved.
        ``audience`` is the resolver's (None: admin); an alert whose condition is still
        detected needs ``confirm`` (alerts.lifecycle.resolve_by_hand)."""
        now = self._clock()
        return await self._act(
            alert_id,
            lambda a: lifecycle.resolve_by_hand(
                a, now, self.policy, by=by, note=note, audience=audience, confirm=confirm
            ),
        )

    async def send_test(self, site_id: str, *, by: str) -> Alert:
        """Queue a test alert to the site's homeowner contacts (see the outbox page)."""
        now = self._clock()
        decision = lifecycle.test_alert(
            site_id, self._jurisdiction(site_id), now, new_id=_new_id(), by=by
        )
        assert decision.alert is not None
        await self.db.write(lambda conn: self._store(conn, decision, now))
        self._wake.set()
        return decision.alert

    async def _act(self, alert_id: str, decide: Callable[[Alert], Decision]) -> Alert:
        now = self._clock()

        # On a shared state the row is locked first: a gateway's repeat or escalation
        # of the same alert commits before (and this decision reads it) or after.
        lock = self.db.dialect == "postgresql"

        def run(conn: Connection) -> Alert:
            self._store(conn, decide(self._require(conn, alert_id, for_update=lock)), now)
            return self._require(conn, alert_id)

        alert = await self.db.write(run)
        self._wake.set()
        return alert

    @staticmethod
    def _require(conn: Connection, alert_id: str, *, for_update: bool = False) -> Alert:
        alert = outbox.get_alert(conn, alert_id, for_update=for_update)
        if alert is None:
            raise NotFound(f"no alert with id {alert_id!r}")
        return alert

    # ------------------------------------------------------------------ queries

    async def get(self, alert_id: str) -> Alert:
        """One alert, or NotFound."""
        return await self.db.read(lambda conn: self._require(conn, alert_id))

    async def list_alerts(self, query: AlertQuery = AlertQuery()) -> list[Alert]:
        """Alerts matching the filters, newest first."""
        return await self.db.read(lambda conn: outbox.query_alerts(conn, query))

    async def history(self, alert_ids: Sequence[str]) -> list[AlertHistoryRow]:
        """What happened to these alerts (who resolved, with which note), oldest first."""
        return await self.db.read(lambda conn: outbox.history_of(conn, alert_ids))

    async def recent_notifications(self, limit: int = 100) -> list[Notification]:
        """The newest notifications of all alerts, with their outbox status."""
        return await self.db.read(lambda conn: outbox.recent_notifications(conn, limit))

    async def local_outbox(self, limit: int = 100) -> list[tuple[Notification, str, str]]:
        """The newest notifications with the subject and text each one says (rendered
        as the channel would), so a gateway without e-mail still shows its messages."""
        now = self._clock()

        def run(conn: Connection) -> list[tuple[Notification, str, str]]:
            out = []
            for n in outbox.recent_notifications(conn, limit):
                alert = outbox.get_alert(conn, n.alert_id)
                if alert is None:
                    continue
                site = self.registry.get(n.site_id)
                message = render(
                    alert,
                    n,
                    site,
                    public_url=self.config.public_url,
                    now=now,
                    ordinances=self.ordinances,
                )
                out.append((n, message.subject, message.text))
            return out

        return await self.db.read(run)

    @property
    def email_configured(self) -> bool:
        """True when an SMTP server is configured (the pages promise e-mail only then)."""
        return self.config.smtp is not None

    async def notifications(self, alert_id: str) -> list[Notification]:
        """The notifications of an alert (with their outbox status), oldest first."""
        return await self.db.read(lambda conn: outbox.notifications_of(conn, alert_id))

    async def deliveries(
        self, *, alert_id: str | None = None, limit: int = 500
    ) -> list[DeliveryAttempt]:
        """The delivery log (attempts and results), newest first; Apprise URLs redacted."""
        rows = await self.db.read(
            lambda conn: outbox.attempts(conn, alert_id=alert_id, limit=limit)
        )
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
        return await self.delivery.run_once()

    def _due_escalations_and_repeats(self, conn: Connection, now: datetime) -> None:
        shared = self.db.dialect == "postgresql"  # other gateways act on the same alerts
        for alert in outbox.due_escalations(conn, now, skip_locked=shared):
            routing = self.config.jurisdiction(alert.jurisdiction)
            self._store(conn, lifecycle.escalation_due(alert, now, routing.default_assignee), now)
        for alert in outbox.due_repeats(conn, now, skip_locked=shared):
            self._store(conn, lifecycle.repeat_due(alert, now, self.policy), now)
