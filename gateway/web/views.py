"""View models of the pages: what a person sees, already worded and in their units.

Pydantic models (they are serialised to the browser: initial render and live
updates send the same JSON). Builders are async functions of the runtime; the
judgement they make (is the pump OK, is the line frozen) is small and explained
where it is made.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, Protocol, TypeVar

from pydantic import BaseModel, TypeAdapter

from alerts.models import Alert, AlertState
from gateway.accounts.models import Principal
from gateway.contract import NodeKind
from gateway.domain import Audience, Citation, Finding, Reading, Severity, ordinance_name
from gateway.registry import SiteConfig
from gateway.registry.models import DischargeDestination
from gateway.rules.catalog import CATALOG
from gateway.rules.detectors.pump_failure import PumpFailureDetector
from gateway.rules.detectors.sanitary import SanitaryDischargeDetector
from gateway.rules.detectors.silence import SensorSilenceDetector
from gateway.rules.detectors.weather import FrozenLineDetector, IcingRiskDetector
from gateway.rules.pack import RulePack
from gateway.rules.verdict import Verdict, VerdictStatus
from gateway.services import Services
from gateway.web import sources, wording
from gateway.web.units import UnitSystem, fmt, unit

State = Literal["ok", "attention", "problem", "unknown"]
#: The rules the pages single out, by the detectors' own ids (the pages only read
#: their findings; a renamed rule cannot silently drop out of a page).
PUMP_FAILURE = PumpFailureDetector.rule_id
SENSOR_SILENT = SensorSilenceDetector.rule_id
SANITARY = SanitaryDischargeDetector.rule_id
FROZEN_LINE = FrozenLineDetector.rule_id
ICING = IcingRiskDetector.rule_id
#: Outlet flow below this (L/min) is "no flow": sensor noise, drips.
FLOWING_LPM = 0.5
DESTINATIONS: dict[DischargeDestination | None, str] = {
    None: "Not recorded",
    DischargeDestination.GRADE: "Onto the lawn (grade)",
    DischargeDestination.SWALE: "Into a yard swale",
    DischargeDestination.STORM_LATERAL: "Into the storm sewer lateral",
    DischargeDestination.SANITARY: "Into the sanitary sewer (floor drain, tub or lateral)",
}


class CitationView(BaseModel):
    """An ordinance section, for people: the ordinance's title, never its file name."""

    text: str  # e.g. "Village of Edgar Sump Pump Ordinance §(c)(2)b"
    quote: str = ""
    title: str = ""
    section: str = ""
    #: The ordinance text's file: for machines (the JSON APIs); pages never show it.
    file: str = ""


class StatusView(BaseModel):
    """The one-line answer to "is my pump OK?"."""

    state: State
    headline: str
    detail: str


class PitView(BaseModel):
    """The pit gauge: level against the marks, as fractions of the pit depth."""

    level_text: str
    level_pct: float
    rim_text: str = ""
    #: e.g. "Rising 0.4 in/min: at the rim in about 12 min"; "" when not rising.
    trend_text: str = ""
    overflowing: bool = False
    on_pct: float
    off_pct: float
    alarm_pct: float
    on_text: str
    off_text: str
    alarm_text: str
    depth_text: str
    above_alarm: bool


class AlertView(BaseModel):
    """An open or acknowledged alert with what to do and what the viewer may do."""

    id: str
    site_id: str
    site_name: str
    rule_id: str
    severity: Severity
    state: AlertState
    level: str
    title: str
    action: str
    opened_text: str
    acknowledged_text: str = ""
    assignee: str = ""
    citations: list[CitationView]
    evidence: list[tuple[str, str]]
    #: The dashboard's charts over the alert's time (a link for people).
    chart_url: str = ""
    can_ack: bool
    can_assign: bool
    can_resolve: bool


class ComplianceItemView(BaseModel):
    """One reason the site is (or may be) out of compliance."""

    kind: Literal["audit", "finding"]
    status: str  # fail / advisory / unknown for the audit; the finding's level otherwise
    message: str
    action: str
    citations: list[CitationView]
    evidence: list[tuple[str, str]] = []
    chart_url: str = ""


class NodeView(BaseModel):
    """A sensor node and whether it is reporting."""

    id: str
    kind: str
    kind_text: str = ""
    last_seen_text: str
    #: Receive time of the newest message (the one clock of "last seen" on every page).
    last_seen_ms: int | None = None
    reporting: bool


