"""Issue 7, faults: every message the broker accepted is stored exactly once.

Each test publishes a known set of messages through a real Mosquitto, breaks
something mid-stream, and then counts: stored == published, with exactly the
published identities (the store's key makes a second copy impossible, so the
count is what proves nothing was lost or added). docs/reliability.md describes
each behaviour.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from gateway.broker import BrokerProcess, free_port
from gateway.contract import telemetry_topic
from gateway.runtime import Runtime, run_gateway
from gateway.settings import REPO_DIR, Settings
from gateway.store.base import SeriesQuery
from tests.mqtt_helpers import pit_messages, pit_payload, publish, wait_connected, wait_until

pytestmark = pytest.mark.integration


@contextlib.contextmanager
def exclusive_lock(db_file: Path) -> Iterator[None]:
    """Another process-like connection holding SQLite's write lock (a real condition:
    a backup, a migration, an operator's sqlite3 shell)."""
    conn = sqlite3.connect(db_file, isolation_level=None, timeout=10)
    conn.execute("BEGIN EXCLUSIVE")
    try:
        yield
    finally:
        conn.execute("ROLLBACK")
        conn.close()


def stored_identities(db_file: Path) -> list[tuple[str, str, str, int]]:
    """Every stored reading's identity, read straight from the SQLite file."""
    conn = sqlite3.connect(f"file:{db_file}?mode=ro", uri=True, timeout=10)
    try:
        rows = conn.execute("SELECT site_id, node_id, boot, seq FROM readings").fetchall()
    finally:
        conn.close()
    return sorted(rows)


def identities(messages: list[tuple[str, bytes]]) -> list[tuple[str, str, str, int]]:
    """The identities of published messages."""
    out = []
    for _, payload in messages:
        p = json.loads(payload)
        out.append((p["site_id"], p["node_id"], p["boot"], p["seq"]))
    return sorted(set(out))


async def stored_count(runtime: Runtime, expected: int, timeout: float = 30.0) -> None:
    """Wait until ``expected`` readings are stored, then a moment for any extra."""

    async def done() -> bool:
        return await runtime.store.count() >= expected

    await wait_until(done, timeout)
    await asyncio.sleep(0.3)


async def test_broker_restart_mid_stream_loses_and_duplicates_nothing(
    gateway_settings: Settings, mosquitto: BrokerProcess
) -> None:
    before = pit_messages(2000, boot="before")
    after = pit_messages(2000, boot="after")
    async with run_gateway(gateway_settings) as runtime:
        await wait_connected(runtime)
        # Hold the store so the gateway has received but not committed (nor acked)
        # the first half when the broker goes down: those must come back.
        with exclusive_lock(gateway_settings.sqlite_file):
            await asyncio.to_thread(publish, mosquitto.host, mosquitto.port, before)

            async def all_received() -> bool:
                return runtime.metrics.received >= len(before)

            await wait_until(all_received, 15)
            assert runtime.metrics.stored == 0
            await asyncio.to_thread(mosquitto.restart)
            await wait_connected(runtime, timeout=15)
            await asyncio.to_thread(publish, mosquitto.host, mosquitto.port, after)
        await stored_count(runtime, 4000)
        assert await runtime.store.count() == 4000
        # The broker redelivered the unacknowledged first half; the store kept one copy.
        assert runtime.metrics.duplicates >= 1
    assert stored_identities(gateway_settings.sqlite_file) == identities(before + after)


def _gateway_process(
    mosquitto: BrokerProcess, data_dir: Path, log: Path
) -> subprocess.Popen[bytes]:
    """The gateway as the operator runs it (``python -m gateway.cli gateway``), once
    its API says it is connected to the broker (and so subscribed)."""
    # Rate limit off: the test floods one node with readings 1 ms apart (see conftest).
    env = {
        **os.environ,
        "SUMPWATCH_STORE__BATCH_INTERVAL_S": "0.02",
        "SUMPWATCH_VALIDATION__RATE_LIMIT_FACTOR": "0",
    }
    api_port = free_port()
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gateway.cli",
                "gateway",
                "--mqtt-host",
                mosquitto.host,
                "--mqtt-port",
                str(mosquitto.port),
                "--data-dir",
                str(data_dir),
                "--api-port",
                str(api_port),
            ],
            cwd=REPO_DIR,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"gateway exited:\n{log.read_text()[-3000:]}"
        with contextlib.suppress(httpx.HTTPError):
            health = httpx.get(f"http://127.0.0.1:{api_port}/health", timeout=1).json()
            if health.get("broker_connected"):
                return proc
        time.sleep(0.1)
    proc.kill()
    raise TimeoutError(f"gateway did not connect; log:\n{log.read_text()[-3000:]}")


def _count_rows(db_file: Path) -> int:
    if not db_file.exists():
        return 0
    try:
        return len(stored_identities(db_file))
    except sqlite3.OperationalError:  # the file exists but the table does not yet
        return 0


def _wait_rows(db_file: Path, at_least: int, proc: subprocess.Popen[bytes], log: Path) -> int:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        n = _count_rows(db_file)
        if n >= at_least:
            return n
        assert proc.poll() is None, f"gateway exited:\n{log.read_text()[-3000:]}"
        time.sleep(0.05)
    raise TimeoutError(f"{at_least} rows not stored; log:\n{log.read_text()[-3000:]}")


