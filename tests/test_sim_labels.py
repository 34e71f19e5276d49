"""Issue 3: every scenario's ground-truth labels match its fault schedule and expectations."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from firmware_sim.offline import build_simulation, list_scenarios, run_offline
from firmware_sim.scenario import load_scenario

SCHEDULED = {
    "float_stuck": "continuous_run",
    "check_valve_fail": "short_cycling",
    "node_offline": "sensor_silent",
    "sanitary_hose": "sanitary_discharge",
}


def _t(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _labels(name: str) -> dict:
    sim = build_simulation(name)
    sim.run_physics()
    return sim.labels()


@pytest.mark.parametrize("name", list_scenarios())
def test_each_home_shows_exactly_the_conditions_its_scenario_promises(name: str) -> None:
    labels = _labels(name)
    expected = {h.id: set(h.expect) for h in load_scenario(name).home}
    found = {h["site_id"]: {c["condition"] for c in h["conditions"]} for h in labels["homes"]}
    assert found == expected


@pytest.mark.parametrize(
    "name",
    [
        "stuck_float_continuous_run",
        "check_valve_failure_short_cycling",
        "sensor_offline",
        "illegal_sanitary_hose",
    ],
)
def test_scheduled_faults_are_labelled_over_their_scheduled_interval(name: str) -> None:
    model = load_scenario(name)
    labels = _labels(name)
    start, end = _t(labels["start"]), _t(labels["end"])
    homes = {h["site_id"]: h["conditions"] for h in labels["homes"]}
    checked = 0
    for home in model.home:
        for fault in home.fault:
            condition = SCHEDULED.get(fault.kind)
            if condition is None:
                continue
            (interval,) = [c for c in homes[home.id] if c["condition"] == condition]
            want_end = end if fault.end_h is None else start + timedelta(hours=fault.end_h)
            began = start + timedelta(hours=fault.start_h)
            if fault.kind == "sanitary_hose":
                # A hose is a discharge once the pump sends water down it.
                assert began <= _t(interval["start"]) < want_end
            else:
                assert abs(_t(interval["start"]) - began) <= timedelta(seconds=10)
            assert abs(_t(interval["end"]) - want_end) <= timedelta(seconds=10)
            if fault.kind == "node_offline":
                assert interval["node_id"] == fault.node
            checked += 1
    assert checked


def test_the_hose_swapped_in_on_freezing_nights_is_labelled_from_dusk_to_dawn() -> None:
    labels = _labels("illegal_sanitary_hose")
    (night,) = next(h for h in labels["homes"] if h["site_id"] == "hose-nights")["conditions"]
    # 20:00 to 07:00 Central Standard Time = 02:00 to 13:00 UTC.
    assert (_t(night["start"]).hour, _t(night["end"]).hour) == (2, 13)


def test_labels_do_not_depend_on_whether_messages_are_produced() -> None:
    span = timedelta(hours=6)
    with_messages = run_offline("sensor_offline", duration=span).labels
    sim = build_simulation("sensor_offline", duration=span)
    sim.run_physics()
    assert sim.labels() == with_messages


def test_the_silent_node_sends_no_telemetry_and_the_broker_announces_it_offline() -> None:
    run = run_offline("sensor_offline", duration=timedelta(hours=6))
    start = _t(run.labels["start"])
    pit = "sumpwatch/v1/offline-pit/pit/"
    stamps = []
    statuses = []
    for topic, payload in run.messages:
        if topic == pit + "telemetry":
            stamps.append(_t(payload.decode().split('"ts":"')[1].split('"')[0]))
        elif topic == pit + "status":
            statuses.append(payload.decode())
    silent = [s for s in stamps if start + timedelta(hours=3) < s < start + timedelta(hours=5)]
    assert silent == []
    assert statuses == ["online", "offline", "online"]
