"""Live updates over server-sent events, fed by polling the store.

Each open page holds one SSE connection. Its generator looks at the store every
``POLL_S`` seconds (one cheap ``latest()`` query, plus the alert list) and only
when something changed renders the page's panels again and sends them, with the
new raw readings as chart points. Polling was chosen over a publish/subscribe hub
in the pipeline: at one gateway's scale (hundreds of sites, a few viewers each)
it costs little, needs no hook in the ingest path, and a page that reconnects
catches up by itself. The session is re-checked every ``RECHECK_S`` so a
logged-out or disabled account stops receiving data.

Nothing arriving is news too: a sensor that stops reporting changes no row of the
store, yet the page must say so. So the panels are also re-rendered every
``RERENDER_S`` whatever the fingerprint says (the status is judged against the
clock, "last seen" moves on).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from fastapi import Request
from sse_starlette import EventSourceResponse, ServerSentEvent

from gateway.accounts.access import authenticate
from gateway.domain import Reading
from gateway.registry import SiteConfig
from gateway.services import Services, get_services
from gateway.web import sources
from gateway.web.series import live_points
from gateway.web.units import UnitSystem

POLL_S = 2.0
CONSOLE_POLL_S = 5.0
RECHECK_S = 30.0
PING_S = 15.0
RERENDER_S = 30.0


async def _fingerprint(services: Services, site_ids: list[str]) -> tuple[Any, ...]:
    """Changes whenever a page of these sites would show something new."""
    parts: list[Any] = []
    for site_id in site_ids:
        latest: dict[str, Reading] = await services.store.latest(site_id)
        parts.append(tuple(sorted((n, r.ts) for n, r in latest.items())))
    alerts = []
    for site_id in site_ids:
        alerts += [
            (a.id, a.state, a.updated_at)
            for a in await sources.live_alerts(services, site_id=site_id)
        ]
    findings = [
        (f.id, f.updated_at, f.level) for f in await sources.open_findings(services, site_ids)
    ]
    return (tuple(parts), tuple(sorted(alerts)), tuple(sorted(findings)))


async def _still_allowed(request: Request, allowed: Callable[[Any], bool]) -> bool:
    principal = await authenticate(request)
    return principal is not None and allowed(principal)


def site_events(
    request: Request,
    site: SiteConfig,
    units: UnitSystem,
    render_panels: Callable[[], Awaitable[str]],
) -> EventSourceResponse:
    """The dashboard's stream: ``panels`` (HTML of the status panels) and ``points``."""
    services = get_services(request)

    async def stream() -> AsyncIterator[ServerSentEvent]:
        seen: tuple[Any, ...] | None = None
        last_ts: dict[str, datetime] = {
            n: r.ts for n, r in (await services.store.latest(site.id)).items()
        }
        checked = rendered = asyncio.get_running_loop().time()
        while True:
            now_mono = asyncio.get_running_loop().time()
            if now_mono - checked > RECHECK_S:
                if not await _still_allowed(request, lambda p: p.can_see(site)):
                    yield ServerSentEvent(event="logout", data="{}")
                    return
                checked = now_mono
            fingerprint = await _fingerprint(services, [site.id])
            if fingerprint != seen or now_mono - rendered > RERENDER_S:
                if seen is not None:
                    yield ServerSentEvent(event="panels", data=await render_panels())
                    points = await _new_points(services, site, last_ts, units)
                    if points:
                        yield ServerSentEvent(event="points", data=json.dumps(points))
                seen, rendered = fingerprint, now_mono
            await asyncio.sleep(POLL_S)

    return EventSourceResponse(stream(), ping=PING_S)


async def _new_points(
    services: Services, site: SiteConfig, last_ts: dict[str, datetime], units: UnitSystem
) -> dict[str, list[tuple[int, float]]]:
    """Chart points of readings newer than the last ones sent, per series key."""
    out: dict[str, list[tuple[int, float]]] = {}
    now = datetime.now(UTC)
    for node in site.nodes:
        since = last_ts.get(node.id, now - timedelta(minutes=5))
        rows = await sources.readings(
            services,
            site.id,
            node.id,
            since + timedelta(microseconds=1),
            now + timedelta(minutes=5),
            limit=2000,
        )
        if rows:
            last_ts[node.id] = rows[-1].ts
            for key, pts in live_points(rows, units).items():
                out.setdefault(key, []).extend(pts)
    return out


def console_events(
    request: Request,
    jurisdiction: str,
    site_ids: list[str],
    render_panels: Callable[[], Awaitable[str]],
) -> EventSourceResponse:
    """The console's stream: ``panels`` (HTML of table, alerts and audit) when it changed."""
    services = get_services(request)

    async def stream() -> AsyncIterator[ServerSentEvent]:
        seen: tuple[Any, ...] | None = None
        checked = rendered = asyncio.get_running_loop().time()
        while True:
            now_mono = asyncio.get_running_loop().time()
            if now_mono - checked > RECHECK_S:
                if not await _still_allowed(
                    request, lambda p: p.can_see_jurisdiction(jurisdiction)
                ):
                    yield ServerSentEvent(event="logout", data="{}")
                    return
                checked = now_mono
            fingerprint = await _fingerprint(services, site_ids)
            if fingerprint != seen or now_mono - rendered > RERENDER_S:
                if seen is not None:
                    yield ServerSentEvent(event="panels", data=await render_panels())
                seen, rendered = fingerprint, now_mono
            await asyncio.sleep(CONSOLE_POLL_S)

    return EventSourceResponse(stream(), ping=PING_S)
