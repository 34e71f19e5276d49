"""Stopping tasks for sure: a loop that loses a cancel (Python 3.11's wait_for returns
when the cancel lands as its future completes; aiomqtt publishes that way) still
stops, so a gateway's shutdown cannot hang on it."""

from __future__ import annotations

import asyncio
import contextlib
import sys

import pytest

from gateway.aiotasks import cancel_and_wait, cancel_one


async def _swallows_one_cancel(stopped: list[str]) -> None:
    """A loop whose first cancel is lost, the way a publish loses it."""
    # What asyncio.wait_for does on 3.11 when its future is already done:
    with contextlib.suppress(asyncio.CancelledError):
        await asyncio.sleep(3600)
    try:
        await asyncio.Event().wait()  # the loop goes on, as if never cancelled
    finally:
        stopped.append("stopped")


async def test_a_task_that_loses_its_cancel_is_cancelled_again() -> None:
    stopped: list[str] = []
    task = asyncio.create_task(_swallows_one_cancel(stopped), name="publisher")
    await asyncio.sleep(0)
    async with asyncio.timeout(5):
        await cancel_and_wait([task], grace_s=0.05)
    assert task.cancelled()
    assert stopped == ["stopped"]


async def test_a_wait_for_finishing_as_it_is_cancelled_still_stops() -> None:
    """The reason for the helper, shown: cancel a wait_for whose future completes in
    the same loop iteration. On 3.11 the cancel is lost; on 3.12+ it is kept. Either
    way cancel_and_wait ends the task."""
    done = asyncio.Event()

    async def waits() -> None:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        asyncio.get_running_loop().call_soon(fut.set_result, None)
        await asyncio.wait_for(fut, timeout=10)
        done.set()
        await asyncio.sleep(3600)

    task = asyncio.create_task(waits())
    await asyncio.sleep(0)  # the task is inside wait_for; the result is scheduled
    async with asyncio.timeout(5):
        await cancel_and_wait([task], grace_s=0.05)
    assert task.cancelled()
    if sys.version_info < (3, 12):
        assert done.is_set(), "on 3.11 the first cancel is lost inside wait_for"


async def test_cancel_one_raises_what_the_task_failed_with() -> None:
    async def fails_on_cancel() -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            raise RuntimeError("flush failed") from None

    task = asyncio.create_task(fails_on_cancel())
    await asyncio.sleep(0)
    with pytest.raises(RuntimeError, match="flush failed"):
        await cancel_one(task)


async def test_tasks_are_cancelled_in_the_order_given() -> None:
    order: list[str] = []

    async def named(name: str) -> None:
        try:
            await asyncio.sleep(3600)
        finally:
            order.append(name)

    tasks = [asyncio.create_task(named(n)) for n in ("first", "second", "third")]
    await asyncio.sleep(0)
    await cancel_and_wait(tasks[::-1])
    assert order == ["third", "second", "first"]
