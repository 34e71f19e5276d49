"""Scheduled winter reports: monthly during each season and once at its end.

For every jurisdiction with registered sites, and for the season in progress
and the one before it, the schedule writes the village report and every
property's report at each month boundary inside the season (data through local
midnight of the 1st) and after the season's last day, into::

    <reports_dir>/winter-<season>/<jurisdiction>/through-<YYYY-MM-DD>/<file>
    <reports_dir>/winter-<season>/<jurisdiction>/final/<file>

A report is due ``SETTLE`` after its cut (rollups lag real time by minutes) and is
written once: an existing file is skipped, so restarts and repeated runs are
harmless, and files missed while the gateway was down are written when it is back
(up to ``CATCH_UP`` late).

:class:`ReportTimes` adds cuts of an operator's choosing (a drill, the cluster
proof's report due in the middle of a failover) and sets the settle time; they are
written like the season's, to ``through-<YYYY-MM-DDTHHMMSSZ>`` folders.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Literal

from gateway.errors import SumpWatchError
from gateway.registry.models import SiteConfig
from gateway.reports.season import SeasonPeriod, season_label, season_period
from gateway.reports.service import (
    ReportFormat,
    build_winter_reports,
    report_filename,
    write_atomically,
)
from gateway.reports.sources import ReportSources
from gateway.units import UnitSystem

log = logging.getLogger(__name__)

#: Wait this long after a cut before writing its report (rollups must have caught up).
SETTLE = timedelta(hours=1)
#: Cuts older than this are not caught up (a first start in autumn does not write
#: last winter's reports for sites that had no sensors then).
CATCH_UP = timedelta(days=60)
#: How often the schedule looks for due reports.
CHECK_EVERY_S = 3600.0
DEFAULT_FORMATS: tuple[ReportFormat, ...] = ("pdf", "csv")
#: Filed reports are for the village clerk: US customary units (gallons, °F), the default.
SCHEDULED_UNITS: UnitSystem = "us"


@dataclass(frozen=True, slots=True)
class ReportTimes:
    """When reports fall due: the season's cuts plus ``extra_cuts`` (UTC instants;
    one out of season reports the season last ended), each ``settle`` after its cut."""

    extra_cuts: tuple[datetime, ...] = ()
    settle: timedelta = SETTLE


@dataclass(frozen=True, slots=True)
class DueReport:
    """One report file the schedule should have written by now."""

    season: str
    kind: Literal["monthly", "final"]
    cut: datetime  # data through this instant (UTC)
    jurisdiction: str
    site: str | None  # None: the village report
    fmt: ReportFormat
    path: Path


def _month_starts(period: SeasonPeriod) -> list[date]:
    """The 1st of each month strictly inside the season (its monthly cut days)."""
    out = []
    day = date(period.first_day.year, period.first_day.month, 1)
    while day <= period.last_day:
        if period.first_day < day:
            out.append(day)
        day = date(day.year + (day.month == 12), day.month % 12 + 1, 1)
    return out


def _cuts(
    period: SeasonPeriod, extra: Sequence[datetime] = ()
) -> list[tuple[Literal["monthly", "final"], datetime, str]]:
    cuts: list[tuple[Literal["monthly", "final"], datetime, str]] = [
        ("monthly", period.local_midnight(d), f"through-{d.isoformat()}")
        for d in _month_starts(period)
    ]
    cuts.extend(
        ("monthly", cut, f"through-{cut.astimezone(UTC):%Y-%m-%dT%H%M%SZ}")
        for cut in extra
        # The season under way at the cut, or out of season the one last ended (seasons
        # start a year apart, so each cut belongs to exactly one).
        if period.start < cut <= period.start + timedelta(days=365) and cut != period.end
    )
    cuts.append(("final", period.end, "final"))
    return cuts


def due_reports(
    now: datetime,
    sources: ReportSources,
    out_dir: Path,
    *,
    formats: Sequence[ReportFormat] = DEFAULT_FORMATS,
    times: ReportTimes = ReportTimes(),
) -> list[DueReport]:
    """Every scheduled report whose time has come at ``now`` (written or not)."""
    by_jurisdiction: dict[str, list[SiteConfig]] = {}
    for site in sources.registry:
        by_jurisdiction.setdefault(site.jurisdiction, []).append(site)
    due: list[DueReport] = []
    for jurisdiction, sites in sorted(by_jurisdiction.items()):
        pack = sources.packs.get(jurisdiction)
        for first_year in (now.year - 1, now.year):
            season = season_label(first_year)
            period = season_period(season, pack, sites[0].timezone)
            for kind, cut, folder_name in _cuts(period, times.extra_cuts):
                if cut + times.settle > now or cut < now - CATCH_UP:
                    continue
                folder = out_dir / f"winter-{season}" / jurisdiction / folder_name
                for fmt in formats:
                    targets: list[str | None] = [None, *(s.id for s in sites)]
                    for target in targets:
                        name = report_filename(
                            season, fmt, site=target, jurisdiction=None if target else jurisdiction
                        )
                        due.append(
                            DueReport(season, kind, cut, jurisdiction, target, fmt, folder / name)
                        )
    return due


async def run_schedule_once(
    sources: ReportSources,
    out_dir: Path,
    *,
    now: datetime,
    formats: Sequence[ReportFormat] = DEFAULT_FORMATS,
    times: ReportTimes = ReportTimes(),
) -> list[Path]:
    """Write every due report that does not exist yet; return the files written.

    A report missing in several formats is assembled once and rendered in each.
    """
    missing: dict[tuple[str, datetime, str, str | None], list[DueReport]] = {}
    for item in due_reports(now, sources, out_dir, formats=formats, times=times):
        if not await asyncio.to_thread(item.path.exists):
            key = (item.season, item.cut, item.jurisdiction, item.site)
            missing.setdefault(key, []).append(item)
    written: list[Path] = []
    for (season, cut, jurisdiction, site), items in missing.items():
        try:
            rendered = await build_winter_reports(
                sources,
                season,
                [item.fmt for item in items],
                site=site,
                jurisdiction=None if site else jurisdiction,
                now=cut,
                units=SCHEDULED_UNITS,
            )
        except SumpWatchError as exc:
            # One bad report (a site removed from the registry...) must not stop the rest.
            log.warning("scheduled report %s failed: %s", items[0].path, exc)
            continue
        for item, report in zip(items, rendered, strict=True):
            await asyncio.to_thread(write_atomically, item.path, report.content)
            written.append(item.path)
    if written:
        log.info("wrote %d scheduled winter report file(s) to %s", len(written), out_dir)
    return written


async def run_report_schedule(
    sources: ReportSources,
    out_dir: Path,
    *,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    interval_s: float = CHECK_EVERY_S,
    formats: Sequence[ReportFormat] = DEFAULT_FORMATS,
    times: ReportTimes = ReportTimes(),
) -> None:
    """Run forever: write due reports, then wait ``interval_s`` (a TaskGroup task)."""
    while True:
        try:
            await run_schedule_once(sources, out_dir, now=clock(), formats=formats, times=times)
        except (SumpWatchError, OSError) as exc:
            log.error("report schedule: %s", exc)
        await sleep(interval_s)
