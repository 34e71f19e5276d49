"""Hand-built telemetry sequences for detector unit tests and examples.

A deliberately small sump: 1 s steps, constant inflow, a pump of fixed flow
switched by the pit's float marks, and switches for the faults the detectors
look for. It is not the scenario simulator (``firmware_sim``): it exists so each
detector can be specified on a sequence whose truth is obvious.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from gateway.contract import NodeKind
from gateway.domain import Finding, FindingChange, FindingEvent, Reading
from gateway.registry.models import SiteConfig, SiteRegistry
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
    frozen: bool = False  # ice plug beyond the outlet node
    stuck_float: bool = False  # pump never switches off
    check_valve_failed: bool = False  # riser water falls back at each stop
    pump_dead: bool = False  # pump never runs


@dataclass
class MiniSump:
    """A 1 s step sump that emits pit, discharge and air readings."""

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

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)
        self.pit_id = self._node(NodeKind.PIT)
        self.outlet_id = self._node(NodeKind.DISCHARGE)
        self.air_id = self._node(NodeKind.AIR)
        self._pit_every = self.pit_interval_s or self._interval(NodeKind.PIT)
        self._outlet_every = self.outlet_interval_s or self._interval(NodeKind.DISCHARGE)
        self._air_every = self.air_interval_s or self._interval(NodeKind.AIR)

    def _interval(self, kind: NodeKind) -> int:
        node = self.site.node_of_kind(kind)
        return 10 if node is None else max(1, int(node.interval_s))

    def _node(self, kind: NodeKind) -> str | None:
        node = self.site.node_of_kind(kind)
        return None if node is None else node.id

    def _n(self, scale: float) -> float:
        return self._rng.gauss(0.0, self.noise * scale) if self.noise else 0.0

    def run(self, seconds: int) -> list[Reading]:
        """Advance ``seconds`` and return the readings emitted, in time order."""
        out: list[Reading] = []
        pit = self.site.pit
        area_l_per_cm = pit.area_cm2 / 1000.0
        diameter_in, length_m, _rise = self.site.installation.line_geometry
        line_l = 3.14159 * (diameter_in * 0.0127) ** 2 * length_m * 1000.0
        for _ in range(seconds):
            self.t += 1
            f = self.faults
            if not f.pump_dead and self.level_cm >= pit.pump_on_cm:
                self.pump_on = True
            self.level_cm += self.inflow_lpm / 60.0 / area_l_per_cm
            # At the intake the pump moves only what is there (it sucks air).
            available_l = max(0.0, self.level_cm - self.intake_cm) * area_l_per_cm
            pumped_l = 0.0
            if self.pump_on and not f.frozen:
                pumped_l = min(self.pump_lpm / 60.0, available_l)
            self.level_cm -= pumped_l / area_l_per_cm
            pumping = pumped_l > 0
            if self.pump_on and self.level_cm <= pit.pump_off_cm and not f.stuck_float:
                self.pump_on = False
                if f.check_valve_failed:
                    self.level_cm += line_l / area_l_per_cm
            self.level_cm = min(self.level_cm, pit.depth_cm)
            ts = self.start + timedelta(seconds=self.t)
            sid = self.site.id
            if self.pit_id and self.t % self._pit_every == 0:
                level = max(0.0, self.level_cm + self._n(0.5))
                out.append(
                    reading(
                        sid, self.pit_id, NodeKind.PIT, ts, level_cm=level, pump_on=self.pump_on
                    )
                )
            if (
                self.outlet_id
                and self.t % self._outlet_every == self.outlet_offset_s % self._outlet_every
            ):
                flowing = pumping and self.pump_on
                flow = pumped_l * 60.0 * (1 - f.sanitary_share) if flowing else 0.0
                if f.frozen and self.pump_on:
                    pressure = 45.0
                elif flow > 0:
                    pressure = 20.0
                else:
                    pressure = 0.0
                out.append(
                    reading(
                        sid,
                        self.outlet_id,
                        NodeKind.DISCHARGE,
                        ts,
                        flow_lpm=max(0.0, flow + self._n(1.0)),
                        pressure_kpa=pressure + self._n(1.0),
                        pipe_temp_c=self.pipe_c,
                    )
                )
            if self.air_id and self.t % self._air_every == 0:
                out.append(reading(sid, self.air_id, NodeKind.AIR, ts, air_temp_c=self.air_c))
        return out


def make_site(
    site_id: str = "test-1",
    jurisdiction: str = "edgar",
    *,
    pit_interval_s: float = 10,
    outlet_interval_s: float = 10,
    air_interval_s: float = 60,
    waivers: tuple[dict[str, object], ...] = (),
    **installation: object,
) -> SiteConfig:
    """A site with pit, outlet and air nodes, default pit, and the given installation."""
    return SiteConfig.model_validate(
        {
            "id": site_id,
            "name": site_id,
            "jurisdiction": jurisdiction,
            "nodes": [
                {"id": "pit", "kind": "pit", "interval_s": pit_interval_s},
                {"id": "outlet", "kind": "discharge", "interval_s": outlet_interval_s},
                {"id": "air", "kind": "air", "interval_s": air_interval_s},
            ],
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
