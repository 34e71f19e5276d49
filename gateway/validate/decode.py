"""A telemetry payload decoded straight into typed structs: the validator's fast path.

The contract's pydantic models (``gateway.contract``) stay the single source of truth:
the msgspec structs here are *derived* from them at import (field names, types, bounds,
patterns, defaults, unknown fields forbidden), and anything the derivation does not
know how to mirror exactly fails at import rather than being mirrored loosely.

Why: pydantic's ``validate_json`` and then building a ``Reading`` from the model was
19 % of the gateway's main thread at 1,000 sites (docs/performance.md, issue 17);
msgspec decodes the same bytes into slotted structs several times faster.

The fast path may only ever *refuse more* than pydantic, never accept more or decode
a different value: whatever it refuses is decoded again by pydantic, whose verdict and
error messages (the dead letters' reasons and details) are the contract's. Where the
two parsers differ it is made stricter than pydantic:

* string patterns (the ids) are checked after decoding by a full match, cached per
  distinct id (a regex per id per message was half of msgspec's decoding time), not
  with Python's ``$``, which also matches before a final newline where pydantic's
  (Rust) does not;
* the device time is taken only in the one RFC 3339 form nodes send
  (``YYYY-MM-DDTHH:MM:SS[.ffffff](Z|+HH:MM)``, ASCII digits, at most 6 fractional
  digits, which both parsers read alike); any other spelling pydantic may accept
  (a space for ``T``, 7 fractional digits, which it truncates where msgspec rounds)
  goes to pydantic.

``tests/test_contract.py`` checks the two agree on every valid and invalid payload of
the contract tests and on a corpus of mutated payloads.
"""

from __future__ import annotations

import operator
import re
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, Protocol, Union, get_args, get_origin

import annotated_types
import msgspec
from pydantic import AwareDatetime, BaseModel
from pydantic.fields import FieldInfo

from gateway.contract import AirTelemetry, DischargeTelemetry, NodeKind, PitTelemetry

#: The one RFC 3339 spelling taken on the fast path (see the module docstring).
_TS = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,6})?"
    r"(?:Z|[+-][0-9]{2}:[0-9]{2})"
)


class FastTelemetry(Protocol):
    """What the validator reads of a decoded payload (either parser's)."""

    site_id: str
    node_id: str
    seq: int
    boot: str
    battery_v: float | None
    rssi_dbm: float | None


def _meta(info: FieldInfo) -> tuple[msgspec.Meta | None, str | None]:
    """The field's bounds as msgspec's and its pattern; an error for a constraint
    it cannot mirror."""
    bounds: dict[str, Any] = {}
    pattern: str | None = None
    for item in info.metadata:
        if isinstance(item, annotated_types.Ge):
            bounds["ge"] = item.ge
        elif isinstance(item, annotated_types.Le):
            bounds["le"] = item.le
        elif isinstance(item, annotated_types.Gt):
            bounds["gt"] = item.gt
        elif isinstance(item, annotated_types.Lt):
            bounds["lt"] = item.lt
        elif getattr(item, "pattern", None) is not None and len(vars(item)) == 1:
            pattern = item.pattern
        else:
            raise TypeError(f"cannot mirror the constraint {item!r}")
    return (msgspec.Meta(**bounds) if bounds else None), pattern


def _ids_check(patterns: list[str]) -> Callable[[tuple[str, ...]], tuple[str, ...] | None]:
    """The canonical copy of ids that each fully match their anchored pattern, or None.

    Ids repeat (a fleet's few thousand sites, nodes and boots), so one dict lookup
    replaces three regexes a message, and every reading of a node shares one copy of its
    id strings, as pydantic's string cache did (msgspec makes new ones each message:
    ~170 bytes a message held in flight). Bounded: random hostile ids only refill it.
    ``fullmatch``, not ``$``: Python's ``$`` also matches before a final newline,
    pydantic's (Rust) does not."""
    compiled = []
    for pattern in patterns:
        if not (pattern.startswith("^") and pattern.endswith("$")):
            raise TypeError(f"cannot mirror the unanchored pattern {pattern!r}")
        compiled.append(re.compile(pattern[1:-1]).fullmatch)
    known: dict[tuple[str, ...], tuple[str, ...]] = {}

    def canonical(texts: tuple[str, ...]) -> tuple[str, ...] | None:
        found = known.get(texts)
        if found is not None:
            return found
        if not all(m(t) is not None for m, t in zip(compiled, texts, strict=True)):
            return None
        if len(known) >= _IDS_KEPT:
            known.clear()
        known[texts] = texts
        return texts

    return canonical


#: Distinct id tuples remembered (a fleet has a few thousand).
_IDS_KEPT = 65536


