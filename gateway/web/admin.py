"""Admin pages (issue 20.11) and the alert history page (issue 20.4).

Dead letters, deliveries, metrics and the local outbox as pages a person reads:
counts by reason per hour, the latest examples, what was sent and what failed.
The admin pages take :data:`AdminDep` (``require_role()`` with no role: admin
only, 403 for anyone else, like the other admin routes). The alert history page
names ``{alert_id}``, so the app-wide access control scopes it to the caller's
sites (404 for another site's alert).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Annotated

from fastapi import APIRouter, Depends, Form, Query, Request
from fastapi.responses import JSONResponse, RedirectResponse, Response
from pydantic import BaseModel, Field

from alerts.manager import AlertManager
from gateway.accounts.access import PrincipalDep, require_role
from gateway.accounts.models import Principal
from gateway.errors import NotEnabled, NotFound
from gateway.services import Services, get_services
from gateway.web import inject
from gateway.web.templating import render

router = APIRouter(include_in_schema=False)
#: The admin routes that are API (JSON), so they are in the OpenAPI document.
api_router = APIRouter(tags=["admin"])

AdminDep = Annotated[Principal, Depends(require_role())]

#: How far back the dead-letter table of counts per hour reaches.
DEADLETTER_HOURS = 24


def _services(request: Request) -> Services:
    return get_services(request)


def _alerts(request: Request) -> AlertManager:
    alerts = _services(request).alerts
    if alerts is None:
        raise NotEnabled("alerts are not enabled on this gateway")
    return alerts


def _when(value: datetime) -> str:
    """Admin pages speak UTC (the gateway's clock), said once in each page's heading."""
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


# ---------------------------------------------------------------- alert history


@router.get("/ui/alerts/{alert_id}/history")
async def alert_history_page(request: Request, alert_id: str, principal: PrincipalDep) -> Response:
    """Who did what to an alert: opened, acknowledged, resolved (by whom, why)."""
    alerts = _alerts(request)
    alert = await alerts.get(alert_id)
    rows = [
        {
            "at": _when(h.at),
            "step": h.entry.step.value,
            "actor": h.entry.actor or "",
            "note": h.entry.note or "",
            "persisted": h.entry.condition_persisted,
        }
        for h in await alerts.history([alert_id])
    ]
    return render(request, "alert_history.html", principal, alert=alert, rows=rows)


# ---------------------------------------------------------------- dead letters


@dataclass(frozen=True, slots=True)
class HourCounts:
    """Dead letters of one hour, per reason."""

    hour: str
    counts: dict[str, int]
    total: int


def hour_table(rows: list[tuple[int, str, int]]) -> list[HourCounts]:
    """(epoch hour, reason, count) rows -> one line per hour, newest first."""
    by_hour: dict[int, Counter[str]] = {}
    for hour, reason, n in rows:
        by_hour.setdefault(hour, Counter())[reason] += n
    return [
        HourCounts(_when(datetime.fromtimestamp(h * 3600, UTC))[:13] + ":00", dict(c), c.total())
        for h, c in sorted(by_hour.items(), reverse=True)
    ]


@router.get("/admin/deadletters")
async def deadletters_page(
    request: Request,
    admin: AdminDep,
    reason: Annotated[str | None, Query(max_length=64)] = None,
) -> Response:
    """Refused messages: totals per reason, per hour (last day), the latest examples."""
    services = _services(request)
    since = datetime.now(UTC) - timedelta(hours=DEADLETTER_HOURS)
    totals = await services.state.deadletter_counts()
    hours = hour_table(await services.state.deadletters_per_hour(since))
    latest = await services.state.deadletters(reason=reason, limit=50)
    examples = [
        {
            "at": _when(d.received_at),
            "reason": d.reason,
            "detail": d.detail,
            "topic": d.topic,
            "payload": d.payload[:200].decode("utf-8", "replace"),
        }
        for d in latest
    ]
    return render(
        request,
        "admin_deadletters.html",
        admin,
        totals=sorted(totals.items(), key=lambda kv: -kv[1]),
        reasons=sorted(totals),
        hours=hours,
        examples=examples,
        reason=reason,
        hours_back=DEADLETTER_HOURS,
    )


# ---------------------------------------------------------------- deliveries, outbox


@router.get("/admin/deliveries")
async def deliveries_page(request: Request, admin: AdminDep) -> Response:
    """Delivery attempts (newest first) and how many succeeded per channel."""
    alerts = _alerts(request)
    attempts = await alerts.deliveries(limit=200)
    per_channel: dict[str, Counter[str]] = {}
    for a in attempts:
        outcome = "sent" if a.ok else ("failed" if a.ok is False else "in flight")
        per_channel.setdefault(a.channel, Counter())[outcome] += 1
    rows = [
        {
            "at": _when(a.started_at),
            "channel": a.channel,
            "recipient": a.recipient,
            "alert_id": a.alert_id,
            "attempt": a.attempt,
            "ok": a.ok,
            "detail": a.detail,
        }
        for a in attempts
    ]
    return render(
        request,
        "admin_deliveries.html",
        admin,
        rows=rows,
        per_channel=sorted((c, dict(n)) for c, n in per_channel.items()),
    )


@router.get("/admin/outbox")
async def outbox_page(
    request: Request,
    admin: AdminDep,
    sent: Annotated[str | None, Query(max_length=200)] = None,
) -> Response:
    """The local outbox: every message the gateway queued, with its status. With no
    e-mail server configured (the demo) this is where messages can be read."""
    alerts = _alerts(request)
    messages = await alerts.local_outbox(limit=100)
    rows = [
        {
            "at": _when(n.created_at),
            "alert_id": n.alert_id,
            "site_id": n.site_id,
            "audience": n.audience.replace("_", " "),
            "channel": n.channel,
            "recipient": n.recipient_name or n.recipient,
            "reason": n.reason.value,
            "severity": n.severity.value,
            "status": n.status.value,
            "error": n.last_error or "",
            "subject": subject,
            "text": body,
        }
        for n, subject, body in messages
    ]
    return render(
        request,
        "admin_outbox.html",
        admin,
        rows=rows,
        email_configured=alerts.email_configured,
        sites=sorted((s.id, s.name) for s in _services(request).registry),
        sent=sent,
    )


@router.post("/admin/test-alert")
async def send_test_alert(
    request: Request,
    admin: AdminDep,
    site_id: Annotated[str, Form(max_length=200)],
) -> Response:
    """Queue a test alert to a site's homeowner contacts, then show the outbox."""
    services = _services(request)
    if services.registry.get(site_id) is None:
        raise NotFound(f"no site with id {site_id!r}")
    await _alerts(request).send_test(site_id, by=admin.username)
    return RedirectResponse("/admin/outbox?sent=" + site_id, status_code=303)


# ---------------------------------------------------------------- inject a scenario


def _inject_page(
    request: Request, admin: Principal, *, refused: str = "", status_code: int = 200
) -> Response:
    services = _services(request)
    response = render(
        request,
        "admin_inject.html",
        admin,
        availability=inject.availability(services.data_dir),
        sites=sorted((s.id, s.name) for s in services.registry),
        scenarios=sorted(inject.fault_scenarios().items()),
        lead_minutes=int(inject.LEAD.total_seconds() // 60),
        injected=request.query_params.get("injected", ""),
        scenario=request.query_params.get("scenario", ""),
        refused=refused,
    )
    response.status_code = status_code
    return response


async def _inject(request: Request, site_id: str, scenario: str) -> inject.Injection:
    services = _services(request)
    if services.registry.get(site_id) is None:
        raise NotFound(f"no site with id {site_id!r}")
    # Stopping the old simulator waits for it: off the event loop.
    return await asyncio.to_thread(inject.inject, services.data_dir, site_id, scenario)


@router.get("/admin/inject")
async def inject_page(request: Request, admin: AdminDep) -> Response:
    """The demo's "inject a scenario into a site": a form, or why it cannot be done here."""
    return _inject_page(request, admin)


@router.post("/admin/inject")
async def inject_form(
    request: Request,
    admin: AdminDep,
    site_id: Annotated[str, Form(max_length=200)],
    scenario: Annotated[str, Form(max_length=200)],
) -> Response:
    """Start the chosen scenario's fault at one demo site, then show what was done."""
    try:
        done = await _inject(request, site_id, scenario)
    except inject.InjectRefused as exc:
        return _inject_page(request, admin, refused=str(exc), status_code=409)
    return RedirectResponse(
        f"/admin/inject?injected={done.site_id}&scenario={done.scenario}", status_code=303
    )


class InjectRequest(BaseModel):
    """Which demo site gets which scenario's fault."""

    site_id: str = Field(max_length=200)
    scenario: str = Field(max_length=200, description="A scenario name (sumpwatch simulate --list)")


@api_router.post("/demo/inject")
async def inject_api(request: Request, admin: AdminDep, body: InjectRequest) -> Response:
    """Demo only, admins only: restart the simulator with ``scenario``'s fault at
    ``site_id`` (begun 15 minutes ago). 409 with the reason when this gateway cannot."""
    try:
        done = await _inject(request, body.site_id, body.scenario)
    except inject.InjectRefused as exc:
        return JSONResponse({"detail": str(exc)}, status_code=409)
    return JSONResponse(
        {
            "site_id": done.site_id,
            "scenario": done.scenario,
            "template": done.template,
            "simulator_pid": done.pid,
            "fault_began": done.fault_began.isoformat(),
        }
    )


# ---------------------------------------------------------------- metrics


@router.get("/admin/metrics")
async def metrics_page(request: Request, admin: AdminDep) -> Response:
    """The ingest counters in words (the Prometheus text stays at /metrics)."""
    services = _services(request)
    m = services.metrics
    counters = [
        ("Messages received", m.received),
        ("Readings stored", m.stored),
        ("Duplicates dropped", m.duplicates),
        ("Status messages", m.status_messages),
        ("Finding events", m.findings_events),
        ("Store errors", m.store_errors),
        ("Waiting to be written", m.pending),
    ]
    rejected = sorted(m.rejected.items(), key=lambda kv: -kv[1])
    return render(
        request,
        "admin_metrics.html",
        admin,
        counters=counters,
        rejected=rejected,
        rejected_total=sum(m.rejected.values()),
        broker_connected=m.broker_connected,
        store=sorted(services.store.stats().items()),
    )
