"""Deliberately broken delivery for the ``bad_payloads`` scenario.

Wraps a clean message stream and, for a share of telemetry messages, garbles
the payload, repeats it (QoS 1 redelivery), delays it (out-of-order delivery)
or skews the node's clock for a run of its messages. Every change is recorded
as a :class:`BadItem` with the index of the affected message in the output.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from gateway.contract import MAX_PAYLOAD_BYTES

if TYPE_CHECKING:
    from firmware_sim.engine import Message
    from firmware_sim.scenario import BadPayloadsModel

#: Kinds whose payload still validates (the gateway must dedupe/reorder, not refuse).
VALID_KINDS = frozenset({"duplicate", "out_of_order", "clock_skew_past"})
#: How many consecutive messages of a node a clock-skew episode lasts.
SKEW_RUN = 6


@dataclass(frozen=True, slots=True)
class BadItem:
    """One deliberately broken or disordered message in the output stream."""

    index: int
    kind: str
    topic: str
    valid: bool

    def as_json(self) -> dict[str, Any]:
        """The item as it appears in the labels file."""
        return {"index": self.index, "kind": self.kind, "topic": self.topic, "valid": self.valid}


def _edit(payload: bytes, change: Any) -> bytes:
    doc = json.loads(payload)
    change(doc)
    return json.dumps(doc, separators=(",", ":")).encode()


def _shift_ts(doc: dict[str, Any], seconds: float) -> None:
    when = datetime.fromisoformat(doc["ts"].replace("Z", "+00:00")) + timedelta(seconds=seconds)
    doc["ts"] = when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"


def _out_of_range(doc: dict[str, Any]) -> None:
    readings = doc["readings"]
    if "level_cm" in readings:
        readings["level_cm"] = 999.0
    elif "flow_lpm" in readings:
        readings["flow_lpm"] = -12.5
    else:
        readings["air_temp_c"] = 99.9


def _garble(kind: str, payload: bytes) -> bytes:
    if kind == "malformed_json":
        return payload[: len(payload) // 2]
    if kind == "not_utf8":
        return b"\xff\xfe" + payload[2:]
    if kind == "schema_violation":
        return _edit(payload, lambda d: d.pop("seq"))
    if kind == "out_of_range":
        return _edit(payload, _out_of_range)
    if kind == "topic_mismatch":
        return _edit(payload, lambda d: d.update(site_id="not-this-site"))
    if kind == "oversize":
        return payload + b" " * (MAX_PAYLOAD_BYTES + 1 - len(payload))
    raise ValueError(kind)


def corrupt(
    stream: Iterator[Message],
    cfg: BadPayloadsModel,
    rng: random.Random,
    items: list[BadItem],
) -> Iterator[Message]:
    """The stream with a share ``cfg.rate`` of telemetry messages broken; fills ``items``."""
    index = 0
    held: list[tuple[int, Message]] = []  # (messages still to pass, message)
    skew: dict[str, tuple[int, float, str]] = {}  # topic -> (messages left, seconds, kind)

    def emit(msg: Message, kind: str | None) -> Message:
        nonlocal index
        if kind is not None:
            items.append(BadItem(index, kind, msg.topic, kind in VALID_KINDS))
        index += 1
        return msg

    for msg in stream:
        if msg.retain:
            yield emit(msg, None)
            continue
        ready = [m for n, m in held if n <= 0]
        held = [(n - 1, m) for n, m in held if n > 0]
        out: list[tuple[Message, str | None]]
        if msg.topic in skew:
            out = [_skew_on(msg, skew)]
        else:
            kind = rng.choice(cfg.kinds) if rng.random() < cfg.rate else None
            out = _break(msg, kind, cfg, rng, held, skew)
        for broken, why in out:
            yield emit(broken, why)
        for late in ready:
            yield emit(late, "out_of_order")
    for _, late in held:
        yield emit(late, "out_of_order")


def _skew_on(msg: Message, skew: dict[str, tuple[int, float, str]]) -> tuple[Message, str]:
    """The node's clock stays wrong for a run of its messages."""
    left, seconds, kind = skew.pop(msg.topic)
    if left > 1:
        skew[msg.topic] = (left - 1, seconds, kind)
    return replace(msg, payload=_edit(msg.payload, lambda d: _shift_ts(d, seconds))), kind


def _break(
    msg: Message,
    kind: str | None,
    cfg: BadPayloadsModel,
    rng: random.Random,
    held: list[tuple[int, Message]],
    skew: dict[str, tuple[int, float, str]],
) -> list[tuple[Message, str | None]]:
    """What to emit now for ``msg`` broken as ``kind`` (held ones come out later)."""
    if kind == "out_of_order":
        held.append((rng.randint(1, cfg.max_delay_messages), msg))
        return []
    if kind in ("clock_skew_future", "clock_skew_past"):
        seconds = cfg.skew_future_s if kind == "clock_skew_future" else -cfg.skew_past_s
        skew[msg.topic] = (SKEW_RUN - 1, seconds, kind)
        return [(replace(msg, payload=_edit(msg.payload, lambda d: _shift_ts(d, seconds))), kind)]
    if kind == "duplicate":
        return [(msg, None), (msg, kind)]
    if kind is not None:
        return [(replace(msg, payload=_garble(kind, msg.payload)), kind)]
    return [(msg, None)]
