"""The alert lifecycle as pure functions: current alert + event -> a :class:`Decision`.

No I/O and no clock: each function gets the alert as stored (or None), what
happened, ``now`` and the policy numbers, and says what the alert becomes and which
notifications to queue. :mod:`alerts.outbox` writes a decision in one transaction;
:class:`alerts.manager.AlertManager` ties the two together. Recipients are named by
audience (:class:`To`) because who they are (contacts, routing, who was told before)
is looked up when the decision is written.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from alerts.models import (
    SYSTEM_ACTOR,
    Alert,
    AlertState,
    ConditionPersists,
    InvalidTransition,
    NotYourAlert,
    Reason,
)
from alerts.policy import is_material, max_severity
from gateway.domain import Audience, Finding, FindingChange, FindingEvent, Severity

SYSTEM = SYSTEM_ACTOR
"""``resolved_by`` of an alert resolved because its finding cleared."""

HUMAN_REASONS = (Reason.OPENED, Reason.RAISED, Reason.REPEAT, Reason.ESCALATED)
"""Messages to people (not the MQTT state) that a resolve makes moot."""


class To(StrEnum):
    """Who a queued notification goes to (resolved to addresses by the outbox)."""

    HOMEOWNER = "homeowner"  # the site's contacts
    PUBLIC_WORKS = "public_works"  # the jurisdiction's routing for this rule and severity
    TOLD = "told"  # whoever was told (or may have been) about this alert before


@dataclass(frozen=True, slots=True)
class Send:
    """Queue one notification per recipient of ``to``, after ``delay``."""

    to: To
    reason: Reason
    delay: timedelta = timedelta(0)


@dataclass(frozen=True, slots=True)
class Cancel:
    """Cancel the alert's pending notifications for these reasons (``why`` is recorded)."""

    reasons: tuple[Reason, ...]
    why: str


@dataclass(frozen=True, slots=True)
class Notified:
    """The highest severity and level people were told of (so a wobble notifies once)."""

    severity: Severity
    level: str


@dataclass(frozen=True, slots=True)
class Tracked:
    """An alert as stored, with what was notified of it."""

    alert: Alert
    notified: Notified


@dataclass(frozen=True, slots=True)
class Policy:
    """The lifecycle's numbers (from :class:`alerts.config.AlertsConfig`)."""

    flap_window: timedelta
    repeat_interval: timedelta
    repeat_max: int | None = None


@dataclass(frozen=True, slots=True)
class Escalation:
    """How a violation of this rule in this jurisdiction reaches public works.

    ``clock_start`` comes from :func:`alerts.policy.compliance_clock_start` (the
    case's order once there is one, else the first episode of the season year);
    ``grace`` None or zero means at once, unless ``by_case``.
    """

    grace: timedelta | None
    clock_start: datetime
    default_assignee: str | None = None
    #: Public works hears of this rule through its case's deadlines, not the alert's
    #: age: the pack has an order step (Edgar (f)(1): the 30 days run from the order,
    #: and ``gateway.cases.escalation`` alerts public works when they run out).
    by_case: bool = False


class Step(StrEnum):
    """What happened to an alert, as its history page lists it."""

    OPENED = "opened"
    ACKNOWLEDGED = "acknowledged"
    ASSIGNED = "assigned"
    RESOLVED = "resolved"  # by a person (the note says why)
    CLEARED = "cleared"  # the finding cleared: resolved by the system
    REOPENED = "reopened"  # came back (flap, got worse, or still present after a resolve)
    ESCALATED = "escalated"


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    """One line of an alert's history (written with the decision; time is ``now``)."""

    step: Step
    actor: str | None = None
    note: str | None = None
    #: True when a person resolved while the finding was still open.
    condition_persisted: bool = False


@dataclass(frozen=True, slots=True)
class AlertHistoryRow:
    """A history entry as stored: which alert, and when."""

    alert_id: str
    at: datetime
    entry: HistoryEntry