class SiteOverview(BaseModel):
    """Everything on the homeowner dashboard except the charts."""

    site_id: str
    name: str
    address: str
    timezone: str
    jurisdiction: str
    jurisdiction_name: str
    units: UnitSystem
    updated_text: str
    has_data: bool
    #: When the gateway received the newest message of the site (epoch ms).
    last_reading_ms: int | None
    last_reading_text: str = "never"
    #: Older than this (ms) and the page says nothing new is arriving.
    stale_after_ms: int = 600_000
    now_ms: int = 0
    status: StatusView
    pit: PitView
    pump_text: str
    pump_running: bool | None
    backup_text: str
    last_cycle_text: str
    cycles_today: int | None
    volume_today_text: str
    discharge_state: Literal["flowing", "idle", "frozen", "unknown"]
    discharge_text: str
    flow_text: str
    pressure_text: str
    outlet_temp_text: str
    outdoor_temp_text: str
    pit_water_temp_text: str
    destination_text: str
    #: False: a requirement forbids it; True: the pack's requirements on where the water
    #: goes were checked and met (or a waiver the text provides covers it); None: not
    #: recorded, only suspected, or the text does not address it (no legality claimed).
    destination_lawful: bool | None
    destination_note: str
    destination_citations: list[CitationView]
    season_text: str
    alerts_enabled: bool
    alerts: list[AlertView]
    compliance_ok: bool  # the verdict is "compliant"
    verdict_status: str  # gateway.rules.verdict.VerdictStatus
    verdict_label: str
    verdict_text: str  # worded for the viewer (staff or homeowner)
    compliance: list[ComplianceItemView]
    nodes: list[NodeView]


# ---------------------------------------------------------------------- helpers


def citation_view(c: Citation | Mapping[str, str], pack: RulePack | None) -> CitationView:
    """``file`` + ``section`` as "<ordinance name> §<section>"."""
    if not isinstance(c, Citation):
        c = Citation(c.get("file", ""), c.get("section", ""), c.get("quote", ""))
    # Pages name the ordinance; only the JSON APIs and machine outputs keep file names.
    known = pack.title if pack is not None and pack.file == c.file else None
    return CitationView(
        text=c.cited(known),
        quote=c.quote,
        title=ordinance_name(c.file, known),
        section=c.section,
        file=c.file,
    )


def chart_url(site_id: str, at: datetime, now: datetime) -> str:
    """The dashboard's charts over a moment: the shortest range that still shows it."""
    age = now - at
    range_ = "24h" if age <= timedelta(hours=23) else "7d" if age <= timedelta(days=6) else "season"
    return f"/site/{site_id}?range={range_}#charts-h"


def _alert_title(alert: Alert) -> str:
    """Sensor alerts name the sensor; the others keep the detector's title."""
    if alert.rule_id == SENSOR_SILENT:
        named = wording.silent_sensors(alert.evidence)
        if named:
            return f"Not reporting: {named}"
    return alert.title


def alert_view(
    alert: Alert,
    site: SiteConfig,
    principal: Principal,
    pack: RulePack | None,
    now: datetime,
    units: UnitSystem = "us",
) -> AlertView:
    """An alert for a page, with the buttons this principal may use."""
    ack_text = ""
    if alert.acknowledged_at is not None:
        ack_text = (
            f"Acknowledged by {alert.acknowledged_by or 'someone'}, "
            f"{sources.ago(alert.acknowledged_at, now)}"
        )
        if alert.ack_note:
            ack_text += f": “{alert.ack_note}”"
    return AlertView(
        id=alert.id,
        site_id=alert.site_id,
        site_name=site.name,
        rule_id=alert.rule_id,
        severity=alert.severity,
        state=alert.state,
        level=alert.level,
        title=_alert_title(alert),
        action=alert.action,
        opened_text=f"{sources.local_time(alert.opened_at, site, now)} "
        f"({sources.ago(alert.opened_at, now)})",
        acknowledged_text=ack_text,
        assignee=alert.assignee or "",
        citations=[citation_view(c, pack) for c in alert.citations],
        evidence=wording.evidence(alert.evidence, site, units),
        chart_url=chart_url(site.id, alert.opened_at, now),
        can_ack=alert.state is AlertState.OPEN,
        can_assign=principal.is_staff,
        # Public works may resolve only what is addressed to it (issue 20.4).
        can_resolve=principal.is_admin
        or (principal.is_staff and Audience.PUBLIC_WORKS.value in alert.audience),
    )


#: The rise rate is fitted over this much of the newest pit readings.
TREND_WINDOW = timedelta(minutes=10)
#: Slower than this (cm/min) is "steady": float bounce and sensor noise.
RISING_CM_PER_MIN = 0.1
#: At or above this share of the pit depth the water is at the rim (the sensor saturates).
RIM_SHARE = 0.97


