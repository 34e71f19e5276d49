"""Assemble winter reports: stores, findings, audit, alerts and packs -> frozen data.

Everything is read through :class:`~gateway.reports.sources.ReportSources`, so
the SQLite and InfluxDB stores both work. The hourly arithmetic uses only the
1-hour rollups (a whole season of a site is ~11,000 of them), never raw points.

Where the water went, hour by hour (see ``docs/reports.md``):

* pit volume = primary pump cycles x the volume between the registered float
  marks (``pump_on_cm - pump_off_cm`` x pit area): what the pump lifted out;
* outlet volume = outlet flow integrated over time (the rollups' ``pumped_volume_l``);
* an hour is *unaccounted* when, over it and its two neighbours (a cycle can
  start in one hour and discharge in the next), the outlet saw less than
  ``ACCOUNTED_RATIO`` of the pit volume while both nodes reported and no frozen
  line was open: the shortfall of that hour is "suspected to the sanitary sewer",
  the sanitary detector's physics on hourly sums;
* the outlet volume goes where the installation is registered to go (grade or
  swale -> "grade", storm lateral -> "storm", sanitary -> "sanitary").
"""

from __future__ import annotations

import asyncio
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any

from alerts.lifecycle import TEST_RULE
from alerts.models import Alert
from gateway.contract import NodeKind
from gateway.domain import Citation, Confirmation, Finding, NotEvaluated
from gateway.registry.models import DischargeDestination, Installation, SiteConfig
from gateway.reports.models import (
    VOLUME_SLOT,
    AlertEntry,
    AlertSummary,
    Compliance,
    ComplianceStatus,
    Coverage,
    DayStats,
    FindingEntry,
    Gap,
    Recommendation,
    SiteInfo,
    SiteReport,
    SiteStatusRow,
    SiteTotals,
    SuspectedEntry,
    VillageReport,
    VillageTotals,
    WeekStats,
)
from gateway.reports.penalties import estimate_from_ledger, estimate_penalties
from gateway.reports.season import SeasonPeriod, season_period
from gateway.reports.sources import ReportSources
from gateway.rules.audit import FIELD_LABELS
from gateway.rules.pack import RulePack
from gateway.rules.thresholds import ACCOUNTED_RATIO, FREEZING_C, MIN_CYCLE_VOLUME_L
from gateway.rules.verdict import (
    CONFIRM_WITHIN,
    LedgerLine,
    LevelHistory,
    Verdict,
    VerdictStatus,
    level_spans,
    site_verdict,
)
from gateway.store.base import Rollup

HOUR = timedelta(hours=1)
#: Below this share of the period with readings, "no violation seen" is not a
#: statement of compliance: too much of the season went unwatched.
MIN_COVERAGE = 0.9
#: Findings about the monitoring itself, not about the property's discharge.
MONITORING_RULES = frozenset({"sensor_silent"})
#: Icing levels that mean the walk or street could really ice (not just "watch").
ICING_LEVELS = frozenset({"warning", "violation"})
_SURFACE = (DischargeDestination.GRADE, DischargeDestination.SWALE)


def floor_hour(when: datetime) -> datetime:
    """The start of the UTC hour containing ``when``."""
    return when.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


@dataclass(slots=True)
class _Hour:
    """One hour of one site, from its nodes' rollups."""

    start: datetime
    reported: set[str] = field(default_factory=set)  # nodes with samples in the hour
    cycles: int = 0
    on_s: float = 0.0
    backup_cycles: int = 0
    pit_l: float = 0.0
    outlet_l: float = 0.0
    air_min: float | None = None
    air_max: float | None = None
    pipe_min: float | None = None
    pit_seen: bool = False
    outlet_seen: bool = False


