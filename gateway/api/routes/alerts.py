"""Alerts API: list and filter, acknowledge, assign, resolve, and the delivery log.

The AlertManager and the alert actions (shared with the page forms) come from the
gateway's Services; unknown alerts (404) and changes the state does not allow
(409) are answered by the app's exception handlers (gateway.problems). Who acts is the
signed-in account when authentication is on (``by`` in the body is then ignored);
assigning and resolving are for public works and admins; lists are filtered to the
caller's sites (gateway.accounts.access).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel, Field

from alerts.channels.apprise import redact
from alerts.manager import AlertManager
from alerts.models import (
    Alert,
    AlertQuery,
    AlertState,
    DeliveryAttempt,
    Notification,
)
from gateway.accounts.models import Principal
from gateway.api.deps import MAX_OFFSET, PrincipalDep, ScopeDep, StaffDep, UtcTime
from gateway.domain import Severity
from gateway.errors import NotEnabled
from gateway.services import AlertActions, ServicesDep

router = APIRouter(tags=["alerts"])


def get_alerts(services: ServicesDep) -> AlertManager:
    """The running AlertManager (503 when alerting is not wired)."""
    if services.alerts is None:
        raise NotEnabled("alerts are not enabled on this gateway")
    return services.alerts


def get_alert_actions(alerts: Annotated[AlertManager, Depends(get_alerts)]) -> AlertActions:
    """Acknowledge, assign, resolve: the same service the page forms use."""
    return AlertActions(alerts)


AlertsDep = Annotated[AlertManager, Depends(get_alerts)]
ActionsDep = Annotated[AlertActions, Depends(get_alert_actions)]


class CitationPublic(BaseModel):
    """Where the rule comes from in the ordinance texts."""

    file: str
    section: str
    quote: str = ""


class AlertBase(BaseModel):
    """What an alert is about."""

    site_id: str
    jurisdiction: str
    rule_id: str
    severity: Severity
    level: str
    title: str
    action: str


class AlertPublic(AlertBase):
    """An alert with its lifecycle."""

    id: str
    finding_id: str
    state: AlertState
    audience: list[str]
    citations: list[CitationPublic]
    evidence: dict[str, Any]
    opened_at: datetime
    updated_at: datetime
    acknowledged_at: datetime | None
    acknowledged_by: str | None
    ack_note: str | None
    resolved_at: datetime | None
    resolved_by: str | None
    resolve_note: str | None
    assignee: str | None
    escalate_at: datetime | None
    escalated_at: datetime | None
    repeats: int
    flaps: int = Field(description="Times the finding cleared and re-opened within the window")
    condition_persists: bool = Field(
        False, description="Resolved by a person while the condition is still detected"
    )

    @classmethod
    def of(cls, a: Alert) -> AlertPublic:
        """From the domain value."""
        return cls(
            id=a.id,
            site_id=a.site_id,
            jurisdiction=a.jurisdiction,
            rule_id=a.rule_id,
            finding_id=a.finding_id,
            state=a.state,
            severity=a.severity,
            level=a.level,
            title=a.title,
            action=a.action,
            audience=list(a.audience),
            citations=[CitationPublic(**c) for c in a.citations],
            evidence=dict(a.evidence),
            opened_at=a.opened_at,
            updated_at=a.updated_at,
            acknowledged_at=a.acknowledged_at,
            acknowledged_by=a.acknowledged_by,
            ack_note=a.ack_note,
            resolved_at=a.resolved_at,
            resolved_by=a.resolved_by,
            resolve_note=a.resolve_note,
            assignee=a.assignee,
            escalate_at=a.escalate_at,
            escalated_at=a.escalated_at,
            repeats=a.repeats,
            flaps=a.flaps,
            condition_persists=a.condition_persists,
        )


class NotificationPublic(BaseModel):
    """One outbox entry: a message to one recipient over one channel."""

    id: str
    audience: str
    channel: str
    recipient: str
    reason: str
    status: str
    attempts: int
    created_at: datetime
    not_before: datetime
    next_attempt_at: datetime | None
    sent_at: datetime | None
    last_error: str | None

    @classmethod
    def of(cls, n: Notification) -> NotificationPublic:
        """From the domain value (Apprise URLs redacted: they carry tokens)."""
        return cls(
            id=n.id,
            audience=n.audience,
            channel=n.channel,
            recipient=redact(n.recipient) if n.channel == "apprise" else n.recipient,
            reason=n.reason.value,
            status=n.status.value,
            attempts=n.attempts,
            created_at=n.created_at,
            not_before=n.not_before,
            next_attempt_at=n.next_attempt_at,
            sent_at=n.sent_at,
            last_error=n.last_error,
        )


class AlertDetail(AlertPublic):
    """An alert with its notifications."""

    notifications: list[NotificationPublic]


class DeliveryPublic(BaseModel):
    """One delivery attempt and its result."""

    id: int
    notification_id: str
    alert_id: str
    channel: str
    recipient: str
    attempt: int
    started_at: datetime
    finished_at: datetime | None
    ok: bool | None = Field(description="None while in flight")
    detail: str

    @classmethod
    def of(cls, d: DeliveryAttempt) -> DeliveryPublic:
        """From the domain value."""
        return cls(
            id=d.id,
            notification_id=d.notification_id,
            alert_id=d.alert_id,
            channel=d.channel,
            recipient=d.recipient,
            attempt=d.attempt,
            started_at=d.started_at,
            finished_at=d.finished_at,
            ok=d.ok,
            detail=d.detail,
        )


class AckCreate(BaseModel):
    """Acknowledge: who, and an optional note."""

    by: str = Field(min_length=1, max_length=200)
    note: str | None = Field(None, max_length=2000)


class ResolveCreate(AckCreate):
    """Resolve by hand: who, and a note saying why."""

    confirm: bool = Field(
        False,
        description="The condition is still detected: resolve anyway (409 without it)",
    )


class AssignCreate(BaseModel):
    """Assign to someone at public works (null to unassign)."""

    assignee: str | None = Field(max_length=200)


def _actor(principal: Principal, claimed: str) -> str:
    """The signed-in account; the body's ``by`` only when authentication is off."""
    return claimed if principal.via == "open" else principal.username


