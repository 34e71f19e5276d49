"""The validator's fast decoding (msgspec structs derived from the contract's pydantic
models) takes only what pydantic takes, and reads it as pydantic does.

Whatever the fast path refuses goes to pydantic, so refusals keep pydantic's reasons
and wording (tests/test_contract.py, tests/test_badinput.py); what is pinned here is
that the fast path never accepts a payload pydantic refuses and never decodes a value
differently."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gateway.contract import TELEMETRY_ADAPTER
from gateway.validate import decode as fast
from tests.test_badinput import PROPS, valid_messages

#: Values a mutation may put in place of any field: wrong types, edge numbers, text
#: with a final newline, other spellings of a time.
ODD_VALUES: list[Any] = [
    None,
    True,
    0,
    1,
    -1,
    1.0,
    0.5,
    2**32,
    1e308,
    -0.0,
    "",
    "pit",
    "abc\n",
    "2026-11-29T12:00:00Z",
    "2026-11-29 12:00:00Z",
    "2026-11-29T12:00:00.1234567Z",
    "2026-11-29t12:00:00z",
    "2026-11-29T12:00Z",
    "20261129T120000Z",
    "2026-11-29T12:00:00+23:59",
    "2026-11-29T12:00:00+24:00",
    "2026-02-30T12:00:00Z",
    "2026-11-29T12:00:60Z",
    "2026-11-29T12:00:00",
    "1764417600",
    [],
    {},
]


def pydantic_view(payload: bytes) -> tuple[Any, ...] | None:
    """What the contract's models read from a payload; None when they refuse it."""
    try:
        msg = TELEMETRY_ADAPTER.validate_json(payload)
    except ValidationError:
        return None
    values = {k: v for k, v in msg.readings.__dict__.items() if v is not None}
    ids = (msg.site_id, msg.node_id, msg.seq, msg.boot, msg.battery_v, msg.rssi_dbm)
    return (*ids, msg.kind, msg.ts, msg.ts.utcoffset(), values)


def fast_view(payload: bytes) -> tuple[Any, ...] | None:
    """The same read by the fast path; None when it leaves the payload to pydantic."""
    decoded = fast.decode(payload)
    if decoded is None:
        return None
    msg, kind, when, values = decoded
    ids = (msg.site_id, msg.node_id, msg.seq, msg.boot, msg.battery_v, msg.rssi_dbm)
    return (*ids, kind, when, when.utcoffset(), values)


def agrees(payload: bytes) -> None:
    """The fast path takes a subset of what pydantic takes, with the same values."""
    got = fast_view(payload)
    if got is not None:
        assert got == pydantic_view(payload), payload


@PROPS
@given(valid_messages())
def test_a_valid_message_is_decoded_by_the_fast_path_as_pydantic_decodes_it(
    msg: tuple[str, dict[str, Any]],
) -> None:
    payload = json.dumps(msg[1]).encode()
    got = fast_view(payload)
    assert got is not None
    assert got == pydantic_view(payload)


@PROPS
@given(valid_messages(), st.data())
def test_a_mutated_message_is_never_taken_by_the_fast_path_alone(
    msg: tuple[str, dict[str, Any]], data: st.DataObject
) -> None:
    payload = msg[1]
    target = data.draw(st.sampled_from([payload, payload["readings"]]))
    key = data.draw(st.sampled_from([*target, "extra"]))
    target[key] = data.draw(st.sampled_from(ODD_VALUES))
    agrees(json.dumps(payload).encode())


@pytest.mark.parametrize("field", ["site_id", "node_id", "boot"])
def test_an_id_ending_in_a_newline_is_left_to_pydantic(field: str) -> None:
    # Python's "$" matches before a final newline; the contract's pattern does not.
    payload = _pit()
    payload[field] += "\n"
    assert fast.decode(json.dumps(payload).encode()) is None
    assert pydantic_view(json.dumps(payload).encode()) is None


def test_seven_fractional_digits_are_left_to_pydantic_which_truncates_them() -> None:
    payload = _pit(ts="2026-11-29T12:00:00.1234567Z")
    raw = json.dumps(payload).encode()
    assert fast.decode(raw) is None
    view = pydantic_view(raw)
    assert view is not None and view[7] == datetime(2026, 11, 29, 12, 0, 0, 123456, tzinfo=UTC)


def test_a_time_with_an_offset_keeps_its_offset() -> None:
    raw = json.dumps(_pit(ts="2026-11-29T13:00:00.5+01:00")).encode()
    got = fast_view(raw)
    assert got is not None and got == pydantic_view(raw)
    assert got[7] == datetime(2026, 11, 29, 12, 0, 0, 500000, tzinfo=UTC)


def test_duplicate_keys_take_the_last_value_as_pydantic_does() -> None:
    raw = json.dumps(_pit()).encode().replace(b'"seq": 7', b'"seq": 7, "seq": 8')
    got = fast_view(raw)
    assert got is not None and got[2] == 8
    assert got == pydantic_view(raw)


def test_a_constraint_the_fast_path_cannot_mirror_fails_at_import_time() -> None:
    class Odd(BaseModel):
        model_config = ConfigDict(extra="forbid", strict=True)
        name: str = Field(max_length=3)

    with pytest.raises(TypeError, match="cannot mirror"):
        fast._struct(Odd)


def test_a_model_that_allows_extra_fields_is_not_mirrored() -> None:
    class Lax(BaseModel):
        model_config = ConfigDict(strict=True)
        x: float

    with pytest.raises(TypeError, match="extra fields forbidden"):
        fast._struct(Lax)


def _pit(ts: str = "2026-11-29T12:00:00.000100Z") -> dict[str, Any]:
    return {
        "v": 1,
        "site_id": "elm-12",
        "node_id": "pit",
        "ts": ts,
        "seq": 7,
        "boot": "b1",
        "kind": "pit",
        "readings": {"level_cm": 20.0, "pump_on": False},
    }


def test_the_readings_of_one_node_share_one_copy_of_its_ids() -> None:
    # Messages in flight and the engine's per-boot ledger hold these strings.
    first = fast.decode(json.dumps(_pit()).encode())
    second = fast.decode(json.dumps({**_pit(), "seq": 8}).encode())
    assert first is not None and second is not None
    assert first[0].site_id is second[0].site_id
    assert first[0].boot is second[0].boot
