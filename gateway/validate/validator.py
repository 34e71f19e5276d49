"""The validation stage: pure, no I/O. Every message ends as exactly one of a
Reading, a StatusChange or a DeadLetter with a stable reason code."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from pydantic import ValidationError

from gateway.contract import (
    MAX_PAYLOAD_BYTES,
    STATUS_OFFLINE,
    STATUS_ONLINE,
    TELEMETRY_ADAPTER,
    TopicParts,
    parse_topic,
)
from gateway.domain import DeadLetter, RawMessage, Reading, StatusChange
from gateway.validate.admission import Admission
from gateway.validate.decode import Decoded, decode

#: Stable reason codes of dead letters (documented in docs/telemetry.md).
REASONS = (
    "unknown_topic",
    "payload_too_large",
    "not_json",
    "missing_field",
    "wrong_type",
    "out_of_range",
    "unknown_field",
    "bad_value",
    "unknown_kind",
    "identity_mismatch",
    "clock_ahead",
    "too_old",
    "bad_status",
    "unknown_site",
    "unknown_node",
    "kind_mismatch",
    "rate_limited",
    "identity_reuse",
)

_ERROR_REASONS = {
    "json_invalid": "not_json",
    "json_type": "not_json",
    "missing": "missing_field",
    "extra_forbidden": "unknown_field",
    "greater_than": "out_of_range",
    "greater_than_equal": "out_of_range",
    "less_than": "out_of_range",
    "less_than_equal": "out_of_range",
    "finite_number": "out_of_range",
    "union_tag_invalid": "unknown_kind",
    "union_tag_not_found": "missing_field",
    "model_attributes_type": "wrong_type",
    "model_type": "wrong_type",
    "dict_type": "wrong_type",
}


def reason_of(exc: ValidationError) -> tuple[str, str]:
    """A reason code and a readable detail for a pydantic error."""
    errors = exc.errors(include_url=False, include_input=False)
    first = errors[0]
    kind = first["type"]
    reason = _ERROR_REASONS.get(kind)
    if reason is None:
        reason = "wrong_type" if kind.endswith(("_type", "_parsing")) else "bad_value"
    # loc[0] is the union member (pit/discharge/air); the rest is the field path.
    detail = "; ".join(
        f"{'.'.join(str(p) for p in e['loc'][1:]) or 'payload'}: {e['msg']}" for e in errors[:5]
    )
    return reason, detail


#: Details of the admission reasons (gateway.validate.admission); fixed strings, so a
#: flood of refusals costs no formatting.
_DETAILS = {
    "unknown_site": "site is not in the site registry (settings: open_enrolment)",
    "unknown_node": "node is not registered at this site (settings: open_enrolment)",
    "kind_mismatch": "payload kind differs from the node's registered kind",
    "rate_limited": "node sends faster than its registered interval allows (rate_limit_factor)",
}

#: A fleet repeats the same few thousand topics: parse each once (bench/ingest.py:
#: ~5% of the per-message cost). Bounded, so hostile random topics cannot grow it.
_parse_topic = functools.lru_cache(maxsize=65536)(parse_topic)


class Validator:
    """Turns a RawMessage into a Reading, a StatusChange or a DeadLetter."""

    def __init__(
        self,
        *,
        max_future_skew_s: float = 300.0,
        max_age_s: float = 90 * 86400.0,
        clock: Callable[[], datetime] | None = None,
        admission: Admission | None = None,
    ) -> None:
        self._admission = admission
        self._max_age = timedelta(seconds=max_age_s)
        self._skew_s = float(max_future_skew_s)
        self._max_age_s = float(max_age_s)
        self._clock = clock or (lambda: datetime.now(UTC))
        # The check needs only epoch seconds: time.time() is a third of datetime.now(UTC)
        # .timestamp() per message (issue 17 profile); an injected clock is honoured.
        self._now_s: Callable[[], float] = (
            time.time if clock is None else (lambda: self._clock().timestamp())
        )

    def _status(self, raw: RawMessage, parts: TopicParts) -> StatusChange | DeadLetter:
        text = raw.payload.decode("utf-8", "replace").strip()
        if text not in (STATUS_ONLINE, STATUS_OFFLINE):
            return self._dead(raw, "bad_status", f"status must be online|offline, not {text!r}")
        if self._admission is not None:
            refused = self._admission.enrolled(parts.site_id, parts.node_id)
            if refused is not None:
                return self._dead(raw, refused, _DETAILS[refused])
        return StatusChange(parts.site_id, parts.node_id, text == STATUS_ONLINE, raw.received_at)

    def _clock_refusal(self, raw: RawMessage, when: datetime, ts: float) -> DeadLetter | None:
        """A device time too far ahead of ours or too old, else None."""
        now_s = self._now_s()
        if ts - now_s > self._skew_s:
            now = datetime.fromtimestamp(now_s, UTC)
            ahead = f"ts {when.isoformat()} is ahead of {now:%Y-%m-%dT%H:%M:%SZ}"
            return self._dead(raw, "clock_ahead", ahead)
        if now_s - ts > self._max_age_s:
            return self._dead(
                raw, "too_old", f"ts {when.isoformat()} is older than {self._max_age}"
            )
        return None

    def validate(self, raw: RawMessage) -> Reading | StatusChange | DeadLetter:
        """Classify one message. Never raises for bad input."""
        parts = _parse_topic(raw.topic)
        if parts is None:
            return self._dead(
                raw,
                "unknown_topic",
                "topic does not match sumpwatch/v1/<site>/<node>/"
                "telemetry|status with ids of [a-z0-9_-]{1,64}",
            )
        if len(raw.payload) > MAX_PAYLOAD_BYTES:
            return self._dead(
                raw, "payload_too_large", f"{len(raw.payload)} bytes > {MAX_PAYLOAD_BYTES}"
            )
        if parts.channel == "status":
            return self._status(raw, parts)
        decoded = decode(raw.payload) or self._pydantic(raw)
        if isinstance(decoded, DeadLetter):
            return decoded
        msg, kind, when, values = decoded
        if msg.site_id != parts.site_id or msg.node_id != parts.node_id:
            return self._dead(
                raw,
                "identity_mismatch",
                f"payload says {msg.site_id}/{msg.node_id}, topic says "
                f"{parts.site_id}/{parts.node_id}",
            )
        # Epoch seconds: float comparisons are cheaper than datetime arithmetic, and
        # admission's token bucket wants the device time as a number anyway.
        ts = when.timestamp()
        late = self._clock_refusal(raw, when, ts)
        if late is not None:
            return late
        if self._admission is not None:
            refused = self._admission.admit(msg.site_id, msg.node_id, kind, ts)
            if refused is not None:
                return self._dead(raw, refused, _DETAILS[refused])
        return Reading(
            site_id=msg.site_id,
            node_id=msg.node_id,
            kind=kind,
            ts=when if when.tzinfo is UTC else when.astimezone(UTC),
            seq=msg.seq,
            boot=msg.boot,
            values=values,
            received_at=raw.received_at,
            battery_v=msg.battery_v,
            rssi_dbm=msg.rssi_dbm,
        )

    def _pydantic(self, raw: RawMessage) -> Decoded | DeadLetter:
        """The contract's own decoding, for what the fast path did not take: a refusal
        worded by pydantic (the dead letters' reasons and details), or a payload in a
        spelling only pydantic reads."""
        try:
            msg = TELEMETRY_ADAPTER.validate_json(raw.payload)
        except ValidationError as exc:
            reason, detail = reason_of(exc)
            return self._dead(raw, reason, detail)
        except UnicodeDecodeError as exc:  # pragma: no cover - pydantic reports json_invalid
            return self._dead(raw, "not_json", str(exc))
        values = {k: v for k, v in msg.readings.__dict__.items() if v is not None}
        return msg, msg.kind, msg.ts, values

    @staticmethod
    def _dead(raw: RawMessage, reason: str, detail: str) -> DeadLetter:
        return DeadLetter(raw.topic, raw.payload, reason, detail, raw.received_at)


def shape_only() -> Validator:
    """A validator of shape alone (topic, size, payload, identity): no time limits and
    no admission. Offline replay refuses device times on its own data clock."""
    return Validator(max_future_skew_s=1e12, max_age_s=1e12)