@dataclass(frozen=True, slots=True)
class Decision:
    """What an event does. ``alert`` None: nothing changes."""

    alert: Alert | None = None
    notified: Notified | None = None
    created: bool = False
    sends: tuple[Send, ...] = ()
    cancel: Cancel | None = None
    revive_resolved_at: datetime | None = None
    publish_state: bool = False
    history: tuple[HistoryEntry, ...] = ()


def goes_to_public_works(alert: Alert) -> bool:
    """Only ordinance violations (with a citation) addressed to public works."""
    return alert.is_ordinance and Audience.PUBLIC_WORKS.value in alert.audience


def citations_of(f: Finding) -> tuple[dict[str, str], ...]:
    """A finding's citations in the alert's storage form."""
    return tuple({"file": c.file, "section": c.section, "quote": c.quote} for c in f.citations)


def _content(f: Finding) -> dict[str, Any]:
    """The alert fields that mirror its finding."""
    return {
        "finding_id": f.id,
        "severity": f.severity,
        "level": f.level,
        "title": f.title,
        "action": f.action,
        "evidence": dict(f.evidence),
        "audience": tuple(a.value for a in f.audience),
        "citations": citations_of(f),
    }


def on_event(
    tracked: Tracked | None,
    event: FindingEvent,
    now: datetime,
    policy: Policy,
    *,
    new_id: str,
    jurisdiction: str,
    escalation: Escalation,
) -> Decision:
    """Apply one finding event to the alert that follows its finding (if any)."""
    if event.change is FindingChange.CLEARED:
        return _cleared(tracked, event.finding, now, policy)
    if tracked is None:
        return _create(event.finding, now, policy, new_id, jurisdiction, escalation)
    return _follow(tracked, event.finding, now, policy, escalation)


def _cleared(tracked: Tracked | None, f: Finding, now: datetime, policy: Policy) -> Decision:
    if tracked is None:
        return Decision()
    alert = tracked.alert
    if alert.state is AlertState.RESOLVED:
        if alert.finding_cleared_at is not None:
            return Decision()
        # Resolved by hand earlier; now the condition is gone too: no more reminders.
        return Decision(
            alert=replace(alert, finding_cleared_at=now, next_repeat_at=None),
            history=(HistoryEntry(Step.CLEARED, SYSTEM, "condition cleared"),),
        )
    decision = resolve(alert, now, by=SYSTEM, note="condition cleared", delay=policy.flap_window)
    assert decision.alert is not None
    return replace(
        decision,
        alert=replace(decision.alert, finding_cleared_at=f.cleared_at or now),
        history=(HistoryEntry(Step.CLEARED, SYSTEM, "condition cleared"),),
    )


def _create(
    f: Finding,
    now: datetime,
    policy: Policy,
    new_id: str,
    jurisdiction: str,
    escalation: Escalation,
) -> Decision:
    alert = Alert(
        id=new_id,
        site_id=f.site_id,
        jurisdiction=jurisdiction,
        rule_id=f.rule_id,
        state=AlertState.OPEN,
        opened_at=now,
        updated_at=now,
        **_content(f),
    )
    sends: list[Send] = []
    if Audience.HOMEOWNER.value in alert.audience:
        sends.append(Send(To.HOMEOWNER, Reason.OPENED))
        if alert.severity is Severity.CRITICAL:
            alert = replace(alert, next_repeat_at=now + policy.repeat_interval)
    if goes_to_public_works(alert):
        alert, more = _start_clock(alert, now, escalation)
        sends += more
    return Decision(
        alert=alert,
        notified=Notified(alert.severity, alert.level),
        created=True,
        sends=tuple(sends),
        publish_state=True,
        history=(HistoryEntry(Step.OPENED, SYSTEM),),
    )


