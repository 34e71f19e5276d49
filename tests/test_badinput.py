"""Issue 7, bad input: every malformed message is dead-lettered with a clear reason,
the gateway never raises or stalls, and valid traffic keeps flowing.

Property tests (hypothesis) drive the validation stage directly (it is pure);
one integration test sends a seeded mix through a real Mosquitto and gateway.
"""

from __future__ import annotations

import asyncio
import json
import math
import random
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from gateway.broker import BrokerProcess
from gateway.contract import FIELDS, ID_RE, MAX_PAYLOAD_BYTES, NodeKind, parse_topic
from gateway.domain import DeadLetter, RawMessage, Reading, StatusChange
from gateway.runtime import Runtime
from gateway.store.base import SeriesQuery
from gateway.validate.validator import REASONS, Validator
from tests.mqtt_helpers import pit_messages, publish, wait_until

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
SKEW_S = 300.0
MAX_AGE_S = 90 * 86400.0
VALIDATOR = Validator(max_future_skew_s=SKEW_S, max_age_s=MAX_AGE_S, clock=lambda: NOW)
PROPS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

ids = st.from_regex(r"[a-z0-9_-]{1,64}", fullmatch=True)
boots = st.from_regex(r"[a-z0-9]{1,32}", fullmatch=True)
in_window = st.datetimes(
    min_value=(NOW - timedelta(days=89)).replace(tzinfo=None),
    max_value=(NOW + timedelta(seconds=SKEW_S - 1)).replace(tzinfo=None),
).map(lambda d: d.replace(tzinfo=UTC))


def finite(lo: float, hi: float) -> st.SearchStrategy[float]:
    return st.floats(min_value=lo, max_value=hi, allow_nan=False, allow_infinity=False)


READINGS: dict[NodeKind, st.SearchStrategy[dict[str, Any]]] = {
    NodeKind.PIT: st.fixed_dictionaries(
        {"level_cm": finite(0, 300), "pump_on": st.booleans()},
        optional={
            "water_temp_c": finite(-5, 50),
            "backup_pump_on": st.booleans(),
            "pump_current_a": finite(0, 40),
        },
    ),
    NodeKind.DISCHARGE: st.fixed_dictionaries(
        {
            "flow_lpm": finite(0, 1000),
            "pressure_kpa": finite(-50, 700),
            "pipe_temp_c": finite(-50, 70),
        }
    ),
    NodeKind.AIR: st.fixed_dictionaries({"air_temp_c": finite(-60, 60)}),
}