def _hours(
    site: SiteConfig, rollups: Sequence[Rollup], start: datetime, end: datetime
) -> list[_Hour]:
    """Every hour of [start, end) with what the site's registered nodes said in it."""
    band_l = (site.pit.pump_on_cm - site.pit.pump_off_cm) * site.pit.area_cm2 / 1000.0
    n = int((end - start) / HOUR)
    hours = [_Hour(start + i * HOUR) for i in range(n)]
    base = start.timestamp()
    node_ids = {node.id for node in site.nodes}
    for r in rollups:
        i = int((r.start.timestamp() - base) // 3600)
        if not 0 <= i < n or r.node_id not in node_ids:
            continue
        h = hours[i]
        seen = r.samples > 0
        if seen:
            h.reported.add(r.node_id)
        if r.kind is NodeKind.PIT:
            h.cycles += r.pump_cycles
            h.on_s += r.pump_on_s
            h.backup_cycles += r.backup_pump_cycles
            h.pit_l = h.cycles * band_l
            h.pit_seen = h.pit_seen or seen
        elif r.kind is NodeKind.DISCHARGE:
            h.outlet_l += r.pumped_volume_l
            h.outlet_seen = h.outlet_seen or seen
            pipe = r.stats.get("pipe_temp_c")
            if pipe is not None:
                h.pipe_min = pipe.min if h.pipe_min is None else min(h.pipe_min, pipe.min)
        elif r.kind is NodeKind.AIR:
            air = r.stats.get("air_temp_c")
            if air is not None:
                h.air_min = air.min if h.air_min is None else min(h.air_min, air.min)
                h.air_max = air.max if h.air_max is None else max(h.air_max, air.max)
    return hours


def _overlaps(f: Finding, start: datetime, end: datetime) -> bool:
    return f.opened_at < end and (f.cleared_at is None or f.cleared_at > start)


def _intervals(findings: Iterable[Finding], through: datetime) -> list[tuple[datetime, datetime]]:
    return [(f.opened_at, f.cleared_at or through) for f in findings]


def _covers(intervals: Sequence[tuple[datetime, datetime]], start: datetime, end: datetime) -> bool:
    return any(a < end and b > start for a, b in intervals)


def _days_overlapped(
    intervals: Sequence[tuple[datetime, datetime]], period: SeasonPeriod, through: datetime
) -> set[date]:
    """Local days of the period (up to ``through``) that an interval overlaps."""
    tz = period.tz
    days: set[date] = set()
    for a, b in intervals:
        a, b = max(a, period.start), min(b, through)
        if b <= a:
            continue
        day = a.astimezone(tz).date()
        last = (b - timedelta(microseconds=1)).astimezone(tz).date()
        while day <= last:
            days.add(day)
            day += timedelta(days=1)
    return days


def _icing_intervals(
    findings: Iterable[Finding], histories: Mapping[str, LevelHistory], through: datetime
) -> list[tuple[datetime, datetime]]:
    """When icing findings were at a level that means real icing risk (from their history)."""
    return [
        (span.start, span.end)
        for f in findings
        if f.rule_id == "icing_risk"
        for span in level_spans(f, histories.get(f.id), through)
        if span.level in ICING_LEVELS
    ]


def _coverage(site: SiteConfig, hours: Sequence[_Hour]) -> Coverage:
    node_ids = tuple(n.id for n in site.nodes)
    n = len(hours)
    by_node = {nid: sum(nid in h.reported for h in hours) / n if n else 0.0 for nid in node_ids}
    gaps: list[Gap] = []
    run_start: datetime | None = None
    missing: set[str] = set()
    covered = 0
    for h in hours:
        absent = [nid for nid in node_ids if nid not in h.reported]
        if not absent:
            covered += 1
            if run_start is not None:
                gaps.append(Gap(run_start, h.start, tuple(sorted(missing))))
                run_start, missing = None, set()
            continue
        if run_start is None:
            run_start = h.start
        missing.update(absent)
    if run_start is not None and hours:
        gaps.append(Gap(run_start, hours[-1].start + HOUR, tuple(sorted(missing))))
    return Coverage(n, covered, by_node, tuple(gaps))


def _sanitary_hours(
    inst: Installation, hours: Sequence[_Hour], blocked: Sequence[tuple[datetime, datetime]]
) -> list[float]:
    """Per hour, the pit volume the outlet did not account for (0 when accounted)."""
    out = [0.0] * len(hours)
    if inst.destination is DischargeDestination.SANITARY:
        return out  # registered to the sanitary sewer: the outlet's volume already goes there
    # Prefix sums: the three-hour window of each hour in O(1).
    pit_sum, out_sum = [0.0], [0.0]
    for h in hours:
        pit_sum.append(pit_sum[-1] + h.pit_l)
        out_sum.append(out_sum[-1] + h.outlet_l)
    n = len(hours)
    for i, h in enumerate(hours):
        if not (h.pit_seen and h.outlet_seen) or h.pit_l < MIN_CYCLE_VOLUME_L:
            continue
        if blocked and _covers(blocked, h.start, h.start + HOUR):
            continue  # a frozen line holds the water back; it is not diverted
        lo, hi = max(0, i - 1), min(n, i + 2)
        pit = pit_sum[hi] - pit_sum[lo]
        outlet = out_sum[hi] - out_sum[lo]
        if outlet < ACCOUNTED_RATIO * pit:
            out[i] = max(0.0, h.pit_l - h.outlet_l)
    return out


def _days(
    site: SiteConfig,
    inst: Installation,
    period: SeasonPeriod,
    hours: Sequence[_Hour],
    sanitary: Sequence[float],
    icing_days: set[date],
    verdict: Verdict,
) -> list[DayStats]:
    tz = period.tz
    dest = inst.destination
    violation_days = set(verdict.confirmed_days)
    suspected_days = set(verdict.suspected_days)
    grouped: dict[date, list[int]] = defaultdict(list)
    for i, h in enumerate(hours):
        grouped[h.start.astimezone(tz).date()].append(i)
    node_count = len(site.nodes)
    out: list[DayStats] = []
    for day in sorted(grouped):
        idx = grouped[day]
        hs = [hours[i] for i in idx]
        outlet = sum(h.outlet_l for h in hs)
        suspected = sum(sanitary[i] for i in idx)
        airs_min = [h.air_min for h in hs if h.air_min is not None]
        airs_max = [h.air_max for h in hs if h.air_max is not None]
        pipes = [h.pipe_min for h in hs if h.pipe_min is not None]
        freezing = [h.air_min is not None and h.air_min <= FREEZING_C for h in hs]
        # At risk: water flowed out while the air froze (it can ice where it lands) or
        # while the outlet pipe was at 0 °C (the line can freeze shut).
        risk = [
            h.outlet_l >= MIN_CYCLE_VOLUME_L  # a drip at the outlet is not a discharge
            and (
                (cold and dest in _SURFACE) or (h.pipe_min is not None and h.pipe_min <= FREEZING_C)
            )
            for h, cold in zip(hs, freezing, strict=True)
        ]
        out.append(
            DayStats(
                day=day,
                hours=len(hs),
                covered_hours=sum(len(h.reported) == node_count for h in hs),
                pump_cycles=sum(h.cycles for h in hs),
                pump_on_s=sum(h.on_s for h in hs),
                backup_pump_cycles=sum(h.backup_cycles for h in hs),
                pit_volume_l=sum(h.pit_l for h in hs),
                outlet_volume_l=outlet,
                grade_l=outlet if dest in _SURFACE else 0.0,
                storm_l=outlet if dest is DischargeDestination.STORM_LATERAL else 0.0,
                sanitary_l=suspected + (outlet if dest is DischargeDestination.SANITARY else 0.0),
                unaccounted_hours=sum(1 for i in idx if sanitary[i] > 0),
                air_min_c=min(airs_min) if airs_min else None,
                air_max_c=max(airs_max) if airs_max else None,
                pipe_min_c=min(pipes) if pipes else None,
                freezing_hours=sum(freezing),
                freezing_risk_hours=sum(risk),
                icing=day in icing_days,
                violation=day in violation_days,
                suspected=day in suspected_days,
            )
        )
    return out


def _totals(days: Sequence[DayStats]) -> SiteTotals:
    return SiteTotals(
        pump_cycles=sum(d.pump_cycles for d in days),
        pump_on_h=sum(d.pump_on_s for d in days) / 3600.0,
        pit_volume_l=sum(d.pit_volume_l for d in days),
        outlet_volume_l=sum(d.outlet_volume_l for d in days),
        grade_l=sum(d.grade_l for d in days),
        storm_l=sum(d.storm_l for d in days),
        sanitary_l=sum(d.sanitary_l for d in days),
        freezing_hours=sum(d.freezing_hours for d in days),
        freezing_risk_hours=sum(d.freezing_risk_hours for d in days),
        freezing_risk_days=sum(1 for d in days if d.freezing_risk_hours > 0),
        icing_days=sum(1 for d in days if d.icing),
        violation_days=sum(1 for d in days if d.violation),
        suspected_days=sum(1 for d in days if d.suspected),
    )


def _dated_citations(
    f: Finding, pack: RulePack | None, days: Iterable[date]
) -> tuple[Citation, ...]:
    """The finding's citations that apply on its days (Edgar (e)(1)b only in season)."""
    if pack is None or not f.citations or not pack.rule(f.rule_id).enforced:
        return tuple(f.citations)
    return _unique_citations(c for day in sorted(days) for c in pack.citations_on(f.rule_id, day))


def _finding_entries(
    findings: Sequence[Finding],
    period: SeasonPeriod,
    through: datetime,
    pack: RulePack | None,
    frozen: Mapping[str, Mapping[str, Any]],
) -> list[FindingEntry]:
    out = []
    for f in sorted(findings, key=lambda f: (f.opened_at, f.rule_id)):
        days = _days_overlapped(_intervals([f], through), period, through)
        out.append(
            FindingEntry(
                rule_id=f.rule_id,
                title=f.title,
                level=f.level,
                severity=f.severity.value,
                opened_at=f.opened_at,
                cleared_at=f.cleared_at,
                enforced=bool(f.citations),
                # As frozen by the period's end (15.5); live only where nothing was frozen.
                evidence=dict(frozen.get(f.id, f.evidence)),
                citations=_dated_citations(f, pack, days) if days else tuple(f.citations),
                action=f.action,
                days=len(days),
            )
        )
    return out


def _alerts(alerts: Sequence[Alert]) -> tuple[list[AlertEntry], AlertSummary]:
    entries = [
        AlertEntry(
            rule_id=a.rule_id,
            title=a.title,
            severity=a.severity.value,
            state=a.state.value,
            opened_at=a.opened_at,
            acknowledged_at=a.acknowledged_at,
            acknowledged_by=a.acknowledged_by,
            resolved_at=a.resolved_at,
            resolved_by=a.resolved_by,
            resolve_note=a.resolve_note,
            condition_persisted=a.condition_persists,
        )
        for a in sorted(alerts, key=lambda a: a.opened_at)
        if a.rule_id != TEST_RULE  # an administrator's test message is not an alert of the site
    ]
    waits = [e.time_to_ack for e in entries if e.time_to_ack is not None]
    seconds = [w.total_seconds() for w in waits]
    summary = AlertSummary(
        count=len(entries),
        acknowledged=len(waits),
        median_time_to_ack=timedelta(seconds=statistics.median(seconds)) if seconds else None,
        longest_time_to_ack=max(waits) if waits else None,
    )
    return entries, summary


def _unique_citations(items: Iterable[Citation]) -> tuple[Citation, ...]:
    out: list[Citation] = []
    for c in items:
        if c not in out:
            out.append(c)
    return tuple(out)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _not_checked(verdict: Verdict) -> str:
    fields = sorted({FIELD_LABELS.get(a.field, a.field) for a in verdict.not_checked})
    return (
        f"{_plural(len(verdict.not_checked), 'requirement')} not checked because the "
        f"registry does not record {'; '.join(fields)}"
    )


def _compliance(
    coverage: Coverage,
    findings: Sequence[FindingEntry],
    verdict: Verdict,
    totals: SiteTotals,
    findings_available: bool,
) -> Compliance:
    """The statement, from the one verdict (gateway.rules.verdict) plus the data coverage."""
    watched = f"{coverage.share:.0%} of the period had readings from every sensor"
    suspected = (
        f"telemetry suspects a violation on {_plural(totals.suspected_days, 'day')} "
        f"({', '.join(sorted({s.title for s in verdict.suspected}))}), not confirmed by an "
        "inspection or a dated observation"
    )
    if verdict.status is VerdictStatus.VIOLATION:
        parts = []
        if verdict.confirmed:
            titles = "; ".join(sorted({s.title for s in verdict.confirmed}))
            parts.append(
                f"{_plural(len(verdict.confirmed), 'confirmed violation')} on "
                f"{_plural(totals.violation_days, 'day')}: {titles}"
            )
        if verdict.failed:
            parts.append(
                f"the registered installation fails "
                f"{_plural(len(verdict.failed), 'requirement')} of the rule pack"
            )
        if verdict.suspected:
            parts.append(suspected)
        cites = _unique_citations(
            [c for s in verdict.confirmed for c in s.citations]
            + [c for a in verdict.failed for c in a.citations]
        )
        return Compliance(
            ComplianceStatus.VIOLATION,
            "Not in compliance: " + "; and ".join(parts) + f". ({watched}.)",
            cites,
        )
    if verdict.status is VerdictStatus.SUSPECTED:
        return Compliance(
            ComplianceStatus.SUSPECTED,
            f"Suspected violation: {suspected}. A violation needs a confirming record. "
            f"({watched}.)",
            _unique_citations(c for s in verdict.suspected for c in s.citations),
        )
    if not findings_available:
        return Compliance(
            ComplianceStatus.INSUFFICIENT_DATA,
            f"No statement of compliance: findings were not available to this report ({watched}).",
        )
    concerns = [f for f in findings if f.rule_id not in MONITORING_RULES]
    advisories = verdict.advisories
    if concerns or advisories or totals.sanitary_l > 0:
        parts = []
        if concerns:
            parts.append(
                f"{len(concerns)} finding(s) without a cited violation ("
                + ", ".join(sorted({f.title for f in concerns}))
                + ")"
            )
        unseen_l: float | None = None
        if totals.sanitary_l > 0 and not any(f.rule_id == "sanitary_discharge" for f in concerns):
            unseen_l = totals.sanitary_l  # worded by the renderer, in the reader's units
            parts.append(f"{VOLUME_SLOT} of pumped water not seen at the outlet")
        if advisories:
            parts.append(f"{len(advisories)} advisory installation item(s)")
        if verdict.not_checked:
            parts.append(_not_checked(verdict))
        return Compliance(
            ComplianceStatus.ATTENTION,
            "No violation of the ordinance was found, but the season shows "
            + "; ".join(parts)
            + f". ({watched}.)",
            volume_l=unseen_l,
        )
    if coverage.share < MIN_COVERAGE:
        return Compliance(
            ComplianceStatus.INSUFFICIENT_DATA,
            f"No violation was found in the monitored hours, but only {watched}; "
            "compliance cannot be stated for the gaps listed under Data coverage.",
        )
    if verdict.status is VerdictStatus.NOT_CHECKED:
        return Compliance(
            ComplianceStatus.NOT_CHECKED,
            f"No violation found; {_not_checked(verdict)}. ({watched}.)",
        )
    return Compliance(
        ComplianceStatus.COMPLIANT,
        f"In compliance: no violation of {verdict.pack_name} was found and every applicable "
        f"requirement was checked and met ({watched}).",
    )


_STEPS = {
    "order": Recommendation.ORDER,
    "citation": Recommendation.CITATION,
    "notice": Recommendation.NOTICE,
    "inspection": Recommendation.INSPECTION,
}


def _recommendation(verdict: Verdict, totals: SiteTotals) -> tuple[Recommendation, str]:
    """The village's first step as the pack's text provides it, and why (cited)."""
    step = verdict.next_step
    if step is not None:
        deadline = f" within {step.deadline_days} days" if step.deadline_days else ""
        cite = f" [{step.citation}]" if step.citation else ""
        return (
            _STEPS[step.step],
            f"{verdict.next_step_reason}; {step.summary}{deadline}{cite}",
        )
    if verdict.failed:
        return (
            Recommendation.INSPECTION,
            f"installation fails {_plural(len(verdict.failed), 'requirement')}",
        )
    if totals.sanitary_l > 0:
        return Recommendation.INSPECTION, "pumped water not seen at the outlet"
    return Recommendation.NONE, ""


@dataclass(frozen=True, slots=True)
class SiteInputs:
    """Everything one property report is computed from, as read from the sources."""

    site: SiteConfig
    pack: RulePack | None
    period: SeasonPeriod
    through: datetime
    now: datetime
    rollups: Sequence[Rollup]
    findings: Sequence[Finding]
    alerts: Sequence[Alert]
    findings_available: bool
    alerts_available: bool
    histories: Mapping[str, LevelHistory] = field(default_factory=dict)
    confirmations: Sequence[Confirmation] = ()
    histories_available: bool = True
    #: Spans of late readings that were stored but not judged by any detector.
    not_evaluated: Sequence[NotEvaluated] = ()
    #: Each finding's evidence frozen at or before the period's end (by finding id).
    frozen_evidence: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    #: The site's posted enforcement ledger; None: no case, the telemetry estimate stands.
    ledger: Sequence[LedgerLine] | None = None


async def read_site_inputs(
    sources: ReportSources, site_id: str, season: str, *, now: datetime | None = None
) -> SiteInputs:
    """Read one property's season from the sources (the only I/O of a report)."""
    now = now or datetime.now(UTC)
    site = sources.registry.require(site_id)
    pack = sources.packs.get(site.jurisdiction)
    period = season_period(season, pack, site.timezone)
    through = min(period.end, max(period.start, floor_hour(now)))
    rollups = await sources.store.rollups(site.id, "1h", period.start, through)
    findings = [
        f
        for f in await sources.findings_of(site.id, period.start, through)
        if _overlaps(f, period.start, through)
    ]
    histories = await sources.levels_of(findings)
    confirmations = sources.confirmations_of(site.id, period.start, through + CONFIRM_WITHIN)
    alerts = await sources.alerts_of(site.id, period.start, through)
    return SiteInputs(
        site=site,
        pack=pack,
        period=period,
        through=through,
        now=now,
        rollups=rollups,
        findings=findings,
        alerts=alerts,
        findings_available=sources.findings is not None,
        alerts_available=sources.alerts is not None,
        histories=histories,
        confirmations=confirmations,
        histories_available=not findings or bool(histories),
        not_evaluated=await sources.not_evaluated_of(site.id, period.start, through),
        frozen_evidence=await sources.frozen_evidence_of(findings, through),
        ledger=await sources.ledger_of(site.id),
    )


def not_an_inspection(pack: RulePack | None) -> list[str]:
    """The property report's first notes (review O6): monitoring is not the proof the
    texts accept, e.g. Edgar (f)(4)b "appropriate proof ... with verification by
    Village inspection" or (f)(2)a's licensed plumber's certificate."""
    notes = ["Not an inspection: this report establishes neither compliance nor a violation."]
    steps = pack.enforcement.steps if pack is not None else {}
    proofs = [steps[name] for name in ("inspection", "correction_proof") if name in steps]
    if proofs:
        named = "; or ".join(f"{p.label.lower()} ({p.citation.section})" for p in proofs)
        notes.append(f"Proof under the ordinance: {named}.")
    return notes


def build_site_report(inputs: SiteInputs) -> SiteReport:
    """The property report from its inputs: pure arithmetic, no I/O."""
    site, pack, period, through = inputs.site, inputs.pack, inputs.period, inputs.through
    notes: list[str] = not_an_inspection(pack)
    if period.is_default:
        notes.append(
            "The rule pack sets no winter season; the report uses Nov 15 - Apr 15. "
            + (period.note or "")
        )
    if through < period.end:
        local = through.astimezone(period.tz)
        notes.append(f"Season in progress: data up to {local:%Y-%m-%d %H:%M} ({site.timezone}).")
    if pack is None:
        notes.append(f"No rule pack for jurisdiction {site.jurisdiction!r}: nothing is cited.")
    if not inputs.findings_available:
        notes.append("Findings were not available to this report (no findings repository).")

    if inputs.findings and not inputs.histories_available:
        notes.append(
            "The findings source keeps no level history: each finding's last level is taken "
            "for its whole span."
        )
    # The season as it was: the installation record and waivers in force on its last
    # day considered, so recording a later fix does not rewrite this report.
    as_of = max(period.start, through - timedelta(seconds=1))
    audited_on = as_of.astimezone(period.tz).date()
    inst = site.installation_on(audited_on)
    changes = site.installation_changes(period.first_day, audited_on)
    if changes:
        notes.append(
            "The installation record changed on "
            + ", ".join(f"{d:%Y-%m-%d}" for d in changes)
            + f"; the audit uses the record in force on {audited_on:%Y-%m-%d} and lists "
            "what each earlier record of the season failed or left unchecked."
        )
    hours = _hours(site, inputs.rollups, period.start, through)
    raw_findings = inputs.findings
    verdict = site_verdict(
        site,
        pack,
        as_of=as_of,
        findings=raw_findings,
        histories=inputs.histories,
        confirmations=inputs.confirmations,
        since=period.start,
        audit_from=period.first_day,
    )
    icing_days = _days_overlapped(
        _icing_intervals(raw_findings, inputs.histories, through), period, through
    )
    blocked = _intervals([f for f in raw_findings if f.rule_id == "frozen_line"], through)
    sanitary = _sanitary_hours(inst, hours, blocked)
    days = _days(site, inst, period, hours, sanitary, icing_days, verdict)
    totals = _totals(days)
    coverage = _coverage(site, hours)
    findings = _finding_entries(raw_findings, period, through, pack, inputs.frozen_evidence)
    alerts, alert_summary = _alerts(inputs.alerts)
    in_period = {d.day for d in days}
    confirmed_days = [d for d in verdict.confirmed_days if d in in_period]
    suspected_days = [d for d in verdict.suspected_days if d in in_period]
    penalties = estimate_penalties(pack, confirmed_days, len(verdict.confirmed))
    if inputs.ledger is not None:  # a site with cases: the ledger speaks (16.5)
        penalties = estimate_from_ledger(inputs.ledger, period.first_day, period.last_day)
        notes.append(
            "Penalty estimate: the posted lines of the site's case ledger for this season "
            "(an estimate, not a legal determination)."
        )
    if_confirmed = (
        estimate_penalties(
            pack,
            confirmed_days + suspected_days,
            len(verdict.confirmed) + len(verdict.suspected),
        )
        if suspected_days
        else None
    )
    compliance = _compliance(coverage, findings, verdict, totals, inputs.findings_available)
    recommendation, reason = _recommendation(verdict, totals)
    info = SiteInfo(
        site_id=site.id,
        name=site.name,
        address=site.address,
        jurisdiction=site.jurisdiction,
        pack_name=pack.name if pack is not None else site.jurisdiction,
        destination="not_recorded" if inst.destination is None else inst.destination.value,
        timezone=site.timezone,
    )
    suspected = tuple(
        SuspectedEntry(
            rule_id=s.rule_id,
            title=s.title,
            start=s.start,
            end=s.end,
            days=len(s.days),
            confidence=s.confidence,
            citations=s.citations,
        )
        for s in verdict.suspected
    )
    return SiteReport(
        site=info,
        period=period,
        through=through,
        generated_at=inputs.now,
        coverage=coverage,
        days=tuple(days),
        totals=totals,
        findings=tuple(findings),
        findings_available=inputs.findings_available,
        audit=verdict.audit,
        alerts=tuple(alerts),
        alert_summary=alert_summary,
        alerts_available=inputs.alerts_available,
        penalties=penalties,
        compliance=compliance,
        recommendation=recommendation,
        notes=tuple(notes),
        penalties_if_confirmed=if_confirmed,
        suspected=suspected,
        next_step=reason,
        audited_on=audited_on,
        not_evaluated=tuple(inputs.not_evaluated),
    )


async def assemble_site_report(
    sources: ReportSources,
    site_id: str,
    season: str,
    *,
    now: datetime | None = None,
) -> SiteReport:
    """The winter report of one property for the season ``"2026-2027"``.

    ``now`` (default: the current time) cuts a season still in progress: data up
    to the last full hour is used and the report says so. The arithmetic runs on
    a worker thread so a report never stalls the gateway's event loop.
    """
    inputs = await read_site_inputs(sources, site_id, season, now=now)
    return await asyncio.to_thread(build_site_report, inputs)


def status_row(report: SiteReport) -> SiteStatusRow:
    """The village-table line of a property report."""
    t = report.totals
    return SiteStatusRow(
        site_id=report.site.site_id,
        name=report.site.name,
        address=report.site.address,
        jurisdiction=report.site.jurisdiction,
        status=report.compliance.status,
        recommendation=report.recommendation,
        reason=report.next_step,
        coverage=report.coverage.share,
        outlet_volume_l=t.outlet_volume_l,
        pit_volume_l=t.pit_volume_l,
        sanitary_l=t.sanitary_l,
        icing_days=t.icing_days,
        violation_days=t.violation_days,
        audit_failures=sum(1 for a in report.audit if a.status == "fail"),
        alerts=report.alert_summary.count,
        unacknowledged=report.alert_summary.count - report.alert_summary.acknowledged,
        estimate_min_usd=report.penalties.min_usd,
        estimate_max_usd=report.penalties.max_usd,
        suspected_days=t.suspected_days,
        not_checked=sum(1 for a in report.audit if a.status == "unknown"),
    )


def _priority_key(row: SiteStatusRow) -> tuple[int, float, int, int, int, str]:
    rank = {
        Recommendation.ORDER: 0,
        Recommendation.CITATION: 0,
        Recommendation.NOTICE: 1,
        Recommendation.INSPECTION: 1,
        Recommendation.NONE: 2,
    }
    return (
        rank[row.recommendation],
        -row.sanitary_l,
        -row.violation_days,
        -row.suspected_days,
        -row.audit_failures,
        row.site_id,
    )


class _WeekAcc:
    __slots__ = ("freezing", "icing", "outlet", "pit", "sanitary", "violators")

    def __init__(self) -> None:
        self.pit = self.outlet = self.sanitary = 0.0
        self.icing = self.freezing = 0
        self.violators: set[str] = set()


def _week_of(day: date) -> date:
    return day - timedelta(days=day.weekday())


async def assemble_village_report(
    sources: ReportSources,
    season: str,
    *,
    jurisdiction: str | None = None,
    site_ids: Sequence[str] | None = None,
    now: datetime | None = None,
) -> VillageReport:
    """Every site's status, totals, the sites to inspect or order first, and weekly sums.

    Sites are those of ``jurisdiction`` (a village = a rule pack id), or
    ``site_ids``, or every registered site. Each site is assembled over its own
    pack's season and reduced at once, so memory stays flat for 1,000 sites.
    """
    now = now or datetime.now(UTC)
    if site_ids is not None:
        sites = [sources.registry.require(s) for s in site_ids]
    elif jurisdiction is not None:
        sites = sources.registry.in_jurisdiction(jurisdiction)
    else:
        sites = list(sources.registry)
    rows: list[SiteStatusRow] = []
    weeks: dict[date, _WeekAcc] = defaultdict(_WeekAcc)
    seasons: dict[str, str] = {}
    first_day: date | None = None
    last_day: date | None = None
    through: datetime | None = None
    for site in sites:
        report = await assemble_site_report(sources, site.id, season, now=now)
        rows.append(status_row(report))
        p = report.period
        first_day = p.first_day if first_day is None else min(first_day, p.first_day)
        last_day = p.last_day if last_day is None else max(last_day, p.last_day)
        through = report.through if through is None else max(through, report.through)
        pack = sources.packs.get(site.jurisdiction)
        key = pack.id if pack is not None else site.jurisdiction
        if key not in seasons:
            cites = ", ".join(dict.fromkeys(str(c) for c in p.citations))
            seasons[key] = f"{key}: {p.describe()}" + (f" [{cites}]" if cites else "")
        for d in report.days:
            acc = weeks[_week_of(d.day)]
            acc.pit += d.pit_volume_l
            acc.outlet += d.outlet_volume_l
            acc.sanitary += d.sanitary_l
            acc.icing += int(d.icing)
            acc.freezing += d.freezing_risk_hours
            if d.violation:
                acc.violators.add(site.id)
    rows.sort(key=lambda r: r.site_id)
    priority = tuple(
        sorted((r for r in rows if r.recommendation is not Recommendation.NONE), key=_priority_key)
    )
    totals = VillageTotals(
        sites=len(rows),
        pit_volume_l=sum(r.pit_volume_l for r in rows),
        outlet_volume_l=sum(r.outlet_volume_l for r in rows),
        sanitary_l=sum(r.sanitary_l for r in rows),
        icing_days=sum(r.icing_days for r in rows),
        violation_days=sum(r.violation_days for r in rows),
        sites_in_violation=sum(1 for r in rows if r.status is ComplianceStatus.VIOLATION),
        sites_compliant=sum(1 for r in rows if r.status is ComplianceStatus.COMPLIANT),
    )
    week_rows = tuple(
        WeekStats(
            week_start=w,
            pit_volume_l=a.pit,
            outlet_volume_l=a.outlet,
            sanitary_l=a.sanitary,
            icing_site_days=a.icing,
            sites_in_violation=len(a.violators),
            freezing_risk_hours=a.freezing,
        )
        for w, a in sorted(weeks.items())
    )
    scope = jurisdiction or ("selected sites" if site_ids is not None else "all sites")
    pack = sources.packs.get(jurisdiction) if jurisdiction else None
    title = f"Winter monitoring report {season}: " + (pack.name if pack else scope)
    fallback = season_period(season, None, "UTC")
    notes = []
    if not rows:
        notes.append("No site matches this report's scope.")
    return VillageReport(
        title=title,
        scope=scope,
        season_label=fallback.label,
        first_day=first_day or fallback.first_day,
        last_day=last_day or fallback.last_day,
        seasons=tuple(seasons.values()),
        through=through or fallback.start,
        generated_at=now,
        rows=tuple(rows),
        totals=totals,
        priority=priority,
        weeks=week_rows,
        notes=tuple(notes),
        timezone=_one_zone(sites),
        village=pack.name if pack else scope,
    )


def _one_zone(sites: Iterable[SiteConfig]) -> str:
    """The sites' one time zone (a village's sites share one); UTC if they differ."""
    zones = {s.timezone for s in sites}
    return zones.pop() if len(zones) == 1 else "UTC"
