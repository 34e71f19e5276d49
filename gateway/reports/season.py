"""Winter seasons: "2026-2027" plus a site's rule pack -> the exact local period.

A pack's :class:`~gateway.rules.pack.Season` is a recurring (month, day) interval
across New Year; a report needs one concrete instance of it, in the site's time
zone (a season day is a *local* calendar day).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from gateway.domain import Citation
from gateway.errors import ConfigError
from gateway.rules.pack import DEFAULT_SEASON_END, DEFAULT_SEASON_START, RulePack, Season

_LABEL = re.compile(r"^(\d{4})-(\d{4})$")


def parse_season_label(label: str) -> int:
    """The first year of a season label such as ``"2026-2027"``."""
    match = _LABEL.match(label.strip())
    if match is None or int(match.group(2)) != int(match.group(1)) + 1:
        raise ConfigError(f"season must look like 2026-2027 (consecutive years), not {label!r}")
    return int(match.group(1))


def season_label(first_year: int) -> str:
    """``2026`` -> ``"2026-2027"``."""
    return f"{first_year}-{first_year + 1}"


def default_season() -> Season:
    """The Nov 15 - Apr 15 season used when a pack (or site) has none."""
    return Season(DEFAULT_SEASON_START, DEFAULT_SEASON_END, is_default=True)


@dataclass(frozen=True, slots=True)
class SeasonPeriod:
    """One concrete winter season of one site: local days and their UTC instants.

    ``first_day``..``last_day`` are both included; ``start``/``end`` are the UTC
    instants of local midnight at the start of ``first_day`` and after ``last_day``.
    """

    label: str
    first_day: date
    last_day: date
    start: datetime
    end: datetime
    timezone: str
    is_default: bool
    citations: tuple[Citation, ...] = ()
    note: str = ""

    @property
    def tz(self) -> ZoneInfo:
        """The site's time zone."""
        return ZoneInfo(self.timezone)

    @property
    def n_days(self) -> int:
        """Days in the season."""
        return (self.last_day - self.first_day).days + 1

    def days(self) -> list[date]:
        """Every local day of the season, in order."""
        return [self.first_day + timedelta(days=i) for i in range(self.n_days)]

    def describe(self) -> str:
        """E.g. "Nov 15, 2026 - Apr 15, 2027 (rule pack default)"."""
        text = f"{self.first_day:%b} {self.first_day.day}, {self.first_day.year} - "
        text += f"{self.last_day:%b} {self.last_day.day}, {self.last_day.year}"
        return text + (" (default: the rule pack sets no winter season)" if self.is_default else "")

    def local_midnight(self, day: date) -> datetime:
        """UTC instant of the local midnight that starts ``day``."""
        return datetime.combine(day, time(0), self.tz).astimezone(UTC)


def season_period(label: str, pack: RulePack | None, timezone: str) -> SeasonPeriod:
    """The season ``label`` of a site under ``pack`` (default season without a pack)."""
    first_year = parse_season_label(label)
    season = pack.season if pack is not None else default_season()
    start_md, end_md = season.start, season.end
    first = date(first_year, *start_md)
    # A season that crosses New Year ends in the next year; one inside a year (a
    # pack could define Jan 1 - Mar 31) ends in the same year as it starts.
    last_year = first_year + 1 if end_md < start_md else first_year
    last = date(last_year, *end_md)
    tz = ZoneInfo(timezone)
    start = datetime.combine(first, time(0), tz).astimezone(UTC)
    end = datetime.combine(last + timedelta(days=1), time(0), tz).astimezone(UTC)
    note = season.note
    if pack is None:
        note = "No rule pack for this site; the default season is used."
    return SeasonPeriod(
        label=season_label(first_year),
        first_day=first,
        last_day=last,
        start=start,
        end=end,
        timezone=timezone,
        is_default=season.is_default,
        citations=season.citations,
        note=note,
    )


def season_of(day: date, pack: RulePack | None) -> str | None:
    """The label of the season that contains local ``day``, or None outside every season."""
    season = pack.season if pack is not None else default_season()
    if not season.contains(day):
        return None
    crosses = season.end < season.start
    if crosses and (day.month, day.day) <= season.end:
        return season_label(day.year - 1)
    return season_label(day.year)
