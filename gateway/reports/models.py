"""Frozen report data: what the assemble step builds and the renderers format.

Nothing here reads a store or formats text for a medium; the PDF, HTML and CSV
renderers all take these objects, so the three outputs always agree.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from enum import StrEnum
from typing import Any

from gateway.domain import Citation, NotEvaluated
from gateway.reports.season import SeasonPeriod
from gateway.rules.audit import AuditItem

#: Where a compliance statement names a volume; renderers word it in the reader's units.
VOLUME_SLOT = "{volume}"

#: Gaps listed one by one in a document; shorter ones beyond this are summed.
MAX_LISTED_GAPS = 60


class ComplianceStatus(StrEnum):
    """The one-word verdict of a property's season."""

    VIOLATION = "violation"  # a confirmed violation, or a recorded requirement fails
    SUSPECTED = "suspected"  # telemetry suspects a violation that no record confirmed
    ATTENTION = "attention"  # findings or advice, but no cited violation
    NOT_CHECKED = "not_checked"  # no violation found, but requirements not checked (unrecorded)
    COMPLIANT = "compliant"  # every requirement checked and met, enough data to say so
    INSUFFICIENT_DATA = "insufficient_data"  # no violation seen, but too little data to state it


class Recommendation(StrEnum):
    """What the village should do first about a site."""

    ORDER = "order"  # a connection order, where the pack's text provides one (Edgar (f)(1))
    CITATION = "citation"  # a citation / prosecution, where the text fines upon conviction
    NOTICE = "notice"  # a notice to correct
    INSPECTION = "inspection"  # inspect: violation suspected, installation fails, data missing
    NONE = "none"


@dataclass(frozen=True, slots=True)
class DayStats:
    """One local day of one property, from 1-hour rollups.

    Volumes in litres. ``pit_volume_l`` is what the pump moved out of the pit
    (cycles x the volume between the float marks); ``outlet_volume_l`` is the
    flow integrated at the outlet. Where the water went: ``grade_l`` and
    ``storm_l`` split the outlet volume by the registered destination;
    ``sanitary_l`` is pit water the outlet did not see (suspected to go to the
    sanitary sewer) plus outlet water of a line registered to the sanitary sewer.
    """

    day: date
    hours: int
    covered_hours: int
    pump_cycles: int
    pump_on_s: float
    backup_pump_cycles: int
    pit_volume_l: float
    outlet_volume_l: float
    grade_l: float
    storm_l: float
    sanitary_l: float
    unaccounted_hours: int
    air_min_c: float | None
    air_max_c: float | None
    pipe_min_c: float | None
    freezing_hours: int
    freezing_risk_hours: int
    icing: bool = False
    violation: bool = False  # a confirmed violation on this day
    suspected: bool = False  # a suspected (unconfirmed) violation, and no confirmed one

    @property
    def coverage(self) -> float:
        """Share of the day's hours with readings from every node."""
        return self.covered_hours / self.hours if self.hours else 0.0


@dataclass(frozen=True, slots=True)
class Gap:
    """A stretch without readings from one or more nodes (hour resolution)."""

    start: datetime
    end: datetime
    nodes: tuple[str, ...]

    @property
    def duration(self) -> timedelta:
        """How long the gap lasted."""
        return self.end - self.start


@dataclass(frozen=True, slots=True)
class Coverage:
    """Share of the period with readings, overall and per node, and the gaps."""

    period_hours: int
    covered_hours: int
    by_node: Mapping[str, float]
    gaps: tuple[Gap, ...]

    @property
    def share(self) -> float:
        """Share of the period's hours in which every node reported."""
        return self.covered_hours / self.period_hours if self.period_hours else 0.0

    def listed_gaps(self, limit: int = MAX_LISTED_GAPS) -> tuple[tuple[Gap, ...], int, timedelta]:
        """The ``limit`` longest gaps in time order, and how many (and how long) the rest are.

        A flaky sensor can leave hundreds of one-hour gaps; a document lists the
        ones that matter and sums the others.
        """
        if len(self.gaps) <= limit:
            return self.gaps, 0, timedelta(0)
        longest = sorted(self.gaps, key=lambda g: g.duration, reverse=True)[:limit]
        kept = set(map(id, longest))
        rest = [g for g in self.gaps if id(g) not in kept]
        shown = tuple(g for g in self.gaps if id(g) in kept)
        return shown, len(rest), sum((g.duration for g in rest), timedelta(0))


