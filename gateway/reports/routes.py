"""``GET /reports/winter``: the winter report as a download (PDF, CSV) or a page (HTML).

Include with ``app.include_router(reports.routes.router)``. The sources come from
``request.app.state.runtime`` (registry, store, db, and packs/findings/alerts when
the runtime has them). Access control checks ``site`` and ``jurisdiction``
against the caller's scope; a village report without either covers the sites the
caller may see.
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, HTTPException, Query, Request, Response

from gateway.api.deps import ScopeDep
from gateway.errors import ConfigError, NotFound
from gateway.reports.service import build_winter_report
from gateway.reports.sources import sources_from_runtime
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
    request: Request,
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
    sources = sources_from_runtime(request.app.state.runtime)
    try:
        rendered = await build_winter_report(
            sources,
            season,
            format,
            site=site,
            jurisdiction=jurisdiction,
            site_ids=None if site else scope.site_ids(),
            units=units,
        )
    except NotFound as exc:
        raise HTTPException(status_code=404, detail=str(exc)) from exc
    except ConfigError as exc:
        raise HTTPException(status_code=400, detail=str(exc)) from exc
    disposition = "inline" if format == "html" else "attachment"
    return Response(
        content=rendered.content,
        media_type=rendered.media_type,
        headers={"Content-Disposition": f'{disposition}; filename="{rendered.filename}"'},
    )