def _start_clock(
    alert: Alert, now: datetime, escalation: Escalation
) -> tuple[Alert, tuple[Send, ...]]:
    """Set the escalation deadline, or escalate now when there is no grace period or
    the violation's clock (started by an earlier episode this season) has run out."""
    period = escalation.grace
    if escalation.by_case:  # the case's deadlines escalate; the alert keeps the clock
        return replace(alert, clock_started_at=min(escalation.clock_start, now)), ()
    if period is None or period <= timedelta(0):
        # Handed to public works at once: an escalation, with its "Ordinance violation:"
        # subject (review O8), not a plain "opened".
        return _escalated(alert, now, escalation), (Send(To.PUBLIC_WORKS, Reason.ESCALATED),)
    start = min(escalation.clock_start, now)
    alert = replace(alert, clock_started_at=start, escalate_at=start + period)
    if start + period <= now:
        return _escalated(alert, now, escalation), (Send(To.PUBLIC_WORKS, Reason.ESCALATED),)
    return alert, ()


def _escalated(alert: Alert, now: datetime, escalation: Escalation) -> Alert:
    assignee = alert.assignee
    if assignee is None and escalation.default_assignee:
        assignee = escalation.default_assignee
    return replace(alert, escalated_at=now, assignee=assignee)


def _revived(alert: Alert, updated: Alert) -> Alert:
    """A resolved alert open again (acknowledged still, if it was)."""
    flapped = alert.resolved_by == SYSTEM
    return replace(
        updated,
        state=AlertState.ACKNOWLEDGED if alert.acknowledged_at else AlertState.OPEN,
        resolved_at=None,
        resolved_by=None,
        resolve_note=None,
        finding_cleared_at=None,
        flaps=alert.flaps + 1 if flapped else alert.flaps,
    )


def _raised_sends(alert: Alert, updated: Alert, material: bool) -> list[Send]:
    """Who hears of a material change: the homeowner, and public works once escalated."""
    if not material:
        return []
    sends: list[Send] = []
    if Audience.HOMEOWNER.value in updated.audience:
        sends.append(Send(To.HOMEOWNER, Reason.RAISED))
    if alert.escalated_at is not None:
        sends.append(Send(To.PUBLIC_WORKS, Reason.RAISED))
    return sends


def _follow(
    tracked: Tracked, f: Finding, now: datetime, policy: Policy, escalation: Escalation
) -> Decision:
    """An update or re-open of the finding an alert follows."""
    alert, notified = tracked.alert, tracked.notified
    material = is_material(notified.severity, notified.level, f.severity, f.level)
    updated = replace(alert, updated_at=now, **_content(f))
    revive: datetime | None = None
    reopened = False
    if alert.state is AlertState.RESOLVED:
        if not (alert.resolved_by == SYSTEM or material):
            # Resolved by hand while the finding is still open: stays resolved
            # unless it gets worse.
            return Decision(alert=updated)
        reopened = True
        revive = alert.resolved_at
        updated = _revived(alert, updated)
    severity_changed = f.severity is not alert.severity or f.level != alert.level
    if material:
        notified = Notified(max_severity(notified.severity, f.severity), f.level)
        if updated.state is AlertState.ACKNOWLEDGED and f.severity is Severity.CRITICAL:
            # An acknowledgement covers what was acknowledged: worse than that
            # (now critical) needs a new one, and the reminders start again.
            updated = replace(
                updated,
                state=AlertState.OPEN,
                acknowledged_at=None,
                acknowledged_by=None,
                ack_note=None,
            )
    sends = _raised_sends(alert, updated, material)
    if (
        Audience.HOMEOWNER.value in updated.audience
        and updated.state is AlertState.OPEN
        and updated.severity is Severity.CRITICAL
        and (alert.next_repeat_at is None or material)
    ):
        updated = replace(updated, next_repeat_at=now + policy.repeat_interval)
    if goes_to_public_works(updated) and alert.escalate_at is None and alert.escalated_at is None:
        updated, more = _start_clock(updated, now, escalation)
        sends += more
    return Decision(
        alert=updated,
        notified=notified,
        sends=tuple(sends),
        revive_resolved_at=revive,
        publish_state=material or reopened or severity_changed,
        history=(HistoryEntry(Step.REOPENED, SYSTEM, "condition came back"),) if reopened else (),
    )


