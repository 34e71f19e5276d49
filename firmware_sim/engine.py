"""The fleet: homes, their sensor nodes, telemetry messages and ground-truth labels.

:class:`Simulation` steps every home in lock-step (the weather is shared) and
yields :class:`Message` objects in publish order. The pit node reports on a
fixed interval and also at once when a pump starts or stops (report-on-change,
as real sump monitors do), so short cycles are never lost between samples.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from firmware_sim.badpayloads import BadItem, corrupt
from firmware_sim.home import HomeSim, Snapshot
from firmware_sim.scenario import HomeModel, ScenarioModel
from firmware_sim.weather import Weather
from gateway.contract import (
    STATUS_OFFLINE,
    STATUS_ONLINE,
    NodeKind,
    status_topic,
    telemetry_topic,
)

#: The broker notices a silent client after 1.5 keep-alives and publishes its will.
KEEPALIVE_S = 60.0
WILL_DELAY_S = 1.5 * KEEPALIVE_S
LABELS_VERSION = 1
WEATHER_STEP_S = 60.0

# Sensor noise (1 sigma) and resolution; sources in docs/simulator.md.
LEVEL_SIGMA_CM = 0.3
TEMP_SIGMA_C = 0.1
WATER_TEMP_SIGMA_C = 0.05
FLOW_SIGMA_REL = 0.01
FLOW_SIGMA_LPM = 0.3
FLOW_CUTOFF_LPM = 1.0
PRESSURE_SIGMA_KPA = 0.3
CURRENT_SIGMA_A = 0.05


@dataclass(frozen=True, slots=True)
class Message:
    """One MQTT publication: ``t_s`` is simulated seconds since the start."""

    t_s: float
    topic: str
    payload: bytes
    site_id: str
    node_id: str

    @property
    def retain(self) -> bool:
        """Status (availability) messages are retained, telemetry is not."""
        return self.topic.endswith("/status")


@dataclass(frozen=True, slots=True)
class NodeSpec:
    """A sensor node of a simulated home."""

    node_id: str
    kind: NodeKind
    interval_s: float


@dataclass(frozen=True, slots=True)
class HomeSpec:
    """A home to simulate: its id, model and nodes."""

    site_id: str
    model: HomeModel
    nodes: tuple[NodeSpec, ...]


def default_nodes(model: HomeModel) -> tuple[NodeSpec, ...]:
    """The pit, outlet and (optionally) air nodes of a scenario home."""
    nodes = [
        NodeSpec("pit", NodeKind.PIT, model.pit_interval_s),
        NodeSpec("outlet", NodeKind.DISCHARGE, model.discharge_interval_s),
    ]
    if model.air_node:
        nodes.append(NodeSpec("air", NodeKind.AIR, model.air_interval_s))
    return tuple(nodes)


def scenario_homes(scenario: ScenarioModel, count: int | None) -> list[HomeSpec]:
    """``count`` homes cycling through the scenario's templates (all of them if None)."""
    templates = scenario.home
    n = len(templates) if count is None else count
    homes = []
    for i in range(n):
        model = templates[i % len(templates)]
        cycle = i // len(templates)
        site_id = model.id if cycle == 0 else f"{model.id}-{cycle + 1}"
        if cycle > 0:
            model = _vary(model, random.Random(f"vary-{site_id}"))
        homes.append(HomeSpec(site_id, model, default_nodes(model)))
    return homes


def _vary(model: HomeModel, rng: random.Random) -> HomeModel:
    """A neighbour of a template: same installation, its own soil and drainage."""
    inflow = model.inflow.model_copy(
        update={
            "baseflow_lpm": model.inflow.baseflow_lpm * rng.uniform(0.7, 1.3),
            "catchment_m2": model.inflow.catchment_m2 * rng.uniform(0.8, 1.2),
            "deep_lpm": model.inflow.deep_lpm * rng.uniform(0.7, 1.3),
        }
    )
    return model.model_copy(update={"inflow": inflow})


