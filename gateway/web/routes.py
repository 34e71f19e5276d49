"""The pages: home (who am I, where to go), homeowner dashboard, public-works console.

Every route here declares ``PrincipalDep`` or names a ``{site_id}`` /
``{jurisdiction}``, so the app-wide access control scopes it (gateway.accounts.access).
Panels are rendered by Jinja2 partials, both into the page and into the live
updates, so there is one way each panel is drawn.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Form, HTTPException, Query, Request
from fastapi.responses import JSONResponse, RedirectResponse, Response
from fastapi.routing import iter_route_contexts
from sse_starlette import EventSourceResponse

from alerts.models import Alert
from gateway.accounts.access import PrincipalDep, ScopeDep, StaffDep
from gateway.accounts.models import Principal
from gateway.errors import NotEnabled
from gateway.registry import SiteConfig
from gateway.services import AlertActions, Services, get_services
from gateway.web import live, sources
from gateway.web.series import RANGES, ChartsView, Range, charts_view, season_start
from gateway.web.templating import render, templates
from gateway.web.units import UNITS_COOKIE, units_of
from gateway.web.views import (
    ConsoleView,
    SiteOverview,
    console_view,
    site_overview,
    verdict_installation,
)
from gateway.web.wording import installation_facts

router = APIRouter(include_in_schema=False)
api = APIRouter(tags=["dashboard"])


def _services(request: Request) -> Services:
    return get_services(request)


def _site(request: Request, site_id: str) -> SiteConfig:
    # access_control has already answered 404 for a site out of scope.
    site = _services(request).registry.get(site_id)
    if site is None:
        raise HTTPException(404, detail=f"no site with id {site_id!r}")
    return site


def _winter_season(request: Request, site: SiteConfig) -> str:
    """The current season's label ("2026-2027") when the reports router is mounted."""
    app = request.app
    mounted = getattr(app.state, "reports_mounted", None)
    if mounted is None:
        mounted = any(ctx.path == "/reports/winter" for ctx in iter_route_contexts(app.routes))
        app.state.reports_mounted = mounted
    if not mounted:
        return ""
    start = season_start(site, datetime.now(UTC), _services(request))
    return f"{start.year}-{start.year + 1}"


def _jurisdiction_sites(request: Request, jurisdiction: str) -> list[SiteConfig]:
    sites = _services(request).registry.in_jurisdiction(jurisdiction)
    if not sites:
        raise HTTPException(404, detail=f"no jurisdiction with id {jurisdiction!r}")
    return sites


# ---------------------------------------------------------------------- pages


@router.get("/")
async def home(request: Request, scope: ScopeDep) -> Response:
    """Send each person where they work: their site, their console, or a list."""
    principal = scope.principal
    sites = scope.sites()
    jurisdictions = scope.jurisdictions()
    if not principal.is_staff and len(sites) == 1:
        return RedirectResponse(f"/site/{sites[0].id}", status_code=303)
    if principal.is_staff and not principal.is_admin and len(jurisdictions) == 1:
        return RedirectResponse(f"/console/{jurisdictions[0]}", status_code=303)
    packs = sources.packs(_services(request))
    named = [(j, packs[j].name.split(":")[0] if j in packs else j) for j in jurisdictions]
    # An admin's home says how many messages were refused (issue 20.11: where they look).
    refused = await _services(request).state.deadletter_counts() if principal.is_admin else {}
    return render(
        request,
        "index.html",
        principal,
        sites=sites,
        jurisdictions=named,
        refused=sum(refused.values()),
    )


@router.get("/units")
async def set_units(
    request: Request, principal: PrincipalDep, set: str = "us", next: str = "/"
) -> Response:
    """Switch US customary / metric (a cookie) and go back."""
    target = next if next.startswith("/") and not next.startswith("//") else "/"
    response = RedirectResponse(target, status_code=303)
    response.set_cookie(
        UNITS_COOKIE, "metric" if set == "metric" else "us", max_age=365 * 86400, samesite="lax"
    )
    return response


async def _overview(request: Request, site: SiteConfig, principal: Principal) -> SiteOverview:
    return await site_overview(_services(request), site, principal, units_of(request))


def _panels_html(request: Request, name: str, principal: Principal, **context: Any) -> str:
    template = templates.get_template(name)
    return template.render(
        request=request, principal=principal, csrf_token=principal.csrf_token or "", **context
    )


@router.get("/site/{site_id}")
async def dashboard(request: Request, site_id: str, principal: PrincipalDep) -> Response:
    """The homeowner dashboard of one site (also public works' drill-down)."""
    site = _site(request, site_id)
    overview = await _overview(request, site, principal)
    return render(
        request,
        "dashboard.html",
        principal,
        site=site,
        o=overview,
        ranges=RANGES,
        installation=installation_facts(
            verdict_installation(site, datetime.now(UTC)), units_of(request)
        ),
        winter_season=_winter_season(request, site),
    )


