"""The pipeline's stages wired in order: validate -> store (batched) -> rules -> sinks.

Each stage is a small object behind a tiny interface, so tests and benchmarks
can run any part alone and the composition root decides what is plugged in.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from typing import Protocol

from gateway.contract import parse_topic
from gateway.domain import FindingEvent, RawMessage, Reading, StatusChange
from gateway.metrics import Metrics
from gateway.store.writer import AckToken, BatchWriter
from gateway.validate import Validator

log = logging.getLogger(__name__)

FindingSink = Callable[[list[FindingEvent]], Awaitable[None]]


class Detectors(Protocol):
    """What the pipeline needs of the rules engine."""

    def on_reading(self, reading: Reading) -> list[FindingEvent]:
        """Feed one reading; return what changed."""

    def on_status(self, status: StatusChange) -> list[FindingEvent]:
        """Feed one availability change; return what changed."""

    def tick(self, now: datetime) -> list[FindingEvent]:
        """Advance time (sensor silence); return what changed."""

    def on_heard(self, site_id: str, node_id: str, received_at: datetime) -> list[FindingEvent]:
        """A refused message still shows its node is alive; return what changed."""


class Pipeline:
    """Runs every raw message through the stages. ``handle`` never raises."""

    def __init__(
        self,
        validator: Validator,
        writer: BatchWriter,
        metrics: Metrics,
        *,
        detectors: Detectors | None = None,
        sinks: list[FindingSink] | None = None,
        tick_interval_s: float = 5.0,
        observers: list[Callable[[Reading], None]] | None = None,
    ) -> None:
        self.validator = validator
        self.writer = writer
        self.metrics = metrics
        self.detectors = detectors
        self.sinks = sinks or []
        #: Synchronous, cheap consumers of every valid reading (Home Assistant state).
        self.observers = observers or []
        self.tick_interval_s = tick_interval_s
        self.draining = False
        self.last_message_at: datetime | None = None
        self._events: asyncio.Queue[list[FindingEvent]] = asyncio.Queue()
        #: Each node's last availability and when it was heard: (online, received_at).
        self._availability: dict[tuple[str, str], tuple[bool, datetime]] = {}
        #: Readings waiting for the detectors: a socket read's worth (up to 2,000
        #: messages) is judged in one call once the read is parsed (the engine's
        #: per-batch work is then paid once per site, not per message). Anything else
        #: for the detectors (a status, a refused message, the clock) judges the waiting
        #: readings first, so the detectors see every input in arrival order.
        self._unjudged: list[Reading] = []
        #: The engine's batch entry (``RulesEngine.on_readings``), if it has one.
        self._batch: Callable[[Sequence[Reading]], list[FindingEvent]] | None = getattr(
            detectors, "on_readings", None
        )

    def handle(self, raw: RawMessage, token: AckToken | None = None) -> None:
        """Validate, queue for storage and evaluate one message."""
        if self.draining:
            # Shutting down: leave it unacknowledged; the broker redelivers it.
            return
        m = self.metrics
        m.received += 1
        self.last_message_at = raw.received_at
        item = self.validator.validate(raw)
        self.writer.add(item, token)
        m.pending = self.writer.pending
        detectors = self.detectors
        try:
            if isinstance(item, Reading):
                for observe in self.observers:
                    observe(item)
                events = self._reporting(item)
                if detectors:
                    if self._batch is not None:
                        self._defer(item)
                    else:
                        events += detectors.on_reading(item)
            elif isinstance(item, StatusChange):
                m.status_messages += 1
                self._availability[item.site_id, item.node_id] = (item.online, item.received_at)
                self.judge_waiting()
                events = detectors.on_status(item) if detectors else []
            else:
                m.rejected[item.reason] += 1
                parts = parse_topic(raw.topic)
                if detectors is None or parts is None:
                    return
                self.judge_waiting()
                events = detectors.on_heard(parts.site_id, parts.node_id, raw.received_at)
        except Exception:  # a detector bug must not stop ingestion
            log.exception("detector failed on %s", raw.topic)
            return
        if events:
            self._events.put_nowait(events)

    def _defer(self, reading: Reading) -> None:
        """Queue a reading for the detectors; the first of a batch books the judging
        for when the current socket read is parsed (or judges at once outside a loop)."""
        waiting = self._unjudged
        waiting.append(reading)
        if len(waiting) == 1:
            try:
                asyncio.get_running_loop().call_soon(self.judge_waiting)
            except RuntimeError:  # no loop (a synchronous caller): judge it now
                self.judge_waiting()

    def judge_waiting(self) -> None:
        """Run the detectors on the readings waiting for them (in arrival order)."""
        waiting, batch = self._unjudged, self._batch
        if not waiting or batch is None:
            return
        self._unjudged = []
        try:
            events = batch(waiting)
        except Exception:  # a detector bug must not stop ingestion
            log.exception("detectors failed on a batch of %d readings", len(waiting))
            return
        if events:
            self._events.put_nowait(events)

    def _reporting(self, reading: Reading) -> list[FindingEvent]:
        """Fresh telemetry wins over an older ``offline``: a node whose reading was
        taken after its last status was heard is online (a stale retained
        ``offline``, delivered when we subscribe, would otherwise stick). Backlog
        readings older than a real last will change nothing. O(1) per reading."""
        key = (reading.site_id, reading.node_id)
        known = self._availability.get(key)
        # Nothing heard since start: the broker sends each node's retained status
        # when we subscribe, so an old "offline" comes to us and lands below.
        if known is None or known[0] or reading.ts <= known[1]:
            return []
        change = StatusChange(reading.site_id, reading.node_id, True, reading.received_at)
        self._availability[key] = (True, reading.received_at)
        self.writer.add(change)
        detectors = self.detectors
        if detectors is None:
            return []
        self.judge_waiting()
        return detectors.on_status(change)

    async def run_sinks(self) -> None:
        """Deliver finding events to the sinks (findings store, alerts), in order."""
        while True:
            events = await self._events.get() + self._queued()
            self.metrics.findings_events += len(events)
            for sink in self.sinks:
                try:
                    await sink(events)
                except Exception:
                    log.exception("finding sink %r failed", sink)

    def _queued(self) -> list[FindingEvent]:
        """Every event queued now, oldest first. A sink call costs a database round
        trip or more whatever it carries, and each judged socket read queues its own
        list: delivered one list at a time, a finding waited for the round trips of
        every list queued before it (bench/latency.py, docs/performance.md)."""
        queued: list[FindingEvent] = []
        while not self._events.empty():
            queued += self._events.get_nowait()
        return queued

    async def run_ticks(self, clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        """Advance the detectors' clock so silence is noticed without traffic."""
        if self.detectors is None:
            return
        while True:
            await asyncio.sleep(self.tick_interval_s)
            self.judge_waiting()
            try:
                events = self.detectors.tick(clock())
            except Exception:
                log.exception("detector tick failed")
                continue
            if events:
                self._events.put_nowait(events)

    async def drain(self) -> None:
        """Stop taking messages and commit what is buffered."""
        self.draining = True
        self.judge_waiting()
        await self.writer.flush()
        events = self._queued()
        if events:
            for sink in self.sinks:
                try:
                    await sink(events)
                except Exception:
                    log.exception("finding sink %r failed while draining", sink)