def resolve(
    alert: Alert,
    now: datetime,
    *,
    by: str,
    note: str | None,
    delay: timedelta = timedelta(0),
) -> Decision:
    """Resolve (by hand, or ``by=SYSTEM`` when the finding cleared): pending messages
    to people are moot; whoever was told hears it is resolved (after ``delay``)."""
    resolved = replace(
        alert,
        state=AlertState.RESOLVED,
        resolved_at=now,
        resolved_by=by,
        resolve_note=note,
        next_repeat_at=None,
        updated_at=now,
        # escalate_at is kept: a violation that flaps back keeps its original deadline.
    )
    return Decision(
        alert=resolved,
        cancel=Cancel(HUMAN_REASONS, "alert resolved before delivery"),
        sends=(Send(To.TOLD, Reason.RESOLVED, delay),),
        publish_state=True,
    )


def resolve_by_hand(
    alert: Alert,
    now: datetime,
    policy: Policy,
    *,
    by: str,
    note: str | None,
    audience: Audience | None,
    confirm: bool,
) -> Decision:
    """A person resolves an alert (not one already resolved).

    ``audience`` is the resolver's (None: an administrator, who may resolve any). A
    person outside the alert's audience may not resolve it: public works cannot make
    a homeowner-only high-water alert go away (:class:`NotYourAlert`, 403).

    An unresolved alert's finding is open (a clear resolves it), so its condition is
    still detected: the resolve must be confirmed (:class:`ConditionPersists`, 409,
    until then). A confirmed one is recorded as such and does not silence the
    violation: the alert shows "still detected" and re-opens after
    ``policy.repeat_interval`` if the finding is still open (:func:`repeat_due`).
    """
    if alert.state is AlertState.RESOLVED:
        raise InvalidTransition(f"alert {alert.id} is already resolved")
    if audience is not None and audience.value not in alert.audience:
        who = audience.value.replace("_", " ")
        raise NotYourAlert(
            f"this alert is for {_audience_words(alert)} only; {who} cannot resolve it"
        )
    if not confirm:
        raise ConditionPersists(
            f"the condition of alert {alert.id} ({alert.title}) is still detected; "
            "resolving will not fix it and the alert re-opens while it lasts. "
            "Confirm to resolve anyway."
        )
    decision = resolve(alert, now, by=by, note=note)
    assert decision.alert is not None
    return replace(
        decision,
        alert=replace(decision.alert, next_repeat_at=now + policy.repeat_interval),
        history=(HistoryEntry(Step.RESOLVED, by, note, condition_persisted=True),),
    )


def _audience_words(alert: Alert) -> str:
    return " and ".join(a.replace("_", " ") for a in alert.audience) or "nobody"


def acknowledge(alert: Alert, now: datetime, *, by: str, note: str | None) -> Decision:
    """open -> acknowledged: stops the reminders (not the escalation)."""
    if alert.state is not AlertState.OPEN:
        raise InvalidTransition(f"alert {alert.id} is {alert.state}, not open")
    acknowledged = replace(
        alert,
        state=AlertState.ACKNOWLEDGED,
        acknowledged_at=now,
        acknowledged_by=by,
        ack_note=note,
        next_repeat_at=None,
        updated_at=now,
    )
    return Decision(
        alert=acknowledged,
        cancel=Cancel((Reason.REPEAT,), "acknowledged before delivery"),
        publish_state=True,
        history=(HistoryEntry(Step.ACKNOWLEDGED, by, note),),
    )


def assign(alert: Alert, now: datetime, *, assignee: str | None) -> Decision:
    """Set (or clear) who at public works handles the alert."""
    return Decision(
        alert=replace(alert, assignee=assignee, updated_at=now),
        history=(HistoryEntry(Step.ASSIGNED, None, assignee or "unassigned"),),
    )


