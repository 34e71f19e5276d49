"""A shard is held through a lease in PostgreSQL: a standby gateway takes over a
shard whose holder died, as that shard's gateway (same MQTT client id), and drains
the queue the broker kept for its persistent session (issue 18.3)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path

import psycopg
from pydantic import SecretStr

from gateway.broker import BrokerProcess
from gateway.runtime import Lease, run_shard_leases
from gateway.settings import Settings
from tests.mqtt_helpers import pit_messages, publish, stored_seqs, wait_until

LEASE = Lease(lease_s=3.0, check_s=0.2, retry_s=0.2)
#: The standby tries every 2 s: the messages below are published between two tries,
#: while no gateway is connected, so they can only arrive from the broker's queue.
STANDBY = Lease(lease_s=3.0, check_s=0.2, retry_s=2.0)


def _gateway(settings: Settings, name: str, tmp_path: Path, pg_url: str) -> Settings:
    return settings.updated(
        data_dir=tmp_path / name,
        store={"state_url": SecretStr(pg_url)},
        mqtt={"client_id": "gw-takeover"},  # the shard's id: gw-takeover-shard-0
    )


async def test_a_standby_takes_over_a_dead_gateways_shard_and_drains_its_queue(
    gateway_settings: Settings, mosquitto: BrokerProcess, pg_url: str, tmp_path: Path
) -> None:
    first = _gateway(gateway_settings, "first", tmp_path, pg_url)
    standby = _gateway(gateway_settings, "standby", tmp_path, pg_url)
    stop_first, stop_standby = asyncio.Event(), asyncio.Event()
    holder = asyncio.create_task(run_shard_leases(first, [0], stop_first, LEASE))
    # The first gateway holds the shard once what is published reaches its store.
    # Published again until all of it has (the store keeps each seq once): a round
    # sent while the gateway was still subscribing reaches no queue, and ending at
    # the first stored reading left seq 0 of such a round unsent for good.
    before = pit_messages(5)
    while stored_seqs(first.data_dir) != set(range(5)):
        await asyncio.to_thread(publish, mosquitto.host, mosquitto.port, before)
        await asyncio.sleep(0.3)
    waiting = asyncio.create_task(run_shard_leases(standby, [0], stop_standby, STANDBY))
    await asyncio.sleep(0.3)
    assert not stored_seqs(standby.data_dir)  # it waits: the shard is held

    # The holder dies: its session ends (the lease's lock with it) and it stops.
    died = time.monotonic()
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory'")
    holder.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await holder
    during = pit_messages(5, start_seq=100)  # published while no gateway holds the shard
    await asyncio.to_thread(publish, mosquitto.host, mosquitto.port, during)

    await wait_until(lambda: _has(standby.data_dir, {100, 104}), 30)
    takeover_s = time.monotonic() - died
    print(f"takeover: {takeover_s:.2f} s")
    stop_standby.set()
    await asyncio.wait_for(waiting, 15)
    published = set(range(5)) | set(range(100, 105))
    assert stored_seqs(first.data_dir) | stored_seqs(standby.data_dir) == published
    assert set(range(100, 105)) <= stored_seqs(standby.data_dir)
    assert takeover_s < STANDBY.retry_s + 5


async def _has(data_dir: Path, seqs: set[int]) -> bool:
    return seqs <= stored_seqs(data_dir)