@router.get("/console/{jurisdiction}")
async def console(request: Request, jurisdiction: str, principal: PrincipalDep) -> Response:
    """The public-works console of one jurisdiction."""
    sites = _jurisdiction_sites(request, jurisdiction)
    view = await console_view(_services(request), jurisdiction, sites, principal, units_of(request))
    map_points = [
        {
            "id": r.site_id,
            "name": r.name,
            "address": r.address,
            "lat": r.lat,
            "lon": r.lon,
            "status": r.status,
            "status_text": r.status_text,
            "open_findings": r.open_findings,
        }
        for r in view.rows
        if r.lat is not None and r.lon is not None
    ]
    tiles = _services(request).map
    map_config = {"tiles": tiles.tile_url, "attribution": tiles.attribution}
    return render(
        request,
        "console.html",
        principal,
        c=view,
        winter_season=_winter_season(request, sites[0]),
        # Escaped so no value can close the <script> element it is embedded in.
        map_json=json.dumps(map_points).replace("<", "\\u003c"),
        map_config_json=json.dumps(map_config).replace("<", "\\u003c"),
    )


# ---------------------------------------------------------------------- data for the pages


@api.get("/site/{site_id}/overview.json", response_model=SiteOverview)
async def overview_json(request: Request, site_id: str, principal: PrincipalDep) -> SiteOverview:
    """The dashboard's state as JSON (what the page shows, in the viewer's units)."""
    return await _overview(request, _site(request, site_id), principal)


@api.get("/site/{site_id}/charts.json", response_model=ChartsView)
async def charts_json(
    request: Request,
    site_id: str,
    principal: PrincipalDep,
    range: Annotated[Range, Query(description="24h, 7d or season")] = "24h",
) -> ChartsView:
    """Chart series of one range, from rollups, in the viewer's units."""
    return await charts_view(_services(request), _site(request, site_id), range, units_of(request))


@api.get("/site/{site_id}/events")
async def site_events(
    request: Request, site_id: str, principal: PrincipalDep
) -> EventSourceResponse:
    """Server-sent events: ``panels`` (HTML) and ``points`` (new chart points)."""
    site = _site(request, site_id)

    async def panels() -> str:
        overview = await _overview(request, site, principal)
        return _panels_html(request, "_overview.html", principal, o=overview, site=site)

    return live.site_events(request, site, units_of(request), panels)


@api.get("/console/{jurisdiction}/view.json", response_model=ConsoleView)
async def console_json(request: Request, jurisdiction: str, principal: PrincipalDep) -> ConsoleView:
    """The console's state as JSON."""
    sites = _jurisdiction_sites(request, jurisdiction)
    return await console_view(_services(request), jurisdiction, sites, principal, units_of(request))


@api.get("/console/{jurisdiction}/events")
async def console_events(
    request: Request, jurisdiction: str, principal: PrincipalDep
) -> EventSourceResponse:
    """Server-sent events: ``panels`` (HTML of the table, alerts and audit)."""
    sites = _jurisdiction_sites(request, jurisdiction)

    async def panels() -> str:
        view = await console_view(
            _services(request), jurisdiction, sites, principal, units_of(request)
        )
        return _panels_html(request, "_console.html", principal, c=view)

    return live.console_events(request, jurisdiction, [s.id for s in sites], panels)


# ---------------------------------------------------------------------- alert actions


def _actions(request: Request) -> AlertActions:
    actions = _services(request).alert_actions
    if actions is None:
        raise NotEnabled("alerts are not enabled on this gateway")
    return actions


def _answer(request: Request, alert: Alert, back: str) -> Response:
    if "application/json" in request.headers.get("accept", ""):
        return JSONResponse(
            {"id": alert.id, "state": alert.state.value, "assignee": alert.assignee}
        )
    target = back if back.startswith("/") and not back.startswith("//") else "/"
    return RedirectResponse(target, status_code=303)


@router.post("/ui/alerts/{alert_id}/ack")
async def ack_alert(
    request: Request,
    alert_id: str,
    principal: PrincipalDep,
    note: Annotated[str, Form(max_length=2000)] = "",
    back: Annotated[str, Form(max_length=500)] = "/",
) -> Response:
    """Acknowledge an alert of a site you can see (homeowner or staff)."""
    alert = await _actions(request).acknowledge(alert_id, by=principal.username, note=note)
    return _answer(request, alert, back)


@router.post("/ui/alerts/{alert_id}/assign")
async def assign_alert(
    request: Request,
    alert_id: str,
    _staff: StaffDep,
    assignee: Annotated[str, Form(max_length=200)] = "",
    back: Annotated[str, Form(max_length=500)] = "/",
) -> Response:
    """Assign an alert to someone at public works (staff only)."""
    alert = await _actions(request).assign(alert_id, assignee=assignee)
    return _answer(request, alert, back)


@router.post("/ui/alerts/{alert_id}/resolve")
async def resolve_alert(
    request: Request,
    alert_id: str,
    staff: StaffDep,
    note: Annotated[str, Form(max_length=2000)] = "",
    back: Annotated[str, Form(max_length=500)] = "/",
    confirm: Annotated[bool, Form()] = False,
) -> Response:
    """Resolve an alert by hand, with a note (staff only); the form's checkbox
    confirms that the condition is still detected (409 without it)."""
    alert = await _actions(request).resolve(
        alert_id, by=staff.username, admin=staff.is_admin, note=note, confirm=confirm
    )
    return _answer(request, alert, back)
