"""Hand-built telemetry sequences for detector unit tests and examples.

A deliberately small sump: 1 s steps, inflow the test sets (rain: change it), a
pump of fixed flow switched by the pit's float marks, a discharge line that holds
water, a pressure tap at the outlet or on the riser, and switches for the faults
the detectors look for (diversions, full or partial, always or by the hour; ice;
pump failures; failed or leaking check valves; noise and dropouts).
It is not the scenario simulator (``firmware_sim``): it exists so each
detector can be specified on a sequence whose truth is obvious.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from gateway.contract import NodeKind
from gateway.domain import Finding, FindingChange, FindingEvent, Reading
from gateway.registry.models import PitConfig, SiteConfig, SiteRegistry
from gateway.rules.engine import RulesEngine
from gateway.rules.pack import load_packs

_SEQ: dict[str, int] = {}


def reading(
    site_id: str, node_id: str, kind: NodeKind, ts: datetime, **values: float | bool
) -> Reading:
    """One Reading as the validator would produce it (``received_at`` = ``ts``)."""
    key = f"{site_id}/{node_id}"
    _SEQ[key] = _SEQ.get(key, 0) + 1
    return Reading(site_id, node_id, kind, ts, _SEQ[key], "test", values, received_at=ts)


@dataclass
class Faults:
    """What is wrong at the home (each a switch)."""

    sanitary_share: float = 0.0  # share of pumped water diverted before the outlet
    #: Diversion only during these UTC hours [start, end) (wraps midnight); None: always.
    diversion_hours: tuple[int, int] | None = None
    frozen: bool = False  # ice plug beyond the outlet node: the pump dead-heads
    stuck_float: bool = False  # pump never switches off
    check_valve_failed: bool = False  # riser water falls back at each stop
    #: A leaking check valve: riser water seeps back at this rate while the pump is off.
    check_valve_leak_lpm: float = 0.0
    pump_dead: bool = False  # pump never starts (float or switch failure)
    pump_no_water: bool = False  # motor runs, moves no water (impeller, air lock)
    no_current: bool = False  # switched on, the motor draws nothing and moves nothing

    def diverting(self, ts: datetime) -> float:
        """Share diverted at ``ts``."""
        if self.diversion_hours is None:
            return self.sanitary_share
        a, b = self.diversion_hours
        h = ts.hour
        inside = a <= h < b if a <= b else (h >= a or h < b)
        return self.sanitary_share if inside else 0.0


@dataclass
class MiniSump:
    """A 1 s step sump that emits pit, discharge and air readings.

    ``true_pit``/``true_line_m`` let the house differ from its registry entry (real
    diameters and float marks are never what was recorded). The discharge line holds
    ``line_l`` of water (the riser): the pump refills it before the outlet flows, a
    failed or leaking check valve lets it back into the pit. The pressure tap sits at
    the outlet (reads ~0 on an open line) or on the riser (reads the static lift
    whenever the column stands, even when every litre is diverted to a hose).
    """

    site: SiteConfig
    start: datetime
    inflow_lpm: float = 8.0
    pump_lpm: float = 150.0
    air_c: float = 5.0
    pipe_c: float = 5.0
    #: Sample intervals, s; None takes the site's node interval.
    pit_interval_s: int | None = None
    outlet_interval_s: int | None = None
    air_interval_s: int | None = None
    outlet_offset_s: int = 3
    noise: float = 0.0
    seed: int = 1
    faults: Faults = field(default_factory=Faults)
    level_cm: float = 30.0
    intake_cm: float = 6.0  # below this the pump draws air
    pump_on: bool = False
    t: int = 0
    pressure_tap: str = "outlet"
    static_head_kpa: float = 25.0
    report_current: bool = False
    #: Probability that any one message is lost.
    dropout: float = 0.0
    true_pit: PitConfig | None = None
    true_line_m: float | None = None
    #: Air temperature noise (sigma, C), independent of ``noise``.
    air_noise_c: float = 0.0
    #: Groundwater inflow varies: each minute it is ``inflow_lpm`` x (1 + N(0, this)).
    #: Real inflow is never exactly periodic, so cycles do not stay phase-locked
    #: to the sample clocks.
    inflow_jitter: float = 0.0
    #: The outlet meter reports the mean flow since its last report (a pulse counter,
    #: like the shipped ESPHome outlet node) instead of the flow at the instant.
    mean_flow: bool = False

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)
        self.pit_id = self._node(NodeKind.PIT)
        self.outlet_id = self._node(NodeKind.DISCHARGE)
        self.air_id = self._node(NodeKind.AIR)
        self._pit_every = self.pit_interval_s or self._interval(NodeKind.PIT)
        self._outlet_every = self.outlet_interval_s or self._interval(NodeKind.DISCHARGE)
        self._air_every = self.air_interval_s or self._interval(NodeKind.AIR)
        self.pit = self.true_pit or self.site.pit
        inst = self.site.installation
        length = self.true_line_m or inst.line_length_m or 8.0
        pipe_in = inst.pipe_inside_diameter_in or 1.25
        self.line_l = 3.14159 * (pipe_in * 0.0127) ** 2 * length * 1000.0
        self.riser_l = self.line_l
        self._inflow_factor = 1.0
        self._counted_l = 0.0  # outlet litres since the meter's last report
        self._counted_s = 0

    def _interval(self, kind: NodeKind) -> int:
        node = self.site.node_of_kind(kind)
        return 10 if node is None else max(1, int(node.interval_s))

    def _node(self, kind: NodeKind) -> str | None:
        node = self.site.node_of_kind(kind)
        return None if node is None else node.id

    def _n(self, scale: float) -> float:
        return self._rng.gauss(0.0, self.noise * scale) if self.noise else 0.0

    def _kept(self) -> bool:
        return not self.dropout or self._rng.random() >= self.dropout

    def _step(self, ts: datetime) -> tuple[float, float]:
        """One second of physics; (litres pumped out of the pit, litres at the outlet)."""
        pit, f = self.pit, self.faults
        area_l_per_cm = pit.area_cm2 / 1000.0
        if not f.pump_dead and self.level_cm >= pit.pump_on_cm:
            self.pump_on = True
        if self.inflow_jitter and self.t % 60 == 0:
            self._inflow_factor = max(0.0, 1.0 + self._rng.gauss(0.0, self.inflow_jitter))
        self.level_cm += self.inflow_lpm * self._inflow_factor / 60.0 / area_l_per_cm
        # At the intake the pump moves only what is there (it sucks air).
        available_l = max(0.0, self.level_cm - self.intake_cm) * area_l_per_cm
        moves = self.pump_on and not (f.frozen or f.pump_no_water or f.no_current)
        pumped_l = min(self.pump_lpm / 60.0, available_l) if moves else 0.0
        self.level_cm -= pumped_l / area_l_per_cm
        into_line = pumped_l * (1.0 - f.diverting(ts))
        refill = min(into_line, self.line_l - self.riser_l)
        self.riser_l += refill
        outlet_l = into_line - refill
        if self.pump_on and self.level_cm <= pit.pump_off_cm and not f.stuck_float:
            self.pump_on = False
            if f.check_valve_failed:
                self.level_cm += self.riser_l / area_l_per_cm
                self.riser_l = 0.0
        if not self.pump_on and f.check_valve_leak_lpm > 0 and self.riser_l > 0:
            back = min(self.riser_l, f.check_valve_leak_lpm / 60.0)
            self.riser_l -= back
            self.level_cm += back / area_l_per_cm
        self.level_cm = min(self.level_cm, pit.depth_cm)
        return pumped_l, outlet_l

    def _pressure(self, outlet_lpm: float) -> float:
        f = self.faults
        if self.pressure_tap == "riser":
            if self.pump_on and f.frozen:
                return self.static_head_kpa * 1.6 + 20.0  # dead-head against the ice
            column = self.static_head_kpa * self.riser_l / self.line_l if self.line_l else 0.0
            friction = 5.0 if outlet_lpm > 0 else 0.0
            return column + friction
        if f.frozen and self.pump_on:
            return 45.0
        return 2.0 if outlet_lpm > 0 else 0.0

    def _current(self) -> float:
        f = self.faults
        if not self.pump_on or f.no_current:
            return 0.0
        return 3.0 if (f.frozen or f.pump_no_water) else 4.5

    def run(self, seconds: int) -> list[Reading]:
        """Advance ``seconds`` and return the readings emitted, in time order."""
        out: list[Reading] = []
        for _ in range(seconds):
            self.t += 1
            ts = self.start + timedelta(seconds=self.t)
            _, outlet_l = self._step(ts)
            self._counted_l += outlet_l
            self._counted_s += 1
            sid = self.site.id
            if self.pit_id and self.t % self._pit_every == 0 and self._kept():
                values: dict[str, float | bool] = {
                    "level_cm": max(0.0, self.level_cm + self._n(0.5)),
                    "pump_on": self.pump_on,
                }
                if self.report_current:
                    values["pump_current_a"] = self._current()
                out.append(reading(sid, self.pit_id, NodeKind.PIT, ts, **values))
            due = self.t % self._outlet_every == self.outlet_offset_s % self._outlet_every
            flow = outlet_l * 60.0
            if due and self.mean_flow:
                flow = self._counted_l * 60.0 / self._counted_s
            if due:  # the meter starts counting again whether or not its report arrives
                self._counted_l, self._counted_s = 0.0, 0
            if self.outlet_id and due and self._kept():
                out.append(
                    reading(
                        sid,
                        self.outlet_id,
                        NodeKind.DISCHARGE,
                        ts,
                        flow_lpm=max(0.0, flow + self._n(1.0)),
                        pressure_kpa=self._pressure(flow) + self._n(1.0),
                        pipe_temp_c=self.pipe_c,
                    )
                )
            if self.air_id and self.t % self._air_every == 0 and self._kept():
                air = self.air_c + (
                    self._rng.gauss(0.0, self.air_noise_c) if self.air_noise_c else 0
                )
                out.append(reading(sid, self.air_id, NodeKind.AIR, ts, air_temp_c=air))
        return out


def make_site(
    site_id: str = "test-1",
    jurisdiction: str = "edgar",
    *,
    pit_interval_s: float = 10,
    outlet_interval_s: float = 10,
    air_interval_s: float = 60,
    waivers: tuple[dict[str, object], ...] = (),
    pit: dict[str, float] | None = None,
    outlet_node: dict[str, object] | None = None,
    **installation: object,
) -> SiteConfig:
    """A site with pit, outlet and air nodes, the given (or default) pit, and the given
    installation; ``outlet_node`` adds discharge-node facts (pressure_tap, ...)."""
    return SiteConfig.model_validate(
        {
            "id": site_id,
            "name": site_id,
            "jurisdiction": jurisdiction,
            "nodes": [
                {"id": "pit", "kind": "pit", "interval_s": pit_interval_s},
                {
                    "id": "outlet",
                    "kind": "discharge",
                    "interval_s": outlet_interval_s,
                    **(outlet_node or {}),
                },
                {"id": "air", "kind": "air", "interval_s": air_interval_s},
            ],
            "pit": pit or {},
            "installation": installation,
            "waivers": list(waivers),
        }
    )


def engine_for(*sites: SiteConfig, silence_factor: float = 6.0) -> RulesEngine:
    """A rules engine over the given sites and the packaged packs."""
    return RulesEngine(SiteRegistry(list(sites)), load_packs(), silence_factor)


def feed(engine: RulesEngine, readings: Iterable[Reading]) -> list[FindingEvent]:
    """Every event the engine emits for the readings, in order."""
    events: list[FindingEvent] = []
    for r in readings:
        events.extend(engine.on_reading(r))
    return events


def opened(events: Iterable[FindingEvent], rule_id: str | None = None) -> list[Finding]:
    """The findings that opened (optionally of one rule)."""
    return [
        e.finding
        for e in events
        if e.change is FindingChange.OPENED and (rule_id is None or e.finding.rule_id == rule_id)
    ]