@st.composite
def valid_messages(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    """A topic and a payload that satisfy the contract."""
    site, node, kind = draw(ids), draw(ids), draw(st.sampled_from(list(NodeKind)))
    payload: dict[str, Any] = {
        "v": 1,
        "site_id": site,
        "node_id": node,
        "ts": draw(in_window).isoformat().replace("+00:00", "Z"),
        "seq": draw(st.integers(0, 2**32 - 1)),
        "boot": draw(boots),
        "kind": kind.value,
        "readings": draw(READINGS[kind]),
    }
    if draw(st.booleans()):
        payload["battery_v"] = draw(finite(0, 15))
    return f"sumpwatch/v1/{site}/{node}/telemetry", payload


def judge(topic: str, payload: bytes | str | dict[str, Any]) -> Reading | StatusChange | DeadLetter:
    if isinstance(payload, dict):
        payload = json.dumps(payload)
    if isinstance(payload, str):
        payload = payload.encode()
    return VALIDATOR.validate(RawMessage(topic, payload, NOW))


def refused(result: object, reason: str | None = None) -> DeadLetter:
    """The result is a dead letter with a known reason and a readable detail."""
    assert isinstance(result, DeadLetter), result
    assert result.reason in REASONS
    assert result.detail.strip()
    if reason is not None:
        assert result.reason == reason, (result.reason, result.detail)
    return result


# --- positive control: the strategies do produce valid messages -----------------------


@PROPS
@given(valid_messages())
def test_a_valid_message_becomes_a_reading_with_its_values(msg: tuple[str, dict[str, Any]]) -> None:
    topic, payload = msg
    reading = judge(topic, payload)
    assert isinstance(reading, Reading)
    assert (reading.site_id, reading.node_id, reading.seq) == (
        payload["site_id"],
        payload["node_id"],
        payload["seq"],
    )
    assert dict(reading.values) == payload["readings"]


# --- never raises ------------------------------------------------------------------


@PROPS
@given(topic=st.text(max_size=120), payload=st.binary(max_size=2 * MAX_PAYLOAD_BYTES))
def test_any_topic_and_bytes_end_as_exactly_one_outcome(topic: str, payload: bytes) -> None:
    result = VALIDATOR.validate(RawMessage(topic, payload, NOW))
    assert isinstance(result, Reading | StatusChange | DeadLetter)
    if isinstance(result, DeadLetter):
        refused(result)


@PROPS
@given(valid_messages(), st.binary(max_size=600))
def test_random_bytes_on_a_telemetry_topic_are_refused(
    msg: tuple[str, dict[str, Any]], junk: bytes
) -> None:
    topic, _ = msg
    letter = refused(judge(topic, junk))
    assert letter.payload == junk


@PROPS
@given(valid_messages(), st.integers(MAX_PAYLOAD_BYTES + 1, 64 * 1024))
def test_payloads_over_the_cap_are_refused_before_parsing(
    msg: tuple[str, dict[str, Any]], size: int
) -> None:
    topic, payload = msg
    text = json.dumps(payload)
    padded = text[:-1] + ', "pad": "' + "x" * max(0, size - len(text) - 12) + '"}'
    assume(len(padded) > MAX_PAYLOAD_BYTES)
    refused(judge(topic, padded), "payload_too_large")


# --- values ------------------------------------------------------------------------

NON_FINITE = st.sampled_from(["NaN", "Infinity", "-Infinity", "1e400", "-1e999"])
NUMERIC_FIELDS = {k: v for k, v in FIELDS.items() if not v.is_bool}


@PROPS
@given(valid_messages(), NON_FINITE, st.data())
def test_nan_and_infinity_are_out_of_range(
    msg: tuple[str, dict[str, Any]], token: str, data: st.DataObject
) -> None:
    topic, payload = msg
    names = [n for n in payload["readings"] if n in NUMERIC_FIELDS] + ["battery_v"]
    name = data.draw(st.sampled_from(names))
    marker = 123456.789
    if name == "battery_v":
        payload["battery_v"] = marker
    else:
        payload["readings"][name] = marker
    text = json.dumps(payload).replace(repr(marker), token)
    refused(judge(topic, text), "out_of_range")


WRONG_JSON = st.one_of(
    st.text(max_size=10),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=2),
)


@PROPS
@given(valid_messages(), WRONG_JSON, st.data())
def test_values_of_the_wrong_type_are_refused(
    msg: tuple[str, dict[str, Any]], value: Any, data: st.DataObject
) -> None:
    topic, payload = msg
    where = data.draw(st.sampled_from(["seq", "battery_v", *payload["readings"]]))
    target = payload if where in ("seq", "battery_v") else payload["readings"]
    target[where] = value
    refused(judge(topic, payload), "wrong_type")


@PROPS
@given(valid_messages(), st.sampled_from([1.5, True, "7", None, -1, 2**32]))
def test_a_bad_sequence_number_is_refused(msg: tuple[str, dict[str, Any]], seq: Any) -> None:
    topic, payload = msg
    payload["seq"] = seq
    refused(judge(topic, payload))


@PROPS
@given(valid_messages(), st.text(min_size=1, max_size=20), st.booleans(), st.integers())
def test_unknown_fields_are_refused(
    msg: tuple[str, dict[str, Any]], name: str, in_readings: bool, value: int
) -> None:
    topic, payload = msg
    target = payload["readings"] if in_readings else payload
    assume(name not in target and name not in ("battery_v", "rssi_dbm"))
    assume(name not in FIELDS)
    target[name] = value
    letter = refused(judge(topic, payload), "unknown_field")
    assert name in letter.detail or "Extra inputs" in letter.detail


@PROPS
@given(valid_messages(), st.sampled_from(["v", "site_id", "node_id", "ts", "seq", "boot"]))
def test_a_missing_required_field_is_refused(msg: tuple[str, dict[str, Any]], name: str) -> None:
    topic, payload = msg
    del payload[name]
    refused(judge(topic, payload), "missing_field")


# --- time ----------------------------------------------------------------------------

offsets = st.integers(-14 * 60, 14 * 60).map(lambda m: timezone(timedelta(minutes=m)))