@dataclass(slots=True)
class _Node:
    spec: NodeSpec
    rng: random.Random
    next_due: float
    boot: str
    seq: int = 0
    online: bool = True
    will_at: float | None = None
    rssi_base: float = -65.0
    battery_v: float = 3.3
    #: Lost messages (Wi-Fi, a full queue): their own stream, so a home without
    #: dropouts publishes the same bytes as before they were modelled.
    drop_rng: random.Random | None = None
    #: A pulse-counting outlet meter: the outlet counter and time at its last report.
    meter_l: float = 0.0
    meter_t: float = 0.0


def _boot_id(rng: random.Random) -> str:
    return "".join(rng.choice("0123456789abcdef") for _ in range(8))


def format_ts(when: datetime) -> str:
    """RFC 3339 UTC with milliseconds, as the nodes send it."""
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"


def _json_value(value: float | bool) -> str:
    if value is True:
        return "true"
    if value is False:
        return "false"
    return repr(value)


def _q(value: float, step: float) -> float:
    """Quantize to the sensor's resolution, 0.1 or 0.01 (and keep it a float in JSON)."""
    return float(round(value, 1 if step >= 0.1 else 2))


class _Labels:
    """Open/close intervals of each condition of one home."""

    def __init__(self) -> None:
        self.open: dict[tuple[str, str | None], float] = {}
        self.closed: list[tuple[str, str | None, float, float]] = []

    def update(self, t_s: float, held: set[tuple[str, str | None]]) -> None:
        for key in held - self.open.keys():
            self.open[key] = t_s
        for key in [k for k in self.open if k not in held]:
            self.closed.append((key[0], key[1], self.open.pop(key), t_s))

    def finish(self, t_s: float) -> None:
        for key, began in self.open.items():
            self.closed.append((key[0], key[1], began, t_s))
        self.open.clear()


@dataclass(slots=True)
class _Home:
    spec: HomeSpec
    sim: HomeSim
    nodes: list[_Node]
    labels: _Labels = field(default_factory=_Labels)