@dataclass(frozen=True, slots=True)
class FindingEntry:
    """A finding as the report shows it."""

    rule_id: str
    title: str
    level: str
    severity: str
    opened_at: datetime
    cleared_at: datetime | None
    enforced: bool
    evidence: Mapping[str, Any]
    citations: tuple[Citation, ...]
    action: str
    days: int  # local days of the period the finding overlapped

    @property
    def is_violation(self) -> bool:
        """An enforced rule at the level the pack calls a violation."""
        return self.enforced and self.level == "violation"


@dataclass(frozen=True, slots=True)
class AlertEntry:
    """An alert and how fast someone acknowledged it."""

    rule_id: str
    title: str
    severity: str
    state: str
    opened_at: datetime
    acknowledged_at: datetime | None
    acknowledged_by: str | None
    resolved_at: datetime | None = None
    #: Who resolved it by hand ("system": the condition cleared) and why (issue 20.4).
    resolved_by: str | None = None
    resolve_note: str | None = None
    #: Resolved by a person while the condition was still detected.
    condition_persisted: bool = False

    @property
    def time_to_ack(self) -> timedelta | None:
        """From raising to acknowledgement (None while unacknowledged)."""
        if self.acknowledged_at is None:
            return None
        return self.acknowledged_at - self.opened_at


@dataclass(frozen=True, slots=True)
class AlertSummary:
    """How alerts were handled over the period."""

    count: int
    acknowledged: int
    median_time_to_ack: timedelta | None
    longest_time_to_ack: timedelta | None


@dataclass(frozen=True, slots=True)
class PenaltyLine:
    """One penalty provision applied to the findings: an estimate, never a determination.

    ``additive`` lines add up to the estimate's total; the others (a misdemeanor
    threshold, a citation without an amount) are shown beside it.
    """

    penalty_id: str
    summary: str
    per: str
    count: int
    basis: str
    min_usd: float | None
    max_usd: float | None
    additive: bool
    citations: tuple[Citation, ...]


@dataclass(frozen=True, slots=True)
class PenaltyEstimate:
    """What the pack's penalties would amount to, computed from the findings."""

    lines: tuple[PenaltyLine, ...]
    min_usd: float
    max_usd: float
    violation_days: int
    violation_months: tuple[str, ...]
    disclaimer: str

    @property
    def any(self) -> bool:
        """True when some provision applies."""
        return any(line.count for line in self.lines)


@dataclass(frozen=True, slots=True)
class Compliance:
    """The compliance statement of a property for the period.

    The data stays in SI like the rest of the report: a volume the statement
    names is kept in ``volume_l`` and written by the renderer, not baked into
    the text in one unit system.
    """

    status: ComplianceStatus
    statement: str  # may hold VOLUME_SLOT where ``volume_l`` goes, in the reader's units
    citations: tuple[Citation, ...] = ()
    volume_l: float | None = None

    def worded(self, volume: Callable[[float], str]) -> str:
        """The statement with its volume written by ``volume`` (litres -> text)."""
        if self.volume_l is None:
            return self.statement
        return self.statement.replace(VOLUME_SLOT, volume(self.volume_l))


@dataclass(frozen=True, slots=True)
class SiteTotals:
    """Season totals of one property (sums of the daily rows)."""

    pump_cycles: int
    pump_on_h: float
    pit_volume_l: float
    outlet_volume_l: float
    grade_l: float
    storm_l: float
    sanitary_l: float
    freezing_hours: int
    freezing_risk_hours: int
    freezing_risk_days: int
    icing_days: int
    violation_days: int  # confirmed
    suspected_days: int = 0  # suspected by telemetry, not confirmed


@dataclass(frozen=True, slots=True)
class SiteInfo:
    """Who and where: the registry's facts about the property."""

    site_id: str
    name: str
    address: str
    jurisdiction: str
    pack_name: str
    destination: str
    timezone: str