def _type(annotation: Any, info: FieldInfo) -> Any:
    """The msgspec type of one pydantic field (bounds on the non-None part); patterns
    are checked after decoding (``_Shape.checks``)."""
    if annotation is AwareDatetime:
        return str  # checked and parsed by device_time()
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return _struct(annotation).struct
    meta, _pattern = _meta(info)
    origin = get_origin(annotation)
    if origin in (Union, types.UnionType):
        args = get_args(annotation)
        inner = [a for a in args if a is not type(None)]
        if len(inner) != 1 or len(args) != 2 or inner[0] not in (float, bool, int):
            raise TypeError(f"cannot mirror {annotation!r}")
        base = inner[0] if meta is None else typing.Annotated[inner[0], meta]
        return base | None
    if origin is Literal or annotation in (float, bool, int, str):
        return annotation if meta is None else typing.Annotated[annotation, meta]
    raise TypeError(f"cannot mirror {annotation!r}")


@dataclass(frozen=True, slots=True)
class _Shape:
    """A model's struct and the pattern check of its string fields (``names``): ``ids``
    reads them as a tuple, ``check`` gives their canonical copy if every one matches its
    pattern, else None."""

    struct: type[msgspec.Struct]
    ids: Callable[[Any], Any]
    check: Callable[[tuple[str, ...]], tuple[str, ...] | None]
    names: tuple[str, ...]


def _struct(model: type[BaseModel], tag: tuple[str, str] | None = None) -> _Shape:
    """A msgspec struct with the model's fields, unknown fields refused, as the model
    (``extra="forbid"``, strict) does. ``tag``: the discriminating field and its value,
    which the struct's type stands for instead of holding it."""
    if model.model_config.get("extra") != "forbid" or not model.model_config.get("strict"):
        raise TypeError(f"{model.__name__} is not strict with extra fields forbidden")
    fields: list[Any] = []
    patterned: dict[str, str] = {}
    for name, info in model.model_fields.items():
        if tag is not None and name == tag[0]:
            continue
        kind = _type(info.annotation, info)
        pattern = _meta(info)[1]
        if pattern is not None:
            if info.annotation is not str or tag is None:
                raise TypeError(f"cannot mirror the pattern of {model.__name__}.{name}")
            patterned[name] = pattern
        fields.append((name, kind) if info.is_required() else (name, kind, info.default))
    struct = msgspec.defstruct(
        model.__name__,
        fields,
        forbid_unknown_fields=True,
        kw_only=True,  # a JSON object has no order: required fields may follow optional
        tag_field=None if tag is None else tag[0],
        tag=None if tag is None else tag[1],
        gc=False,  # no cycles: not tracked by the collector
    )
    if not patterned:
        return _Shape(struct, lambda _msg: (), lambda ids: ids, ())
    names = tuple(patterned)
    get = operator.attrgetter(*names)
    ids = get if len(names) > 1 else lambda msg: (get(msg),)
    return _Shape(struct, ids, _ids_check([patterned[n] for n in names]), names)


#: Each telemetry model's shape by its struct, with the ``kind`` it is tagged with.
_SHAPES: dict[type[msgspec.Struct], tuple[_Shape, NodeKind]] = {
    shape.struct: (shape, kind)
    for shape, kind in (
        (_struct(model, ("kind", kind.value)), kind)
        for model, kind in (
            (PitTelemetry, NodeKind.PIT),
            (DischargeTelemetry, NodeKind.DISCHARGE),
            (AirTelemetry, NodeKind.AIR),
        )
    )
}
_DECODER: msgspec.json.Decoder[Any] = msgspec.json.Decoder(Union[tuple(_SHAPES)])  # noqa: UP007


#: A decoded payload: its fields, kind, device time and the readings it has (no None).
Decoded = tuple[FastTelemetry, NodeKind, datetime, dict[str, float | bool]]


def decode(payload: bytes) -> Decoded | None:
    """The payload, its kind, device time and present readings; None where the fast
    path does not take it (pydantic then decides, with its own error)."""
    try:
        msg = _DECODER.decode(payload)
    except (msgspec.ValidationError, msgspec.DecodeError):
        return None
    shape, kind = _SHAPES[type(msg)]
    fresh = shape.ids(msg)
    ids = shape.check(fresh)
    if ids is None:
        return None
    for name, text, new in zip(shape.names, ids, fresh, strict=True):
        if text is not new:
            setattr(msg, name, text)
    when = device_time(msg.ts)
    if when is None:
        return None
    readings = msg.readings
    values = {k: v for k in readings.__struct_fields__ if (v := getattr(readings, k)) is not None}
    return msg, kind, when, values


def device_time(text: str) -> datetime | None:
    """An RFC 3339 time in the form nodes send, else None."""
    if _TS.fullmatch(text) is None:
        return None
    try:
        return datetime.fromisoformat(text)
    except ValueError:  # a 13th month, a 61st second: pydantic words the refusal
        return None
