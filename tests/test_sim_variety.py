"""Issue 14: the simulator models ordinary plumbing variety, and labels follow its physics."""

from __future__ import annotations

import json
import tomllib
from datetime import UTC, datetime
from typing import Any

import pytest

from firmware_sim.engine import Simulation
from firmware_sim.home import DIVERSION_LABEL_SHARE
from firmware_sim.offline import build_simulation, sites_toml
from firmware_sim.physics import KPA_PER_M
from firmware_sim.scenario import ScenarioModel

START = datetime(2027, 5, 3, 6, tzinfo=UTC)  # local midnight, Monday, spring


def _sim(hours: float, seed: int = 1, **home: Any) -> Simulation:
    doc = {
        "name": "variety",
        "start": START,
        "duration_h": hours,
        "weather": {"random_storms": False, "anomaly_sigma_c": 0.5},
        "home": [{"id": "h", "inflow": {"baseflow_lpm": 2.0}, **home}],
    }
    return build_simulation(ScenarioModel.model_validate(doc), seed=seed)


def _labels(sim: Simulation) -> list[dict[str, Any]]:
    return sim.labels()["homes"][0]["conditions"]


def _readings(sim: Simulation, node: str) -> list[dict[str, Any]]:
    out = []
    for m in sim.messages():
        if m.node_id == node and m.topic.endswith("/telemetry"):
            out.append(json.loads(m.payload)["readings"])
    return out


@pytest.mark.parametrize("share", [0.25, 0.5, 0.75])
def test_a_tee_sends_its_share_of_the_pumped_water_down_the_hose(share: float) -> None:
    sim = _sim(8, fault=[{"kind": "sanitary_tee", "share": share}])
    sim.run_physics()
    wb = sim.water_balance()["h"]
    assert wb["diverted_l"] / (wb["diverted_l"] + wb["outlet_l"]) == pytest.approx(share, abs=0.05)


def test_a_diversion_is_labelled_from_its_first_pumped_water_until_the_hose_comes_out() -> None:
    sim = _sim(6, fault=[{"kind": "sanitary_tee", "share": 0.5, "start_h": 1.0, "end_h": 4.0}])
    sim.run_physics()
    (label,) = _labels(sim)
    assert label["condition"] == "sanitary_discharge"
    began = datetime.fromisoformat(label["start"].replace("Z", "+00:00"))
    assert (began - START).total_seconds() > 3600  # waits for the pump's first run
    assert label["end"] in ("2027-05-03T10:00:00Z", "2027-05-03T10:00:10Z")  # one step


def test_a_tee_below_a_quarter_of_the_water_is_not_a_sanitary_discharge() -> None:
    assert DIVERSION_LABEL_SHARE == 0.25
    sim = _sim(6, fault=[{"kind": "sanitary_tee", "share": 0.10}])
    sim.run_physics()
    assert sim.water_balance()["h"]["diverted_l"] > 0
    assert _labels(sim) == []


def test_a_night_only_hose_is_in_from_22_to_6_local() -> None:
    sim = _sim(30, fault=[{"kind": "sanitary_tee", "share": 1.0, "schedule": "nights"}])
    sim.run_physics()
    (night,) = [c for c in _labels(sim) if c["condition"] == "sanitary_discharge"][-1:]
    assert night["end"] == "2027-05-04T12:00:00Z"  # 06:00 CST


def test_a_riser_tap_reads_the_lift_while_the_pump_runs_into_a_full_diversion() -> None:
    rise, tap = 3.0, 1.1
    sim = _sim(
        3,
        pressure_tap="riser",
        tap_above_floor_m=tap,
        line={"line_rise_m": rise},
        fault=[{"kind": "sanitary_hose"}],
    )
    outlet = _readings(sim, "outlet")
    running = [r for r in outlet if r["pressure_kpa"] > 3]
    assert running and all(r["flow_lpm"] == 0.0 for r in outlet)
    # The pump's head into the hose, less the rise to the tap: a few to tens of kPa.
    assert max(r["pressure_kpa"] for r in running) < (rise - tap + 6) * KPA_PER_M


def test_an_outlet_tap_reads_nothing_when_the_water_goes_elsewhere() -> None:
    sim = _sim(3, pressure_tap="outlet", fault=[{"kind": "sanitary_hose"}])
    assert max(abs(r["pressure_kpa"]) for r in _readings(sim, "outlet")) < 2.0


