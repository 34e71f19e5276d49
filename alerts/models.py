"""Frozen value types of the alerting pipeline: alerts, notifications, attempts."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from gateway.domain import Severity
from gateway.errors import SumpWatchError

SYSTEM_ACTOR = "system"
"""``resolved_by`` of an alert resolved because its finding cleared."""


class AlertState(StrEnum):
    """Where an alert is in its lifecycle."""

    OPEN = "open"
    ACKNOWLEDGED = "acknowledged"
    RESOLVED = "resolved"


class Reason(StrEnum):
    """Why a notification was made."""

    OPENED = "opened"  # the alert was raised
    RAISED = "raised"  # severity or level went up
    REPEAT = "repeat"  # critical homeowner alert, still not acknowledged
    ESCALATED = "escalated"  # ordinance violation handed to public works
    RESOLVED = "resolved"  # the condition cleared or someone resolved it
    STATE = "state"  # MQTT retained state refresh


class NotificationStatus(StrEnum):
    """Outbox status of one notification."""

    PENDING = "pending"  # waiting for its time (not_before / next attempt)
    SENDING = "sending"  # handed to a channel; a crash here means "retry"
    SENT = "sent"
    FAILED = "failed"  # gave up (permanent error or attempts exhausted)
    CANCELLED = "cancelled"  # made moot (e.g. 'resolved' of an alert that re-opened)


class InvalidTransition(SumpWatchError):
    """The requested lifecycle change does not apply to the alert's state."""


class ConditionPersists(InvalidTransition):
    """A hand resolve of an alert whose condition is still detected, not confirmed."""


class NotYourAlert(SumpWatchError):
    """The person acting is not in the alert's audience (e.g. public works and a
    homeowner-only high-water alert): answered 403."""


@dataclass(frozen=True, slots=True)
class Alert:
    """An alert raised from a finding; it follows the finding of its (site, rule)."""

    id: str
    site_id: str
    jurisdiction: str
    rule_id: str
    finding_id: str
    state: AlertState
    severity: Severity
    level: str
    title: str
    action: str
    audience: tuple[str, ...]
    citations: tuple[Mapping[str, str], ...]
    evidence: Mapping[str, Any]
    opened_at: datetime
    updated_at: datetime
    finding_cleared_at: datetime | None = None
    acknowledged_at: datetime | None = None
    acknowledged_by: str | None = None
    ack_note: str | None = None
    resolved_at: datetime | None = None
    resolved_by: str | None = None
    resolve_note: str | None = None
    assignee: str | None = None
    escalate_at: datetime | None = None
    escalated_at: datetime | None = None
    next_repeat_at: datetime | None = None
    repeats: int = 0
    flaps: int = 0
    #: When the violation's escalation clock started (the first episode of the season
    #: year, alerts.policy.violation_clock_start); None until it goes to public works.
    clock_started_at: datetime | None = None

    @property
    def condition_persists(self) -> bool:
        """Resolved by a person while its finding is still open: the badge (and the
        reminder that re-opens it) of issue 20.4."""
        return (
            self.state is AlertState.RESOLVED
            and self.resolved_by not in (None, SYSTEM_ACTOR)
            and self.finding_cleared_at is None
        )

    @property
    def is_ordinance(self) -> bool:
        """True when the finding cites an ordinance (public works may be told)."""
        return bool(self.citations)


@dataclass(frozen=True, slots=True)
class Notification:
    """One message to one recipient over one channel, for one reason (the outbox row)."""

    id: str
    alert_id: str
    site_id: str
    audience: str  # homeowner / public_works / site (mqtt)
    channel: str
    recipient: str
    recipient_name: str
    reason: Reason
    severity: Severity
    created_at: datetime
    not_before: datetime
    status: NotificationStatus
    attempts: int = 0
    next_attempt_at: datetime | None = None
    sent_at: datetime | None = None
    last_error: str | None = None
    units: str = "us"


@dataclass(frozen=True, slots=True)
class DeliveryAttempt:
    """One try at sending a notification, and what came of it."""

    id: int
    notification_id: str
    attempt: int
    started_at: datetime
    finished_at: datetime | None
    ok: bool | None
    detail: str
    alert_id: str = ""
    channel: str = ""
    recipient: str = ""


@dataclass(frozen=True, slots=True)
class AlertQuery:
    """Filters of the alert list (all optional)."""

    site_id: str | None = None
    jurisdiction: str | None = None
    state: AlertState | None = None
    severity: Severity | None = None
    rule_id: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    limit: int = 200
    offset: int = 0


@dataclass(frozen=True, slots=True)
class OutgoingMessage:
    """What a channel needs to send one notification, already rendered."""

    notification_id: str
    channel: str
    recipient: str
    recipient_name: str
    subject: str
    text: str
    html: str
    payload: Mapping[str, Any] = field(default_factory=dict)
    severity: Severity = Severity.INFO


@dataclass(frozen=True, slots=True)
class DeliveryResult:
    """A channel's answer: delivered, or not (and whether retrying can help)."""

    ok: bool
    detail: str = ""
    permanent: bool = False
