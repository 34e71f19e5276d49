"""The batching writer: collects validated messages and commits them in batches.

A message is acknowledged to the broker only after its batch is committed (manual
QoS 1 acks), so a gateway killed between receipt and commit loses nothing: the
broker redelivers, and the store's idempotent identity drops the duplicates.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from gateway.contract import telemetry_topic
from gateway.domain import DeadLetter, Reading, StatusChange
from gateway.errors import StoreError
from gateway.metrics import Metrics
from gateway.state.deadletters import StateRepository
from gateway.store.base import TimeSeriesStore

log = logging.getLogger(__name__)

Item = Reading | StatusChange | DeadLetter
AckToken = Any  # opaque to the writer; handed back to the ack callback in order


class BatchWriter:
    """Buffers items and writes them in batches of at most ``batch_max``."""

    def __init__(
        self,
        store: TimeSeriesStore,
        state: StateRepository,
        metrics: Metrics,
        *,
        batch_max: int = 5000,
        interval_s: float = 0.05,
        ack: Callable[[Sequence[AckToken]], None] | None = None,
        retry_max_s: float = 10.0,
        hold_max: int | None = None,
    ) -> None:
        self._store = store
        self._state = state
        self._metrics = metrics
        self._batch_max = batch_max
        self._interval = interval_s
        self._ack = ack
        self._retry_max = retry_max_s
        self._items: list[Item] = []
        self._tokens: list[AckToken | None] = []
        self._first_at: float | None = None
        self._has_items = asyncio.Event()
        self._full = asyncio.Event()
        self._flush_lock = asyncio.Lock()
        self.last_flush_at: datetime | None = None
        #: The most items held (received, not yet committed) before the source is asked
        #: to stop reading (:meth:`full`); None: no bound of ours.
        self.hold_max = hold_max
        self._room: list[Callable[[], None]] = []

    @property
    def pending(self) -> int:
        """Items waiting to be written."""
        return len(self._items)

    def full(self) -> bool:
        """True while the writer holds ``hold_max`` items or more: the source should
        leave further messages with the broker (unread, unacknowledged) until
        :meth:`when_room` calls back.

        The broker's own bound (the Receive Maximum we send) is not enough: Mosquitto
        2.0.11 sends past it when PUBACKs arrive in batches, as ours do (a drain into a
        slow store held 115,000 messages; docs/performance.md)."""
        return self.hold_max is not None and len(self._items) >= self.hold_max

    def when_room(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` (soon, from the event loop) once the writer is not full."""
        if not self.full():
            asyncio.get_running_loop().call_soon(callback)
            return
        self._room.append(callback)

    def _made_room(self) -> None:
        if self._room and not self.full():
            loop = asyncio.get_running_loop()
            for callback in self._room:
                loop.call_soon(callback)
            self._room.clear()

    def oldest_pending_age(self) -> float:
        """Seconds the oldest waiting item has waited (0 when none)."""
        return 0.0 if self._first_at is None else time.monotonic() - self._first_at

    def add(self, item: Item, token: AckToken | None = None) -> None:
        """Queue one item; ``token`` is acknowledged after the item is committed."""
        if not self._items:
            self._first_at = time.monotonic()
            self._has_items.set()
        self._items.append(item)
        self._tokens.append(token)
        if len(self._items) >= self._batch_max:
            self._full.set()

    async def run(self) -> None:
        """Flush whenever a batch is full or the oldest item has waited ``interval_s``."""
        while True:
            await self._has_items.wait()
            if not self._full.is_set():
                # asyncio.timeout, not wait_for: on 3.11 wait_for around an
                # Event.wait() can swallow a cancellation and hang shutdown.
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self._interval):
                        await self._full.wait()
            await self.flush()

    async def flush(self) -> None:
        """Write everything buffered now, retrying with backoff while the store is down."""
        async with self._flush_lock:
            delay = 0.1
            while self._items:
                n = min(len(self._items), self._batch_max)
                try:
                    await self._write(self._items[:n])
                except StoreError as exc:
                    self._metrics.store_errors += 1
                    log.warning("store write failed, retrying in %.1fs: %s", delay, exc)
                    await asyncio.sleep(delay * random.uniform(0.5, 1.0))
                    delay = min(delay * 2, self._retry_max)
                    continue
                delay = 0.1
                # Acks go out in arrival order, and only for what is committed.
                tokens = [t for t in self._tokens[:n] if t is not None]
                del self._items[:n]
                del self._tokens[:n]
                if tokens and self._ack is not None:
                    self._ack(tokens)
                self._made_room()
            self._first_at = None
            self._has_items.clear()
            self._full.clear()
            self._metrics.pending = 0

    async def _write(self, items: Sequence[Item]) -> None:
        readings = [i for i in items if type(i) is Reading]
        letters = [i for i in items if type(i) is DeadLetter]
        statuses = [i for i in items if type(i) is StatusChange]
        started = time.perf_counter()
        new = await self._store.write(readings) if readings else 0
        duplicates = len(readings) - new
        if new < len(readings):
            # Same identity, other content: a node reused (boot, seq) (e.g. a reflashed
            # node restarting its sequence). Kept as dead letters, never dropped silently.
            reused = await self._store.reused(readings)
            letters += [_reuse_letter(r) for r in reused]
            self._metrics.rejected["identity_reuse"] += len(reused)
            duplicates -= len(reused)
        if letters or statuses:
            await self._state.save(letters, statuses)
        if statuses:
            await self._store.write_events(statuses=statuses)
        elapsed = time.perf_counter() - started
        m = self._metrics
        m.batch_seconds.observe(elapsed)
        m.batch_size.observe(len(items))
        m.stored += new
        m.duplicates += duplicates
        now = datetime.now(UTC)
        self.last_flush_at = now
        if readings:
            m.stored_lag.observe((now - readings[0].received_at).total_seconds())


def _reuse_letter(reading: Reading) -> DeadLetter:
    """A dead letter for a reading whose identity is already stored with other content.

    The raw bytes are gone by now (validated upstream); the letter keeps the reading
    as the gateway understood it, which is what an operator needs to compare.
    """
    payload = {
        "site_id": reading.site_id,
        "node_id": reading.node_id,
        "boot": reading.boot,
        "seq": reading.seq,
        "ts": reading.ts.isoformat(),
        "kind": reading.kind.value,
        "readings": dict(reading.values),
    }
    return DeadLetter(
        telemetry_topic(reading.site_id, reading.node_id),
        json.dumps(payload).encode(),
        "identity_reuse",
        f"(boot {reading.boot!r}, seq {reading.seq}) is already stored with other content",
        reading.received_at,
    )
