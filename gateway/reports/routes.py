"""``GET /reports/winter``: the winter report as a download (PDF, CSV) or a page (HTML).

Include with ``app.include_router(reports.routes.router)``. The sources come from
the gateway's :class:`~gateway.services.Services`; an unknown site is answered 404
and a bad season or scope 400 by the app's exception handlers (gateway.problems).
Access control checks ``site`` and ``jurisdiction``
against the caller's scope; a village report without either covers the sites the
caller may see.
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query, Response

from gateway.accounts.access import ScopeDep
from gateway.reports.service import build_winter_report
from gateway.reports.sources import sources_from_services
from gateway.services import ServicesDep
from gateway.units import UnitSystem

router = APIRouter(tags=["reports"])


@router.get(
    "/reports/winter",
    response_class=Response,
    responses={
        200: {
            "content": {"application/pdf": {}, "text/html": {}, "text/csv": {}},
            "description": "The report file",
        },
        400: {"description": "Bad season, scope or format"},
        404: {"description": "Unknown site"},
    },
)
async def winter_report(
    services: ServicesDep,
    scope: ScopeDep,
    season: Annotated[str, Query(pattern=r"^\d{4}-\d{4}$", examples=["2026-2027"])],
    site: Annotated[str | None, Query(description="One property's report")] = None,
    jurisdiction: Annotated[str | None, Query(description="A village (rule pack id)")] = None,
    format: Annotated[Literal["pdf", "html", "csv"], Query()] = "pdf",
    units: Annotated[
        UnitSystem, Query(description="us (gal, °F; the default) or metric (L, m³, °C)")
    ] = "us",
) -> Response:
    """The winter report of a property (``site``) or a village (``jurisdiction``, or all)."""
    rendered = await build_winter_report(
        sources_from_services(services),
        season,
        format,
        site=site,
        jurisdiction=jurisdiction,
        site_ids=None if site else scope.site_ids(),
        units=units,
    )
    disposition = "inline" if format == "html" else "attachment"
    return Response(
        content=rendered.content,
        media_type=rendered.media_type,
        headers={"Content-Disposition": f'{disposition}; filename="{rendered.filename}"'},
    )
