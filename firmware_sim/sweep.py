"""Labelled sweeps over varied houses (issue 14): the proof side of the detectors.

A sweep is a list of :class:`SweepCase` s, each one home simulated on its own
weather: a house drawn at random (pit size, float marks, lift, line, pump,
pressure tap, current sensing, sensor noise, dropouts, sample interval) and the
*registry* of it written the way owners fill it in (pit diameter and float marks
off by realistic errors, the tap sometimes recorded, sometimes not). On top, one
condition from a family: a diversion at a share and on a schedule, a pump or
check-valve failure mode, a frozen line (with or without a diversion), a stuck
float, icing near a walkway, a silent sensor, a rain surge on a healthy valve,
or nothing at all (a clean site-week).

Nothing here reads the detectors: the houses model ordinary plumbing variety
and the labels come from the simulator's physics (``HomeSim.conditions``).
Same seed, same cases, same bytes.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from firmware_sim.physics import PumpCurve
from firmware_sim.scenario import ScenarioModel
from gateway.errors import SumpWatchError

#: Diversion shares of the sweep; from 25 % up the hose is a sanitary discharge.
SHARES = (0.0, 0.10, 0.25, 0.33, 0.50, 0.75, 1.0)
SCHEDULES = ("permanent", "nights", "storms", "weekends", "afternoon")
TAPS = ("riser", "outlet")
SEASONS = ("winter", "spring", "summer", "fall")
INTERVALS_S = (5.0, 10.0, 15.0, 30.0)
NOISE = (0.5, 1.0, 2.0, 3.0)
DROPOUTS = (0.0, 0.01, 0.03)
#: Pumps by horsepower: shut-off head (ft), one catalogue point (gpm at 10 ft), amps.
PUMPS: dict[str, tuple[float, float, float]] = {
    "1/4": (17.0, 28.0, 4.0),
    "1/3": (21.0, 40.0, 6.0),
    "1/2": (28.0, 55.0, 9.5),
}
#: Day-of-year windows of each season (start dates fall inside), northern Midwest.
_SEASON_DAYS = {"winter": (5, 55), "spring": (80, 130), "summer": (165, 230), "fall": (265, 315)}
#: Inflow (slow-reservoir baseflow, L/min) by season: spring is the wettest.
_BASEFLOW = {"winter": (0.5, 1.5), "spring": (1.5, 4.0), "summer": (0.6, 2.5), "fall": (0.6, 2.5)}
YEAR = 2027
CLEAN_WEEK_H = 7 * 24.0


@dataclass(frozen=True)
class SweepCase:
    """One home, one condition family, one run."""

    name: str
    family: str
    dims: tuple[tuple[str, str], ...]
    scenario: ScenarioModel
    seed: int
    clean: bool = False  # a clean site-week: every finding is a false positive
    #: Simulation step (None: the fastest node's interval, at most 10 s). The
    #: hydraulics are exact between events at any step; only temperatures are stepped.
    step_s: float | None = None

    @property
    def dim(self) -> dict[str, str]:
        """The sweep dimensions of this case (share, schedule, tap, interval, ...)."""
        return dict(self.dims)


@dataclass
class _House:
    """A drawn house: the home template's fields and its dimension tags."""

    home: dict[str, Any]
    dims: dict[str, str]
    season: str


def _season_start(rng: random.Random, season: str) -> datetime:
    lo, hi = _SEASON_DAYS[season]
    day = datetime(YEAR, 1, 1, 6, tzinfo=UTC) + timedelta(days=rng.randint(lo, hi))
    return day  # 06:00 UTC = local midnight (US Central standard time)


