"""The state queue's stop (issue 18): a batch being written when the gateway stops is
finished and acknowledged, so the next start does not write it a second time."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from gateway.cluster import state_queue
from gateway.cluster.state_queue import SpoolQueue
from gateway.store.spool import Spool


class SlowDatabase(SpoolQueue):
    """A queue whose write takes as long as the test says."""

    def __init__(self, folder: Path) -> None:
        super().__init__(folder, retry_s=0.01)
        self.started = asyncio.Event()
        self.release = asyncio.Event()
        self.written: list[bytes] = []

    async def write_head(self, payload: bytes) -> bool:
        self.started.set()
        await self.release.wait()
        self.written.append(payload)
        return True


async def test_a_write_under_way_at_the_stop_is_finished_and_acknowledged(
    tmp_path: Path,
) -> None:
    queue = SlowDatabase(tmp_path / "queue")
    await queue.open()
    await queue.enqueue(b"batch-1")
    runner = asyncio.create_task(queue.run())
    await asyncio.wait_for(queue.started.wait(), 5)
    runner.cancel()  # the stop lands while the batch is being written
    await asyncio.gather(runner, return_exceptions=True)
    queue.release.set()  # the database answers after the stop
    await queue.close()
    assert [p.strip() for p in queue.written] == [b"batch-1"]
    reopened = Spool(tmp_path / "queue", 1 << 20)
    reopened.open()
    try:
        assert reopened.empty, "the written batch would be written again at the next start"
    finally:
        reopened.close()


async def test_a_write_the_database_never_answers_is_kept_for_the_next_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(state_queue, "CLOSE_WAIT_S", 0.2)
    queue = SlowDatabase(tmp_path / "queue")
    await queue.open()
    await queue.enqueue(b"batch-1")
    runner = asyncio.create_task(queue.run())
    await asyncio.wait_for(queue.started.wait(), 5)
    runner.cancel()
    await asyncio.gather(runner, return_exceptions=True)
    await queue.close()  # the database never answers: close gives up after its wait
    reopened = Spool(tmp_path / "queue", 1 << 20)
    reopened.open()
    try:
        assert reopened.pending_records == 1
    finally:
        reopened.close()
