"""Randomised houses: precision and recall of each detector over many seeds.

Every house differs from its registry entry the way real ones do: the pit's real
diameter is 15 % off the registered one, the float marks a few cm off, the line
length 20 % off; taps sit on the riser or at the outlet (recorded or not); level
noise 0-1 cm, sample intervals 5-30 s, messages lost at random. Each run is one
house with one condition (or none); a detector's finding on a run whose condition
is another detector's is a false positive. High water is not scored here (a
failing pump or a frozen line legitimately raises it too).

``python -m tests.test_detectors_sweep 40`` prints the table for 40 seeds.
"""

from __future__ import annotations

import random
import statistics
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest

from gateway.domain import Reading
from gateway.registry.models import PitConfig
from gateway.rules.sequences import Faults, MiniSump, engine_for, feed, make_site, opened

SUMMER = datetime(2026, 7, 6, tzinfo=UTC)
WINTER = datetime(2027, 1, 12, tzinfo=UTC)
SCORED = ("sanitary_discharge", "frozen_line", "pump_failure", "short_cycling", "continuous_run")
#: Cycle targets of issue 14: >= 50 % within 3 cycles, 25-50 % within 10.
DIVERSIONS = (0.25, 0.33, 0.5, 0.75, 1.0)


@dataclass
class Case:
    name: str
    expect: str | None
    faults: Faults
    winter: bool = False
    clean_h: float = 1.5
    fault_h: float = 3.0


CASES = (
    Case("clean", None, Faults(), clean_h=1.0, fault_h=5.0),
    Case("clean-winter", None, Faults(), winter=True, clean_h=1.0, fault_h=5.0),
    *(Case(f"divert-{s:.2f}", "sanitary_discharge", Faults(sanitary_share=s)) for s in DIVERSIONS),
    Case("divert-0.10", None, Faults(sanitary_share=0.1)),
    Case("pump-no-water", "pump_failure", Faults(pump_no_water=True), fault_h=1.0),
    Case("pump-never-starts", "pump_failure", Faults(pump_dead=True), fault_h=1.0),
    Case("frozen", "frozen_line", Faults(frozen=True), winter=True, fault_h=1.0),
    Case("valve-failed", "short_cycling", Faults(check_valve_failed=True)),
    Case("valve-leaking", "short_cycling", Faults(check_valve_leak_lpm=3.0)),
)


@dataclass
class House:
    seed: int
    sim_kw: dict[str, object]
    site_kw: dict[str, object]


def random_house(seed: int) -> House:
    rng = random.Random(seed)
    diameter = rng.uniform(36.0, 61.0)
    on = rng.uniform(32.0, 45.0)
    off = on - rng.uniform(12.0, 24.0)
    true_pit = PitConfig(
        diameter_cm=diameter, pump_on_cm=on, pump_off_cm=off, alarm_cm=on + 15, depth_cm=on + 35
    )
    reg_on, reg_off = on + rng.uniform(-3, 3), off + rng.uniform(-3, 3)
    registered = {
        "diameter_cm": diameter * rng.uniform(0.85, 1.15),
        "pump_on_cm": reg_on,
        "pump_off_cm": reg_off,
        "alarm_cm": reg_on + 15,
        "depth_cm": reg_on + 35,
    }
    line_m = rng.uniform(3.0, 30.0)
    tap = rng.choice(("outlet", "riser"))
    interval = rng.choice((5, 10, 15, 20, 30))
    outlet_interval = rng.choice((5, 10, 15, 20, 30))
    site_kw: dict[str, object] = {
        "destination": "grade",
        "pit": registered,
        "pit_interval_s": interval,
        "outlet_interval_s": outlet_interval,
        "pipe_inside_diameter_in": rng.choice((1.25, 1.5)),
        "line_length_m": line_m * rng.uniform(0.8, 1.2),
        "outlet_node": {"pressure_tap": tap} if rng.random() < 0.5 else None,
    }
    sim_kw: dict[str, object] = {
        "true_pit": true_pit,
        "true_line_m": line_m,
        "pressure_tap": tap,
        "static_head_kpa": rng.uniform(15, 45),
        "pump_lpm": rng.uniform(80, 200),
        "inflow_lpm": rng.uniform(3, 20),
        "inflow_jitter": rng.uniform(0.0, 0.2),
        "noise": rng.uniform(0, 2.0),
        "dropout": rng.uniform(0, 0.03),
        "outlet_offset_s": rng.randrange(0, 30),
        "seed": seed,
        "report_current": rng.random() < 0.5,
    }
    return House(seed, sim_kw, site_kw)


