"""Offline replay: the live detectors over a recorded telemetry file.

Input: the simulator's JSON-lines file (``firmware_sim --out``): one object a
line with ``topic`` and ``payload`` (text; or ``payload_b64`` for bytes that are
not UTF-8; a JSON object payload is accepted too). Each message goes through the
gateway's validator, which the caller hands in (a composition root: the rules do
not reach into the validate stage; ``gateway.validate.shape_only``); invalid
lines are counted and skipped. The engine runs on
data time: the replay clock is the newest accepted device timestamp, and a
message more than ``max_future_skew_s`` ahead of it is refused like a live
device clock running ahead.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from gateway.contract import NodeKind, parse_topic
from gateway.domain import (
    DeadLetter,
    Finding,
    FindingEvent,
    RawMessage,
    Reading,
    StatusChange,
)
from gateway.registry.models import SiteRegistry
from gateway.rules.engine import RulesEngine
from gateway.rules.pack import RulePack

TICK_EVERY = timedelta(seconds=5)
#: Messages in a row ahead of the clock that agree with each other: real time moved on.
RESYNC_AFTER = 5
#: Receive time of a message before the data clock has one (only its shape is checked).
_FAR = datetime(9999, 1, 1, tzinfo=UTC)

#: Classifies a message by shape alone (time is the replay clock's job): the validate
#: stage's, handed in by the composition root (``gateway.validate.shape_only().validate``).
Classify = Callable[[RawMessage], Reading | StatusChange | DeadLetter]


@dataclass
class ReplayResult:
    """What a replay produced."""

    findings: list[Finding]
    events: list[FindingEvent]
    messages: int = 0
    accepted: int = 0
    rejected: Counter[str] = field(default_factory=Counter)
    invalid_lines: int = 0
    #: Pump starts seen per site (device time), for delays in pump cycles.
    pump_starts: dict[str, list[datetime]] = field(default_factory=dict)
    start: datetime | None = None
    end: datetime | None = None


def parse_line(line: str) -> tuple[str, bytes] | None:
    """``(topic, payload)`` from one JSONL line, or None when the line is unusable."""
    try:
        entry = json.loads(line)
    except json.JSONDecodeError:
        return None
    if not isinstance(entry, dict) or not isinstance(entry.get("topic"), str):
        return None
    payload = entry.get("payload")
    if isinstance(payload, str):
        return entry["topic"], payload.encode("utf-8")
    if isinstance(payload, dict):
        return entry["topic"], json.dumps(payload).encode("utf-8")
    raw = entry.get("payload_b64")
    if isinstance(raw, str):
        try:
            return entry["topic"], base64.b64decode(raw, validate=True)
        except (binascii.Error, ValueError):
            return None
    return None


def read_lines(path: Path) -> Iterator[str]:
    """The non-blank lines of a file."""
    with path.open(encoding="utf-8", errors="replace") as src:
        for line in src:
            if line.strip():
                yield line


class _ReplayClock:
    """Data time: the newest accepted device timestamp."""

    def __init__(self, skew: timedelta) -> None:
        self.now: datetime | None = None
        self._skew = skew
        self._ahead: list[datetime] = []

    def admit(self, ts: datetime) -> bool:
        if self.now is None or ts <= self.now + self._skew:
            self._ahead.clear()
            self.now = ts if self.now is None else max(self.now, ts)
            return True
        self._ahead.append(ts)
        if len(self._ahead) >= RESYNC_AFTER and max(self._ahead) - min(self._ahead) < self._skew:
            self.now = max(self._ahead)  # a real gap in the data, not one fast clock
            self._ahead.clear()
            return True
        return False


class _Replay:
    """One replay's state: the engine, the data clock and the running result."""

    def __init__(
        self,
        registry: SiteRegistry,
        packs: dict[str, RulePack],
        validate: Classify,
        silence_factor: float,
        max_future_skew_s: float,
    ) -> None:
        self.registry = registry
        self.validate = validate
        self.engine = RulesEngine(registry, packs, silence_factor)
        self.clock = _ReplayClock(timedelta(seconds=max_future_skew_s))
        self.result = ReplayResult([], [])
        self.pump_on: dict[str, bool] = {}
        self.last_tick: datetime | None = None

    def heard(self, topic: str) -> None:
        """A refused message still proves its node alive."""
        parts = parse_topic(topic)
        if parts is not None and self.clock.now is not None:
            now = self.clock.now
            self.result.events.extend(self.engine.on_heard(parts.site_id, parts.node_id, now))

    def message(self, item: tuple[str, bytes] | None) -> None:
        """Feed one line's message (None: unreadable) to the engine."""
        result = self.result
        result.messages += 1
        if item is None:
            result.invalid_lines += 1
            return
        topic, payload = item
        out = self.validate(RawMessage(topic, payload, self.clock.now or _FAR))
        if isinstance(out, DeadLetter):
            result.rejected[out.reason] += 1
            self.heard(topic)
            return
        if isinstance(out, Reading):
            if not self.clock.admit(out.ts):
                result.rejected["clock_ahead"] += 1
                self.heard(topic)
                return
            self.reading(out)
        else:
            if self.clock.now is None:
                return
            status = type(out)(out.site_id, out.node_id, out.online, self.clock.now)
            result.accepted += 1
            result.events.extend(self.engine.on_status(status))
        self.tick()

    def reading(self, out: Reading) -> None:
        """An admitted reading, received at data time."""
        assert self.clock.now is not None
        reading = Reading(
            out.site_id, out.node_id, out.kind, out.ts, out.seq, out.boot,
            out.values, self.clock.now, out.battery_v, out.rssi_dbm,
        )  # fmt: skip
        self.result.accepted += 1
        self.result.start = self.result.start or out.ts
        if reading.kind is NodeKind.PIT and reading.site_id in self.registry:
            on = bool(reading.values.get("pump_on"))
            if on and not self.pump_on.get(reading.site_id, False):
                self.result.pump_starts.setdefault(reading.site_id, []).append(reading.ts)
            self.pump_on[reading.site_id] = on
        self.result.events.extend(self.engine.on_reading(reading))

    def tick(self) -> None:
        """Time-driven checks (silence, ...) every TICK_EVERY of data time."""
        now = self.clock.now
        if now is not None and (self.last_tick is None or now - self.last_tick >= TICK_EVERY):
            self.last_tick = now
            self.result.events.extend(self.engine.tick(now))

    def finish(self) -> ReplayResult:
        """The result, with each finding in its last state."""
        result = self.result
        result.end = self.clock.now
        final: dict[str, Finding] = {}
        for event in result.events:
            final[event.finding.id] = event.finding
        result.findings = sorted(final.values(), key=lambda f: (f.opened_at, f.site_id, f.rule_id))
        return result


def replay(
    messages: Iterable[tuple[str, bytes] | None],
    registry: SiteRegistry,
    packs: dict[str, RulePack],
    *,
    validate: Classify,
    silence_factor: float = 6.0,
    max_future_skew_s: float = 300.0,
) -> ReplayResult:
    """Run the engine over messages in file order; ``None`` marks an unusable line."""
    run = _Replay(registry, packs, validate, silence_factor, max_future_skew_s)
    for item in messages:
        run.message(item)
    return run.finish()


def replay_file(
    path: Path,
    registry: SiteRegistry,
    packs: dict[str, RulePack],
    *,
    validate: Classify,
    **kwargs: float,
) -> ReplayResult:
    """Replay a JSONL telemetry file."""
    lines = (parse_line(line) for line in read_lines(path))
    return replay(lines, registry, packs, validate=validate, **kwargs)
