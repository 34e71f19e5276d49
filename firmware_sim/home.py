"""One home's pit, pumps, discharge line and surroundings, advanced in simulated time.

The hydraulics are integrated exactly between events: inflow and pump flow are
held constant over a sub-interval, and the sub-interval ends where a float mark,
the line filling, the back-flow ending or the pit rim would be crossed. So a
coarse step (even a minute) keeps the water balance exact and catches every
pump start; only the temperatures are stepped.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from firmware_sim.physics import (
    BACKUP_PUMP,
    CP_WATER_KJ_PER_KG_K,
    KPA_PER_M,
    LATENT_FUSION_KJ_PER_KG,
    Pipe,
    PumpCurve,
    newton_step,
    operating_point,
)
from firmware_sim.scenario import FaultModel, HomeModel
from firmware_sim.weather import LOCAL_OFFSET_H, Weather

#: Litres per minute that drain back through a pump whose check valve failed.
BACKFLOW_LPM = 40.0
#: Share of the indoor horizontal run that drains out after a cycle (valve intact).
INDOOR_DRAIN_SHARE = 0.5
#: Length of full-bore ice that blocks the line.
PLUG_LENGTH_M = 0.15
#: Heat loss of bare 1-1.5 in PVC outdoors in wind, W per K per metre of pipe.
EXPOSED_UA_W_PER_K_M = 1.2
#: Heat reaching an ice plug from the water standing behind it, W per K above 0 °C.
BEHIND_PLUG_W_PER_K = 0.5
#: Share of the heat of water flushed through a part-frozen run that melts ice.
FLUSH_MELT_EFFICIENCY = 0.05
#: Share of the discharge to grade that runs onto a walkway at distance 0 (falls to 0 at 10 ft).
WALKWAY_REACH_AT_0 = 0.5
WALKWAY_REACH_FT = 10.0
#: Ice (kg) on the walkway that counts as an icy condition.
WALKWAY_ICE_KG = 0.2
#: Degree-hour melt of walkway ice, kg per °C per hour.
WALKWAY_MELT_KG_PER_C_H = 0.25
#: Elevation of a laundry tub / floor drain hose outlet above the basement floor, m.
HOSE_OUTLET_ABOVE_FLOOR_M = 0.5
#: Pit water relaxes toward its inflow's temperature with this time constant.
PIT_WATER_TAU_S = 8 * 3600.0
PIPE_FLOW_TAU_S = 20.0
EPS_CM = 1e-6


@dataclass(slots=True)
class Snapshot:
    """What the pit and outlet sensors would read at one instant (truth, no noise)."""

    level_cm: float
    pump_on: bool
    backup_on: bool
    current_a: float
    outlet_lpm: float
    pressure_kpa: float


@dataclass(slots=True)
class Counters:
    """Water balance of a home, litres."""

    inflow_l: float = 0.0
    pumped_l: float = 0.0  # left the pit through a pump
    backflow_l: float = 0.0  # came back through a failed check valve
    overflow_l: float = 0.0  # spilled over the pit rim
    outlet_l: float = 0.0  # passed the outlet node
    diverted_l: float = 0.0  # went down a hose to the sanitary sewer
    pump_starts: int = 0


@dataclass
class HomeSim:
    """State and physics of one home."""

    site_id: str
    model: HomeModel
    rng: random.Random
    start: datetime
    level_cm: float = 0.0
    motor_on: bool = False
    backup_on: bool = False
    line_l: float = 0.0  # water between pump and outlet node
    backflow_left_l: float = 0.0
    s_fast_l: float = 0.0
    s_slow_l: float = 0.0
    inflow_lpm: float = 0.0
    water_c: float = 9.0
    seg_c: float = 5.0  # exterior run (and the outlet node's pipe wall)
    seg_water_l: float = 0.0
    seg_ice_l: float = 0.0
    plugged: bool = False
    walkway_ice_kg: float = 0.0
    diverted: bool = False
    micro_offset_c: float = 0.0
    counters: Counters = field(default_factory=Counters)
    pump_events: list[Snapshot] = field(default_factory=list)
    _pump_event_times: list[float] = field(default_factory=list)
    _op_cache: dict[tuple[int, int, int], tuple[float, float]] = field(default_factory=dict)
    _night_hose: bool = False
    _inflow_c: float = 9.0

    def __post_init__(self) -> None:
        m = self.model
        self._fault_kinds = frozenset(f.kind for f in m.fault)
        d = m.line.pipe_inside_diameter_in * 0.0254
        self.area_cm2 = math.pi * (m.pit.diameter_cm / 2) ** 2
        self.primary = PumpCurve.through(
            m.pump.shutoff_head_ft, m.pump.flow_gpm, m.pump.at_head_ft, m.pump.current_a
        )
        self.backup = BACKUP_PUMP if m.pump.backup else None
        self.system = Pipe(d, m.line.line_length_m + m.line.exterior_length_m, m.line.minor_loss_k)
        self.exterior = Pipe(d, max(m.line.exterior_length_m, 0.01), 1.0)
        self.hose = Pipe(d, 4.0, 3.0)
        self.indoor_volume_l = Pipe(d, m.line.line_length_m, 0).volume_l
        self.riser_l = Pipe(d, max(m.line.line_rise_m, 0.01), 0).volume_l
        self.hold_l = self.riser_l + INDOOR_DRAIN_SHARE * max(
            0.0, self.indoor_volume_l - self.riser_l
        )
        self.sag_capacity_l = m.line.sag_fraction * self.exterior.volume_l
        self.plug_l = self.exterior.area_m2 * PLUG_LENGTH_M * 1000
        self.line_l = self.hold_l
        pit = m.pit
        self.level_cm = (
            pit.initial_level_cm
            if pit.initial_level_cm is not None
            else self.rng.uniform(pit.pump_off_cm, pit.pump_on_cm)
        )
        k_slow_min = m.inflow.k_slow_d * 1440
        self.s_slow_l = m.inflow.baseflow_lpm * k_slow_min
        self.water_c = m.inflow.groundwater_c
        self.micro_offset_c = self.rng.uniform(-0.7, 0.7)

    def settle(self, weather: Weather) -> None:
        """Start the empty exterior run at the temperature of its surroundings."""
        buried = self.model.line.destination == "storm_lateral"
        self.seg_c = weather.soil_c if buried else weather.air_c + self.micro_offset_c

    # -- faults -------------------------------------------------------------------------
    def _faults(self, kind: str, hours: float) -> list[FaultModel]:
        if kind not in self._fault_kinds:
            return []
        return [f for f in self.model.fault if f.kind == kind and f.active(hours)]

    def fault_active(self, kind: str, hours: float) -> bool:
        """True while a fault of that kind is scheduled."""
        if kind not in self._fault_kinds:
            return False
        return any(f.kind == kind and f.active(hours) for f in self.model.fault)

    def _update_diversion(self, now: datetime, hours: float, air_c: float) -> None:
        """Hose to the sanitary sewer: always (destination), scheduled, or on freezing nights."""
        if self.model.line.destination == "sanitary" or self.fault_active("sanitary_hose", hours):
            self.diverted = True
            return
        nights = self._faults("sanitary_hose_freezing_nights", hours)
        if not nights:
            self.diverted = self._night_hose = False
            return
        f = nights[0]
        local = now + timedelta(hours=LOCAL_OFFSET_H)
        hour = local.hour
        in_window = hour >= f.from_hour or hour < f.to_hour
        if not in_window:
            self._night_hose = False
        elif not self._night_hose and hour == f.from_hour and air_c < f.below_c:
            # The owner swaps the hose in at dusk when the night will freeze.
            self._night_hose = True
        self.diverted = self._night_hose

    # -- hydraulics ---------------------------------------------------------------------
    def _pumps_flow(self, level_cm: float, primary: bool, backup: bool) -> tuple[float, float]:
        """Pump flow (L/min) and pump head (m) for the running pumps at this level."""
        key = (int(level_cm), int(primary) + 2 * int(backup), int(self.diverted))
        hit = self._op_cache.get(key)
        if hit is not None:
            return hit
        pumps = tuple(
            p for p, on in ((self.primary, primary), (self.backup, backup)) if on and p is not None
        )
        level_m = int(level_cm) / 100.0
        if self.diverted:
            depth_m = self.model.pit.depth_cm / 100.0
            static = depth_m - level_m + HOSE_OUTLET_ABOVE_FLOOR_M
            result = operating_point(pumps, static, self.hose)
        else:
            result = operating_point(pumps, self.model.line.line_rise_m - level_m, self.system)
        self._op_cache[key] = result
        return result

    def _pump_flow_now(self, hours: float) -> float:
        primary = self.motor_on and not self.fault_active("pump_no_flow", hours)
        backup = self.backup_on
        if not (primary or backup):
            return 0.0
        if self.plugged and not self.diverted:
            return 0.0
        flow, _ = self._pumps_flow(self.level_cm, primary, backup)
        return flow

    def _primary_wants(self, hours: float) -> bool:
        """Float switch (or a stuck one) and the motor's health decide the primary pump."""
        if self.fault_active("pump_dead", hours):
            return False
        if self.fault_active("float_stuck", hours):
            return True
        pit = self.model.pit
        if self.motor_on:
            return self.level_cm > pit.pump_off_cm + EPS_CM
        return self.level_cm >= pit.pump_on_cm - EPS_CM

    def _backup_wants(self) -> bool:
        if self.backup is None:
            return False
        pump = self.model.pump
        if self.backup_on:
            return self.level_cm > pump.backup_off_cm + EPS_CM
        return self.level_cm >= pump.backup_on_cm - EPS_CM

    def _switch(self, t_s: float, hours: float) -> None:
        """Apply float-switch decisions; remember pump starts and stops as events."""
        primary = self._primary_wants(hours)
        backup = self._backup_wants()
        if primary == self.motor_on and backup == self.backup_on:
            return
        was_running = self.motor_on or self.backup_on
        if primary and not self.motor_on:
            self.counters.pump_starts += 1
        self.motor_on, self.backup_on = primary, backup
        if was_running and not (primary or backup):
            self._after_stop(hours)
        self._pump_event_times.append(t_s)
        self.pump_events.append(self.snapshot(hours))

    def _after_stop(self, hours: float) -> None:
        if self.diverted:
            return
        if self.fault_active("check_valve_fail", hours) or not self.model.line.check_valve:
            self.backflow_left_l = self.line_l  # the whole indoor line falls back
        elif self.line_l > self.hold_l:
            # The indoor run past the riser drains on out of the outlet.
            self.counters.outlet_l += self.line_l - self.hold_l
            self.line_l = self.hold_l

    def advance(self, t0_s: float, dt_s: float, weather: Weather) -> None:
        """Advance the hydraulics, inflow and temperatures by ``dt_s`` from ``t0_s``."""
        now = self.start + timedelta(seconds=t0_s + dt_s)
        hours0 = t0_s / 3600.0
        air = weather.air_c + self.micro_offset_c
        self._update_diversion(now, hours0, air)
        self._inflow(weather, dt_s)
        self.pump_events.clear()
        self._pump_event_times.clear()
        outlet_before = self.counters.outlet_l
        self._switch(t0_s, hours0)
        remaining = dt_s
        t = t0_s
        for _ in range(200):
            if remaining <= 1e-9:
                break
            step = self._substep(t, remaining, hours0)
            t += step
            remaining -= step
            self._switch(t, t / 3600.0)
        outlet_l = self.counters.outlet_l - outlet_before
        self._thermal(weather, air, dt_s, outlet_l)

    def _substep(self, t: float, remaining: float, hours: float) -> float:
        """Integrate up to the next event (or ``remaining``); return the time used."""
        pit = self.model.pit
        c = self.counters
        q_in = self.inflow_lpm
        q_back = BACKFLOW_LPM if self.backflow_left_l > 0 else 0.0
        q_pump = self._pump_flow_now(hours)
        stuck = self.fault_active("float_stuck", hours)
        if self.level_cm <= pit.intake_cm + EPS_CM and q_pump > 0:
            # Pump snoring at its intake: it can move only what flows in.
            q_pump = min(q_pump, q_in + q_back)
        filling = (not self.diverted) and self.line_l < self.indoor_volume_l - 1e-9
        net = q_in + q_back - q_pump
        rate = net * 1000.0 / 60.0 / self.area_cm2  # cm/s
        limit = self._time_to_next_mark(rate, remaining, stuck)
        if filling and q_pump > 0:
            limit = min(limit, (self.indoor_volume_l - self.line_l) / q_pump * 60.0)
        if q_back > 0:
            limit = min(limit, self.backflow_left_l / q_back * 60.0)
        limit = max(limit, 1e-6)
        self._move_water(limit / 60.0, q_in, q_back, q_pump, filling=filling)
        level = self.level_cm + rate * limit
        if level > pit.depth_cm:
            c.overflow_l += (level - pit.depth_cm) * self.area_cm2 / 1000.0
            level = pit.depth_cm
        self.level_cm = max(level, 0.0)
        return limit

    def _time_to_next_mark(self, rate: float, remaining: float, stuck: bool) -> float:
        """Seconds until the level reaches the next switch point or the pit's limits
        at ``rate`` (cm/s), at most ``remaining``."""
        pit = self.model.pit
        pump = self.model.pump
        if rate < 0:
            targets = [pit.intake_cm]
            if self.motor_on and not stuck:
                targets.append(pit.pump_off_cm)
            if self.backup_on and self.backup is not None:
                targets.append(pump.backup_off_cm)
            gaps = [(self.level_cm - m) / -rate for m in targets if self.level_cm > m + EPS_CM]
        elif rate > 0:
            targets = [pit.depth_cm]
            if not self.motor_on:
                targets.append(pit.pump_on_cm)
            if self.backup is not None and not self.backup_on:
                targets.append(pump.backup_on_cm)
            gaps = [(m - self.level_cm) / rate for m in targets if self.level_cm < m - EPS_CM]
        else:
            gaps = []
        return min([remaining, *gaps])

    def _move_water(
        self, minutes: float, q_in: float, q_back: float, q_pump: float, *, filling: bool
    ) -> None:
        """Count ``minutes`` of inflow, backflow and pumping, and route what was pumped:
        diverted, into the indoor line while it fills, or out of the outlet."""
        c = self.counters
        c.inflow_l += q_in * minutes
        c.backflow_l += q_back * minutes
        c.pumped_l += q_pump * minutes
        self.backflow_left_l = max(0.0, self.backflow_left_l - q_back * minutes)
        if q_back > 0:
            self.line_l = max(0.0, self.line_l - q_back * minutes)
        moved = q_pump * minutes
        if self.diverted:
            c.diverted_l += moved
        elif filling:
            self.line_l = min(self.indoor_volume_l, self.line_l + moved)
        else:
            c.outlet_l += moved

    def _inflow(self, weather: Weather, dt_s: float) -> None:
        """Drain tile inflow from two linear reservoirs fed by rain and snowmelt."""
        inf = self.model.inflow
        recharge_l = (
            weather.recharge_mm_per_h
            * dt_s
            / 3600.0
            * inf.catchment_m2
            * inf.recharge_fraction
            * weather.infiltration
        )
        self.s_fast_l += recharge_l * inf.fast_share
        self.s_slow_l += recharge_l * (1 - inf.fast_share)
        k_fast = inf.k_fast_h * 60.0
        k_slow = inf.k_slow_d * 1440.0
        q_fast = self.s_fast_l / k_fast
        q_slow = self.s_slow_l / k_slow
        minutes = dt_s / 60.0
        # Exact outflow of a linear reservoir over the step, as an average rate.
        out_fast = self.s_fast_l * (1 - math.exp(-minutes / k_fast))
        out_slow = self.s_slow_l * (1 - math.exp(-minutes / k_slow))
        self.s_fast_l -= out_fast
        self.s_slow_l -= out_slow
        drained = (out_fast + out_slow) / minutes if minutes > 0 else q_fast + q_slow
        self.inflow_lpm = drained + inf.deep_lpm
        # Inflow temperature: groundwater, cooled by fresh recharge (melt is near 0 °C).
        recharge_c = min(max(weather.air_c, 0.5), 20.0)
        total = q_fast + q_slow + inf.deep_lpm
        if total > 0:
            ground = (q_slow + inf.deep_lpm) * inf.groundwater_c
            self._inflow_c = (ground + q_fast * recharge_c) / total
        else:
            self._inflow_c = inf.groundwater_c

    # -- temperatures and ice ---------------------------------------------------------------
    def _thermal(self, weather: Weather, air_c: float, dt_s: float, outlet_l: float) -> None:
        self.water_c = newton_step(self.water_c, self._inflow_c, dt_s, PIT_WATER_TAU_S)
        line = self.model.line
        ambient = weather.soil_c if line.destination == "storm_lateral" else air_c
        if outlet_l > 0:
            self._flush(outlet_l)
        ua = EXPOSED_UA_W_PER_K_M * max(line.exterior_length_m, 0.1) / 1000.0  # kW/K
        mass = self.seg_water_l + self.seg_ice_l
        heat_capacity = mass * CP_WATER_KJ_PER_KG_K + 1.5  # kJ/K, water/ice + pipe wall
        behind = BEHIND_PLUG_W_PER_K / 1000.0 * max(self.water_c, 0.0) if self.plugged else 0.0
        if self.seg_c <= 0.0 and (self.seg_water_l > 0 or self.seg_ice_l > 0):
            # At the freezing point: heat flow changes phase, not temperature.
            power = ua * ambient + behind  # kW into the segment
            melt_kg = power * dt_s / LATENT_FUSION_KJ_PER_KG
            if melt_kg < 0 and self.seg_water_l > 0:
                frozen = min(self.seg_water_l, -melt_kg)
                self.seg_water_l -= frozen
                self.seg_ice_l += frozen
            elif melt_kg > 0 and self.seg_ice_l > 0:
                melted = min(self.seg_ice_l, melt_kg)
                self.seg_ice_l -= melted
                self.seg_water_l += melted
                if self.seg_ice_l <= 0:
                    self.seg_c = 0.01
            else:
                self.seg_c = newton_step(self.seg_c, ambient, dt_s, heat_capacity / ua)
        else:
            new_c = newton_step(self.seg_c, ambient, dt_s, heat_capacity / ua)
            self.seg_c = max(new_c, 0.0) if self.seg_water_l > 0 else new_c
        if self.seg_ice_l >= self.plug_l:
            self.plugged = True
        elif self.seg_ice_l < 0.5 * self.plug_l:
            self.plugged = False
        self._walkway(air_c, dt_s, outlet_l)

    def _flush(self, outlet_l: float) -> None:
        """Pumped water refills the sag with warm water and melts some of the ice."""
        heat = outlet_l * CP_WATER_KJ_PER_KG_K * max(self.water_c, 0.0) * FLUSH_MELT_EFFICIENCY
        melted = min(self.seg_ice_l, heat / LATENT_FUSION_KJ_PER_KG)
        self.seg_ice_l -= melted
        self.seg_water_l = max(self.sag_capacity_l - self.seg_ice_l, 0.0)
        share = 1 - math.exp(-outlet_l / max(self.exterior.volume_l, 0.1))
        self.seg_c += (self.water_c - self.seg_c) * share

    def _walkway(self, air_c: float, dt_s: float, outlet_l: float) -> None:
        line = self.model.line
        distance = line.outlet_to_walkway_ft
        if line.destination in ("grade", "swale") and distance is not None and outlet_l > 0:
            reach = WALKWAY_REACH_AT_0 * max(0.0, 1 - distance / WALKWAY_REACH_FT)
            if air_c < 0:
                self.walkway_ice_kg += reach * outlet_l
        if air_c > 0 and self.walkway_ice_kg > 0:
            melt = WALKWAY_MELT_KG_PER_C_H * air_c * dt_s / 3600.0
            self.walkway_ice_kg = max(0.0, self.walkway_ice_kg - melt)

    # -- what the sensors see ---------------------------------------------------------------
    def snapshot(self, hours: float) -> Snapshot:
        """Truth at this instant for the pit and outlet nodes."""
        running = self.motor_on or self.backup_on
        no_flow = self.fault_active("pump_no_flow", hours)
        q_pump = self._pump_flow_now(hours)
        if self.level_cm <= self.model.pit.intake_cm + EPS_CM:
            q_pump = min(q_pump, self.inflow_lpm)
        dry = self.level_cm <= self.model.pit.intake_cm + EPS_CM or no_flow
        current = self.primary.current(q_pump, dry=dry) if self.motor_on else 0.0
        outlet = 0.0
        pressure = 0.0
        if running and not self.diverted:
            if self.plugged:
                # Dead-heading against the ice: shut-off head less the lift to the node.
                pumps = [
                    p
                    for p, on in (
                        (self.primary, self.motor_on and not no_flow),
                        (self.backup, self.backup_on),
                    )
                    if on and p is not None
                ]
                if pumps:
                    shutoff = max(p.shutoff_head_m for p in pumps)
                    lift = self.model.line.line_rise_m - self.level_cm / 100.0
                    pressure = max(0.0, shutoff - lift) * KPA_PER_M
            elif self.line_l >= self.indoor_volume_l - 1e-6 and q_pump > 0:
                outlet = q_pump
                back = 0.5 if self.model.line.destination == "storm_lateral" else 0.0
                pressure = (self.exterior.loss_m(q_pump) + back) * KPA_PER_M
        return Snapshot(self.level_cm, self.motor_on, self.backup_on, current, outlet, pressure)

    def pump_event_list(self) -> list[tuple[float, Snapshot]]:
        """Pump starts/stops during the last step, with their times (s since start)."""
        return list(zip(self._pump_event_times, self.pump_events, strict=True))

    # -- ground truth ---------------------------------------------------------------------
    def conditions(self, hours: float) -> set[str]:
        """The conditions that truly hold now (rule ids)."""
        held: set[str] = set()
        if self.diverted:
            held.add("sanitary_discharge")
        if self.plugged:
            held.add("frozen_line")
        if self.walkway_ice_kg >= WALKWAY_ICE_KG:
            held.add("icing_risk")
        if self.level_cm >= self.model.pit.alarm_cm:
            held.add("high_water")
        if self.fault_active("float_stuck", hours) and not self.fault_active("pump_dead", hours):
            held.add("continuous_run")
        if self.fault_active("check_valve_fail", hours) and self.model.line.check_valve:
            held.add("short_cycling")
        return held