def rise_rate(rows: list[Reading], now: datetime) -> float | None:
    """Least-squares slope of the pit level (cm/min) over the last minutes, or None."""
    pts = [
        ((r.ts - now).total_seconds() / 60.0, v)
        for r in rows
        if r.ts >= now - TREND_WINDOW and (v := r.number("level_cm")) is not None
    ]
    if len(pts) < 3 or pts[-1][0] - pts[0][0] < 1.0:
        return None
    mx = sum(x for x, _ in pts) / len(pts)
    my = sum(y for _, y in pts) / len(pts)
    sxx = sum((x - mx) ** 2 for x, _ in pts)
    return sum((x - mx) * (y - my) for x, y in pts) / sxx if sxx else None


def is_overflowing(site: SiteConfig, level_cm: float | None) -> bool:
    """The water is at the rim of the pit."""
    return level_cm is not None and level_cm >= site.pit.depth_cm * RIM_SHARE


def trend_text(
    site: SiteConfig, level_cm: float | None, rate: float | None, units: UnitSystem
) -> str:
    """E.g. "Rising 0.4 in/min: at the rim in about 12 min"; "" when not rising."""
    # Below the pump-on mark a rising pit is a pit filling before its next cycle:
    # normal, and no news. Above it the pump should be lowering the water.
    if level_cm is None or rate is None or rate < RISING_CM_PER_MIN:
        return ""
    if level_cm < site.pit.pump_on_cm:
        return ""
    speed = f"Rising {fmt('level', rate, units)}/min"
    if is_overflowing(site, level_cm):
        return speed
    minutes = (site.pit.depth_cm - level_cm) / rate
    return f"{speed}: at the rim in about {wording.duration(minutes * 60)}"


def _pit_view(
    site: SiteConfig, level_cm: float | None, units: UnitSystem, rate: float | None = None
) -> PitView:
    pit = site.pit

    def pct(value: float) -> float:
        return round(max(0.0, min(100.0, value / pit.depth_cm * 100)), 1)

    return PitView(
        level_text=fmt("level", level_cm, units),
        level_pct=pct(level_cm or 0.0),
        rim_text=fmt("level", pit.depth_cm, units),
        trend_text=trend_text(site, level_cm, rate, units),
        overflowing=is_overflowing(site, level_cm),
        on_pct=pct(pit.pump_on_cm),
        off_pct=pct(pit.pump_off_cm),
        alarm_pct=pct(pit.alarm_cm),
        on_text=fmt("level", pit.pump_on_cm, units),
        off_text=fmt("level", pit.pump_off_cm, units),
        alarm_text=fmt("level", pit.alarm_cm, units),
        depth_text=fmt("level", pit.depth_cm, units),
        above_alarm=level_cm is not None and level_cm >= pit.alarm_cm,
    )


def _last_cycle(pit_rows: list[Reading], site: SiteConfig, now: datetime) -> str:
    """The most recent pump run: when it started and how long it ran."""
    start = end = None
    for i in range(len(pit_rows) - 1, 0, -1):
        on, before = pit_rows[i].values.get("pump_on"), pit_rows[i - 1].values.get("pump_on")
        if end is None and on is False and before is True:
            end = pit_rows[i].ts
        if on is True and before is False:
            start = pit_rows[i].ts
            break
    if start is None:
        return "No pump run in the last 3 hours"
    if end is None or end < start:
        return f"Running since {sources.local_time(start, site, now)}"
    seconds = int((end - start).total_seconds())
    return (
        f"{sources.local_time(start, site, now)}, ran {seconds // 60} min {seconds % 60} s "
        f"({sources.ago(end, now)})"
    )


def _destination(
    site: SiteConfig, verdict: Verdict, pack: RulePack | None
) -> tuple[bool | None, str, list[CitationView]]:
    """What the verdict says about where the water goes, claiming no more than the text."""
    if pack is None:
        return None, f"No rule pack for jurisdiction {site.jurisdiction!r}.", []
    items = [i for i in verdict.audit if i.field == "destination"]
    for status in ("fail", "waived"):
        item = next((i for i in items if i.status == status), None)
        if item is not None:
            cites = [citation_view(c, pack) for c in item.citations]
            return status == "waived", item.message, cites
    sanitary = [s for s in verdict.spells if s.rule_id == SANITARY]
    if any(s.status == "confirmed" for s in sanitary):
        spell = next(s for s in sanitary if s.status == "confirmed")
        return False, "Confirmed: " + spell.title, [citation_view(c, pack) for c in spell.citations]
    if any(s.status == "suspected" for s in sanitary):
        spell = next(s for s in sanitary if s.status == "suspected")
        return (
            None,
            "Suspected, not confirmed: "
            + spell.title
            + ". An inspection confirms or rules it out.",
            [citation_view(c, pack) for c in spell.citations],
        )
    name = pack.name.split(":")[0]
    unknown = next((i for i in items if i.status == "unknown"), None)
    if verdict_installation(site, verdict.as_of).destination is None or unknown is not None:
        return None, "Where the water goes is not recorded, so it could not be checked.", []
    advisory = next((i for i in items if i.status == "advisory"), None)
    if advisory is not None:
        return None, advisory.message, [citation_view(c, pack) for c in advisory.citations]
    checked = [r for r in pack.requirements if r.field == "destination" and r.status == "fail"]
    if not checked:
        return None, f"{name} does not say where a sump may discharge.", []
    return True, f"Meets the requirements of {name} on where the water goes.", []