@dataclass
class Outcome:
    case: str
    seed: int
    expect: str | None
    opened: dict[str, datetime]
    onset: datetime
    starts_to_open: int | None


def _starts(readings: list[Reading], start: datetime, until: datetime) -> int:
    count, on = 0, False
    for r in readings:
        if r.node_id == "pit" and start <= r.ts <= until:
            now = bool(r.values["pump_on"])
            count += now and not on
            on = now
    return count


def run_case(house: House, case: Case) -> Outcome:
    site = make_site(**house.site_kw)  # type: ignore[arg-type]
    start = WINTER if case.winter else SUMMER
    cold = {"air_c": -8.0, "pipe_c": -2.0} if case.winter else {"air_c": 22.0, "pipe_c": 15.0}
    sim = MiniSump(site, start, **house.sim_kw, **cold)  # type: ignore[arg-type]
    engine = engine_for(site)
    readings = sim.run(int(case.clean_h * 3600))
    events = feed(engine, readings)
    onset = start + timedelta(seconds=sim.t)
    sim.faults = case.faults
    later = sim.run(int(case.fault_h * 3600))
    events += feed(engine, later)
    first: dict[str, datetime] = {}
    for f in opened(events):
        first.setdefault(f.rule_id, f.opened_at)
    delay = None
    if case.expect in first:
        delay = _starts(readings + later, onset, first[case.expect])
    return Outcome(case.name, house.seed, case.expect, first, onset, delay)


@dataclass
class Tally:
    tp: int = 0
    fp: int = 0
    labels: int = 0
    detected: int = 0
    delays: list[int] = field(default_factory=list)
    misses: list[str] = field(default_factory=list)
    false: list[str] = field(default_factory=list)

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else 1.0

    @property
    def recall(self) -> float:
        return self.detected / self.labels if self.labels else 1.0


def sweep(seeds: range) -> tuple[dict[str, Tally], list[Outcome]]:
    tallies = {r: Tally() for r in SCORED}
    outcomes: list[Outcome] = []
    for seed in seeds:
        house = random_house(seed)
        for case in CASES:
            o = run_case(house, case)
            outcomes.append(o)
            for rule in SCORED:
                t = tallies[rule]
                hit = rule in o.opened and o.opened[rule] >= o.onset
                early = rule in o.opened and o.opened[rule] < o.onset
                if o.expect == rule:
                    t.labels += 1
                    t.detected += hit
                    t.tp += hit
                    if hit and o.starts_to_open is not None:
                        t.delays.append(o.starts_to_open)
                    if not hit:
                        t.misses.append(f"{o.case}@{seed}")
                    if early:
                        t.fp += 1
                        t.false.append(f"{o.case}@{seed}(before onset)")
                elif rule in o.opened:
                    t.fp += 1
                    t.false.append(f"{o.case}@{seed}")
    return tallies, outcomes


def table(tallies: dict[str, Tally]) -> str:
    lines = [
        "| detector | labels | precision | recall | median delay (cycles) |",
        "|---|---|---|---|---|",
    ]
    for rule, t in tallies.items():
        delay = statistics.median(t.delays) if t.delays else "-"
        lines.append(f"| {rule} | {t.labels} | {t.precision:.2f} | {t.recall:.2f} | {delay} |")
    return "\n".join(lines)


@pytest.fixture(scope="module")
def swept() -> tuple[dict[str, Tally], list[Outcome]]:
    return sweep(range(1, 5))


