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
from pydantic import AfterValidator, StringConstraints

from gateway.accounts.access import ScopeDep
from gateway.errors import ConfigError
from gateway.reports.season import parse_season_label
from gateway.reports.service import build_winter_report
from gateway.reports.sources import sources_from_services
from gateway.services import ServicesDep
from gateway.units import UnitSystem

router = APIRouter(tags=["reports"])

#: Years a season may start in: the same range the API accepts for times (UtcTime).
MIN_YEAR, MAX_YEAR = 1970, 9999


def _season_label(label: str) -> str:
    """Consecutive years the calendar can hold: ``0000-0001`` was a 500 (no year 0)."""
    try:
        first = parse_season_label(label)
    except ConfigError as exc:  # pydantic turns only ValueError into a 422
        raise ValueError("must be two consecutive years, e.g. 2026-2027") from exc
    if not MIN_YEAR <= first < MAX_YEAR:
        raise ValueError(f"the first year must be between {MIN_YEAR} and {MAX_YEAR - 1}")
    return label


#: A season label such as ``2026-2027``, checked before the route runs (else 422).
SeasonLabel = Annotated[
    str, StringConstraints(pattern=r"^\d{4}-\d{4}$"), AfterValidator(_season_label)
]


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
    season: Annotated[SeasonLabel, Query(examples=["2026-2027"])],
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
