"""One entry point for the CLI, the API and the scheduler: scope + format -> file bytes."""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Literal

from gateway.errors import ConfigError
from gateway.reports.assemble import assemble_site_report, assemble_village_report
from gateway.reports.models import SiteReport, VillageReport
from gateway.reports.season import parse_season_label
from gateway.reports.sources import ReportSources
from gateway.units import UNIT_SYSTEMS, UnitSystem

ReportFormat = Literal["pdf", "html", "csv"]
FORMATS: tuple[ReportFormat, ...] = ("pdf", "html", "csv")
MEDIA_TYPES: dict[str, str] = {
    "pdf": "application/pdf",
    "html": "text/html; charset=utf-8",
    "csv": "text/csv; charset=utf-8",
}


@dataclass(frozen=True, slots=True)
class RenderedReport:
    """A finished report file."""

    content: bytes
    media_type: str
    filename: str


def _check(fmt: str, units: str) -> None:
    if fmt not in FORMATS:
        raise ConfigError(f"format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    if units not in UNIT_SYSTEMS:
        raise ConfigError(f"units must be one of {', '.join(UNIT_SYSTEMS)}, not {units!r}")


def render(
    report: SiteReport | VillageReport, fmt: ReportFormat, units: UnitSystem = "us"
) -> bytes:
    """Format assembled report data in ``units`` (CPU-bound: call it off the event loop).

    The report data is in SI whatever ``units`` is; only the file differs.
    """
    _check(fmt, units)
    # Imported at the first render, not with the module: the gateway imports this for
    # its report schedule, and matplotlib and ReportLab are ~0.5 s of its start-up
    # (issue 17 item 6) for documents written once a month.
    from gateway.reports.render_csv import site_csv, village_csv
    from gateway.reports.render_html import site_html, village_html
    from gateway.reports.render_pdf import site_pdf, village_pdf

    if isinstance(report, SiteReport):
        if fmt == "pdf":
            return site_pdf(report, units=units)
        if fmt == "html":
            return site_html(report, units=units).encode("utf-8")
        return site_csv(report, units).encode("utf-8")
    if fmt == "pdf":
        return village_pdf(report, units=units)
    if fmt == "html":
        return village_html(report, units=units).encode("utf-8")
    return village_csv(report, units).encode("utf-8")


def report_filename(
    season: str, fmt: str, *, site: str | None = None, jurisdiction: str | None = None
) -> str:
    """E.g. ``winter-2026-2027-site-hose.pdf`` or ``winter-2026-2027-edgar.csv``."""
    scope = f"site-{site}" if site else (jurisdiction or "all-sites")
    return f"winter-{season}-{scope}.{fmt}"


async def build_winter_reports(
    sources: ReportSources,
    season: str,
    fmts: Sequence[ReportFormat],
    *,
    site: str | None = None,
    jurisdiction: str | None = None,
    site_ids: Collection[str] | None = None,
    now: datetime | None = None,
    units: UnitSystem = "us",
) -> list[RenderedReport]:
    """Assemble one report once and render it in each of ``fmts``, in ``units``.

    A property report for ``site``; otherwise a village report of
    ``jurisdiction``'s sites (or all registered sites), kept to ``site_ids`` when
    given (a caller's access scope). Raises :class:`~gateway.errors.NotFound` for
    an unknown site and :class:`~gateway.errors.ConfigError` for a bad season,
    format, unit system or scope.
    """
    parse_season_label(season)
    for fmt in fmts:
        _check(fmt, units)
    if site and jurisdiction:
        raise ConfigError("give a site or a jurisdiction, not both")
    if jurisdiction and not sources.registry.in_jurisdiction(jurisdiction):
        raise ConfigError(f"no site is registered under jurisdiction {jurisdiction!r}")
    report: SiteReport | VillageReport
    if site:
        report = await assemble_site_report(sources, site, season, now=now)
    else:
        chosen: list[str] | None = None
        if jurisdiction is not None:
            chosen = [s.id for s in sources.registry.in_jurisdiction(jurisdiction)]
        if site_ids is not None:
            allowed = set(site_ids)
            pool = chosen if chosen is not None else [s.id for s in sources.registry]
            chosen = [s for s in pool if s in allowed]
        report = await assemble_village_report(
            sources, season, jurisdiction=jurisdiction, site_ids=chosen, now=now
        )
    out = []
    for fmt in fmts:
        content = await asyncio.to_thread(render, report, fmt, units)
        name = report_filename(season, fmt, site=site, jurisdiction=jurisdiction)
        out.append(RenderedReport(content, MEDIA_TYPES[fmt], name))
    return out


async def build_winter_report(
    sources: ReportSources,
    season: str,
    fmt: ReportFormat,
    *,
    site: str | None = None,
    jurisdiction: str | None = None,
    site_ids: Collection[str] | None = None,
    now: datetime | None = None,
    units: UnitSystem = "us",
) -> RenderedReport:
    """One report in one format (see :func:`build_winter_reports`)."""
    (rendered,) = await build_winter_reports(
        sources,
        season,
        [fmt],
        site=site,
        jurisdiction=jurisdiction,
        site_ids=site_ids,
        now=now,
        units=units,
    )
    return rendered


def write_atomically(path: Path, content: bytes) -> None:
    """Write a file so readers never see half of it (temp file, then rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(content)
    tmp.replace(path)
