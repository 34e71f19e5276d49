"""Stopping tasks for sure.

Kernel: imports nothing of ours. On Python 3.11, ``asyncio.wait_for`` returns
normally when a cancel lands in the loop iteration its future completes in
(CPython gh-86296, fixed in 3.12 by building ``wait_for`` on ``asyncio.timeout``).
aiomqtt waits for every PUBACK that way, so one ``Task.cancel()`` sent to a loop
that publishes can be lost, and a ``TaskGroup`` then waits for that loop forever:
the gateway never stops. :func:`cancel_and_wait` cancels again until a task ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from typing import Any

log = logging.getLogger(__name__)


async def cancel_and_wait(tasks: Sequence[asyncio.Task[Any]], *, grace_s: float = 1.0) -> None:
    """Cancel ``tasks`` (in the given order) and wait until each has ended; a task still
    running ``grace_s`` after its cancel is cancelled again. Exceptions stay in the
    tasks for whoever owns them (a ``TaskGroup``, ``task.result()``)."""
    for task in tasks:
        task.cancel()
    pending = {task for task in tasks if not task.done()}
    while pending:
        _, pending = await asyncio.wait(pending, timeout=grace_s)
        for task in pending:
            log.warning("task %s ignored its cancel; cancelling it again", task.get_name())
            task.cancel()


async def cancel_one(task: asyncio.Task[Any], *, grace_s: float = 1.0) -> None:
    """:func:`cancel_and_wait` for a task nobody else awaits: its cancellation is
    consumed here, any other error it ended with is raised."""
    await cancel_and_wait([task], grace_s=grace_s)
    with contextlib.suppress(asyncio.CancelledError):
        task.result()