def _reporting_status(
    site: SiteConfig, latest: dict[str, Reading], now: datetime, silence_factor: float
) -> StatusView | None:
    """No readings at all, or a silent pit sensor: nothing else can be judged."""
    if not latest:
        return StatusView(
            state="unknown",
            headline="No readings yet",
            detail="Check that the sensors are plugged in and on Wi-Fi; readings show here "
            "within a minute of the first message.",
        )
    pit_node = site.node_of_kind(NodeKind.PIT)
    if pit_node is None:
        return None
    pit = latest.get(pit_node.id)
    if pit is not None and now - pit.received_at <= sources.stale_after(
        site, pit_node.id, silence_factor
    ):
        return None
    since = f" since {sources.local_time(pit.ts, site, now)}" if pit else ""
    return StatusView(
        state="problem",
        headline="The pit sensor is not reporting",
        detail=f"No reading{since}. Check its power and Wi-Fi; until it reports we "
        "cannot tell whether the pump works.",
    )


def _pit_status(
    site: SiteConfig, level: float | None, findings: list[Finding], trend: str
) -> StatusView | None:
    """Water in the pit that needs someone now: overflowing, a failed pump, high water."""
    rising = f"{trend}. " if trend else ""
    if is_overflowing(site, level):
        return StatusView(
            state="problem",
            headline="The pit is overflowing",
            detail="The water has reached the rim of the pit and can flood the basement. "
            "Call a plumber or a water-damage service now; keep clear of standing water "
            "near outlets and appliances.",
        )
    failed = next((f for f in findings if f.rule_id == PUMP_FAILURE), None)
    if failed is not None:
        return StatusView(
            state="problem",
            headline="The pump did not start",
            detail=rising + (failed.action or CATALOG["high_water"].action),
        )
    if level is not None and level >= site.pit.alarm_cm:
        return StatusView(
            state="problem",
            headline="High water in the pit",
            detail=rising + CATALOG["high_water"].action,
        )
    return None


def _open_status(
    findings: list[Finding], alerts: list[Alert], suspected: frozenset[str]
) -> StatusView | None:
    """The first critical, else the first warning, open alert or finding."""
    problems = [a for a in alerts if a.severity is Severity.CRITICAL] + [
        f for f in findings if f.severity is Severity.CRITICAL
    ]
    if problems:
        first = problems[0]
        # Telemetry alone suspects a violation; the banner must not state it as a fact.
        headline = f"Suspected: {first.title}" if first.rule_id in suspected else first.title
        return StatusView(state="problem", headline=headline, detail=first.action)
    concerns = [a for a in alerts if a.severity is Severity.WARNING] + [
        f for f in findings if f.severity is Severity.WARNING
    ]
    if concerns:
        return StatusView(state="attention", headline=concerns[0].title, detail=concerns[0].action)
    return None


def _status(
    site: SiteConfig,
    latest: dict[str, Reading],
    findings: list[Finding],
    alerts: list[Alert],
    now: datetime,
    silence_factor: float,
    staff: bool = False,
    suspected: frozenset[str] = frozenset(),
    trend: str = "",
) -> StatusView:
    silent = _reporting_status(site, latest, now, silence_factor)
    if silent is not None:
        return silent
    pit_node = site.node_of_kind(NodeKind.PIT)
    pit = latest.get(pit_node.id) if pit_node else None
    level = pit.number("level_cm") if pit else None
    found = _pit_status(site, level, findings, trend) or _open_status(findings, alerts, suspected)
    if found is not None:
        return found
    if staff:
        return StatusView(
            state="ok",
            headline="Pump working",
            detail="The pit empties when it should; no alert or finding is open.",
        )
    return StatusView(
        state="ok",
        headline="Your pump is OK",
        detail="The pit empties when it should and nothing needs your attention.",
    )