def _pick_pump(rng: random.Random, lift_m: float, line_m: float, pipe_in: float) -> str:
    """A pump an installer would fit: one that moves ~40 L/min at this lift and line,
    1/3 hp most often (the usual residential choice), else 1/4 or 1/2 hp."""
    weights = {"1/4": 0.3, "1/3": 0.5, "1/2": 0.2}
    friction = 0.02 * line_m * (1.25 / pipe_in) ** 4.87  # rough, m: the installer's guess
    able = [
        hp
        for hp, (shutoff_ft, gpm, _) in PUMPS.items()
        if PumpCurve.through(shutoff_ft, gpm, 10.0, 1.0).flow_at(lift_m + friction) > 40.0
    ]
    if not able:
        return "1/2"
    return rng.choices(able, [weights[hp] for hp in able])[0]


def _registered_pit(rng: random.Random, pit: dict[str, float]) -> dict[str, float]:
    """What the owner wrote down: diameter within 10-15 %, float marks within a few cm."""
    diameter = pit["diameter_cm"] * (1 + rng.choice((-1, 1)) * rng.uniform(0.10, 0.15))
    off = max(3.0, pit["pump_off_cm"] + rng.uniform(-4.0, 4.0))
    on = max(off + 4.0, pit["pump_on_cm"] + rng.uniform(-4.0, 4.0))
    alarm = pit["alarm_cm"]
    if on >= alarm - 1.0:
        on = alarm - 2.0
        off = min(off, on - 4.0)
    return {
        "diameter_cm": round(diameter, 1),
        "pump_off_cm": round(off, 1),
        "pump_on_cm": round(on, 1),
    }


def _draw_pit(rng: random.Random) -> tuple[dict[str, float], float, float]:
    """A pit's size and float marks (and its unrounded diameter and depth)."""
    diameter = rng.uniform(36.0, 61.0)
    depth = rng.uniform(56.0, 91.0)
    off = rng.uniform(12.0, 25.0)
    on = off + rng.uniform(8.0, 30.0)
    alarm = on + rng.uniform(6.0, 14.0)
    if alarm > depth - 3.0:
        depth = alarm + rng.uniform(3.0, 10.0)
    pit = {
        "diameter_cm": round(diameter, 1),
        "depth_cm": round(depth, 1),
        "pump_on_cm": round(on, 1),
        "pump_off_cm": round(off, 1),
        "alarm_cm": round(alarm, 1),
        "intake_cm": round(min(6.0, off / 2), 1),
    }
    return pit, diameter, depth


def _draw_line(
    rng: random.Random, depth: float, frost_safe: bool
) -> tuple[dict[str, Any], float, float, float]:
    """A discharge line (and its lift, pipe size and total length) out of a pit this deep."""
    lift = rng.uniform(max(1.0, depth / 100 + 0.3), 4.0)
    pipe_in = rng.choice((1.0, 1.25, 1.5))
    total = rng.uniform(3.0, 30.0)
    exterior = min(rng.uniform(0.5, 6.0), total / 2)
    destination = rng.choices(("grade", "swale", "storm_lateral"), (0.6, 0.2, 0.2))[0]
    # A clean exterior run drains: its standing water can never make a full plug.
    sag = rng.uniform(0.0, 0.08 / max(exterior, 0.1)) if frost_safe else rng.uniform(0.3, 0.6)
    line: dict[str, Any] = {
        "destination": destination,
        "pipe_inside_diameter_in": pipe_in,
        "line_length_m": round(total - exterior, 2),
        "exterior_length_m": round(exterior, 2),
        "line_rise_m": round(lift, 2),
        "sag_fraction": round(min(sag, 1.0), 3),
        "hose_outlet_above_floor_m": rng.choice((0.0, 0.0, 0.9)),
    }
    if destination != "storm_lateral" and rng.random() < 0.5:
        line["outlet_to_walkway_ft"] = round(rng.uniform(15.0, 60.0), 0)
    return line, lift, pipe_in, total


