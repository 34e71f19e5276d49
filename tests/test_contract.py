"""The telemetry contract and the validation stage (pure unit tests)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from gateway.contract import FIELDS, NodeKind, json_schema, parse_topic
from gateway.domain import DeadLetter, RawMessage, Reading, StatusChange
from gateway.settings import REPO_DIR
from gateway.validate import Validator
from tests.mqtt_helpers import pit_payload

NOW = datetime(2026, 11, 29, 18, 0, tzinfo=UTC)
TOPIC = "sumpwatch/v1/elm-12/pit/telemetry"


def _validate(payload: object, topic: str = TOPIC) -> Reading | StatusChange | DeadLetter:
    raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return Validator(clock=lambda: NOW).validate(RawMessage(topic, raw, NOW))


def _reason(payload: object, topic: str = TOPIC) -> str:
    result = _validate(payload, topic)
    assert isinstance(result, DeadLetter), result
    return result.reason


def test_the_committed_json_schema_matches_the_models() -> None:
    committed = json.loads((REPO_DIR / "docs" / "telemetry.schema.json").read_text())
    assert committed == json_schema(), (
        "run `sumpwatch schema --out docs/telemetry.schema.json` and commit the file"
    )


def test_a_valid_pit_message_becomes_a_reading_in_utc() -> None:
    ts = NOW.astimezone().replace(microsecond=0) - timedelta(seconds=5)
    result = _validate(pit_payload(ts=ts, level_cm=31.5, pump_on=True))
    assert isinstance(result, Reading)
    assert result.kind is NodeKind.PIT
    assert result.ts == ts and result.ts.tzinfo == UTC
    assert result.values == {"level_cm": 31.5, "pump_on": True, "water_temp_c": 10.5}


def test_status_messages_become_status_changes() -> None:
    result = _validate(b"offline", "sumpwatch/v1/elm-12/pit/status")
    assert result == StatusChange("elm-12", "pit", False, NOW)
    assert _reason(b"sleeping", "sumpwatch/v1/elm-12/pit/status") == "bad_status"


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"readings": {"level_cm": "20", "pump_on": False}}, "wrong_type"),
        ({"readings": {"level_cm": 20, "pump_on": 1}}, "wrong_type"),
        ({"readings": {"level_cm": -1, "pump_on": False}}, "out_of_range"),
        ({"readings": {"level_cm": 20, "pump_on": False, "depth": 3}}, "unknown_field"),
        ({"readings": {"pump_on": False}}, "missing_field"),
        ({"kind": "sewer"}, "unknown_kind"),
        ({"boot": "Not OK!"}, "bad_value"),
        ({"v": 2}, "bad_value"),
        ({"site_id": "oak-3"}, "identity_mismatch"),
        ({"ts": "2026-11-29T18:10:00Z"}, "clock_ahead"),
        ({"ts": "1970-01-01T00:00:00Z"}, "too_old"),
        ({"ts": "2026-11-29T18:00:00"}, "bad_value"),
    ],
)
def test_invalid_payloads_are_refused_with_a_stable_reason(
    change: dict[str, object], reason: str
) -> None:
    payload = pit_payload(ts=NOW)
    payload.update(change)
    assert _reason(payload) == reason


def test_nan_and_infinity_are_out_of_range() -> None:
    text = json.dumps(pit_payload(ts=NOW)).replace('"level_cm": 25.0', '"level_cm": NaN')
    assert _reason(text.encode()) == "out_of_range"
    text = text.replace("NaN", "Infinity")
    assert _reason(text.encode()) == "out_of_range"


def test_not_json_and_oversized_payloads_are_refused() -> None:
    assert _reason(b"\xff\xfe garbage") == "not_json"
    assert _reason(b"[1, 2, 3]") == "wrong_type"
    assert _reason(b"x" * 5000) == "payload_too_large"


@pytest.mark.parametrize(
    "topic",
    [
        "sumpwatch/v1/elm-12/pit",
        "sumpwatch/v2/elm-12/pit/telemetry",
        "sumpwatch/v1/Elm-12/pit/telemetry",
        "sumpwatch/v1/elm 12/pit/telemetry",
        "sumpwatch/v1/elm-12/pit/commands",
        "sumpwatch/v1/" + "a" * 65 + "/pit/telemetry",
    ],
)
def test_topics_outside_the_contract_are_refused(topic: str) -> None:
    assert parse_topic(topic) is None
    assert _reason(pit_payload(ts=NOW), topic) == "unknown_topic"


def test_every_field_name_carries_its_unit() -> None:
    for name, spec in FIELDS.items():
        assert spec.is_bool or name.rsplit("_", 1)[-1] in {"cm", "lpm", "kpa", "c", "a"}, name