def _discharge(
    outlet: Reading | None, pit: Reading | None, findings: list[Finding], units: UnitSystem
) -> tuple[Literal["flowing", "idle", "frozen", "unknown"], str]:
    if any(f.rule_id == FROZEN_LINE for f in findings):
        return "frozen", "Frozen: the pump pushes but no water reaches the outlet"
    if outlet is None:
        return "unknown", "No outlet sensor reading yet"
    flow = outlet.number("flow_lpm") or 0.0
    if flow >= FLOWING_LPM:
        return "flowing", f"Flowing, {fmt('flow', flow, units)}"
    pipe_c = outlet.number("pipe_temp_c")
    pumping = bool(pit and pit.values.get("pump_on"))
    # A running pump with no outlet flow in a pipe below freezing: an ice plug is
    # the likely cause (the rules' frozen_line detector confirms it over time).
    if pumping and pipe_c is not None and pipe_c <= 0.0:
        return "frozen", "Possibly frozen: the pump runs, no flow, pipe below freezing"
    return "idle", "Idle (no flow)" + (
        ", pipe below freezing" if pipe_c is not None and pipe_c <= 0 else ""
    )


# ---------------------------------------------------------------------- builders


def _compliance_items(
    site: SiteConfig,
    verdict: Verdict,
    findings: list[Finding],
    pack: RulePack | None,
    units: UnitSystem,
    now: datetime,
) -> list[ComplianceItemView]:
    """The verdict's finding spells, then its audit items, worded for the page."""
    by_id = {f.id: f for f in findings}
    spells = [
        ComplianceItemView(
            kind="finding",
            status=spell.status,
            message=spell.title
            + ("" if spell.status != "suspected" else " (suspected: telemetry only)"),
            action=by_id[spell.finding_id].action if spell.finding_id in by_id else "",
            citations=[citation_view(c, pack) for c in spell.citations],
            evidence=wording.evidence(spell.evidence, site, units),
            chart_url=chart_url(site.id, spell.start, now),
        )
        for spell in verdict.spells
    ]
    return spells + [
        ComplianceItemView(
            kind="audit",
            status="not recorded" if i.status == "unknown" else i.status,
            message=i.message,
            action=i.action,
            citations=[citation_view(c, pack) for c in i.citations],
        )
        for i in verdict.audit
    ]


def _node_views(
    site: SiteConfig, latest: dict[str, Reading], now: datetime, factor: float
) -> list[NodeView]:
    # One clock for "last seen" everywhere: when the gateway received the message.
    out = []
    for node in site.nodes:
        last = latest.get(node.id)
        stale_after = sources.stale_after(site, node.id, factor)
        out.append(
            NodeView(
                id=node.id,
                kind=node.kind.value,
                kind_text=wording.NODE_KINDS.get(node.kind.value, "sensor").capitalize(),
                last_seen_text=sources.ago(last.received_at, now) if last else "never",
                last_seen_ms=int(last.received_at.timestamp() * 1000) if last else None,
                reporting=last is not None and now - last.received_at <= stale_after,
            )
        )
    return out


async def _recent_pit_rows(
    runtime: Services, site: SiteConfig, latest: dict[str, Reading], now: datetime
) -> list[Reading]:
    """The pit's last three hours of pump state and level (the trend, the last cycle)."""
    pit_node = site.node_of_kind(NodeKind.PIT)
    if pit_node is None or pit_node.id not in latest:
        return []
    return await sources.readings(
        runtime,
        site.id,
        pit_node.id,
        now - timedelta(hours=3),
        now + timedelta(minutes=5),
        fields=("pump_on", "level_cm"),
    )


async def _today(
    runtime: Services, site: SiteConfig, latest: dict[str, Reading], now: datetime
) -> tuple[int | None, float | None]:
    """Pump cycles and pumped volume since local midnight (None before any reading)."""
    if not latest:
        return None, None
    by_node = await sources.minute_rollups(runtime, site, sources.since_midnight(site, now), now)
    cycles = sum(r.pump_cycles for rs in by_node.values() for r in rs)
    return cycles, sum(r.pumped_volume_l for rs in by_node.values() for r in rs)


def _pump_text(failed: bool, pump_on: object) -> str:
    if failed:
        return "Did not start"
    return "—" if pump_on is None else ("Running" if pump_on else "Off")


def _of_kind(site: SiteConfig, latest: dict[str, Reading], kind: NodeKind) -> Reading | None:
    node = site.node_of_kind(kind)
    return latest.get(node.id) if node else None


def _identity(
    site: SiteConfig,
    pack: RulePack | None,
    units: UnitSystem,
    latest: dict[str, Reading],
    now: datetime,
    factor: float,
) -> dict[str, Any]:
    """The overview's header fields: which site, and how fresh its readings are."""
    # One clock for "last seen" everywhere: when the gateway received the message.
    newest = max((r.received_at for r in latest.values()), default=None)
    return {
        "site_id": site.id,
        "name": site.name,
        "address": site.address,
        "timezone": site.timezone,
        "jurisdiction": site.jurisdiction,
        "jurisdiction_name": pack.name.split(":")[0] if pack else site.jurisdiction,
        "units": units,
        "updated_text": sources.local_time(now, site, now),
        "has_data": bool(latest),
        "last_reading_ms": int(newest.timestamp() * 1000) if newest else None,
        "last_reading_text": sources.ago(newest, now) if newest else "never",
        "stale_after_ms": int(_site_stale_after(site, factor).total_seconds() * 1000),
        "now_ms": int(now.timestamp() * 1000),
    }