def test_gateway_killed_with_sigkill_and_restarted_stores_everything_once(
    mosquitto: BrokerProcess, tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    db_file = data_dir / "sumpwatch.db"
    log = tmp_path / "gateway.log"
    messages = pit_messages(5000, boot="k1ll")
    first = _gateway_process(mosquitto, data_dir, log)
    try:
        publish(mosquitto.host, mosquitto.port, messages[:2500])
        _wait_rows(db_file, 600, first, log)  # mid-stream
        first.send_signal(signal.SIGKILL)
        first.wait(10)
    finally:
        if first.poll() is None:
            first.kill()
    at_kill = _count_rows(db_file)
    assert at_kill < 5000
    # Published while no gateway runs: the broker queues them in the session.
    publish(mosquitto.host, mosquitto.port, messages[2500:])
    second = _gateway_process(mosquitto, data_dir, log)
    try:
        _wait_rows(db_file, 5000, second, log)
        time.sleep(0.5)  # any redelivered copy would have been written by now
        assert stored_identities(db_file) == identities(messages)
    finally:
        second.send_signal(signal.SIGTERM)
        try:
            second.wait(15)
        except subprocess.TimeoutExpired:
            second.kill()


async def test_a_locked_store_holds_messages_until_it_is_free_again(
    gateway: Runtime, gateway_settings: Settings, mosquitto: BrokerProcess
) -> None:
    messages = pit_messages(3000, boot="l0ck")
    with exclusive_lock(gateway_settings.sqlite_file):
        await asyncio.to_thread(publish, mosquitto.host, mosquitto.port, messages)

        async def all_received() -> bool:
            return gateway.metrics.received >= len(messages)

        await wait_until(all_received, 15)

        # Longer than SQLite's busy timeout (5 s): the write fails and is retried.
        async def write_failed() -> bool:
            return gateway.metrics.store_errors >= 1

        await wait_until(write_failed, 15)
        assert gateway.metrics.stored == 0
        assert gateway.writer.pending == len(messages)
    await stored_count(gateway, 3000)
    assert await gateway.store.count() == 3000
    assert stored_identities(gateway_settings.sqlite_file) == identities(messages)


async def test_a_stop_while_the_store_is_locked_is_bounded_and_loses_nothing(
    gateway_settings: Settings, mosquitto: BrokerProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("gateway.runtime.DRAIN_TIMEOUT_S", 1.0)
    messages = pit_messages(500, boot="st0p")
    with contextlib.ExitStack() as locked:
        async with run_gateway(gateway_settings) as runtime:
            await wait_connected(runtime)
            locked.enter_context(exclusive_lock(gateway_settings.sqlite_file))
            await asyncio.to_thread(publish, mosquitto.host, mosquitto.port, messages)

            async def all_received() -> bool:
                return runtime.metrics.received >= len(messages)

            await wait_until(all_received, 15)
            stopping = time.monotonic()
        # The drain gave up at its bound instead of retrying the locked store forever.
        assert time.monotonic() - stopping < 10
        assert runtime.metrics.stored == 0
    # Nothing was acknowledged, so the broker hands every message to the next run.
    async with run_gateway(gateway_settings) as runtime:
        await stored_count(runtime, len(messages))
    assert stored_identities(gateway_settings.sqlite_file) == identities(messages)


async def test_a_node_that_reconnects_and_replays_is_stored_once(
    gateway: Runtime, mosquitto: BrokerProcess
) -> None:
    first = pit_messages(1000, boot="r1")
    # The node lost its connection before the PUBACKs of its last 300 messages
    # came back, so it sends them again, then carries on.
    replay = first[-300:] + pit_messages(500, boot="r1", start_seq=1000)
    await asyncio.to_thread(publish, mosquitto.host, mosquitto.port, first, client_id="node")
    await asyncio.to_thread(publish, mosquitto.host, mosquitto.port, replay, client_id="node")
    await stored_count(gateway, 1500)
    assert await gateway.store.count() == 1500
    assert gateway.metrics.duplicates == 300
    rows = await gateway.store.readings(SeriesQuery("elm-12", node_id="pit", limit=5000))
    assert [r.seq for r in rows] == list(range(1500))


async def test_skewed_clocks_and_out_of_order_messages_are_stored_in_device_time_order(
    gateway: Runtime, mosquitto: BrokerProcess
) -> None:
    now = datetime.now(UTC)
    rng = random.Random(7)
    topic = telemetry_topic("elm-14", "pit")

    def message(seq: int, ts: datetime, boot: str = "sk3w") -> tuple[str, bytes]:
        payload = pit_payload("elm-14", "pit", seq, boot=boot, ts=ts, level_cm=float(seq % 50))
        return topic, json.dumps(payload).encode()

    # A node whose clock runs 4 minutes fast (inside the 5-minute allowance) and
    # one whose clock is 3 days slow, each sending 1,000 samples shuffled.
    fast = [message(i, now + timedelta(minutes=4, seconds=-i)) for i in range(1000)]
    slow = [message(i, now - timedelta(days=3, seconds=i), boot="s10w") for i in range(1000)]
    shuffled = fast + slow
    rng.shuffle(shuffled)
    # Beyond the allowance: refused with a reason, not stored, not blocking the rest.
    too_far = [
        message(5000, now + timedelta(hours=2)),
        message(5001, now - timedelta(days=400)),
    ]
    await asyncio.to_thread(publish, mosquitto.host, mosquitto.port, too_far + shuffled)
    await stored_count(gateway, 2000)
    assert await gateway.store.count() == 2000
    rows = await gateway.store.readings(SeriesQuery("elm-14", node_id="pit", limit=5000))
    stamps = [r.ts for r in rows]
    assert stamps == sorted(stamps)
    assert {(r.boot, r.seq) for r in rows} == {
        (b, s) for b in ("sk3w", "s10w") for s in range(1000)
    }

    async def refused() -> bool:
        return len(await gateway.state.deadletters()) == 2

    await wait_until(refused)
    reasons = sorted(d.reason for d in await gateway.state.deadletters())
    assert reasons == ["clock_ahead", "too_old"]