@router.get("/alerts", response_model=list[AlertPublic])
async def list_alerts(
    alerts: AlertsDep,
    scope: ScopeDep,
    site: Annotated[str | None, Query(description="Site id")] = None,
    jurisdiction: Annotated[str | None, Query(description="Rule pack id")] = None,
    state: AlertState | None = None,
    severity: Severity | None = None,
    rule: Annotated[str | None, Query(description="Rule id")] = None,
    since: Annotated[UtcTime | None, Query(alias="from", description="Opened at or after")] = None,
    until: Annotated[UtcTime | None, Query(alias="to", description="Opened before")] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 200,
    offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0,
) -> list[AlertPublic]:
    """Alerts, newest first, filtered."""
    query = AlertQuery(
        site_id=site,
        jurisdiction=jurisdiction,
        state=state,
        severity=severity,
        rule_id=rule,
        since=since,
        until=until,
        limit=limit,
        offset=offset,
    )
    visible = scope.site_ids()
    if visible is None or site is not None:  # admin, or one site access control checked
        return [AlertPublic.of(a) for a in await alerts.list_alerts(query)]
    # Per visible site, then merged: the page is taken from the caller's alerts only.
    found: list[Alert] = []
    for site_id in sorted(visible):
        found += await alerts.list_alerts(
            replace(query, site_id=site_id, offset=0, limit=offset + limit)
        )
    found.sort(key=lambda a: a.opened_at, reverse=True)
    return [AlertPublic.of(a) for a in found[offset : offset + limit]]


@router.get("/alerts/{alert_id}", response_model=AlertDetail)
async def get_alert(alert_id: str, alerts: AlertsDep) -> AlertDetail:
    """One alert with its notifications."""
    alert = await alerts.get(alert_id)
    notes = await alerts.notifications(alert_id)
    return AlertDetail(
        **AlertPublic.of(alert).model_dump(),
        notifications=[NotificationPublic.of(n) for n in notes],
    )


@router.post("/alerts/{alert_id}/ack", response_model=AlertPublic)
async def acknowledge(
    alert_id: str, body: AckCreate, actions: ActionsDep, principal: PrincipalDep
) -> AlertPublic:
    """open -> acknowledged (stops the reminders); 409 unless open."""
    return AlertPublic.of(
        await actions.acknowledge(alert_id, by=_actor(principal, body.by), note=body.note)
    )


@router.post("/alerts/{alert_id}/assign", response_model=AlertPublic)
async def assign(
    alert_id: str, body: AssignCreate, actions: ActionsDep, _staff: StaffDep
) -> AlertPublic:
    """Set who handles the alert."""
    return AlertPublic.of(await actions.assign(alert_id, assignee=body.assignee))


@router.post("/alerts/{alert_id}/resolve", response_model=AlertPublic)
async def resolve(
    alert_id: str, body: ResolveCreate, actions: ActionsDep, staff: StaffDep
) -> AlertPublic:
    """Resolve by hand with a note; 409 if already resolved or the condition is still
    detected and ``confirm`` is not set; 403 for an alert not addressed to public works."""
    return AlertPublic.of(
        await actions.resolve(
            alert_id,
            by=_actor(staff, body.by),
            admin=staff.is_admin,
            note=body.note,
            confirm=body.confirm,
        )
    )


class HistoryPublic(BaseModel):
    """One step of an alert's history."""

    at: datetime
    step: str
    actor: str | None
    note: str | None
    condition_persisted: bool


@router.get("/alerts/{alert_id}/history", response_model=list[HistoryPublic])
async def alert_history(alert_id: str, alerts: AlertsDep) -> list[HistoryPublic]:
    """Who did what to one alert (resolver and note included), oldest first."""
    await alerts.get(alert_id)  # NotFound -> 404
    return [
        HistoryPublic(
            at=h.at,
            step=h.entry.step.value,
            actor=h.entry.actor,
            note=h.entry.note,
            condition_persisted=h.entry.condition_persisted,
        )
        for h in await alerts.history([alert_id])
    ]


@router.get("/alerts/{alert_id}/deliveries", response_model=list[DeliveryPublic])
async def alert_deliveries(
    alert_id: str, alerts: AlertsDep, limit: Annotated[int, Query(ge=1, le=5000)] = 500
) -> list[DeliveryPublic]:
    """Every delivery attempt of one alert, newest first."""
    await alerts.get(alert_id)  # NotFound -> 404
    return [DeliveryPublic.of(d) for d in await alerts.deliveries(alert_id=alert_id, limit=limit)]


@router.get("/deliveries", response_model=list[DeliveryPublic])
async def deliveries(
    alerts: AlertsDep, limit: Annotated[int, Query(ge=1, le=5000)] = 500
) -> list[DeliveryPublic]:
    """The delivery log across all alerts, newest first."""
    return [DeliveryPublic.of(d) for d in await alerts.deliveries(limit=limit)]
