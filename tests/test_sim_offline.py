"""Issue 3: the simulator's offline output — determinism, contract, labels format, registry."""

from __future__ import annotations

import json
import tomllib
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pydantic import ValidationError

from firmware_sim.offline import list_scenarios, read_jsonl, run_offline, write_jsonl
from gateway.contract import STATUS_OFFLINE, STATUS_ONLINE, TELEMETRY_ADAPTER, parse_topic
from gateway.registry.models import load_registry

REQUIRED = {
    "normal_summer",
    "normal_winter_grade",
    "normal_storm_lateral",
    "illegal_sanitary_hose",
    "frozen_discharge_line",
    "icy_walkway",
    "pump_failure_high_water",
    "stuck_float_continuous_run",
    "check_valve_failure_short_cycling",
    "sensor_offline",
    "heavy_rain_surge",
    "bad_payloads",
}
SHORT = timedelta(hours=2)


def _rfc3339(text: str) -> datetime:
    assert text.endswith("Z")
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def test_every_required_scenario_is_shipped() -> None:
    assert set(list_scenarios()) >= REQUIRED


def test_the_same_seed_gives_the_same_bytes() -> None:
    first = run_offline("illegal_sanitary_hose", seed=11, duration=SHORT)
    second = run_offline("illegal_sanitary_hose", seed=11, duration=SHORT)
    assert first.messages == second.messages
    assert first.labels == second.labels
    assert first.sites_toml == second.sites_toml


def test_another_seed_gives_other_readings() -> None:
    first = run_offline("normal_summer", seed=1, duration=SHORT)
    second = run_offline("normal_summer", seed=2, duration=SHORT)
    assert first.messages != second.messages


def test_every_telemetry_payload_validates_against_the_contract() -> None:
    run = run_offline("sensor_offline", homes=4, duration=timedelta(hours=6))
    kinds = set()
    for topic, payload in run.messages:
        parts = parse_topic(topic)
        assert parts is not None
        if parts.channel == "status":
            assert payload in (STATUS_ONLINE.encode(), STATUS_OFFLINE.encode())
            continue
        msg = TELEMETRY_ADAPTER.validate_json(payload)
        assert (msg.site_id, msg.node_id) == (parts.site_id, parts.node_id)
        kinds.add(msg.kind.value)
    assert kinds == {"pit", "discharge", "air"}


def test_each_node_counts_its_messages_and_keeps_its_clock_in_order() -> None:
    run = run_offline("normal_summer", duration=SHORT)
    last: dict[str, tuple[int, datetime]] = {}
    for topic, payload in run.messages:
        if topic.endswith("/status"):
            continue
        msg = TELEMETRY_ADAPTER.validate_json(payload)
        if topic in last:
            seq, ts = last[topic]
            assert msg.seq == seq + 1
            assert msg.ts > ts
        last[topic] = (msg.seq, msg.ts)


def test_homes_beyond_the_templates_get_their_own_ids() -> None:
    run = run_offline("normal_summer", homes=7, duration=timedelta(minutes=10))
    ids = [h["site_id"] for h in run.labels["homes"]]
    assert len(ids) == len(set(ids)) == 7


def test_labels_have_the_documented_shape() -> None:
    start = datetime(2026, 12, 1, 18, tzinfo=UTC)
    run = run_offline("illegal_sanitary_hose", seed=5, start=start, duration=timedelta(hours=6))
    labels = run.labels
    assert labels["version"] == 1
    assert labels["scenario"] == "illegal_sanitary_hose"
    assert labels["seed"] == 5
    assert _rfc3339(labels["start"]) == start
    assert _rfc3339(labels["end"]) == start + timedelta(hours=6)
    sites = {h["site_id"]: h["conditions"] for h in labels["homes"]}
    assert sites["hose-none"] == []
    for conditions in sites.values():
        for c in conditions:
            assert set(c) <= {"condition", "start", "end", "node_id"}
            assert _rfc3339(c["start"]) <= _rfc3339(c["end"])
    assert json.loads(json.dumps(labels)) == labels


def test_the_registry_describes_homes_as_registered_not_as_they_are(tmp_path: Path) -> None:
    run = run_offline("illegal_sanitary_hose", duration=timedelta(minutes=10))
    path = tmp_path / "sites.toml"
    path.write_text(run.sites_toml)
    registry = load_registry(path)
    hose = registry.require("hose-always")
    assert hose.installation.destination == "grade"  # truth: a hose to the laundry tub
    assert {n.id for n in hose.nodes} == {"pit", "outlet", "air"}
    assert {s.id for s in registry} == {h["site_id"] for h in run.labels["homes"]}
    assert tomllib.loads(run.sites_toml)["site"][0]["jurisdiction"] == "edgar"


def test_bad_payloads_are_labelled_and_only_they_break_the_contract() -> None:
    run = run_offline("bad_payloads", duration=timedelta(hours=3))
    bad = run.labels["bad_messages"]
    items = {i["index"]: i for i in bad["items"]}
    assert bad["count"] == len(items) > 20
    assert bad["invalid"] == sum(1 for i in items.values() if not i["valid"])
    assert {"malformed_json", "duplicate", "out_of_order", "clock_skew_future"} <= set(bad["kinds"])
    for index, (topic, payload) in enumerate(run.messages):
        if topic.endswith("/status"):
            continue
        item = items.get(index)
        if item is None or item["valid"]:
            msg = TELEMETRY_ADAPTER.validate_json(payload)
            if item is None or item["kind"] != "clock_skew_past":
                assert msg.site_id in topic
        elif item["kind"] in ("oversize",):
            assert len(payload) > 4096
        elif item["kind"] == "topic_mismatch":
            assert TELEMETRY_ADAPTER.validate_json(payload).site_id not in topic
        elif item["kind"] == "clock_skew_future":
            # Well-formed, but an hour ahead: the gateway's skew check refuses it.
            msg = TELEMETRY_ADAPTER.validate_json(payload)
            assert msg.ts > _rfc3339(run.labels["start"]) + timedelta(minutes=59)
        else:
            with pytest.raises(ValidationError):
                TELEMETRY_ADAPTER.validate_json(payload)


def test_duplicates_repeat_an_earlier_message_byte_for_byte() -> None:
    run = run_offline("bad_payloads", duration=timedelta(hours=3))
    dupes = [i for i in run.labels["bad_messages"]["items"] if i["kind"] == "duplicate"]
    assert dupes
    for item in dupes:
        assert run.messages[item["index"]] in run.messages[: item["index"]]


def test_jsonl_files_round_trip_every_payload(tmp_path: Path) -> None:
    run = run_offline("bad_payloads", duration=timedelta(hours=1))
    path = tmp_path / "telemetry.jsonl"
    write_jsonl(run.messages, path)
    assert read_jsonl(path) == run.messages
    first = json.loads(path.read_text().splitlines()[0])
    assert first == {"topic": first["topic"], "payload": "online", "retain": True}