def _reading_texts(
    site: SiteConfig, latest: dict[str, Reading], units: UnitSystem
) -> dict[str, str]:
    """The latest outlet, air and pit water readings, formatted ("—" when none)."""
    outlet = _of_kind(site, latest, NodeKind.DISCHARGE)
    air = _of_kind(site, latest, NodeKind.AIR)
    pit = _of_kind(site, latest, NodeKind.PIT)

    def shown(kind: str, reading: Reading | None, name: str) -> str:
        return fmt(kind, reading.number(name) if reading else None, units)

    return {
        "flow_text": shown("flow", outlet, "flow_lpm"),
        "pressure_text": shown("pressure", outlet, "pressure_kpa"),
        "outlet_temp_text": shown("temperature", outlet, "pipe_temp_c"),
        "outdoor_temp_text": shown("temperature", air, "air_temp_c"),
        "pit_water_temp_text": shown("temperature", pit, "water_temp_c"),
    }


async def site_overview(
    runtime: Services,
    site: SiteConfig,
    principal: Principal,
    units: UnitSystem,
    now: datetime | None = None,
) -> SiteOverview:
    """The homeowner dashboard's state for one site."""
    now = now or datetime.now(UTC)
    pack = sources.pack_of(runtime, site)
    latest: dict[str, Reading] = await runtime.store.latest(site.id)
    findings = await sources.open_findings(runtime, [site.id])
    alerts = await sources.live_alerts(runtime, site_id=site.id)
    verdict = await sources.verdict(runtime, site, now, findings)
    factor = runtime.detectors.silence_factor
    staff = principal.is_staff
    pit = _of_kind(site, latest, NodeKind.PIT)
    outlet = _of_kind(site, latest, NodeKind.DISCHARGE)
    pit_rows = await _recent_pit_rows(runtime, site, latest, now)
    cycles, volume = await _today(runtime, site, latest, now)
    pump_on = pit.values.get("pump_on") if pit else None
    level_now = pit.number("level_cm") if pit else None
    trend = trend_text(site, level_now, rise_rate(pit_rows, now), units)
    backup = pit.values.get("backup_pump_on") if pit else None
    state, discharge_text = _discharge(outlet, pit, findings, units)
    lawful, note, dest_cites = _destination(site, verdict, pack)
    return SiteOverview(
        **_identity(site, pack, units, latest, now, factor),
        **_reading_texts(site, latest, units),
        status=_status(
            site, latest, findings, alerts, now, factor, staff, _suspected_rules(verdict), trend
        ),
        pit=_pit_view(site, level_now, units, rise_rate(pit_rows, now)),
        pump_text=_pump_text(any(f.rule_id == PUMP_FAILURE for f in findings), pump_on),
        pump_running=None if pump_on is None else bool(pump_on),
        backup_text=""
        if backup is None
        else ("Backup pump running" if backup else "Backup pump off"),
        last_cycle_text=_last_cycle(pit_rows, site, now) if pit else "—",
        cycles_today=cycles,
        volume_today_text=fmt("volume", volume, units),
        discharge_state=state,
        discharge_text=discharge_text,
        destination_text=DESTINATIONS[verdict_installation(site, now).destination],
        destination_lawful=lawful,
        destination_note=note,
        destination_citations=dest_cites,
        season_text=f"Winter season: {pack.season.label()}" if pack else "",
        alerts_enabled=sources.alerts_enabled(runtime),
        alerts=[alert_view(a, site, principal, pack, now, units) for a in alerts],
        # The one verdict (gateway.rules.verdict) the console, API and reports also read.
        compliance_ok=verdict.status is VerdictStatus.COMPLIANT,
        verdict_status=verdict.status.value,
        verdict_label=verdict.label,
        verdict_text=verdict.sentence("staff" if staff else "homeowner"),
        compliance=_compliance_items(site, verdict, findings, pack, units, now),
        nodes=_node_views(site, latest, now, factor),
    )


def _site_stale_after(site: SiteConfig, factor: float) -> timedelta:
    """The longest any node of the site may stay silent before it counts as not reporting."""
    return max(sources.node_stale_after(n, factor) for n in site.nodes)


def _suspected_rules(verdict: Verdict) -> frozenset[str]:
    """Rules with a suspected and no confirmed violation spell."""
    confirmed = {s.rule_id for s in verdict.confirmed}
    return frozenset(s.rule_id for s in verdict.suspected if s.rule_id not in confirmed)