def draw_house(rng: random.Random, season: str, *, frost_safe: bool = True) -> _House:
    """A house as plumbers build them: every number drawn from its ordinary range."""
    pit, diameter, depth = _draw_pit(rng)
    line, lift, pipe_in, total = _draw_line(rng, depth, frost_safe)
    destination = line["destination"]
    hp = _pick_pump(rng, lift, total, pipe_in)
    shutoff, gpm, amps = PUMPS[hp]
    tap = rng.choice(TAPS)
    interval = rng.choice(INTERVALS_S)
    noise = rng.choice(NOISE)
    dropout = rng.choice(DROPOUTS)
    current = rng.random() < 0.7
    tap_registered = rng.random() < 0.5
    lo, hi = _BASEFLOW[season]
    home: dict[str, Any] = {
        "id": "home",
        "jurisdiction": rng.choice(("edgar", "edgar", "local-law-6-2024", "sewer-ord-247")),
        "pit_interval_s": interval,
        "discharge_interval_s": rng.choice((interval, interval, 2 * interval)),
        "air_interval_s": rng.choice((60.0, 120.0)),
        "air_node": rng.random() < 0.8,
        "pit": pit,
        "pump": {"shutoff_head_ft": shutoff, "flow_gpm": gpm, "current_a": amps},
        "line": line,
        "inflow": {
            "baseflow_lpm": round(rng.uniform(lo, hi), 2),
            "deep_lpm": round(rng.uniform(0.1, 0.5), 2),
            "catchment_m2": round(rng.uniform(200.0, 600.0)),
        },
        "sensor_noise": noise,
        "dropout": dropout,
        "pump_current_sensor": current,
        "pressure_tap": tap,
        "tap_above_floor_m": round(min(depth / 100 + rng.uniform(0.15, 0.6), lift - 0.2), 2),
        "tap_registered": tap_registered,
        "registered_pit": _registered_pit(rng, pit),
        "registered": {
            "destination": "storm_lateral" if destination == "storm_lateral" else "grade",
            "line_length_m": round(total * rng.uniform(0.8, 1.2), 1),
            "line_rise_m": round(lift * rng.uniform(0.85, 1.15), 1),
        },
    }
    return _House(home, _dims(home, season, hp, diameter, lift, total), season)


def _dims(
    home: dict[str, Any], season: str, hp: str, diameter: float, lift: float, total: float
) -> dict[str, str]:
    """The sweep dimensions a drawn house is tagged with."""
    interval, noise = home["pit_interval_s"], home["sensor_noise"]
    line = home["line"]
    return {
        "season": season,
        "tap": home["pressure_tap"],
        "tap_registered": "yes" if home["tap_registered"] else "no",
        "interval": f"{interval:g}s",
        "noise": f"x{noise:g}",
        "dropout": f"{home['dropout']:g}",
        "current_sensor": "yes" if home["pump_current_sensor"] else "no",
        "pump": f"{hp} hp",
        "pit_diameter": "36-45 cm" if diameter < 45 else ("45-53 cm" if diameter < 53 else "53-61"),
        "lift": f"{math.floor(lift)}-{math.floor(lift) + 1} m",
        "line_length": _length_tag(total),
        "pipe": f"{line['pipe_inside_diameter_in']:g} in",
        "destination": line["destination"],
    }


def _weather(rng: random.Random, season: str, events: list[dict[str, Any]]) -> dict[str, Any]:
    return {"anomaly_sigma_c": round(rng.uniform(1.5, 3.0), 2), "event": events}


def _scenario(
    name: str, start: datetime, hours: float, weather: dict[str, Any], home: dict[str, Any]
) -> ScenarioModel:
    return ScenarioModel.model_validate(
        {"name": name, "start": start, "duration_h": hours, "weather": weather, "home": [home]}
    )


