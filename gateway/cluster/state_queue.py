"""State writes queue durably while the state database is away.

The state sinks (the findings repository, the alert manager's outbox, the case
service) write to the state database; with PostgreSQL on another host it can be
down (a lost primary, a failover) while the broker, the gateway and the time-series
store are fine. Ingestion must go on and nothing acknowledged may be lost, so a
batch of events a state sink cannot write is appended to an fsync'd spool in the
data dir (``gateway/store/spool.py``, the InfluxDB store's) and written, in order,
when the database is back; every later batch queues behind it so the order holds.
Alert notifications follow once their events are written (the outbox is in the
state database too). The writer's dead letters and node status changes queue the
same way (:class:`QueuedStateRepository`), so a refused message or a node going
offline during the outage does not hold the writer, and with it ingestion.

A record is ``{"from": <first sink still to run>, "events": [...]}``: a batch
whose findings were written before the alert manager failed resumes at the alert
manager, not with a second copy of the finding's events (the head's progress is
kept in memory; only a crash while the head is partly written repeats its sinks).
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from gateway.aiotasks import cancel_and_wait
from gateway.domain import DeadLetter, FindingChange, FindingEvent, StatusChange
from gateway.errors import StoreUnavailable
from gateway.pipeline import FindingSink
from gateway.rules.serialize import event_json, finding_from_json
from gateway.state.database import Database
from gateway.state.deadletters import StateRepository
from gateway.store.spool import Spool, SpoolBatch

log = logging.getLogger(__name__)

#: The spool's cap: about a million events; past it new batches fail loudly.
MAX_BYTES = 1 << 30
#: Longest a stop waits for a batch being written to finish (a dead database fails
#: its write sooner: the connection is refused or times out).
CLOSE_WAIT_S = 15.0


def encode(events: Sequence[FindingEvent], start: int) -> bytes:
    """One spool record (JSON on one line; evidence values as stored, str if odd)."""
    body = {"from": start, "events": [event_json(e) for e in events]}
    return json.dumps(body, default=str, separators=(",", ":")).encode()


def decode(payload: bytes) -> tuple[list[FindingEvent], int]:
    """The events of a record and the first sink still to run."""
    body: dict[str, Any] = json.loads(payload)
    events = [
        FindingEvent(FindingChange(e["change"]), finding_from_json(e["finding"]))
        for e in body["events"]
    ]
    return events, int(body["from"])


class SpoolQueue:
    """A spool of state writes and the loop that writes its head, oldest first."""

    def __init__(self, folder: Path, *, retry_s: float = 1.0) -> None:
        self.retry_s = retry_s
        self.spool = Spool(folder, MAX_BYTES)
        self._wake = asyncio.Event()
        self._inflight: asyncio.Task[bool] | None = None

    async def open(self) -> None:
        """Open the spool (a queue left by a previous run is written by :meth:`run`)."""
        await asyncio.to_thread(self.spool.open)
        if not self.spool.empty:
            log.warning("state queue: %d batch(es) left to write", self.spool.pending_records)

    async def close(self) -> None:
        """Let a write under way finish and be acknowledged (bounded: past the wait it is
        stopped and written again at the next start), then close the spool; what is
        queued stays on disk."""
        if self._inflight is not None:
            _, pending = await asyncio.wait({self._inflight}, timeout=CLOSE_WAIT_S)
            await cancel_and_wait(list(pending))
        await asyncio.to_thread(self.spool.close)

    @property
    def queued(self) -> int:
        """Batches waiting for the state database."""
        return self.spool.pending_records

    async def enqueue(self, payload: bytes) -> None:
        """Append a batch (fsync'd before it returns) and wake the writer loop."""
        await asyncio.to_thread(self.spool.append, payload)
        self._wake.set()

    async def run(self) -> None:
        """Forever: write the queue's head when the database takes it (a TaskGroup task)."""
        while True:
            batch = await asyncio.to_thread(self.spool.peek, 1)
            if batch is None:
                self._wake.clear()
                await self._wake.wait()
                continue
            # Shielded: a stop that lands while a batch is being written must not leave
            # it written but not acknowledged (the next start would write it again);
            # close() waits for it.
            self._inflight = asyncio.create_task(self._write_and_ack(batch), name="state-write")
            if await asyncio.shield(self._inflight):
                continue
            await asyncio.sleep(self.retry_s)

    async def _write_and_ack(self, batch: SpoolBatch) -> bool:
        if not await self.write_head(batch.payload):
            return False
        await asyncio.to_thread(self.spool.ack, batch)
        if self.spool.empty:
            log.info("state queue: written; the state database is caught up")
        return True

    async def write_head(self, payload: bytes) -> bool:
        """Write one queued batch; False while the database is unavailable."""
        raise NotImplementedError


class StateQueue(SpoolQueue):
    """The state sinks behind one sink that never loses a batch to an outage."""

    def __init__(self, folder: Path, sinks: Sequence[FindingSink], *, retry_s: float = 1.0) -> None:
        super().__init__(folder, retry_s=retry_s)
        self.sinks = list(sinks)
        self._resume: int | None = None  # the head's progress this run

    async def sink(self, events: list[FindingEvent]) -> None:
        """Write ``events`` through the state sinks now, or queue them on disk: behind
        a queue (order), or when the database is unavailable."""
        done = await self._deliver(events, 0) if self.spool.empty else 0
        if done < len(self.sinks):
            await self.enqueue(encode(events, done))

    async def write_head(self, payload: bytes) -> bool:
        events, start = decode(payload)
        self._resume = await self._deliver(events, start if self._resume is None else self._resume)
        if self._resume < len(self.sinks):
            return False
        self._resume = None
        return True

    async def _deliver(self, events: list[FindingEvent], start: int) -> int:
        """Run the sinks from ``start`` on; the index of the first that could not
        write (``len(sinks)`` when all did)."""
        for index in range(start, len(self.sinks)):
            try:
                await self.sinks[index](events)
            except StoreUnavailable as exc:
                log.warning("state queue: database unavailable (%s); queued on disk", exc)
                return index
            except Exception:
                # Not an outage (a bug, a refused row): retrying would block the queue
                # for good, so as before the queue, the sink's failure is logged.
                log.exception("finding sink %r failed", self.sinks[index])
        return len(self.sinks)


def encode_saves(letters: Sequence[DeadLetter], statuses: Sequence[StatusChange]) -> bytes:
    """One spool record of the writer's state writes (payloads in base64)."""
    body = {
        "letters": [
            [d.topic, base64.b64encode(d.payload).decode(), d.reason, d.detail,
             d.received_at.isoformat()]
            for d in letters
        ],
        "statuses": [
            [c.site_id, c.node_id, c.online, c.received_at.isoformat()] for c in statuses
        ],
    }  # fmt: skip
    return json.dumps(body, separators=(",", ":")).encode()


def decode_saves(payload: bytes) -> tuple[list[DeadLetter], list[StatusChange]]:
    """The dead letters and status changes of a record."""
    body: dict[str, Any] = json.loads(payload)
    letters = [
        DeadLetter(t, base64.b64decode(p), r, d, datetime.fromisoformat(at))
        for t, p, r, d, at in body["letters"]
    ]
    statuses = [
        StatusChange(s, n, bool(on), datetime.fromisoformat(at))
        for s, n, on, at in body["statuses"]
    ]
    return letters, statuses


class QueuedStateRepository(StateRepository):
    """Dead letters and node status that queue on disk while the database is away,
    so the writer acknowledges the readings it stored meanwhile."""

    def __init__(self, db: Database, folder: Path, *, retry_s: float = 1.0) -> None:
        super().__init__(db)
        self.queue = _SavesQueue(self, folder, retry_s=retry_s)

    async def save(self, letters: Sequence[DeadLetter], statuses: Sequence[StatusChange]) -> None:
        """Store now, or queue behind earlier batches or while the database is away."""
        if self.queue.spool.empty:
            try:
                await super().save(letters, statuses)
                return
            except StoreUnavailable as exc:
                log.warning("state queue: database unavailable (%s); queued on disk", exc)
        await self.queue.enqueue(encode_saves(letters, statuses))

    async def save_now(
        self, letters: Sequence[DeadLetter], statuses: Sequence[StatusChange]
    ) -> None:
        """Store without the queue (the queue's own writes)."""
        await super().save(letters, statuses)


class _SavesQueue(SpoolQueue):
    def __init__(self, repo: QueuedStateRepository, folder: Path, *, retry_s: float) -> None:
        super().__init__(folder, retry_s=retry_s)
        self.repo = repo

    async def write_head(self, payload: bytes) -> bool:
        try:
            await self.repo.save_now(*decode_saves(payload))
        except StoreUnavailable:
            return False
        return True
