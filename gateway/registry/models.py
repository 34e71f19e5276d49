"""Site registry models (pydantic: this is a config-file edge) and the TOML loader.

See ``docs/configuration.md`` for the file format and ``deploy/sites.example.toml``
for the demo's registry.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from datetime import date, datetime, time, timedelta
from enum import StrEnum
from itertools import pairwise
from pathlib import Path
from typing import Literal, Protocol
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from gateway.contract import ID_PATTERN, NodeKind
from gateway.errors import ConfigError, NotFound
from gateway.tomlfile import load_toml

_CFG = ConfigDict(extra="forbid", frozen=True)


class NodeConfig(BaseModel):
    """A sensor node installed at a site."""

    model_config = _CFG
    id: str = Field(pattern=ID_PATTERN)
    kind: NodeKind
    interval_s: float = Field(10.0, gt=0, description="Nominal seconds between samples")
    #: Discharge nodes only: where the pressure transducer sits. At the outlet it
    #: reads ~0 kPa on an open line; on the riser near the pump it reads the line's
    #: static lift whenever the pump runs, even when no water reaches the outlet.
    #: None: not recorded (the detectors then learn the site's running baseline).
    pressure_tap: Literal["outlet", "riser"] | None = None
    static_head_kpa: float | None = Field(
        None, ge=0, description="Pressure the tap reads with the pump running into an open line"
    )


class PitConfig(BaseModel):
    """Sump pit geometry and float-switch marks (cm above the pit floor)."""

    model_config = _CFG
    diameter_cm: float = Field(46.0, gt=0, description="18 in basin, the common residential size")
    depth_cm: float = Field(76.0, gt=0, description="30 in basin")
    pump_on_cm: float = Field(40.0, gt=0)
    pump_off_cm: float = Field(18.0, ge=0)
    alarm_cm: float = Field(55.0, gt=0, description="High-water alarm mark")

    @model_validator(mode="after")
    def _ordered(self) -> PitConfig:
        if not self.pump_off_cm < self.pump_on_cm < self.alarm_cm <= self.depth_cm:
            raise ValueError("need pump_off_cm < pump_on_cm < alarm_cm <= depth_cm")
        return self

    @property
    def area_cm2(self) -> float:
        """Horizontal cross-section of the pit."""
        return 3.141592653589793 * (self.diameter_cm / 2) ** 2


class DischargeDestination(StrEnum):
    """Where the discharge line ends.

    Sanitary is expressly prohibited by the Edgar text (000 (b), (c)(1)) and L.L.
    6-2024 (002 E, J); texts 001 and 003 do not say so in words, so there it is
    homeowner advice, not a cited violation (docs/rule-packs.md).
    """

    GRADE = "grade"  # onto the lawn / an absorbent surface
    SWALE = "swale"  # a rear or side yard swale
    STORM_LATERAL = "storm_lateral"  # the storm sewer lateral or a catch basin
    SANITARY = "sanitary"  # floor drain, laundry tub, sanitary lateral


class Waiver(BaseModel):
    """A waiver or time extension granted by the village, e.g. Edgar (f)(3)b.

    ``start``/``end`` are either dates (the whole local day, both ends included) or
    aware date-times (exactly that instant): "a limited time specified in the written
    determination" can end at an hour, and a waiver ending at midnight UTC must not
    stretch into the rest of the local day. Only packs whose rule carries a
    ``waiver_cite`` honour a waiver at all (``RuleSpec.waiver_citation``).
    """

    model_config = _CFG
    rule: str = Field(description="Rule id it covers, e.g. sanitary_discharge")
    start: datetime | date
    end: datetime | date
    reference: str = ""

    @field_validator("start", "end", mode="before")
    @classmethod
    def _plain_date(cls, value: object) -> object:
        # "2026-05-20" is a whole local day, not midnight UTC: parse it as a date.
        if isinstance(value, str) and len(value) == 10:
            return date.fromisoformat(value)
        return value

    @field_validator("start", "end")
    @classmethod
    def _aware(cls, value: datetime | date) -> datetime | date:
        if isinstance(value, datetime) and value.tzinfo is None:
            raise ValueError("a waiver time needs a UTC offset (or give a date)")
        return value

    def bounds(self, tz: ZoneInfo) -> tuple[datetime, datetime]:
        """``[start, end)`` as aware instants; a date end runs to the next local midnight."""
        start = (
            self.start
            if isinstance(self.start, datetime)
            else datetime.combine(self.start, time(), tz)
        )
        end = (
            self.end
            if isinstance(self.end, datetime)
            else datetime.combine(self.end + timedelta(days=1), time(), tz)
        )
        return start, end

    def covers_at(self, ts: datetime, tz: ZoneInfo) -> bool:
        """True while the waiver is in force at instant ``ts``."""
        start, end = self.bounds(tz)
        return start <= ts < end


#: Typical residential line geometry, for the detectors' physics when a fact is not
#: recorded (never used by the audit: an unrecorded fact is "not recorded" there).
TYPICAL_PIPE_INSIDE_DIAMETER_IN = 1.25
TYPICAL_LINE_LENGTH_M = 8.0
TYPICAL_LINE_RISE_M = 2.5


class Installation(BaseModel):
    """What the installation audit and the detectors need to know about a site.

    Every fact is tri-state: recorded yes, recorded no, or None (not recorded);
    numbers are a value or None. None is never read as a pass or a fail: the audit
    reports it as "not recorded" (docs/rule-packs.md).
    """

    model_config = _CFG
    destination: DischargeDestination | None = None
    pipe_inside_diameter_in: float | None = Field(None, gt=0)
    pipe_rigid: bool | None = None
    valving_or_quick_connect: bool | None = None
    check_valve: bool | None = None
    check_valve_height_ft: float | None = Field(None, ge=0, description="Above floor grade")
    air_gap: bool | None = None
    union_coupling: bool | None = None
    outlet_height_above_grade_ft: float | None = None
    outlet_to_foundation_ft: float | None = None
    outlet_to_property_line_ft: float | None = None
    outlet_to_walkway_ft: float | None = Field(None, description="Nearest sidewalk or walkway")
    outlet_to_right_of_way_ft: float | None = Field(None, description="Street or right-of-way")
    flows_toward_property_line: bool | None = None
    absorbent_surface: bool | None = None
    storm_sewer_available: bool | None = None
    pit_to_floor_drain_ft: float | None = None
    discharge_existing_since: date | None = Field(
        None, description="First day of this discharge (grandfathering dates)"
    )
    line_length_m: float | None = Field(None, gt=0)
    line_rise_m: float | None = Field(None, ge=0)

    @property
    def line_geometry(self) -> tuple[float, float, float]:
        """(inside diameter in, length m, rise m), typical values where not recorded."""
        return (
            self.pipe_inside_diameter_in or TYPICAL_PIPE_INSIDE_DIAMETER_IN,
            self.line_length_m or TYPICAL_LINE_LENGTH_M,
            TYPICAL_LINE_RISE_M if self.line_rise_m is None else self.line_rise_m,
        )


class InstallationRecord(Installation):
    """The installation as it was over a stretch of local days (both ends included).

    A season report audits the record in force during the season, so fixing the
    installation later (and recording it) does not rewrite a past report.
    """

    valid_from: date
    valid_to: date

    @model_validator(mode="after")
    def _ordered(self) -> InstallationRecord:
        if self.valid_to < self.valid_from:
            raise ValueError("installation record: valid_to is before valid_from")
        return self

    def facts(self) -> Installation:
        """The installation facts without the dates."""
        data = self.model_dump(exclude={"valid_from", "valid_to"})
        return Installation.model_validate(data)


class Contact(BaseModel):
    """A homeowner contact and how they want to be told."""

    model_config = _CFG
    name: str = ""
    email: str | None = None
    webhook_url: str | None = None
    apprise_urls: tuple[str, ...] = ()
    channels: tuple[str, ...] = ("email",)
    quiet_hours: tuple[int, int] | None = Field(None, description="(start_hour, end_hour) local")
    units: str = "us"


class SiteConfig(BaseModel):
    """One property with a monitored sump."""

    model_config = _CFG
    id: str = Field(pattern=ID_PATTERN)
    name: str
    address: str = ""
    jurisdiction: str = Field(description="Rule pack id, e.g. edgar")
    timezone: str = "America/Chicago"
    lat: float | None = Field(None, ge=-90, le=90)
    lon: float | None = Field(None, ge=-180, le=180)
    nodes: tuple[NodeConfig, ...] = Field(min_length=1)
    pit: PitConfig = PitConfig()
    installation: Installation = Installation()
    #: Earlier installations, each with the days it was in force; ``installation`` is
    #: the current one, in force from the day after the latest record ends.
    installation_history: tuple[InstallationRecord, ...] = ()
    waivers: tuple[Waiver, ...] = ()
    contacts: tuple[Contact, ...] = ()

    @field_validator("timezone")
    @classmethod
    def _tz(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ValueError(f"unknown time zone {value!r}") from exc
        return value

    @model_validator(mode="after")
    def _unique_nodes(self) -> SiteConfig:
        ids = [n.id for n in self.nodes]
        if len(ids) != len(set(ids)):
            raise ValueError(f"site {self.id}: node ids repeat")
        return self

    @model_validator(mode="after")
    def _history_in_order(self) -> SiteConfig:
        records = self.installation_history
        for before, after in pairwise(records):
            if after.valid_from <= before.valid_to:
                raise ValueError(
                    f"site {self.id}: installation_history must be in date order without overlaps"
                )
        return self

    @property
    def tz(self) -> ZoneInfo:
        """The site's time zone."""
        return ZoneInfo(self.timezone)

    def installation_on(self, day: date) -> Installation:
        """The installation in force on local ``day``.

        A day inside a history record gets that record; a day after every record
        (or any day, without history) gets the current ``installation``; a day
        before the first record gets an installation with nothing recorded.
        """
        records = self.installation_history
        if not records:
            return self.installation
        for record in records:
            if record.valid_from <= day <= record.valid_to:
                return record.facts()
        if day > records[-1].valid_to:
            return self.installation
        return Installation()

    def installation_changes(self, first: date, last: date) -> list[date]:
        """Days in ``[first, last]`` on which a different installation record took effect."""
        starts = [r.valid_from for r in self.installation_history]
        if self.installation_history:
            starts.append(self.installation_history[-1].valid_to + timedelta(days=1))
        return [d for d in starts if first < d <= last]

    def node(self, node_id: str) -> NodeConfig | None:
        """The node with that id, if the site has it."""
        return next((n for n in self.nodes if n.id == node_id), None)

    def node_of_kind(self, kind: NodeKind) -> NodeConfig | None:
        """The first node of a kind."""
        return next((n for n in self.nodes if n.kind == kind), None)