@PROPS
@given(
    valid_messages(),
    st.datetimes(
        min_value=(NOW + timedelta(seconds=SKEW_S + 1)).replace(tzinfo=None),
        max_value=datetime(9999, 12, 30),
    ),
)
def test_timestamps_ahead_of_the_clock_allowance_are_refused(
    msg: tuple[str, dict[str, Any]], ts: datetime
) -> None:
    topic, payload = msg
    payload["ts"] = ts.replace(tzinfo=UTC).isoformat()
    refused(judge(topic, payload), "clock_ahead")


@PROPS
@given(
    valid_messages(),
    st.datetimes(
        min_value=datetime(1, 1, 2),
        max_value=(NOW - timedelta(seconds=MAX_AGE_S + 1)).replace(tzinfo=None),
    ),
    offsets,
)
def test_timestamps_older_than_the_window_are_refused(
    msg: tuple[str, dict[str, Any]], ts: datetime, tz: timezone
) -> None:
    topic, payload = msg
    payload["ts"] = ts.replace(tzinfo=UTC).astimezone(tz).isoformat()
    refused(judge(topic, payload), "too_old")


@PROPS
@given(valid_messages(), st.datetimes(timezones=st.just(None)))
def test_timestamps_without_a_utc_offset_are_refused(
    msg: tuple[str, dict[str, Any]], ts: datetime
) -> None:
    topic, payload = msg
    payload["ts"] = ts.isoformat()
    refused(judge(topic, payload), "bad_value")


@PROPS
@given(valid_messages(), in_window, offsets)
def test_any_utc_offset_inside_the_window_is_accepted_and_normalised(
    msg: tuple[str, dict[str, Any]], ts: datetime, tz: timezone
) -> None:
    topic, payload = msg
    payload["ts"] = ts.astimezone(tz).isoformat()
    reading = judge(topic, payload)
    assert isinstance(reading, Reading)
    assert reading.ts == ts
    assert reading.ts.utcoffset() == timedelta(0)


# --- identities and topics ----------------------------------------------------------

bad_ids = st.text(min_size=1, max_size=70).filter(lambda s: not ID_RE.match(s))
hostile_ids = st.sampled_from(["+", "#", "a/b", "élm", "ELM-12", "elm 12", "", "x" * 65, "\x00"])


@PROPS
@given(valid_messages(), st.one_of(bad_ids, hostile_ids), st.sampled_from(["site_id", "node_id"]))
def test_ids_outside_the_contract_in_the_payload_are_refused(
    msg: tuple[str, dict[str, Any]], bad: str, name: str
) -> None:
    topic, payload = msg
    payload[name] = bad
    refused(judge(topic, payload), "bad_value")


@PROPS
@given(valid_messages(), ids, ids)
def test_a_payload_naming_another_site_or_node_than_its_topic_is_refused(
    msg: tuple[str, dict[str, Any]], site: str, node: str
) -> None:
    _, payload = msg
    assume((site, node) != (payload["site_id"], payload["node_id"]))
    letter = refused(judge(f"sumpwatch/v1/{site}/{node}/telemetry", payload), "identity_mismatch")
    assert payload["site_id"] in letter.detail and site in letter.detail


level = st.one_of(ids, bad_ids, hostile_ids)


@st.composite
def off_contract_topics(draw: st.DrawFn) -> str:
    """Topics that a subscription may deliver (or a client send) but the contract
    does not allow: wrong root or version, bad ids, other channels, extra levels."""
    levels = draw(
        st.one_of(
            st.lists(level, min_size=0, max_size=8),
            st.tuples(
                st.sampled_from(["sumpwatch", "SumpWatch", "sumpwatch ", "$SYS"]),
                st.sampled_from(["v1", "v2", "V1", "v0"]),
                level,
                level,
                st.sampled_from(["telemetry", "status", "alerts", "Telemetry", "x", ""]),
            ).map(list),
            st.tuples(ids, ids).map(lambda t: ["sumpwatch", "v1", *t, "telemetry", "extra"]),
        )
    )
    topic = "/".join(levels)
    assume(parse_topic(topic) is None)
    return topic


@PROPS
@given(off_contract_topics(), valid_messages())
def test_topics_that_do_not_match_the_contract_are_refused(
    topic: str, msg: tuple[str, dict[str, Any]]
) -> None:
    refused(judge(topic, msg[1]), "unknown_topic")


