"""A lost PostgreSQL (issue 18): ingestion and time-series writes go on, the finding
events queue on disk in order, and they (then their alerts) are written when the
database is back. On a cluster of its own, stopped with ``pg_ctl stop`` mid-test."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest

from gateway.broker import BrokerProcess, free_port
from gateway.runtime import Runtime, run_gateway
from gateway.settings import Settings
from tests.mqtt_helpers import pit_messages, publish, wait_connected, wait_until
from tests.pg_fixture import _as_owner, _bin_dir, _install, _owned_dir, _run

pytestmark = [pytest.mark.integration]


@dataclass(frozen=True)
class StoppableCluster:
    """A PostgreSQL cluster of this test's own, which it may stop and start again."""

    pg_ctl: Path
    data: Path
    log: Path
    options: str
    url: str

    def stop(self) -> None:
        _run([str(self.pg_ctl), "-D", str(self.data), "-m", "fast", "-w", "stop"], self.log.parent)

    def start(self) -> None:
        _run(
            [str(self.pg_ctl), "-D", str(self.data), "-l", str(self.log), "-o", self.options,
             "-w", "-t", "60", "start"],
            self.log.parent,
        )  # fmt: skip


@pytest.fixture
def cluster() -> Iterator[StoppableCluster]:
    bin_dir = _bin_dir() or _install()
    root = _owned_dir()
    port = free_port()
    _run(
        [str(bin_dir / "initdb"), "-D", str(root / "data"), "-U", "postgres", "--auth=trust",
         "--encoding=UTF8", "--locale=C.UTF-8", "--no-sync"],
        root,
    )  # fmt: skip
    options = f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off"
    url = f"postgresql://postgres@127.0.0.1:{port}/postgres"
    pg = StoppableCluster(bin_dir / "pg_ctl", root / "data", root / "log", options, url)
    pg.start()
    try:
        yield pg
    finally:
        pg_ctl = [str(pg.pg_ctl), "-D", str(pg.data), "-m", "immediate", "stop"]
        subprocess.run(_as_owner(pg_ctl), check=False, capture_output=True)


def _changes(url: str, rule_id: str) -> list[str]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT e.change FROM finding_events e JOIN findings f ON f.id = e.finding_id"
            " WHERE f.rule_id = %s ORDER BY e.seq",
            (rule_id,),
        ).fetchall()
    return [r[0] for r in rows]


def _alerts(url: str) -> int:
    with psycopg.connect(url) as conn:
        [(count,)] = conn.execute("SELECT COUNT(*) FROM alerts").fetchall()
    return int(count)


@contextlib.asynccontextmanager
async def _gateway_while_down(
    settings: Settings, cluster: StoppableCluster
) -> AsyncIterator[Runtime]:
    """A gateway on the cluster's state, running, with the cluster stopped under it."""
    async with run_gateway(settings.updated(store={"state_url": cluster.url})) as runtime:
        await wait_connected(runtime)
        await asyncio.to_thread(cluster.stop)
        yield runtime


def _queued(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.glob("*.seg")) if folder.exists() else 0


async def test_findings_made_while_postgresql_is_down_are_written_in_order_when_it_is_back(
    gateway_settings: Settings, mosquitto: BrokerProcess, cluster: StoppableCluster
) -> None:
    settings = gateway_settings
    # Levels climb 0..59 past the 55 cm alarm and fall back: high water opens, clears.
    messages = pit_messages(70)
    async with _gateway_while_down(settings, cluster) as runtime:
        await asyncio.to_thread(publish, mosquitto.host, mosquitto.port, messages)

        async def stored_and_queued() -> bool:
            queued = _queued(settings.data_dir / "state-queue")
            return await runtime.store.count() >= len(messages) and queued > 0

        await wait_until(stored_and_queued, 60)
        await asyncio.to_thread(cluster.start)

        async def written() -> bool:
            return "cleared" in await asyncio.to_thread(_changes, cluster.url, "high_water")

        await wait_until(written, 60)
        assert await runtime.store.count() == len(messages)
    changes = _changes(cluster.url, "high_water")
    assert changes[0] == "opened" and changes[-1] == "cleared"
    assert changes.count("opened") == 1 and changes.count("cleared") == 1
    assert _alerts(cluster.url) == 1
    assert _queued(settings.data_dir / "state-queue") == 0


def _deadletters(url: str) -> list[str]:
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT reason FROM deadletters ORDER BY id").fetchall()
    return [r[0] for r in rows]


async def test_a_message_refused_while_postgresql_is_down_does_not_hold_the_readings_after_it(
    gateway_settings: Settings, mosquitto: BrokerProcess, cluster: StoppableCluster
) -> None:
    settings = gateway_settings
    good = pit_messages(20)
    async with _gateway_while_down(settings, cluster) as runtime:
        refused = [(good[0][0], b"not json")]
        await asyncio.to_thread(publish, mosquitto.host, mosquitto.port, [*refused, *good])

        async def stored_and_committed() -> bool:
            # Committed: nothing waits in the writer, so all of it was acknowledged.
            return await runtime.store.count() >= len(good) and runtime.writer.pending == 0

        await wait_until(stored_and_committed, 60)
        await asyncio.to_thread(cluster.start)

        async def letter_written() -> bool:
            return await asyncio.to_thread(_deadletters, cluster.url) != []

        await wait_until(letter_written, 60)
    assert len(_deadletters(cluster.url)) == 1
    assert _queued(settings.data_dir / "state-queue-writer") == 0