class Simulation:
    """A scenario's homes advanced together; iterate :meth:`messages` to run it."""

    def __init__(
        self,
        scenario: ScenarioModel,
        homes: list[HomeSpec],
        *,
        seed: int,
        start: datetime,
        duration_s: float | None,
        step_s: float | None = None,
    ) -> None:
        self.scenario = scenario
        self.seed = seed
        self.start = start.replace(microsecond=0)  # whole seconds keep device times exact
        self.duration_s = duration_s
        self.weather = Weather(scenario.weather.to_config(), seed, start)
        intervals = [n.interval_s for h in homes for n in h.nodes]
        self.step_s = step_s or max(1.0, min([10.0, *intervals]))
        self.homes: list[_Home] = []
        for spec in homes:
            rng = random.Random(f"home-{seed}-{spec.site_id}")
            sim = HomeSim(spec.site_id, spec.model, rng, start)
            sim.settle(self.weather)
            nodes = []
            for n in spec.nodes:
                nrng = random.Random(f"node-{seed}-{spec.site_id}-{n.node_id}")
                slots = max(1, int(n.interval_s // self.step_s))
                phase = nrng.randrange(slots) * self.step_s
                nodes.append(
                    _Node(
                        n,
                        nrng,
                        phase + self.step_s,
                        _boot_id(nrng),
                        rssi_base=nrng.uniform(-80, -50),
                        battery_v=nrng.uniform(3.0, 3.3),
                        drop_rng=random.Random(f"drop-{seed}-{spec.site_id}-{n.node_id}")
                        if spec.model.dropout > 0
                        else None,
                        meter_l=sim.counters.outlet_l,
                    )
                )
            self.homes.append(_Home(spec, sim, nodes))
        self.elapsed_s = 0.0
        self._ts_minute = -1
        self._ts_prefix = ""
        self.bad_items: list[BadItem] = []
        self.finished = False

    # -- running ----------------------------------------------------------------------
    def messages(self) -> Iterator[Message]:
        """Every message in publish order (corrupted ones included for ``bad_payloads``)."""
        stream = self._clean_messages()
        bad = self.scenario.bad_payloads
        if bad is not None:
            return corrupt(stream, bad, random.Random(f"bad-{self.seed}"), self.bad_items)
        return stream

    def run_physics(self) -> None:
        """Advance to the end without producing messages (water balance, labels)."""
        for _ in self._steps(emit=False):
            pass

    def iter_steps(self) -> Iterator[float]:
        """Advance step by step without messages, yielding the simulated seconds elapsed."""
        for _ in self._steps(emit=False):
            yield self.elapsed_s

    def home(self, site_id: str) -> HomeSim:
        """The physical state of one home."""
        for home in self.homes:
            if home.spec.site_id == site_id:
                return home.sim
        raise KeyError(site_id)

    def _clean_messages(self) -> Iterator[Message]:
        for home in self.homes:
            for node in home.nodes:
                yield self._status(home, node, 0.0, STATUS_ONLINE)
        for batch in self._steps(emit=True):
            yield from batch

    def _steps(self, *, emit: bool) -> Iterator[list[Message]]:
        t = 0.0
        weather_at = 0.0
        duration = self.duration_s
        while duration is None or t < duration - 1e-9:
            dt = self.step_s if duration is None else min(self.step_s, duration - t)
            end = t + dt
            # The shared weather changes slowly: refresh it once a simulated minute.
            if end - weather_at >= WEATHER_STEP_S - 1e-9 or t == 0.0:
                self.weather.advance(self.start + timedelta(seconds=end), end - weather_at)
                weather_at = end
            batch: list[Message] = []
            for home in self.homes:
                home.sim.advance(t, dt, self.weather)
                silent = self._node_states(home, end, batch if emit else None)
                held: set[tuple[str, str | None]] = {
                    (c, None) for c in home.sim.conditions(end / 3600.0)
                }
                held |= {("sensor_silent", node_id) for node_id in silent}
                # A condition present from the first step holds from the start.
                home.labels.update(end if t > 0 else 0.0, held)
                if emit:
                    self._sample(home, end, batch)
            t = end
            self.elapsed_s = t
            if emit:
                batch.sort(key=lambda m: m.t_s)
            yield batch
        for home in self.homes:
            home.labels.finish(self.elapsed_s)
        self.finished = True

    def _node_states(self, home: _Home, end: float, batch: list[Message] | None) -> list[str]:
        """Apply node_offline faults: silence, the broker's will, reconnection."""
        hours = end / 3600.0
        silent = []
        for node in home.nodes:
            spec = node.spec
            offline = any(
                f.kind == "node_offline"
                and f.node in (spec.node_id, spec.kind.value)
                and f.active(hours)
                for f in home.spec.model.fault
            )
            if offline:
                silent.append(spec.node_id)
                if node.online:
                    node.online = False
                    node.will_at = end + WILL_DELAY_S
                if node.will_at is not None and end >= node.will_at:
                    node.will_at = None
                    if batch is not None:
                        batch.append(self._status(home, node, end, STATUS_OFFLINE))
            elif not node.online:
                node.online = True
                node.will_at = None
                if any(f.reboot for f in home.spec.model.fault if f.kind == "node_offline"):
                    node.boot = _boot_id(node.rng)
                    node.seq = 0
                node.next_due = end
                # A meter that was off counted nothing: it starts counting again now.
                node.meter_l, node.meter_t = home.sim.counters.outlet_l, end
                if batch is not None:
                    batch.append(self._status(home, node, end, STATUS_ONLINE))
        return silent

    def _status(self, home: _Home, node: _Node, t_s: float, text: str) -> Message:
        topic = status_topic(home.spec.site_id, node.spec.node_id)
        return Message(t_s, topic, text.encode(), home.spec.site_id, node.spec.node_id)

    def _sample(self, home: _Home, end: float, batch: list[Message]) -> None:
        hours = end / 3600.0
        snap: Snapshot | None = None
        for node in home.nodes:
            if not node.online:
                continue
            kind = node.spec.kind
            if kind is NodeKind.PIT and home.spec.model.change_reports:
                for t_ev, ev in home.sim.pump_event_list():
                    # Report-on-change, stamped just before the step's regular sample.
                    when = min(t_ev, end - 0.001)
                    if not self._lost(home, node):
                        batch.append(self._telemetry(home, node, when, self._pit(home, node, ev)))
            if end + 1e-9 < node.next_due:
                continue
            node.next_due += node.spec.interval_s
            if node.next_due <= end:
                node.next_due = end + node.spec.interval_s
            if kind is NodeKind.AIR:
                readings: dict[str, Any] = {"air_temp_c": self._air(home, node)}
            else:
                snap = snap or home.sim.snapshot(hours)
                if kind is NodeKind.PIT:
                    readings = self._pit(home, node, snap)
                else:
                    readings = self._discharge(home, node, snap, end)
            if not self._lost(home, node):
                batch.append(self._telemetry(home, node, end, readings))

    @staticmethod
    def _lost(home: _Home, node: _Node) -> bool:
        return node.drop_rng is not None and node.drop_rng.random() < home.spec.model.dropout

    def _telemetry(self, home: _Home, node: _Node, t_s: float, readings: dict[str, Any]) -> Message:
        site_id, node_id = home.spec.site_id, node.spec.node_id
        # Hand-built JSON: ~5x faster than json.dumps; the ids match the contract's
        # ID pattern and the readings are floats and booleans, so nothing needs escaping.
        body = ",".join(f'"{k}":{_json_value(v)}' for k, v in readings.items())
        extra = f',"rssi_dbm":{float(round(node.rssi_base + node.rng.gauss(0, 2.0)))!r}'
        if node.spec.kind is NodeKind.AIR:
            days = t_s / 86400.0
            extra += f',"battery_v":{_q(max(node.battery_v - 0.002 * days, 2.0), 0.01)!r}'
        text = (
            f'{{"v":1,"site_id":"{site_id}","node_id":"{node_id}",'
            f'"ts":"{self._ts(t_s)}","seq":{node.seq},"boot":"{node.boot}",'
            f'"kind":"{node.spec.kind.value}","readings":{{{body}}}{extra}}}'
        )
        node.seq = (node.seq + 1) % 2**32
        return Message(t_s, telemetry_topic(site_id, node_id), text.encode(), site_id, node_id)

    def _ts(self, t_s: float) -> str:
        """RFC 3339 device time; the date-and-minute prefix is cached (it rarely changes)."""
        whole = int(t_s)
        minute = whole // 60
        if minute != self._ts_minute:
            self._ts_minute = minute
            when = self.start + timedelta(seconds=minute * 60)
            self._ts_prefix = when.strftime("%Y-%m-%dT%H:%M:")
        millis = int((t_s - whole) * 1000)
        return f"{self._ts_prefix}{whole % 60:02d}.{millis:03d}Z"

    # -- sensors ----------------------------------------------------------------------
    def _air(self, home: _Home, node: _Node) -> float:
        noise = home.spec.model.sensor_noise
        value = (
            self.weather.air_c + home.sim.micro_offset_c + node.rng.gauss(0, TEMP_SIGMA_C * noise)
        )
        return _q(min(max(value, -60.0), 60.0), 0.1)

    def _pit(self, home: _Home, node: _Node, snap: Snapshot) -> dict[str, Any]:
        rng = node.rng
        sim = home.sim
        noise = home.spec.model.sensor_noise
        level = snap.level_cm + rng.gauss(0, LEVEL_SIGMA_CM * noise)
        current = snap.current_a + rng.gauss(0, CURRENT_SIGMA_A * noise) if snap.pump_on else 0.0
        water = sim.water_c + rng.gauss(0, WATER_TEMP_SIGMA_C * noise)
        readings: dict[str, Any] = {
            "level_cm": _q(min(max(level, 0.0), 300.0), 0.1),
            "pump_on": snap.pump_on,
            "water_temp_c": _q(min(max(water, -5.0), 50.0), 0.1),
        }
        if home.spec.model.pump_current_sensor:
            readings["pump_current_a"] = _q(min(max(current, 0.0), 40.0), 0.01)
        if sim.backup is not None:
            readings["backup_pump_on"] = snap.backup_on
        return readings

    def _discharge(self, home: _Home, node: _Node, snap: Snapshot, end: float) -> dict[str, Any]:
        rng = node.rng
        noise = home.spec.model.sensor_noise
        true_lpm = snap.outlet_lpm
        if home.spec.model.flow_reading == "mean":
            # Pulses counted since the last report, as L/min: every litre is in some
            # report, and a run shorter than the interval reads as part of one.
            counted = home.sim.counters.outlet_l
            seconds = end - node.meter_t
            true_lpm = (counted - node.meter_l) * 60.0 / seconds if seconds > 0 else 0.0
            node.meter_l, node.meter_t = counted, end
        flow = true_lpm * (1 + rng.gauss(0, FLOW_SIGMA_REL * noise)) + rng.gauss(
            0, FLOW_SIGMA_LPM * noise
        )
        if flow < FLOW_CUTOFF_LPM or true_lpm == 0.0:
            flow = 0.0  # flow meters report zero below their low-flow cut-off
        tapped = snap.riser_kpa if home.spec.model.pressure_tap == "riser" else snap.pressure_kpa
        pressure = tapped + rng.gauss(0, PRESSURE_SIGMA_KPA * noise)
        pipe = home.sim.seg_c + rng.gauss(0, TEMP_SIGMA_C * noise)
        return {
            "flow_lpm": _q(min(flow, 1000.0), 0.1),
            "pressure_kpa": _q(min(max(pressure, -50.0), 700.0), 0.1),
            "pipe_temp_c": _q(min(max(pipe, -50.0), 70.0), 0.1),
        }

    # -- labels -----------------------------------------------------------------------
    def labels(self) -> dict[str, Any]:
        """The ground-truth labels document (format: docs/simulator.md)."""
        homes = []
        for home in self.homes:
            intervals = list(home.labels.closed)
            intervals += [
                (k[0], k[1], began, self.elapsed_s) for k, began in home.labels.open.items()
            ]
            intervals.sort(key=lambda c: (c[2], c[0], c[1] or ""))
            conditions = []
            for condition, node_id, began, ended in intervals:
                entry: dict[str, Any] = {
                    "condition": condition,
                    "start": self._rfc3339(began),
                    "end": self._rfc3339(ended),
                }
                if node_id is not None:
                    entry["node_id"] = node_id
                conditions.append(entry)
            homes.append({"site_id": home.spec.site_id, "conditions": conditions})
        doc: dict[str, Any] = {
            "version": LABELS_VERSION,
            "scenario": self.scenario.name,
            "seed": self.seed,
            "start": self._rfc3339(0.0),
            "end": self._rfc3339(self.elapsed_s),
            "homes": homes,
        }
        if self.scenario.bad_payloads is not None:
            kinds: dict[str, int] = {}
            for item in self.bad_items:
                kinds[item.kind] = kinds.get(item.kind, 0) + 1
            doc["bad_messages"] = {
                "count": len(self.bad_items),
                "invalid": sum(1 for i in self.bad_items if not i.valid),
                "kinds": dict(sorted(kinds.items())),
                "items": [i.as_json() for i in self.bad_items],
            }
        return doc

    def _rfc3339(self, t_s: float) -> str:
        return (self.start + timedelta(seconds=t_s)).strftime("%Y-%m-%dT%H:%M:%SZ")

    def water_balance(self) -> dict[str, dict[str, float]]:
        """Per home: the volumes counted so far plus what the pit holds now (litres)."""
        out = {}
        for home in self.homes:
            c = home.sim.counters
            out[home.spec.site_id] = {
                "inflow_l": c.inflow_l,
                "pumped_l": c.pumped_l,
                "backflow_l": c.backflow_l,
                "overflow_l": c.overflow_l,
                "outlet_l": c.outlet_l,
                "diverted_l": c.diverted_l,
                "stored_l": home.sim.level_cm * home.sim.area_cm2 / 1000.0,
                "pump_starts": float(c.pump_starts),
            }
        return out