@dataclass(frozen=True, slots=True)
class SuspectedEntry:
    """A stretch of telemetry at violation level that no record has confirmed."""

    rule_id: str
    title: str
    start: datetime
    end: datetime
    days: int
    confidence: str
    citations: tuple[Citation, ...]


@dataclass(frozen=True, slots=True)
class SiteReport:
    """The winter report of one property."""

    site: SiteInfo
    period: SeasonPeriod
    through: datetime  # data considered up to here (the season end, or "now" mid-season)
    generated_at: datetime
    coverage: Coverage
    days: tuple[DayStats, ...]
    totals: SiteTotals
    findings: tuple[FindingEntry, ...]
    findings_available: bool
    audit: tuple[AuditItem, ...]
    alerts: tuple[AlertEntry, ...]
    alert_summary: AlertSummary
    alerts_available: bool
    penalties: PenaltyEstimate  # confirmed violations only
    compliance: Compliance
    recommendation: Recommendation
    notes: tuple[str, ...] = ()
    #: The same provisions applied to confirmed and suspected days: what the estimate
    #: would be if every suspected episode were confirmed (None when nothing is suspected).
    penalties_if_confirmed: PenaltyEstimate | None = None
    #: Suspected episodes (telemetry only), each with its evidence, for the document.
    suspected: tuple[SuspectedEntry, ...] = ()
    #: The village's first step in words, with its citation (from the pack).
    next_step: str = ""
    #: The local day whose installation record the audit used.
    audited_on: date | None = None
    #: Readings that arrived behind their node's newest: stored, not judged (20.10).
    not_evaluated: tuple[NotEvaluated, ...] = ()

    @property
    def freezing_days(self) -> tuple[DayStats, ...]:
        """Days with freezing-risk hours (and the temperatures behind them)."""
        return tuple(d for d in self.days if d.freezing_risk_hours > 0)

    @property
    def is_final(self) -> bool:
        """True when the whole season is in the data."""
        return self.through >= self.period.end


@dataclass(frozen=True, slots=True)
class SiteStatusRow:
    """One line of the village-wide table."""

    site_id: str
    name: str
    address: str
    jurisdiction: str
    status: ComplianceStatus
    recommendation: Recommendation
    reason: str
    coverage: float
    outlet_volume_l: float
    pit_volume_l: float
    sanitary_l: float
    icing_days: int
    violation_days: int
    audit_failures: int
    alerts: int
    unacknowledged: int
    estimate_min_usd: float
    estimate_max_usd: float
    suspected_days: int = 0
    not_checked: int = 0  # requirements not checked (facts not recorded)


@dataclass(frozen=True, slots=True)
class WeekStats:
    """Village totals over one week (Monday start, local)."""

    week_start: date
    pit_volume_l: float
    outlet_volume_l: float
    sanitary_l: float
    icing_site_days: int
    sites_in_violation: int
    freezing_risk_hours: int


@dataclass(frozen=True, slots=True)
class VillageTotals:
    """Totals over every site of the village report."""

    sites: int
    pit_volume_l: float
    outlet_volume_l: float
    sanitary_l: float
    icing_days: int
    violation_days: int
    sites_in_violation: int
    sites_compliant: int


@dataclass(frozen=True, slots=True)
class VillageReport:
    """The village-wide winter report."""

    title: str
    scope: str  # jurisdiction id, or "all sites"
    season_label: str
    first_day: date
    last_day: date
    seasons: tuple[str, ...]  # how each pack's season was set (with citations/default)
    through: datetime
    generated_at: datetime
    rows: tuple[SiteStatusRow, ...]
    totals: VillageTotals
    priority: tuple[SiteStatusRow, ...]
    weeks: tuple[WeekStats, ...]
    notes: tuple[str, ...] = field(default_factory=tuple)
    #: The one time zone every time of the report is written in: the sites' zone
    #: (UTC only when the sites span several zones).
    timezone: str = "UTC"
    #: Who the report is for (the rule pack's name, e.g. "Village of Edgar (WI): ...").
    village: str = ""