class _RegistryFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    site: list[SiteConfig] = Field(default_factory=list)


class SiteAmendments(Protocol):
    """What is recorded about a site after its registry entry was written, merged in at
    every read: waivers granted and installation facts inspected in enforcement cases
    (``gateway.cases``). The registry file stays the owner's declaration."""

    def amend(self, site: SiteConfig) -> SiteConfig:
        """The site with the recorded amendments (the same object when there are none)."""
        ...


class SiteRegistry:
    """The loaded registry: sites by id, read-only.

    With ``amendments``, every read (``get``, ``require``, iteration,
    ``in_jurisdiction``) returns the site as amended at that moment, so the audit,
    verdicts, reports, alerts and detectors all read one merged configuration and no
    consumer merges on its own (issue 16.3, 16.4).
    """

    def __init__(self, sites: list[SiteConfig], amendments: SiteAmendments | None = None) -> None:
        ids = [s.id for s in sites]
        dupes = {i for i in ids if ids.count(i) > 1}
        if dupes:
            raise ConfigError(f"site ids repeat: {sorted(dupes)}")
        self._sites = {s.id: s for s in sites}
        self._amendments = amendments

    def amended(self, amendments: SiteAmendments) -> SiteRegistry:
        """The same sites, read through ``amendments``."""
        return SiteRegistry(list(self._sites.values()), amendments)

    def subset(self, keep: Callable[[str], bool]) -> SiteRegistry:
        """The sites whose id ``keep`` accepts, with the same amendments."""
        return SiteRegistry([s for s in self._sites.values() if keep(s.id)], self._amendments)

    def _view(self, site: SiteConfig) -> SiteConfig:
        return site if self._amendments is None else self._amendments.amend(site)

    def __iter__(self) -> Iterator[SiteConfig]:
        return iter([self._view(s) for s in self._sites.values()])

    def __len__(self) -> int:
        return len(self._sites)

    def __contains__(self, site_id: object) -> bool:
        return site_id in self._sites

    def get(self, site_id: str) -> SiteConfig | None:
        """The site, or None."""
        site = self._sites.get(site_id)
        return None if site is None else self._view(site)

    def require(self, site_id: str) -> SiteConfig:
        """The site, or NotFound."""
        site = self.get(site_id)
        if site is None:
            raise NotFound(f"no site with id {site_id!r}")
        return site

    def in_jurisdiction(self, jurisdiction: str) -> list[SiteConfig]:
        """Every site under one rule pack."""
        return [self._view(s) for s in self._sites.values() if s.jurisdiction == jurisdiction]