def escalation_due(alert: Alert, now: datetime, default_assignee: str | None) -> Decision:
    """The grace period ran out on an unresolved violation: tell public works."""
    if (
        alert.state is AlertState.RESOLVED
        or alert.escalated_at is not None
        or alert.escalate_at is None
        or alert.escalate_at > now
    ):
        return Decision()
    escalation = Escalation(grace=None, clock_start=now, default_assignee=default_assignee)
    return Decision(
        alert=_escalated(alert, now, escalation),
        sends=(Send(To.PUBLIC_WORKS, Reason.ESCALATED),),
        publish_state=True,
        history=(HistoryEntry(Step.ESCALATED, SYSTEM),),
    )


def repeat_due(alert: Alert, now: datetime, policy: Policy) -> Decision:
    """A reminder of an open alert is due: critical ones repeat (up to ``repeat_max``).
    A hand-resolved alert whose condition is still detected re-opens instead."""
    if alert.next_repeat_at is None or alert.next_repeat_at > now:
        return Decision()
    if alert.condition_persists:
        return _still_present(alert, now, policy)
    if alert.state is not AlertState.OPEN:
        return Decision()
    if alert.severity is not Severity.CRITICAL:
        return Decision(alert=replace(alert, next_repeat_at=None))
    repeats = alert.repeats + 1
    more = policy.repeat_max is None or repeats < policy.repeat_max
    return Decision(
        alert=replace(
            alert, repeats=repeats, next_repeat_at=now + policy.repeat_interval if more else None
        ),
        sends=(Send(To.HOMEOWNER, Reason.REPEAT),),
    )


TEST_RULE = "test_alert"
"""``rule_id`` of an administrator's test alert (never a finding's rule)."""


def test_alert(site_id: str, jurisdiction: str, now: datetime, *, new_id: str, by: str) -> Decision:
    """An administrator's test: one "opened" message to the site's homeowner contacts
    through the real outbox and channels. The alert is stored already resolved, so it
    never shows as an open problem on any page."""
    alert = Alert(
        id=new_id,
        site_id=site_id,
        jurisdiction=jurisdiction,
        rule_id=TEST_RULE,
        finding_id=f"test-{new_id}",
        state=AlertState.RESOLVED,
        severity=Severity.INFO,
        level="",
        title="Test alert from SumpWatch",
        action="Nothing to do: this message checks that alerts reach you.",
        audience=(Audience.HOMEOWNER.value,),
        citations=(),
        evidence={},
        opened_at=now,
        updated_at=now,
        finding_cleared_at=now,
        resolved_at=now,
        resolved_by=by,
        resolve_note="test alert",
    )
    return Decision(
        alert=alert,
        notified=Notified(alert.severity, alert.level),
        created=True,
        sends=(Send(To.HOMEOWNER, Reason.OPENED),),
        history=(HistoryEntry(Step.OPENED, by, "test alert"),),
    )


def _still_present(alert: Alert, now: datetime, policy: Policy) -> Decision:
    """The resolve did not fix it: the alert re-opens and whoever was told hears again."""
    state = AlertState.ACKNOWLEDGED if alert.acknowledged_at else AlertState.OPEN
    reminders = (
        state is AlertState.OPEN
        and alert.severity is Severity.CRITICAL
        and Audience.HOMEOWNER.value in alert.audience
    )
    reopened = replace(
        alert,
        state=state,
        resolved_at=None,
        resolved_by=None,
        resolve_note=None,
        next_repeat_at=now + policy.repeat_interval if reminders else None,
        updated_at=now,
    )
    return Decision(
        alert=reopened,
        sends=(Send(To.TOLD, Reason.REPEAT),),
        publish_state=True,
        history=(HistoryEntry(Step.REOPENED, SYSTEM, "still detected after it was resolved"),),
    )
