"""Helpers for tests that talk to a real broker: payloads, paho publishers, polling."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
import time
from collections.abc import Awaitable, Callable, Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt

from gateway.contract import telemetry_topic
from gateway.runtime import Runtime


def pit_payload(
    site: str = "elm-12",
    node: str = "pit",
    seq: int = 0,
    *,
    boot: str = "b00t",
    ts: datetime | None = None,
    level_cm: float = 25.0,
    pump_on: bool = False,
    **extra: Any,
) -> dict[str, Any]:
    """A valid pit-node payload."""
    ts = ts or datetime.now(UTC)
    payload: dict[str, Any] = {
        "v": 1,
        "site_id": site,
        "node_id": node,
        "ts": ts.isoformat().replace("+00:00", "Z"),
        "seq": seq,
        "boot": boot,
        "kind": "pit",
        "readings": {"level_cm": level_cm, "pump_on": pump_on, "water_temp_c": 10.5},
    }
    payload.update(extra)
    return payload


def pit_messages(
    count: int, site: str = "elm-12", node: str = "pit", *, boot: str = "b00t", start_seq: int = 0
) -> list[tuple[str, bytes]]:
    """``count`` distinct valid pit messages, level = seq % 60 so values are checkable."""
    base = datetime.now(UTC) - timedelta(seconds=count)
    topic = telemetry_topic(site, node)
    return [
        (
            topic,
            json.dumps(
                pit_payload(
                    site,
                    node,
                    seq,
                    boot=boot,
                    ts=base + timedelta(milliseconds=seq),
                    level_cm=float(seq % 60),
                    pump_on=seq % 2 == 1,
                )
            ).encode(),
        )
        for seq in range(start_seq, start_seq + count)
    ]


def publish(
    host: str,
    port: int,
    messages: Iterable[tuple[str, bytes]],
    *,
    qos: int = 1,
    client_id: str = "test-publisher",
    timeout: float = 60.0,
) -> int:
    """Publish with a real paho client and wait until the broker acked every message."""
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=client_id)
    client.max_inflight_messages_set(1000)
    client.max_queued_messages_set(0)
    client.connect(host, port)
    client.loop_start()
    try:
        infos = [client.publish(topic, payload, qos=qos) for topic, payload in messages]
        deadline = time.monotonic() + timeout
        for info in infos:
            info.wait_for_publish(max(0.1, deadline - time.monotonic()))
            if not info.is_published():
                raise TimeoutError("broker did not acknowledge every message")
        return len(infos)
    finally:
        client.disconnect()
        client.loop_stop()


async def wait_until(
    predicate: Callable[[], Awaitable[bool]], timeout: float = 30.0, interval: float = 0.1
) -> None:
    """Poll an async predicate until it holds, or fail with a TimeoutError."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if await predicate():
            return
        await asyncio.sleep(interval)
    raise TimeoutError(f"condition not met within {timeout}s")


async def wait_connected(runtime: Runtime, timeout: float = 10.0) -> None:
    """Wait until the gateway is connected and subscribed."""

    async def up() -> bool:
        return runtime.source.connected

    await wait_until(up, timeout)


def stored_seqs(data_dir: Path) -> set[int]:
    """The ``seq`` of every reading a gateway's data dir holds (none before it exists)."""
    path = data_dir / "sumpwatch.db"
    if not path.exists():
        return set()
    with contextlib.closing(sqlite3.connect(path)) as conn:
        try:
            return {r[0] for r in conn.execute("SELECT seq FROM readings")}
        except sqlite3.OperationalError:
            return set()