def test_an_idle_riser_tap_above_the_check_valve_reads_the_water_column_it_holds() -> None:
    rise, tap = 2.5, 1.0
    sim = _sim(2, pressure_tap="riser", tap_above_floor_m=tap, line={"line_rise_m": rise})
    idle = [r["pressure_kpa"] for r in _readings(sim, "outlet") if r["flow_lpm"] == 0]
    assert sorted(idle)[len(idle) // 2] == pytest.approx((rise - tap) * KPA_PER_M, abs=1.5)


def test_a_pump_commanded_with_no_current_moves_no_water_and_is_a_pump_failure() -> None:
    sim = _sim(6, pit={"alarm_cm": 55.0}, fault=[{"kind": "pump_no_current", "start_h": 1.0}])
    pit = _readings(sim, "pit")
    on = [r for r in pit if r["pump_on"]]
    assert on and on[-1]["pump_current_a"] < 0.3
    assert pit[-1]["level_cm"] > 50
    assert {"pump_failure", "high_water"} <= {c["condition"] for c in _labels(sim)}


def test_a_failed_float_switch_is_a_pump_failure_from_when_the_level_passes_the_on_mark() -> None:
    sim = _sim(4, pit={"initial_level_cm": 20.0}, fault=[{"kind": "pump_dead"}])
    sim.run_physics()
    failure = next(c for c in _labels(sim) if c["condition"] == "pump_failure")
    assert failure["start"] > sim.labels()["start"]
    assert sim.home("h").counters.pump_starts == 0


def test_a_leaking_check_valve_seeps_back_over_the_off_period_and_is_short_cycling() -> None:
    sim = _sim(4, fault=[{"kind": "check_valve_leak", "leak_lpm": 0.4, "start_h": 1.0}])
    sim.run_physics()
    assert sim.water_balance()["h"]["backflow_l"] > 0
    assert [c["condition"] for c in _labels(sim)] == ["short_cycling"]


def test_a_leaking_check_valve_seeps_back_only_while_no_pump_moves_water() -> None:
    # A 0.4 L/min seep outlasts the off period, so the pump restarts before the line
    # has drained: its pressure must stop the seep and its flow must reach the outlet.
    sim = _sim(4, fault=[{"kind": "check_valve_leak", "leak_lpm": 0.4, "start_h": 1.0}])
    home = sim.home("h")
    back = {True: 0.0, False: 0.0}  # litres seeped back in steps run wholly on / off
    outlet_running = 0.0
    before = (home.counters.backflow_l, home.counters.outlet_l, home.motor_on)
    for elapsed in sim.iter_steps():
        c = home.counters
        whole_step = not home.pump_event_list() and home.motor_on == before[2]
        if whole_step and elapsed > 3600:
            back[home.motor_on] += c.backflow_l - before[0]
            if home.motor_on:
                outlet_running += c.outlet_l - before[1]
        before = (c.backflow_l, c.outlet_l, home.motor_on)
    assert back[True] == 0.0
    assert back[False] > 1.0
    assert outlet_running > 0.5 * home.counters.pumped_l / 4


def test_a_pit_without_a_current_sensor_reports_no_current() -> None:
    sim = _sim(1, pump_current_sensor=False)
    assert all("pump_current_a" not in r for r in _readings(sim, "pit"))


def test_dropouts_lose_a_share_of_messages_and_stay_deterministic() -> None:
    full = len(list(_sim(3).messages()))
    lossy = [m.payload for m in _sim(3, dropout=0.1).messages()]
    assert 0.8 * full < len(lossy) < 0.95 * full
    assert lossy == [m.payload for m in _sim(3, dropout=0.1).messages()]


def test_the_registry_records_the_tap_and_a_pit_as_the_owner_measured_it() -> None:
    sim = _sim(
        1,
        pressure_tap="riser",
        tap_registered=True,
        registered_pit={"diameter_cm": 52.0, "pump_on_cm": 37.0},
    )
    site = tomllib.loads(sites_toml(sim))["site"][0]
    outlet = next(n for n in site["nodes"] if n["id"] == "outlet")
    assert outlet["pressure_tap"] == "riser" and outlet["static_head_kpa"] > 10
    assert site["pit"]["diameter_cm"] == 52.0 and site["pit"]["pump_on_cm"] == 37.0
    assert sim.homes[0].spec.model.pit.diameter_cm == 46.0


def test_noisier_sensors_scatter_more() -> None:
    def spread(noise: float) -> float:
        temps = [r["water_temp_c"] for r in _readings(_sim(1, sensor_noise=noise), "pit")]
        mean = sum(temps) / len(temps)
        return sum((t - mean) ** 2 for t in temps) / len(temps)

    assert spread(4.0) > 4 * spread(1.0)