@PROPS
@given(ids, ids, st.binary(max_size=50))
def test_a_status_other_than_online_or_offline_is_refused(
    site: str, node: str, body: bytes
) -> None:
    assume(body.strip() not in (b"online", b"offline"))
    refused(judge(f"sumpwatch/v1/{site}/{node}/status", body), "bad_status")


# --- through the real gateway ---------------------------------------------------------


def hostile_mix(seed: int, count: int) -> list[tuple[str, bytes, str]]:
    """``count`` bad messages a broker will carry, each with the reason expected."""
    rng = random.Random(seed)
    good = json.loads(pit_messages(1, "elm-16", "pit")[0][1])
    topic = "sumpwatch/v1/elm-16/pit/telemetry"

    def variant(**changes: Any) -> bytes:
        payload = json.loads(json.dumps(good))
        payload["seq"] = rng.randrange(10**6)
        for key, value in changes.items():
            if key.startswith("r_"):
                payload["readings"][key[2:]] = value
            else:
                payload[key] = value
        return json.dumps(payload).encode()

    makers = [
        lambda: (topic, rng.randbytes(rng.randrange(1, 300)), None),
        lambda: (topic, b"x" * rng.randrange(MAX_PAYLOAD_BYTES + 1, 60_000), "payload_too_large"),
        lambda: (topic, variant(r_level_cm=1e308).replace(b"1e+308", b"NaN"), "out_of_range"),
        lambda: (topic, variant(r_level_cm=rng.choice(["20", [1], {"a": 1}])), "wrong_type"),
        lambda: (topic, variant(firmware="1.2.3"), "unknown_field"),
        lambda: (topic, variant(ts="2999-01-01T00:00:00Z"), "clock_ahead"),
        lambda: (topic, variant(ts="1999-01-01T00:00:00Z"), "too_old"),
        lambda: (topic, variant(site_id="élm-16"), "bad_value"),
        lambda: (topic, variant(node_id="outlet"), "identity_mismatch"),
        lambda: ("sumpwatch/v1/Élm 16/pit/telemetry", variant(), "unknown_topic"),
        lambda: (
            "sumpwatch/v1/elm-16/pit/status",
            rng.choice([b"maybe", b"", b"\xff"]),
            "bad_status",
        ),
    ]
    out = []
    for _ in range(count):
        t, payload, reason = rng.choice(makers)()
        if reason is None:  # random bytes: whatever the validator says, as long as refused
            result = VALIDATOR.validate(RawMessage(t, payload, datetime.now(UTC)))
            assert isinstance(result, DeadLetter)
            reason = result.reason
        out.append((t, payload, reason))
    return out


@pytest.mark.integration
async def test_hostile_traffic_is_dead_lettered_while_valid_traffic_keeps_flowing(
    gateway: Runtime, mosquitto: BrokerProcess
) -> None:
    bad = hostile_mix(seed=20261129, count=300)
    good = pit_messages(1500, "elm-16", "pit", boot="g00d")
    rng = random.Random(1)
    stream: list[tuple[str, bytes]] = [(t, p) for t, p, _ in bad] + good
    rng.shuffle(stream)
    await asyncio.to_thread(publish, mosquitto.host, mosquitto.port, stream)

    async def all_judged() -> bool:
        counts = await gateway.state.deadletter_counts()
        return sum(counts.values()) >= len(bad) and await gateway.store.count() >= len(good)

    await wait_until(all_judged, 30)
    await asyncio.sleep(0.3)
    expected: dict[str, int] = {}
    for _, _, reason in bad:
        expected[reason] = expected.get(reason, 0) + 1
    assert await gateway.state.deadletter_counts() == expected
    assert await gateway.store.count() == len(good)
    # Still connected and ingesting: nothing stalled.
    assert gateway.source.connected
    more = pit_messages(100, "elm-16", "pit", boot="after")
    await asyncio.to_thread(publish, mosquitto.host, mosquitto.port, more)

    async def flowing() -> bool:
        return await gateway.store.count() == len(good) + len(more)

    await wait_until(flowing, 15)
    letters = await gateway.state.deadletters(limit=1000)
    assert all(d.detail for d in letters)
    rows = await gateway.store.readings(SeriesQuery("elm-16", limit=5000))
    assert all(math.isfinite(r.number("level_cm") or 0.0) for r in rows)
    assert {r.boot for r in rows} == {"g00d", "after"}
