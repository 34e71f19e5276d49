"""Scheduled jobs run on one gateway at a time (PostgreSQL advisory locks), and move
to another when their gateway dies or loses its database session."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import psycopg
import pytest

from gateway.state.database import SqliteDatabase
from gateway.state.locks import run_exclusively
from gateway.state.postgres import PostgresDatabase
from tests.mqtt_helpers import wait_until


class Job:
    """A forever job that notes which gateway runs it and how many run at once."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.running = 0
        self.most_at_once = 0

    def on(self, gateway: str) -> Job.Runner:
        return Job.Runner(self, gateway)

    class Runner:
        def __init__(self, job: Job, gateway: str) -> None:
            self.job, self.gateway = job, gateway

        async def __call__(self) -> None:
            self.job.started.append(self.gateway)
            self.job.running += 1
            self.job.most_at_once = max(self.job.most_at_once, self.job.running)
            try:
                await asyncio.Event().wait()
            finally:
                self.job.running -= 1


@pytest.fixture
async def gateways(pg_url: str) -> AsyncIterator[PostgresDatabase]:
    db = PostgresDatabase(pg_url)
    await db.open(migrate=False)
    yield db
    await db.close()


async def _stop(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


def _exclusive(db: PostgresDatabase, job: Job, gateway: str) -> asyncio.Task[None]:
    return asyncio.create_task(
        run_exclusively(db, "reports", job.on(gateway), retry_s=0.05, check_s=0.05)
    )


async def test_only_one_gateway_runs_a_scheduled_job(gateways: PostgresDatabase) -> None:
    job = Job()
    tasks = [_exclusive(gateways, job, name) for name in ("a", "b", "c")]
    await wait_until(lambda: _true(job.started), 5)
    await asyncio.sleep(0.3)  # the others keep trying meanwhile
    assert len(job.started) == 1 and job.running == 1
    for task in tasks:
        await _stop(task)


async def test_the_job_moves_to_another_gateway_when_its_gateway_stops(
    gateways: PostgresDatabase,
) -> None:
    job = Job()
    first = _exclusive(gateways, job, "a")
    await wait_until(lambda: _true(job.started), 5)
    second = _exclusive(gateways, job, "b")
    await asyncio.sleep(0.2)
    await _stop(first)
    await wait_until(lambda: _true(job.started == ["a", "b"]), 5)
    assert job.most_at_once == 1
    await _stop(second)


async def test_a_gateway_that_loses_its_session_stops_the_job_and_the_job_goes_on(
    gateways: PostgresDatabase, pg_url: str
) -> None:
    job = Job()
    first = _exclusive(gateways, job, "a")
    await wait_until(lambda: _true(job.started), 5)
    second = _exclusive(gateways, job, "b")
    with psycopg.connect(pg_url, autocommit=True) as admin:
        # What a network cut or a server restart does to the holder's session.
        admin.execute("SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory'")
    # Started again (on either gateway, whichever took the lock) and the lost run
    # stopped: one running, not two.
    await wait_until(lambda: _true(len(job.started) == 2 and job.running == 1), 5)
    await asyncio.sleep(0.2)
    assert job.running == 1
    await _stop(first)
    await _stop(second)


async def test_on_sqlite_a_job_simply_runs(tmp_path: Path) -> None:
    ran: list[bool] = []

    async def once() -> None:
        ran.append(True)

    await run_exclusively(SqliteDatabase(tmp_path / "s.db"), "reports", once)
    assert ran == [True]


async def _true(value: object) -> bool:
    return bool(value)