#: Floors measured on seeds 1-4 (docs/detectors.md has the 10-seed table). They are
#: regression guards below the issue's 0.95 target, which the sweep does not meet
#: yet for sanitary discharge (leak-back refills read as diversions on a few
#: houses) and pump failure; raise them as the detectors improve, never lower them.
PRECISION_FLOOR = {
    "sanitary_discharge": 0.9,
    "frozen_line": 0.95,
    "pump_failure": 0.95,  # 0.89 until a failed valve's rapid restarts stopped reading as a stall
    "short_cycling": 0.95,
    "continuous_run": 0.95,
}
# Sanitary pools sparse outlet samples over many cycles before judging (a run 0-2
# samples fell in says next to nothing): a 25 % diversion at a house sampling every
# 20-30 s can take longer than the 3 h each case runs after the onset.
# Short cycling: 2 of the 4 failed valves on seeds 1-4 (0.12 before the eleventh round);
# the leaking valves (3 L/min) and the failed ones on noisy 15 s pit nodes are missed.
RECALL_FLOOR = {
    "sanitary_discharge": 0.75,
    "frozen_line": 0.95,
    "pump_failure": 0.95,
    "short_cycling": 0.25,
}


@pytest.mark.parametrize("rule", SCORED)
def test_each_detector_is_precise_on_randomised_houses(
    swept: tuple[dict[str, Tally], list[Outcome]], rule: str
) -> None:
    t = swept[0][rule]
    assert t.precision >= PRECISION_FLOOR[rule], t.false


#: Open (issue 14, seventh round, docs/detectors.md): a dry outlet now counts only where
#: the pit makes the run certain, and at sparse instant meters with short runs behind a
#: long line's fill time few readings are: full diversions at 20-30 s outlets go
#: unfound within the 3 h (sanitary recall 0.70 on these seeds, median delay 17 cycles).
SPARSE_INSTANT_RECALL = pytest.mark.xfail(
    strict=True, reason="sanitary recall at sparse instant meters (issue 14, seventh round)"
)


@pytest.mark.parametrize(
    "rule",
    [
        pytest.param(r, marks=SPARSE_INSTANT_RECALL) if r == "sanitary_discharge" else r
        for r in sorted(RECALL_FLOOR)
    ],
)
def test_each_detector_finds_its_condition_on_randomised_houses(
    swept: tuple[dict[str, Tally], list[Outcome]], rule: str
) -> None:
    t = swept[0][rule]
    assert t.recall >= RECALL_FLOOR[rule], t.misses


def test_clean_randomised_houses_raise_nothing(
    swept: tuple[dict[str, Tally], list[Outcome]],
) -> None:
    noisy = [
        (o.case, o.seed, sorted(set(o.opened) - {"high_water", "icing_risk"}))
        for o in swept[1]
        if o.case.startswith("clean") and set(o.opened) - {"high_water", "icing_risk"}
    ]
    assert noisy == []


@SPARSE_INSTANT_RECALL
def test_diversions_of_half_or_more_open_within_a_few_cycles(
    swept: tuple[dict[str, Tally], list[Outcome]],
) -> None:
    delays = [
        o.starts_to_open
        for o in swept[1]
        if o.case in ("divert-0.50", "divert-0.75", "divert-1.00") and o.starts_to_open is not None
    ]
    # The target is 3 cycles; houses whose outlet samples every 20-30 s see a
    # short run only now and then, and a dry outlet counts only from samples inside
    # runs, so they need more (seeds 1-4 include several of them).
    assert delays and statistics.median(delays) <= 12


if __name__ == "__main__":  # pragma: no cover - a measuring tool
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    result, outs = sweep(range(1, n + 1))
    print(table(result))
    for rule, t in result.items():
        print(rule, "missed:", t.misses[:20], "false:", t.false[:20])
    by_share: dict[str, list[int | None]] = {}
    for o in outs:
        if o.case.startswith("divert"):
            by_share.setdefault(o.case, []).append(o.starts_to_open)
    for name, delays in sorted(by_share.items()):
        found = [d for d in delays if d is not None]
        med = statistics.median(found) if found else None
        print(
            name,
            f"found {len(found)}/{len(delays)}",
            "median cycles",
            med,
            "max",
            max(found, default=None),
        )