def verdict_installation(site: SiteConfig, now: datetime) -> Any:
    """The installation record in force today (the one the verdict audits)."""
    return site.installation_on(now.astimezone(site.tz).date())


#: The verdict's weight on a console row's state: a violation is a problem whatever
#: the pump does; a suspected one needs attention.
_VERDICT_STATE: dict[VerdictStatus, State] = {
    VerdictStatus.VIOLATION: "problem",
    VerdictStatus.SUSPECTED: "attention",
}
_STATE_RANK = {"problem": 0, "attention": 1, "unknown": 2, "ok": 3}


class ConsoleRow(BaseModel):
    """One site in the public-works table."""

    site_id: str
    name: str
    address: str
    status: State
    status_text: str
    verdict_status: str
    verdict_label: str
    verdict_text: str
    open_findings: int
    open_alerts: int
    last_seen_text: str
    last_seen_ms: int | None
    icing_risk: str  # "" or the finding's level (watch / warning / violation)
    sanitary_suspected: bool
    audit_fails: int
    lat: float | None
    lon: float | None


class AuditRow(BaseModel):
    """One failed (or unknown) requirement of the installation audit."""

    site_id: str
    site_name: str
    status: str
    message: str
    action: str
    citations: list[CitationView]


class ConsoleView(BaseModel):
    """The public-works console of one jurisdiction."""

    jurisdiction: str
    jurisdiction_name: str
    units: UnitSystem
    updated_text: str
    rows: list[ConsoleRow]
    alerts_enabled: bool
    alerts: list[AlertView]
    audit: list[AuditRow]
    has_map: bool
    now_ms: int = 0
    #: Receive time of the newest message from any site (epoch ms).
    newest_ms: int | None = None
    stale_after_ms: int = 600_000
    #: E.g. "2 sites with a problem, 1 needs attention, 5 OK" (announced when it changes).
    summary_text: str = ""


class _Citations:
    """:func:`citation_view` once per distinct citation: a village's 1,000 audits cite
    the same few sections thousands of times (the views are only read)."""

    def __init__(self, pack: RulePack | None) -> None:
        self._pack = pack
        self._seen: dict[Citation, CitationView] = {}
        # The audits' citations are the pack's own objects: found by identity first,
        # without hashing a dataclass (the entry keeps the citation, so its id holds).
        self._by_id: dict[int, tuple[Citation, CitationView]] = {}
        # An item's citations tuple, by identity (kept, so its id holds), and their views.
        self._tuples: dict[int, tuple[tuple[Citation, ...], tuple[CitationView, ...]]] = {}

    def __call__(self, c: Citation) -> CitationView:
        known = self._by_id.get(id(c))
        if known is not None:
            return known[1]
        view = self._seen.get(c)
        if view is None:
            view = self._seen[c] = citation_view(c, self._pack)
        self._by_id[id(c)] = (c, view)
        return view

    def all(self, citations: tuple[Citation, ...]) -> tuple[CitationView, ...]:
        """The views of an item's citations; the audits' items share their tuples, so
        each distinct tuple is viewed once (a row's model copies it into its list)."""
        known = self._tuples.get(id(citations))
        if known is None:
            known = self._tuples[id(citations)] = (citations, tuple(map(self, citations)))
        return known[1]


def _audit_rows(site: SiteConfig, verdict: Verdict, cite: _Citations) -> Iterator[dict[str, Any]]:
    """A site's audit rows as the fields of :class:`AuditRow` (a village has ~8,000:
    they are validated together, see :data:`_AUDIT_ROWS`)."""
    for i in verdict.audit:
        yield {
            "site_id": site.id,
            "site_name": site.name,
            "status": "not recorded" if i.status == "unknown" else i.status,
            "message": i.message,
            "action": i.action,
            "citations": cite.all(i.citations),
        }


#: The console's rows and audit rows made into models in one call each: pydantic-core
#: builds a whole list at once, where a model a row (``model_construct`` included) paid
#: Python's per-call cost 9,000 times a console (issue 17 item 5). Each is handed a
#: generator, so the fields of one row are dropped as soon as its model is made: fewer
#: objects outlive a collection, and the collector runs less (it was a third of a
#: console's time).
_CONSOLE_ROWS = TypeAdapter(list[ConsoleRow])
_AUDIT_ROWS = TypeAdapter(list[AuditRow])


