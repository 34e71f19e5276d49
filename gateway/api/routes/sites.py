"""GET /sites, /sites/{id}, /sites/{id}/readings."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Query

from gateway.api.deps import ScopeDep, ServicesDep, SiteDep, UtcTime
from gateway.api.models import NodePublic, ReadingPublic, ReadingsPublic, SitePublic, SiteSummary
from gateway.contract import FIELDS
from gateway.store.base import SeriesQuery

router = APIRouter(tags=["sites"])


@router.get("/sites", response_model=list[SiteSummary])
async def list_sites(scope: ScopeDep) -> list[SiteSummary]:
    """Every site in the registry that the caller may see."""
    return [SitePublic.summary(site) for site in scope.sites()]


@router.get("/sites/{site_id}", response_model=SitePublic)
async def get_site(site: SiteDep, services: ServicesDep) -> SitePublic:
    """One site with its nodes, their availability and the installation."""
    statuses = {s.node_id: s for s in await services.state.statuses(site.id)}
    latest = await services.store.latest(site.id)
    nodes = []
    for node in site.nodes:
        status = statuses.get(node.id)
        last = latest.get(node.id)
        nodes.append(
            {
                "id": node.id,
                "kind": node.kind.value,
                "interval_s": node.interval_s,
                "online": status.online if status else None,
                "last_seen": last.ts if last else None,
            }
        )
    summary = SitePublic.summary(site)
    return SitePublic(
        **summary.model_dump(),
        nodes=[NodePublic(**n) for n in nodes],
        pit=site.pit.model_dump(),
        installation=site.installation.model_dump(mode="json"),
        waivers=[w.model_dump(mode="json") for w in site.waivers],
    )


@router.get("/sites/{site_id}/readings", response_model=ReadingsPublic)
async def site_readings(
    site: SiteDep,
    services: ServicesDep,
    node: Annotated[str | None, Query(description="Only this node")] = None,
    field: Annotated[list[str] | None, Query(description="Only these fields")] = None,
    start: Annotated[UtcTime | None, Query(alias="from", description="From (inclusive)")] = None,
    end: Annotated[UtcTime | None, Query(alias="to", description="To (exclusive)")] = None,
    limit: Annotated[int, Query(ge=1, le=100_000)] = 10_000,
) -> ReadingsPublic:
    """Stored readings of a site in device-time order."""
    if node is not None and site.node(node) is None:
        raise HTTPException(404, detail=f"site {site.id!r} has no node {node!r}")
    fields = tuple(field or ())
    unknown = [f for f in fields if f not in FIELDS]
    if unknown:
        # The known names, not the submitted ones: error bodies echo no input.
        raise HTTPException(422, detail=f"unknown field in 'field'; known: {sorted(FIELDS)}")
    rows = await services.store.readings(
        SeriesQuery(site.id, node_id=node, fields=fields, start=start, end=end, limit=limit)
    )
    return ReadingsPublic(
        site_id=site.id, count=len(rows), readings=[ReadingPublic.of(r, fields) for r in rows]
    )
