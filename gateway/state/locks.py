"""Scheduled jobs that must run on one gateway at a time (reports, case deadlines,
rollups of a shared store), through PostgreSQL advisory locks.

A job runs on the gateway that holds its lock; the others wait and try again. The
lock is session-level on a connection of its own, so a gateway that dies (or loses
its connection) releases it with its session, and the next try elsewhere takes the
job over. While holding, the holder checks its connection: when the session is gone
the lock may already be someone else's, so it stops the job rather than run twice.

On SQLite the state belongs to one gateway, so a job simply runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from gateway.aiotasks import cancel_one
from gateway.state.database import Database

if TYPE_CHECKING:
    import psycopg

log = logging.getLogger(__name__)

Job = Callable[[], Awaitable[None]]


def lock_key(name: str) -> int:
    """A stable signed 64-bit key for a job name (pg_advisory_lock takes a bigint)."""
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big", signed=True)


class AdvisoryLock:
    """One job's lock on a connection of its own."""

    def __init__(self, url: str, name: str, *, lease_s: float | None = None) -> None:
        self.url = url
        self.name = name
        self.lease_s = lease_s
        self._conn: psycopg.AsyncConnection[tuple[object, ...]] | None = None

    async def try_acquire(self) -> bool:
        """Take the lock if no session holds it; never waits.

        With ``lease_s`` the lock is a lease the server enforces: a session left idle
        that long is ended (``idle_session_timeout``), which frees the lock, so a
        holder that stops checking :meth:`alive` (a frozen or cut-off host) loses it
        within ``lease_s`` even when its TCP connection lingers."""
        import psycopg  # only with a PostgreSQL state (~9 MB an SQLite gateway never loads)

        conn = await psycopg.AsyncConnection.connect(self.url, autocommit=True)
        if self.lease_s is not None:
            await conn.execute(f"SET idle_session_timeout = {int(self.lease_s * 1000):d}")
        cur = await conn.execute("SELECT pg_try_advisory_lock(%s)", (lock_key(self.name),))
        row = await cur.fetchone()
        if row is None or not row[0]:
            await conn.close()
            return False
        self._conn = conn
        return True

    async def alive(self) -> bool:
        """True while the session holding the lock is still there."""
        if self._conn is None:
            return False
        import psycopg

        try:
            await self._conn.execute("SELECT 1")
        except psycopg.Error:
            return False
        return True

    async def release(self) -> None:
        """Give the lock up (closing the session would too)."""
        conn, self._conn = self._conn, None
        if conn is None:
            return
        import psycopg

        with contextlib.suppress(psycopg.Error):
            await conn.execute("SELECT pg_advisory_unlock(%s)", (lock_key(self.name),))
        await conn.close()


async def run_while_held(lock: AdvisoryLock, job: Job, check_s: float) -> None:
    """Run ``job`` while ``lock`` (held) stays held, checking every ``check_s`` (the
    heartbeat of a lease); the job is cancelled when the lock's session is gone."""

    async def held() -> None:
        await job()

    task = asyncio.create_task(held(), name=f"held:{lock.name}")
    try:
        while not task.done():
            await asyncio.wait({task}, timeout=check_s)
            if not task.done() and not await lock.alive():
                log.warning("state: lost the lock of job %s; stopping it here", lock.name)
                return
        task.result()  # the job's own error, if it failed
    finally:
        if not task.done():
            await cancel_one(task)


async def run_exclusively(
    db: Database,
    name: str,
    job: Job,
    *,
    retry_s: float = 10.0,
    check_s: float = 5.0,
    lease_s: float = 30.0,
) -> None:
    """Run ``job`` on one of the gateways sharing ``db`` at a time: here once this
    gateway holds the job's lock (tried every ``retry_s``), stopped if the lock's
    session is lost (checked every ``check_s``). Returns when the job returns."""
    if db.dialect != "postgresql":
        await job()
        return
    import psycopg

    from gateway.state.postgres import PostgresDatabase

    if not isinstance(db, PostgresDatabase):
        await job()
        return
    while True:
        lock = AdvisoryLock(db.url, f"sumpwatch-job:{name}", lease_s=lease_s)
        try:
            held = await lock.try_acquire()
        except psycopg.OperationalError as exc:
            log.warning("state: cannot reach PostgreSQL for job %s: %s", name, exc)
            held = False
        if held:
            log.info("state: this gateway runs job %s", name)
            try:
                await run_while_held(lock, job, check_s)
                if await lock.alive():
                    return  # the job finished (not a lost lock)
            finally:
                await lock.release()
        await asyncio.sleep(retry_s)
