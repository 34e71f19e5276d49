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
    split_operating_point,
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
#: Pit water relaxes toward its inflow's temperature with this time constant.
PIT_WATER_TAU_S = 8 * 3600.0
PIPE_FLOW_TAU_S = 20.0
EPS_CM = 1e-6
#: Share of the pumped water a diversion must take to count as a sanitary discharge
#: (issue 14: a tee that sends 10 % elsewhere is a clean house for that rule).
DIVERSION_LABEL_SHARE = 0.25
#: Storm-only hose: in while it rains at least this hard, out this long after the rain.
STORM_HOSE_MM_PER_H = 1.0
STORM_HOSE_AFTER_H = 6.0
#: Night-only hose: local hours.
NIGHT_HOSE_FROM, NIGHT_HOSE_TO = 22, 6
PUMP_FAULTS = ("pump_dead", "pump_no_flow", "pump_no_current")


@dataclass(slots=True)
class Snapshot:
    """What the pit and outlet sensors would read at one instant (truth, no noise)."""

    level_cm: float
    pump_on: bool
    backup_on: bool
    current_a: float
    outlet_lpm: float
    pressure_kpa: float
    riser_kpa: float = 0.0


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
    _split_cache: dict[tuple[int, int, int, float], tuple[float, float, float]] = field(
        default_factory=dict
    )
    _night_hose: bool = False
    _inflow_c: float = 9.0
    share: float = 1.0  # of the pumped water the hose takes while diverted
    backflow_lpm: float = BACKFLOW_LPM
    _hose_ran: bool = False  # water went down the hose since it was put in
    _storm_until_h: float = -1.0
    _pump_fail_seen: bool = False
    _hose_k: dict[float, float] = field(default_factory=dict)

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
        for f in m.fault:
            if f.kind == "sanitary_tee" and f.share < 1.0:
                self._hose_k[f.share] = self._calibrate_tee(f.share)

    def _calibrate_tee(self, share: float) -> float:
        """Loss coefficient of the tee's hose that takes ``share`` of the flow at mid-pit.

        A real tee takes whatever its hose's size, length and kinks give; the sweep
        asks for a share, so the hose is given the resistance that yields it.
        """
        pit = self.model.pit
        level = int((pit.pump_on_cm + pit.pump_off_cm) / 2)
        lo, hi = 0.0, 20.0  # log10 of the loss coefficient
        for _ in range(30):
            mid = (lo + hi) / 2
            got = self._split(level, (self.primary,), 10**mid)[2]
            total = self._split(level, (self.primary,), 10**mid)[0]
            if total > 0 and got / total > share:
                lo = mid
            else:
                hi = mid
        return 10 ** ((lo + hi) / 2)

    def _split(
        self, level_cm: int, pumps: tuple[PumpCurve, ...], hose_k: float
    ) -> tuple[float, float, float]:
        level_m = level_cm / 100.0
        main = (self.model.line.line_rise_m - level_m, self.system)
        hose = Pipe(self.hose.inside_diameter_m, self.hose.length_m, hose_k)
        return split_operating_point(pumps, main, (self._hose_static(level_m), hose))

    def _hose_static(self, level_m: float) -> float:
        floor_m = self.model.pit.depth_cm / 100.0
        return floor_m - level_m + self.model.line.hose_outlet_above_floor_m

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

    def _update_diversion(self, now: datetime, hours: float, weather: Weather) -> None:
        was = self.diverted
        self._hose_in_place(now, hours, weather)
        if not self.diverted or not was:
            self._hose_ran = False

    def _hose_in_place(self, now: datetime, hours: float, weather: Weather) -> None:
        """Hose to the sanitary sewer: always (destination), scheduled, or on freezing nights."""
        air_c = weather.air_c + self.micro_offset_c
        self.share = 1.0
        if self.model.line.destination == "sanitary" or self.fault_active("sanitary_hose", hours):
            self.diverted = True
            return
        tees = self._faults("sanitary_tee", hours)
        if tees:
            self.diverted = self._tee_in(tees[0], now, hours, weather)
            self.share = tees[0].share if self.diverted else 1.0
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

    def _tee_in(self, f: FaultModel, now: datetime, hours: float, weather: Weather) -> bool:
        """Whether the owner has the hose in place now, by its schedule."""
        local = now + timedelta(hours=LOCAL_OFFSET_H)
        if f.schedule == "nights":
            return local.hour >= NIGHT_HOSE_FROM or local.hour < NIGHT_HOSE_TO
        if f.schedule == "weekends":
            return local.weekday() >= 5
        if f.schedule == "storms":
            if weather.precip_mm_per_h >= STORM_HOSE_MM_PER_H and weather.air_c > 1.0:
                self._storm_until_h = hours + STORM_HOSE_AFTER_H
            return hours < self._storm_until_h
        return True

    # -- hydraulics ---------------------------------------------------------------------
    def _pumps_split(
        self, level_cm: float, primary: bool, backup: bool
    ) -> tuple[float, float, float]:
        """Pump flow (L/min), head (m) and the part of the flow that goes down the hose."""
        tee = self.diverted and self.share < 1.0
        mode = int(self.diverted) + int(tee) + int(tee and self.plugged)
        key = (int(level_cm), int(primary) + 2 * int(backup), mode, self.share)
        hit = self._split_cache.get(key)
        if hit is not None:
            return hit
        pumps = tuple(
            p for p, on in ((self.primary, primary), (self.backup, backup)) if on and p is not None
        )
        level_m = int(level_cm) / 100.0
        result: tuple[float, float, float]
        if tee and not self.plugged:
            result = self._split(int(level_cm), pumps, self._hose_k[self.share])
        elif self.diverted:
            hose = self.hose
            if tee:  # the main leg is iced shut: all of it goes down the tee's hose
                hose = Pipe(hose.inside_diameter_m, hose.length_m, self._hose_k[self.share])
            flow, head = operating_point(pumps, self._hose_static(level_m), hose)
            result = (flow, head, flow)
        else:
            flow, head = operating_point(pumps, self.model.line.line_rise_m - level_m, self.system)
            result = (flow, head, 0.0)
        self._split_cache[key] = result
        return result

    def _impeller_turns(self, hours: float) -> bool:
        """The primary moves water: commanded, powered and with a working impeller."""
        return (
            self.motor_on
            and not self.fault_active("pump_no_flow", hours)
            and not self.fault_active("pump_no_current", hours)
        )

    def _pump_flows_now(self, hours: float) -> tuple[float, float, float]:
        """Pump flow, head and the hose's part of it, now (L/min, m, L/min)."""
        primary = self._impeller_turns(hours)
        backup = self.backup_on
        if not (primary or backup):
            return 0.0, 0.0, 0.0
        if self.plugged and not self.diverted:
            return 0.0, 0.0, 0.0
        return self._pumps_split(self.level_cm, primary, backup)

    def _pump_flow_now(self, hours: float) -> float:
        return self._pump_flows_now(hours)[0]

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
        if self.diverted and self.share >= 1.0:
            return
        leaks = self._faults("check_valve_leak", hours)
        if leaks:
            # A valve that seats badly: the line seeps back over the whole off period.
            self.backflow_left_l = self.line_l
            self.backflow_lpm = leaks[0].leak_lpm
        elif self.fault_active("check_valve_fail", hours) or not self.model.line.check_valve:
            self.backflow_left_l = self.line_l  # the whole indoor line falls back
            self.backflow_lpm = BACKFLOW_LPM
        elif self.line_l > self.hold_l:
            # The indoor run past the riser drains on out of the outlet.
            self.counters.outlet_l += self.line_l - self.hold_l
            self.line_l = self.hold_l

    def advance(self, t0_s: float, dt_s: float, weather: Weather) -> None:
        """Advance the hydraulics, inflow and temperatures by ``dt_s`` from ``t0_s``."""
        now = self.start + timedelta(seconds=t0_s + dt_s)
        hours0 = t0_s / 3600.0
        air = weather.air_c + self.micro_offset_c
        self._update_diversion(now, hours0, weather)
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
        q_in = self.inflow_lpm
        q_pump, _, q_hose = self._pump_flows_now(hours)
        # The line drains back through a bad valve only while no pump moves water:
        # a running pump's pressure holds the line full and sends the water out.
        leaking = self.backflow_left_l > 0 and q_pump == 0
        q_back = self.backflow_lpm if leaking else 0.0
        if self.level_cm <= pit.intake_cm + EPS_CM and q_pump > 0:
            # Pump snoring at its intake: it can move only what flows in.
            q_pump = min(q_pump, q_in)
            q_hose *= q_pump / max(self._pump_flow_now(hours), 1e-9)
        full_hose = self.diverted and self.share >= 1.0
        filling = (not full_hose) and self.line_l < self.indoor_volume_l - 1e-9
        rate = (q_in + q_back - q_pump) * 1000.0 / 60.0 / self.area_cm2  # cm/s
        limit = self._mark_limit(rate, remaining, hours)
        if filling and q_pump > 0:
            limit = min(limit, (self.indoor_volume_l - self.line_l) / q_pump * 60.0)
        if q_back > 0:
            limit = min(limit, self.backflow_left_l / q_back * 60.0)
        limit = max(limit, 1e-6)
        self._advance(limit / 60.0, (q_in, q_back, q_pump, q_hose), full_hose, filling)
        level = self.level_cm + rate * limit
        if level > pit.depth_cm:
            self.counters.overflow_l += (level - pit.depth_cm) * self.area_cm2 / 1000.0
            level = pit.depth_cm
        self.level_cm = max(level, 0.0)
        return limit

    def _mark_limit(self, rate: float, remaining: float, hours: float) -> float:
        """Time (s, at most ``remaining``) until the level at ``rate`` reaches the next
        mark that changes the physics: a float's, the intake, the rim."""
        pit = self.model.pit
        targets: list[float] = []
        if rate < 0:
            targets = [pit.intake_cm]
            if self.motor_on and not self.fault_active("float_stuck", hours):
                targets.append(pit.pump_off_cm)
            if self.backup_on and self.backup is not None:
                targets.append(self.model.pump.backup_off_cm)
            gaps = [self.level_cm - m for m in targets if self.level_cm > m + EPS_CM]
        elif rate > 0:
            targets = [pit.depth_cm]
            if not self.motor_on:
                targets.append(pit.pump_on_cm)
            if self.backup is not None and not self.backup_on:
                targets.append(self.model.pump.backup_on_cm)
            gaps = [m - self.level_cm for m in targets if self.level_cm < m - EPS_CM]
        else:
            gaps = []
        return min([remaining, *(g / abs(rate) for g in gaps)])

    def _advance(
        self,
        minutes: float,
        flows: tuple[float, float, float, float],
        full_hose: bool,
        filling: bool,
    ) -> None:
        """Book ``minutes`` of the flows (in, back, pump, hose; L/min) on the counters,
        the line's fill and the outlet."""
        q_in, q_back, q_pump, q_hose = flows
        c = self.counters
        c.inflow_l += q_in * minutes
        c.backflow_l += q_back * minutes
        c.pumped_l += q_pump * minutes
        self.backflow_left_l = max(0.0, self.backflow_left_l - q_back * minutes)
        if q_back > 0:
            self.line_l = max(0.0, self.line_l - q_back * minutes)
        moved = q_pump * minutes
        if moved > 0 and self.diverted:
            self._hose_ran = True
        if full_hose:
            c.diverted_l += moved
            moved = 0.0
        else:
            c.diverted_l += q_hose * minutes
            moved -= q_hose * minutes
        if filling:
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
        no_current = self.fault_active("pump_no_current", hours)
        q_pump, head, q_hose = self._pump_flows_now(hours)
        if self.level_cm <= self.model.pit.intake_cm + EPS_CM and q_pump > 0:
            q_hose *= min(q_pump, self.inflow_lpm) / q_pump
            q_pump = min(q_pump, self.inflow_lpm)
        dry = self.level_cm <= self.model.pit.intake_cm + EPS_CM or no_flow
        current = 0.0
        if self.motor_on and not no_current:
            current = self.primary.current(q_pump, dry=dry)
            if no_flow:
                current *= self._faults("pump_no_flow", hours)[0].current_share / 0.55
        outlet = 0.0
        pressure = 0.0
        turning = [
            p
            for p, on in (
                (self.primary, self._impeller_turns(hours)),
                (self.backup, self.backup_on),
            )
            if on and p is not None
        ]
        lift = self.model.line.line_rise_m - self.level_cm / 100.0
        if running and self.plugged and turning and not self.diverted:
            # Dead-heading against the ice: shut-off head less the lift to the node.
            head = max(p.shutoff_head_m for p in turning)
            pressure = max(0.0, head - lift) * KPA_PER_M
        elif running and self.plugged and turning:
            # The tee's hose carries it all; the iced main leg stands at the tee's head.
            pressure = max(0.0, head - lift) * KPA_PER_M
        elif running and not (self.diverted and self.share >= 1.0):
            q_main = q_pump - q_hose
            if self.line_l >= self.indoor_volume_l - 1e-6 and q_main > 0:
                outlet = q_main
                back = 0.5 if self.model.line.destination == "storm_lateral" else 0.0
                pressure = (self.exterior.loss_m(q_main) + back) * KPA_PER_M
        riser = self._riser_kpa(head if turning else 0.0)
        return Snapshot(
            self.level_cm, self.motor_on, self.backup_on, current, outlet, pressure, riser
        )

    def _riser_kpa(self, head_m: float) -> float:
        """What a tap on the riser near the pump reads (kPa).

        Running, it reads the pump's head less the rise from the pit's water to the
        tap, whatever happens downstream (outlet, tee, hose or ice). Idle, it reads
        the column the check valve holds above it (0 once that has drained back).
        """
        tap_m = self.model.tap_above_floor_m
        if head_m > 0:
            return max(0.0, head_m - (tap_m - self.level_cm / 100.0)) * KPA_PER_M
        if self.diverted and self.share >= 1.0:
            return 0.0
        rise = self.model.line.line_rise_m
        column = min(self.line_l / max(self.riser_l, 1e-9), 1.0) * rise - tap_m
        return max(0.0, column) * KPA_PER_M

    def running_tap_kpa(self) -> float:
        """What the discharge node's tap reads with the primary running into the open
        line at mid-pit (what an installer notes as its static head)."""
        pit = self.model.pit
        level_m = (pit.pump_on_cm + pit.pump_off_cm) / 200.0
        flow, head = operating_point(
            (self.primary,), self.model.line.line_rise_m - level_m, self.system
        )
        if self.model.pressure_tap == "riser":
            return max(0.0, head - (self.model.tap_above_floor_m - level_m)) * KPA_PER_M
        back = 0.5 if self.model.line.destination == "storm_lateral" else 0.0
        return (self.exterior.loss_m(flow) + back) * KPA_PER_M

    def pump_event_list(self) -> list[tuple[float, Snapshot]]:
        """Pump starts/stops during the last step, with their times (s since start)."""
        return list(zip(self._pump_event_times, self.pump_events, strict=True))

    # -- ground truth ---------------------------------------------------------------------
    def conditions(self, hours: float) -> set[str]:
        """The conditions that truly hold now (rule ids)."""
        held: set[str] = set()
        if self.diverted and self._hose_ran and self.share >= DIVERSION_LABEL_SHARE:
            held.add("sanitary_discharge")
        if self.plugged:
            held.add("frozen_line")
        if self.walkway_ice_kg >= WALKWAY_ICE_KG:
            held.add("icing_risk")
        if self.level_cm >= self.model.pit.alarm_cm:
            held.add("high_water")
        if self.fault_active("float_stuck", hours) and not self.fault_active("pump_dead", hours):
            held.add("continuous_run")
        valve = self.fault_active("check_valve_fail", hours) or self.fault_active(
            "check_valve_leak", hours
        )
        if valve and self.model.line.check_valve:
            held.add("short_cycling")
        if self._pump_failed(hours):
            held.add("pump_failure")
        return held

    def _pump_failed(self, hours: float) -> bool:
        """A failed primary, from the moment it is called on (float up or level at the
        on mark) until it is repaired."""
        if not any(self.fault_active(k, hours) for k in PUMP_FAULTS):
            self._pump_fail_seen = False
            return False
        if self.motor_on or self.level_cm >= self.model.pit.pump_on_cm - EPS_CM:
            self._pump_fail_seen = True
        return self._pump_fail_seen