def load_registry(path: Path) -> SiteRegistry:
    """Read and validate a registry TOML file (``[[site]]`` tables)."""
    return SiteRegistry(share_equal_parts(load_toml(path, _RegistryFile, "site registry").site))


_SHARED_FIELDS = ("nodes", "pit", "installation", "installation_history", "waivers")
_SHARED_STRINGS = ("jurisdiction", "timezone")


def share_equal_parts(sites: list[SiteConfig]) -> list[SiteConfig]:
    """The same sites, with equal immutable parts held once (issue 17 item 2).

    A utility's registry repeats itself: the same three nodes at the same intervals,
    the default pit, a handful of installations. Parsed, each site had its own copy of
    each (~4 kB of its ~5.5); here equal parts (same model, same values, same fields
    set) become one shared object, and the rule-pack and time-zone names one string.
    The models are frozen and compare equal, so nothing can tell, except memory.
    Done once, on the freshly parsed sites, before anything else holds them."""
    parts: dict[object, object] = {}

    def one(value: object) -> object:
        if isinstance(value, tuple):
            value = tuple(one(v) for v in value)
            key: object = (tuple, tuple(id(v) for v in value))
        elif isinstance(value, BaseModel):
            key = (type(value), frozenset(value.model_fields_set), value)
        else:
            return value
        try:
            return parts.setdefault(key, value)
        except TypeError:  # an unhashable value somewhere inside: kept as parsed
            return value

    for site in sites:
        fields = site.__dict__  # frozen: assigned in place, values equal to the parsed
        for name in _SHARED_FIELDS:
            fields[name] = one(fields[name])
        for name in _SHARED_STRINGS:
            fields[name] = sys.intern(fields[name])
    return sites