def _console_row(
    site: SiteConfig,
    latest: dict[str, Reading],
    site_findings: list[Finding],
    site_alerts: list[Alert],
    verdict: Verdict,
    now: datetime,
    factor: float,
) -> dict[str, Any]:
    """A site's line of the console, as the fields of :class:`ConsoleRow`."""
    status = _status(
        site, latest, site_findings, site_alerts, now, factor, True, _suspected_rules(verdict)
    )
    state = _VERDICT_STATE.get(verdict.status, status.state)
    if _STATE_RANK[state] > _STATE_RANK[status.state]:
        state = status.state
    newest = max((r.received_at for r in latest.values()), default=None)
    icing = next((f for f in site_findings if f.rule_id == ICING), None)
    return dict(
        site_id=site.id,
        name=site.name,
        address=site.address,
        status=state,
        status_text=status.headline,
        verdict_status=verdict.status.value,
        verdict_label=verdict.label,
        verdict_text=verdict.sentence("staff"),
        open_findings=len(site_findings),
        open_alerts=len(site_alerts),
        last_seen_text=sources.ago(newest, now) if newest else "never",
        last_seen_ms=int(newest.timestamp() * 1000) if newest else None,
        icing_risk=(icing.level or icing.severity.value) if icing else "",
        sanitary_suspected=any(f.rule_id == SANITARY for f in site_findings),
        audit_fails=sum(1 for i in verdict.audit if i.status == "fail"),
        lat=site.lat,
        lon=site.lon,
    )


def _stale_after_ms(sites: Iterable[SiteConfig], factor: float) -> int:
    longest = max((_site_stale_after(s, factor) for s in sites), default=timedelta(minutes=10))
    return int(longest.total_seconds() * 1000)


async def console_view(
    runtime: Services,
    jurisdiction: str,
    sites: list[SiteConfig],
    principal: Principal,
    units: UnitSystem,
    now: datetime | None = None,
) -> ConsoleView:
    """Every site of a jurisdiction with its status, alerts and audit."""
    now = now or datetime.now(UTC)
    pack = sources.packs(runtime).get(jurisdiction)
    findings = await sources.open_findings(runtime, [s.id for s in sites])
    alerts = await sources.live_alerts(runtime, jurisdiction=jurisdiction)
    by_id = {s.id: s for s in sites}
    factor = runtime.detectors.silence_factor
    cite = _Citations(pack)
    # One store read for the whole village (1,000 sites), and each site's findings and
    # alerts picked by key rather than by scanning every list once per site.
    latest_of = await runtime.store.latest_of([s.id for s in sites])
    findings_of = _by_site(findings)
    alerts_of = _by_site(alerts)
    verdicts = await sources.verdicts(runtime, sites, now, findings)
    rows = _CONSOLE_ROWS.validate_python(
        _console_row(
            site,
            latest_of.get(site.id, {}),
            findings_of.get(site.id, []),
            alerts_of.get(site.id, []),
            verdicts[site.id],
            now,
            factor,
        )
        for site in sites
    )
    audit = _AUDIT_ROWS.validate_python(
        row for site in sites for row in _audit_rows(site, verdicts[site.id], cite)
    )
    seen = [r.last_seen_ms for r in rows if r.last_seen_ms is not None]
    return ConsoleView(
        now_ms=int(now.timestamp() * 1000),
        newest_ms=max(seen) if seen else None,
        stale_after_ms=_stale_after_ms(sites, factor),
        summary_text=console_summary(rows),
        jurisdiction=jurisdiction,
        jurisdiction_name=pack.name.split(":")[0] if pack else jurisdiction,
        units=units,
        updated_text=sources.local_time(now, sites[0], now) if sites else "",
        rows=rows,
        alerts_enabled=sources.alerts_enabled(runtime),
        alerts=[
            alert_view(a, by_id[a.site_id], principal, pack, now, units)
            for a in alerts
            if a.site_id in by_id
        ],
        audit=audit,
        has_map=any(s.lat is not None and s.lon is not None for s in sites),
    )


class _OfSite(Protocol):
    @property
    def site_id(self) -> str:
        """The site the item belongs to."""


_T = TypeVar("_T", bound=_OfSite)


def _by_site(items: Iterable[_T]) -> dict[str, list[_T]]:
    """Findings or alerts grouped by their site, each group in the given order."""
    out: dict[str, list[_T]] = {}
    for item in items:
        out.setdefault(item.site_id, []).append(item)
    return out


def console_summary(rows: list[ConsoleRow]) -> str:
    """How many sites are in each state, worst first."""
    words = {
        "problem": "with a problem",
        "attention": "needing attention",
        "unknown": "without data",
        "ok": "OK",
    }
    parts = []
    for state in ("problem", "attention", "unknown", "ok"):
        n = sum(1 for r in rows if r.status == state)
        if n:
            parts.append(f"{n} {'site' if n == 1 else 'sites'} {words[state]}")
    return ", ".join(parts) or "No sites"


def unit_labels(units: UnitSystem) -> dict[str, str]:
    """Unit symbols by quantity, for chart axes."""
    return {q: unit(q, units) for q in ("level", "flow", "pressure", "temperature", "volume")}
