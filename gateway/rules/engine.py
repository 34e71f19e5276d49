"""The rules engine: per-site stateful detectors over validated readings.

Pure apart from its in-memory state: readings, status changes and clock ticks
go in, :class:`FindingEvent` s come out. One open finding per (site, rule): it
opens once, is updated while the condition holds (an event only when its level
or severity changes, or every ``REFRESH_EVERY``), and clears when it ends.

Detectors use device time (``Reading.ts``). A reading whose ``ts`` is not newer
than the last one seen from its node (QoS 1 redelivery, duplicate, late
out-of-order message) is ignored, as are readings of unknown sites. Sensor
silence is about *arrival*, so it compares ``received_at`` with the clock given
to :meth:`RulesEngine.tick` (wall clock live, data time in replay).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from gateway.contract import NodeKind
from gateway.domain import (
    Audience,
    Finding,
    FindingChange,
    FindingEvent,
    Reading,
    Severity,
    StatusChange,
)
from gateway.registry.models import SiteConfig, SiteRegistry
from gateway.rules.catalog import CATALOG, action_for
from gateway.rules.detectors.base import (
    AirSample,
    OutletSample,
    PitSample,
    SiteContext,
    SiteState,
    Verdict,
    iso,
)
from gateway.rules.detectors.pump import (
    ContinuousRunDetector,
    HighWaterDetector,
    ShortCyclingDetector,
)
from gateway.rules.detectors.sanitary import SanitaryDischargeDetector
from gateway.rules.detectors.weather import FrozenLineDetector, IcingRiskDetector
from gateway.rules.pack import RulePack
from gateway.rules.thresholds import ICING_WINDOW, REFRESH_EVERY

SILENT_RULE = "sensor_silent"


class SiteMonitor:
    """The detectors and state of one site."""

    def __init__(self, site: SiteConfig, pack: RulePack | None, silence_factor: float) -> None:
        self.site = site
        self.state = SiteState(SiteContext(site, pack), ICING_WINDOW + timedelta(minutes=5))
        self.sanitary = SanitaryDischargeDetector()
        self.icing = IcingRiskDetector(self.state)
        self.frozen = FrozenLineDetector()
        self.high_water = HighWaterDetector()
        self.continuous = ContinuousRunDetector()
        self.short_cycling = ShortCyclingDetector()
        self.silence_factor = silence_factor
        self.last_ts: dict[str, datetime] = {}
        self.last_heard: dict[str, datetime] = {}
        self.offline: set[str] = set()
        self.watch_from: datetime | None = None

    def detectors(self) -> Mapping[str, Any]:
        """Detector objects by rule id (for restore)."""
        return {
            d.rule_id: d
            for d in (
                self.sanitary,
                self.icing,
                self.frozen,
                self.high_water,
                self.continuous,
                self.short_cycling,
            )
        }

    def on_reading(self, r: Reading) -> list[tuple[str, Verdict, datetime]]:
        """Feed one fresh reading; the verdicts it produced, with their data time."""
        out: list[tuple[str, Verdict, datetime]] = []

        def add(rule_id: str, verdict: Verdict | None) -> None:
            if verdict is not None:
                out.append((rule_id, verdict, r.ts))

        state = self.state
        if r.kind is NodeKind.PIT:
            level, pump = r.number("level_cm"), r.values.get("pump_on")
            if level is None or pump is None:
                return out
            current = r.number("pump_current_a")
            s = PitSample(r.ts, level, bool(pump), bool(r.values.get("backup_pump_on")), current)
            cycle = state.cycles.add(s)
            add("high_water", self.high_water.on_pit(s, state))
            add("continuous_run", self.continuous.on_pit(s, state))
            if cycle is not None:
                self.sanitary.add_cycle(cycle)
                self.short_cycling.add_cycle(cycle, s)
            add("short_cycling", self.short_cycling.on_pit(s, state))
            add("sanitary_discharge", self.sanitary.poll(r.ts, state))
        elif r.kind is NodeKind.DISCHARGE:
            flow, pressure, temp = (
                r.number(k) for k in ("flow_lpm", "pressure_kpa", "pipe_temp_c")
            )
            if flow is None or pressure is None or temp is None:
                return out
            o = OutletSample(r.ts, flow, pressure, temp)
            state.outlet.add(o)
            add("frozen_line", self.frozen.on_outlet(o, state))
            add("sanitary_discharge", self.sanitary.poll(r.ts, state))
            add("icing_risk", self.icing.evaluate(r.ts, state))
        elif r.kind is NodeKind.AIR:
            temp = r.number("air_temp_c")
            if temp is None:
                return out
            state.air = AirSample(r.ts, temp)
            add("icing_risk", self.icing.evaluate(r.ts, state))
        return out

    def silence(self, now: datetime) -> Verdict:
        """Which nodes are silent at ``now`` (arrival clock)."""
        if self.watch_from is None:
            self.watch_from = now
        silent: list[dict[str, Any]] = []
        for node in self.site.nodes:
            heard = self.last_heard.get(node.id)
            limit = timedelta(seconds=node.interval_s * self.silence_factor)
            since = heard or self.watch_from
            if node.id in self.offline or now - since > limit:
                silent.append(
                    {
                        "node_id": node.id,
                        "kind": node.kind.value,
                        "status": "offline" if node.id in self.offline else "silent",
                        "last_heard": iso(heard),
                        "interval_s": node.interval_s,
                        "silent_for_s": int((now - since).total_seconds()),
                    }
                )
        if not silent:
            return Verdict(False)
        return Verdict(
            True,
            Severity.WARNING,
            "offline" if any(n["status"] == "offline" for n in silent) else "silent",
            {"nodes": silent, "silence_factor": self.silence_factor},
        )


class RulesEngine:
    """Stateful detectors for every site of a registry, under each site's rule pack."""

    def __init__(
        self, registry: SiteRegistry, packs: dict[str, RulePack], silence_factor: float = 6.0
    ) -> None:
        self.registry = registry
        self.packs = packs
        self.silence_factor = silence_factor
        self._monitors: dict[str, SiteMonitor] = {}
        self._open: dict[tuple[str, str], Finding] = {}
        self._emitted: dict[tuple[str, str], datetime] = {}

    # -- inputs ---------------------------------------------------------------

    def on_reading(self, reading: Reading) -> list[FindingEvent]:
        """Run the site's detectors on one validated reading."""
        mon = self._monitor(reading.site_id)
        if mon is None:
            return []
        # Any message is a sign of life, even one whose data we then ignore.
        mon.last_heard[reading.node_id] = reading.received_at
        mon.offline.discard(reading.node_id)
        last = mon.last_ts.get(reading.node_id)
        if last is not None and reading.ts <= last:
            return []  # redelivery, duplicate or late message: already judged
        mon.last_ts[reading.node_id] = reading.ts
        events: list[FindingEvent] = []
        for rule_id, verdict, at in mon.on_reading(reading):
            events.extend(self._apply(mon, rule_id, verdict, at))
        if (reading.site_id, SILENT_RULE) in self._open:
            events.extend(
                self._apply(mon, SILENT_RULE, mon.silence(reading.received_at), reading.received_at)
            )
        return events

    def on_heard(self, site_id: str, node_id: str, received_at: datetime) -> list[FindingEvent]:
        """A message from a node arrived but was refused (dead letter): it is alive.

        The sensor-silent rule is about messages arriving at all; a node whose
        clock runs ahead or that sends a malformed payload is not silent.
        """
        mon = self._monitor(site_id)
        if mon is None or mon.site.node(node_id) is None:
            return []
        mon.last_heard[node_id] = received_at
        if (site_id, SILENT_RULE) not in self._open:
            return []
        return self._apply(mon, SILENT_RULE, mon.silence(received_at), received_at)

    def on_status(self, status: StatusChange) -> list[FindingEvent]:
        """A node's retained online/offline message."""
        mon = self._monitor(status.site_id)
        if mon is None or mon.site.node(status.node_id) is None:
            return []
        if status.online:
            mon.offline.discard(status.node_id)
        else:
            mon.offline.add(status.node_id)
        return self._apply(mon, SILENT_RULE, mon.silence(status.received_at), status.received_at)

    def tick(self, now: datetime) -> list[FindingEvent]:
        """Check every site for silent sensors at ``now``."""
        events: list[FindingEvent] = []
        for site in self.registry:
            mon = self._monitor(site.id)
            assert mon is not None
            events.extend(self._apply(mon, SILENT_RULE, mon.silence(now), now))
        return events

    def restore(self, findings: Iterable[Finding]) -> None:
        """Continue open findings from the store (after a restart): no re-raise."""
        for f in findings:
            if not f.is_open:
                continue
            mon = self._monitor(f.site_id)
            if mon is None:
                continue
            key = (f.site_id, f.rule_id)
            self._open[key] = f
            self._emitted[key] = f.updated_at
            detector = mon.detectors().get(f.rule_id)
            if detector is not None:
                detector.restore_active()

    def open_findings(self) -> list[Finding]:
        """Every open finding held in memory."""
        return list(self._open.values())

    # -- internals ------------------------------------------------------------

    def _monitor(self, site_id: str) -> SiteMonitor | None:
        mon = self._monitors.get(site_id)
        if mon is None:
            site = self.registry.get(site_id)
            if site is None:
                return None
            mon = SiteMonitor(site, self.packs.get(site.jurisdiction), self.silence_factor)
            self._monitors[site_id] = mon
        return mon

    def _apply(
        self, mon: SiteMonitor, rule_id: str, verdict: Verdict, at: datetime
    ) -> list[FindingEvent]:
        key = (mon.site.id, rule_id)
        current = self._open.get(key)
        if not verdict.active:
            if current is None:
                return []
            cleared = replace(
                current,
                cleared_at=max(at, current.updated_at),
                updated_at=max(at, current.updated_at),
            )
            del self._open[key]
            self._emitted.pop(key, None)
            return [FindingEvent(FindingChange.CLEARED, cleared)]
        if current is None:
            finding = self._new_finding(mon, rule_id, verdict, at)
            self._open[key] = finding
            self._emitted[key] = at
            return [FindingEvent(FindingChange.OPENED, finding)]
        changed = verdict.level != current.level or verdict.severity != current.severity
        updated = replace(
            current,
            updated_at=max(at, current.updated_at),
            severity=verdict.severity,
            level=verdict.level,
            evidence=dict(verdict.evidence),
        )
        self._open[key] = updated
        if changed or at - self._emitted.get(key, at) >= REFRESH_EVERY:
            self._emitted[key] = at
            return [FindingEvent(FindingChange.UPDATED, updated)]
        return []

    def _new_finding(
        self, mon: SiteMonitor, rule_id: str, verdict: Verdict, at: datetime
    ) -> Finding:
        pack = mon.state.ctx.pack
        spec = pack.rule(rule_id) if pack is not None else None
        enforced = spec is not None and spec.enforced
        evidence = dict(verdict.evidence)
        citations: tuple[Any, ...] = ()
        if spec is not None and enforced:
            citations = spec.citations
        elif spec is not None and spec.note:
            evidence["ordinance_note"] = spec.note
        audience = (
            (Audience.HOMEOWNER, Audience.PUBLIC_WORKS) if enforced else (Audience.HOMEOWNER,)
        )
        return Finding(
            id=uuid.uuid4().hex,
            rule_id=rule_id,
            site_id=mon.site.id,
            severity=verdict.severity,
            title=CATALOG[rule_id].title,
            opened_at=at,
            updated_at=at,
            level=verdict.level,
            audience=audience,
            evidence=evidence,
            citations=citations,
            action=action_for(rule_id, pack),
        )