class _Builder:
    """Collects cases with unique names and per-case seeds drawn from one RNG."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(f"sweep-{seed}")
        self.cases: list[SweepCase] = []

    def add(
        self,
        family: str,
        house: _House,
        start: datetime,
        hours: float,
        events: list[dict[str, Any]],
        extra_dims: dict[str, str],
        *,
        clean: bool = False,
        step_s: float | None = None,
    ) -> None:
        name = f"{family}-{len(self.cases):03d}"
        home = dict(house.home, id=f"s{len(self.cases):03d}")
        scenario = _scenario(name, start, hours, _weather(self.rng, house.season, events), home)
        dims = {**house.dims, **extra_dims}
        case = SweepCase(
            name,
            family,
            tuple(sorted(dims.items())),
            scenario,
            self.rng.randrange(1 << 30),
            clean,
            step_s,
        )
        self.cases.append(case)


def _rain(rng: random.Random, start_h: float, heavy: bool = False) -> dict[str, Any]:
    rate = rng.uniform(8.0, 20.0) if heavy else rng.uniform(2.0, 6.0)
    return {"kind": "rain", "start_h": start_h, "hours": rng.uniform(1.5, 4.0), "mm_per_h": rate}


def _warm_season(rng: random.Random) -> str:
    return rng.choice(("spring", "summer", "fall"))


def _diversions(b: _Builder, replicas: int) -> None:
    """Every share x schedule x tap, as a tee (share < 1) or a full diversion (share 1)."""
    rng = b.rng
    for _ in range(replicas):
        for share in SHARES:
            for schedule in SCHEDULES:
                for tap in TAPS:
                    season = _warm_season(rng) if schedule == "storms" else rng.choice(SEASONS)
                    house = draw_house(rng, season)
                    house.home["pressure_tap"] = tap
                    house.dims["tap"] = tap
                    start = _season_start(rng, season)
                    hours, events, fault = _diversion_schedule(rng, schedule, share)
                    if schedule == "weekends":
                        # Start on a Friday, local midnight: one clean weekday, then the weekend.
                        start -= timedelta(days=(start.weekday() - 4) % 7)
                    if fault is not None:
                        house.home["fault"] = [fault]
                    kind = "none" if share == 0 else ("full" if share >= 1 else "tee")
                    dims = {"share": f"{share:.0%}", "schedule": schedule, "diversion": kind}
                    b.add("diversion", house, start, hours, events, dims)


def _diversion_schedule(
    rng: random.Random, schedule: str, share: float
) -> tuple[float, list[dict[str, Any]], dict[str, Any] | None]:
    """Run length, weather events and the hose fault; a clean first day to learn from."""
    events: list[dict[str, Any]] = []
    if schedule == "storms":
        events = [_rain(rng, 26.0), _rain(rng, 44.0)]
    hours = {"permanent": 48.0, "nights": 56.0, "storms": 60.0, "weekends": 72.0}.get(
        schedule, 48.0
    )
    if share <= 0:
        return hours, events, None
    fault: dict[str, Any] = {"kind": "sanitary_tee", "share": share}
    if schedule == "permanent":
        fault |= {"start_h": 24.0}
    elif schedule == "afternoon":
        fault |= {"start_h": 37.0, "end_h": 42.0}  # 13:00-18:00 local on day two
    else:
        fault |= {"schedule": schedule, "start_h": 18.0 if schedule == "nights" else 0.0}
    return hours, events, fault


def _pump_failures(b: _Builder, replicas: int) -> None:
    """Air lock / broken impeller (runs, no water), float or switch failure (never
    starts), and a motor commanded with no current; some repaired after hours."""
    rng = b.rng
    modes = (
        ("air_lock", {"kind": "pump_no_flow", "current_share": 0.5}),
        ("broken_impeller", {"kind": "pump_no_flow", "current_share": 0.9}),
        ("float_switch", {"kind": "pump_dead"}),
        ("no_current", {"kind": "pump_no_current"}),
    )
    for _ in range(replicas):
        for mode, fault in modes:
            for tap in TAPS:
                season = rng.choice(("spring", "summer", "fall"))
                house = draw_house(rng, season)
                house.home["pressure_tap"] = tap
                house.dims["tap"] = tap
                start_h = rng.uniform(16.0, 22.0)
                f = dict(fault, start_h=round(start_h, 2))
                if rng.random() < 0.5:
                    f["end_h"] = round(start_h + rng.uniform(4.0, 10.0), 2)
                house.home["fault"] = [f]
                events = [_rain(rng, start_h + 1.0)]
                b.add("pump_failure", house, _season_start(rng, season), 36.0, events,
                      {"failure": mode})  # fmt: skip


def _resize_line(house: _House, **changes: float) -> None:
    """Change the real line and keep its registered length the owner's same error.

    The registered length was drawn as the real total x U(0.8, 1.2); a family that
    lengthens the line after the draw must lengthen the registered one too, or the
    registry would say 4 m for a 15 m line (no owner is that far off)."""
    line = house.home["line"]
    registered = house.home["registered"]
    before = line["line_length_m"] + line["exterior_length_m"]
    line.update(changes)
    after = line["line_length_m"] + line["exterior_length_m"]
    registered["line_length_m"] = round(registered["line_length_m"] * after / before, 1)
    house.dims["line_length"] = _length_tag(after)


def _length_tag(total_m: float) -> str:
    return "3-10 m" if total_m < 10 else ("10-20 m" if total_m < 20 else "20-30 m")


def _redirect(house: _House, destination: str) -> None:
    """Send the line somewhere else after the draw, and register it as owners do
    (a swale is registered as grade): the registry must not keep the old one (a line
    to grade registered as piped to the storm sewer is no house's record)."""
    house.home["line"]["destination"] = house.dims["destination"] = destination
    house.home["registered"]["destination"] = (
        "storm_lateral" if destination == "storm_lateral" else "grade"
    )


def _valves(b: _Builder, replicas: int) -> None:
    """A valve that lets the line fall back at once, one that seeps back over the whole
    off period, and heavy rain on healthy valves (not a leak)."""
    rng = b.rng
    for _ in range(2 * replicas):
        for mode, tap in itertools.product(
            ("fast_fallback", "slow_leak", "rain_surge_healthy"), TAPS
        ):
            season = _warm_season(rng)
            house = draw_house(rng, season)
            house.home["pressure_tap"] = tap
            house.dims["tap"] = tap
            line = house.home["line"]
            # Long, wide lines hold enough water to matter against the pit's cycle.
            line["pipe_inside_diameter_in"] = rng.choice((1.25, 1.5))
            _resize_line(house, line_length_m=round(rng.uniform(8.0, 25.0), 1))
            pit = house.home["pit"]
            pit["pump_on_cm"] = round(pit["pump_off_cm"] + rng.uniform(6.0, 14.0), 1)
            house.home["registered_pit"] = _registered_pit(rng, pit)
            events: list[dict[str, Any]] = []
            start_h = round(rng.uniform(12.0, 20.0), 2)
            if mode == "fast_fallback":
                house.home["fault"] = [{"kind": "check_valve_fail", "start_h": start_h}]
            elif mode == "slow_leak":
                house.home["fault"] = [
                    {"kind": "check_valve_leak", "start_h": start_h, "leak_lpm": _leak(rng, house)}
                ]
            else:
                events = [_rain(rng, start_h, heavy=True), _rain(rng, start_h + 10, heavy=True)]
            house.dims["pipe"] = f"{line['pipe_inside_diameter_in']:g} in"
            b.add("check_valve", house, _season_start(rng, season), 36.0, events,
                  {"valve": mode})  # fmt: skip


def _leak(rng: random.Random, house: _House) -> float:
    """A seep that empties the indoor line over 0.5-1.5 of a typical off period."""
    pit, line, inflow = house.home["pit"], house.home["line"], house.home["inflow"]
    area = math.pi * (pit["diameter_cm"] / 2) ** 2
    cycle_l = area * (pit["pump_on_cm"] - pit["pump_off_cm"]) / 1000.0
    off_min = cycle_l / (inflow["baseflow_lpm"] + inflow["deep_lpm"])
    line_l = (
        math.pi
        * (line["pipe_inside_diameter_in"] * 0.0254) ** 2
        / 4
        * line["line_length_m"]
        * 1000.0
    )
    return float(round(max(0.05, line_l / (off_min * rng.uniform(0.5, 1.5))), 3))


def _frozen(b: _Builder, replicas: int) -> None:
    """A cold snap on a sagging exterior run, with and without a diversion, each tap."""
    rng = b.rng
    for _ in range(replicas):
        for diversion in ("none", "tee_50", "full"):
            for tap in TAPS:
                house = draw_house(rng, "winter", frost_safe=False)
                house.home["pressure_tap"] = tap
                house.dims["tap"] = tap
                line = house.home["line"]
                _redirect(house, "grade")
                _resize_line(house, exterior_length_m=round(rng.uniform(2.0, 5.0), 2))
                line["outlet_to_walkway_ft"] = 40.0
                house.home["inflow"]["baseflow_lpm"] = round(rng.uniform(0.5, 1.2), 2)
                if diversion != "none":
                    share = 0.5 if diversion == "tee_50" else 1.0
                    house.home["fault"] = [
                        {"kind": "sanitary_tee", "share": share, "start_h": 20.0}
                    ]
                snap = {"kind": "cold_snap", "start_h": 6.0, "hours": 30.0,
                        "delta_c": round(-rng.uniform(8.0, 14.0), 1)}  # fmt: skip
                b.add("frozen", house, _season_start(rng, "winter"), 48.0, [snap],
                      {"diversion": diversion})  # fmt: skip


def _singles(b: _Builder, replicas: int) -> None:
    """Stuck floats, icing near walkways in season, silent sensors."""
    rng = b.rng
    for _ in range(replicas):
        house = draw_house(rng, rng.choice(SEASONS))
        start_h = round(rng.uniform(12.0, 20.0), 2)
        house.home["fault"] = [{"kind": "float_stuck", "start_h": start_h,
                                "end_h": round(start_h + rng.uniform(3.0, 12.0), 2)}]  # fmt: skip
        b.add("stuck_float", house, _season_start(rng, house.season), 36.0, [], {})

        house = draw_house(rng, "winter")
        line = house.home["line"]
        _redirect(house, rng.choice(("grade", "swale")))
        line["outlet_to_walkway_ft"] = round(rng.uniform(0.0, 6.0), 1)
        house.home["inflow"]["baseflow_lpm"] = round(rng.uniform(0.8, 2.0), 2)
        snap = {"kind": "cold_snap", "start_h": 10.0, "hours": 20.0, "delta_c": -6.0}
        b.add("icing", house, _season_start(rng, "winter"), 48.0, [snap], {})

        house = draw_house(rng, rng.choice(SEASONS))
        node = rng.choice(("pit", "outlet", "air") if house.home["air_node"] else ("pit", "outlet"))
        start_h = round(rng.uniform(8.0, 16.0), 2)
        house.home["fault"] = [{"kind": "node_offline", "node": node, "start_h": start_h,
                                "end_h": round(start_h + rng.uniform(1.0, 6.0), 2)}]  # fmt: skip
        b.add("silent", house, _season_start(rng, house.season), 30.0, [], {"node": node})


def _clean_weeks(b: _Builder, count: int) -> None:
    """Healthy houses, a week each, in every season, with their season's storms and cold.

    Sampled every 30 s (the slow end of real nodes) so a week costs little; pump
    starts and stops are still reported at once (report-on-change)."""
    rng = b.rng
    for i in range(count):
        season = SEASONS[i % len(SEASONS)]
        house = draw_house(rng, season)
        house.home["pit_interval_s"] = house.home["discharge_interval_s"] = 30.0
        house.home["air_interval_s"] = 120.0
        house.dims["interval"] = "30s"
        line = house.home["line"]
        if "outlet_to_walkway_ft" in line:
            line["outlet_to_walkway_ft"] = max(line["outlet_to_walkway_ft"], 15.0)
        events = [_rain(rng, rng.uniform(24, 120), heavy=rng.random() < 0.3)]
        if season == "winter":
            events.append({"kind": "cold_snap", "start_h": rng.uniform(0, 100), "hours": 36.0,
                           "delta_c": -8.0})  # fmt: skip
        start = _season_start(rng, season)
        b.add("clean", house, start, CLEAN_WEEK_H, events, {}, clean=True, step_s=30.0)


def _selectors(case: SweepCase) -> set[str]:
    """The names ``--only`` knows a case by: its family, its name and its site id."""
    return {case.family, case.name, case.scenario.home[0].id}


def select_cases(cases: list[SweepCase], only: list[str] | None) -> list[SweepCase]:
    """The cases named by family, case name or site id (all of them without ``only``).

    A selector that matches nothing is an error, so a typo does not score an empty sweep.
    """
    if not only:
        return cases
    wanted = set(only)
    unmatched = wanted - set().union(*map(_selectors, cases))
    if unmatched:
        raise SumpWatchError(f"no sweep case matches {', '.join(sorted(unmatched))}")
    return [case for case in cases if wanted & _selectors(case)]


def _every_home(
    cases: list[SweepCase], update: dict[str, Any], dim: tuple[str, str]
) -> list[SweepCase]:
    """The same cases with ``update`` applied to every home, tagged with ``dim``."""
    return [
        replace(
            case,
            scenario=case.scenario.model_copy(
                update={"home": tuple(h.model_copy(update=update) for h in case.scenario.home)}
            ),
            dims=tuple(sorted({**case.dim, dim[0]: dim[1]}.items())),
        )
        for case in cases
    ]


def interval_reports_only(cases: list[SweepCase]) -> list[SweepCase]:
    """The same cases with pit nodes that report on their interval only.

    Our simulator's pit node also reports at once on each pump start and stop; the
    shipped ESPHome pit node, and nodes of other makes, do not. Scoring both ways keeps
    the detectors from leaning on exact run times they will not always get.
    """
    return _every_home(cases, {"change_reports": False}, ("pit_reports", "interval"))


def mean_flow_readings(cases: list[SweepCase]) -> list[SweepCase]:
    """The same cases with outlet meters that report the mean flow since their last
    report (pulse counters, like the shipped ESPHome outlet node), not the flow at the
    sample's instant: a run shorter than the interval reads as a fraction of its rate.
    """
    return _every_home(cases, {"flow_reading": "mean"}, ("flow_reading", "mean"))


def build_sweep(seed: int = 1, *, replicas: int = 2, clean_weeks: int = 200) -> list[SweepCase]:
    """The whole sweep: every family ``replicas`` times over, plus ``clean_weeks`` weeks.

    ``replicas=2, clean_weeks=200`` is the full sweep (about 240 labelled cases); a
    CI smoke run takes ``replicas=1`` and a few clean weeks.
    """
    b = _Builder(seed)
    steps: list[Callable[[_Builder, int], None]] = [
        _diversions, _pump_failures, _valves, _frozen,
    ]  # fmt: skip
    for step in steps:
        step(b, replicas)
    _singles(b, 6 * replicas)
    _clean_weeks(b, clean_weeks)
    return b.cases


#: Dimensions whose every value a smoke sweep keeps at least one case of.
SMOKE_KEYS = ("share", "schedule", "failure", "valve", "diversion", "node")


def smoke_sweep(seed: int = 1) -> list[SweepCase]:
    """A small fixed subset for the regular test suite: every family, and at least one
    case for each share, schedule, failure mode, valve mode and frozen variant."""
    cases = build_sweep(seed, replicas=1, clean_weeks=4)
    kept: list[SweepCase] = []
    seen: set[tuple[str, str, str]] = set()
    for case in cases:
        keys = {(case.family, k, v) for k, v in case.dims if k in SMOKE_KEYS}
        keys.add((case.family, "family", case.family))
        if case.clean or not keys <= seen:
            kept.append(case)
            seen |= keys
    return kept
