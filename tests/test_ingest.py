"""Issue 2: simulated sensors -> Mosquitto -> gateway -> SQLite store, on real parts."""

from __future__ import annotations

import asyncio
import gc
import json
import time
from pathlib import Path
from typing import Any

import aiomqtt
import pytest

from gateway.broker import BrokerProcess, start_broker
from gateway.ingest import mqtt as mqtt_source
from gateway.mqttconn import MqttConnection
from gateway.pipeline import Pipeline
from gateway.runtime import Runtime, run_gateway
from gateway.settings import Settings
from gateway.store.base import SeriesQuery
from tests.mqtt_helpers import pit_messages, pit_payload, publish, wait_connected, wait_until

pytestmark = pytest.mark.integration


async def _stored(runtime: Runtime, expected: int, timeout: float = 60.0) -> None:
    async def done() -> bool:
        return await runtime.store.count() >= expected

    await wait_until(done, timeout)


async def test_2000_published_messages_are_stored_exactly_once_with_their_values(
    gateway: Runtime, mosquitto: BrokerProcess
) -> None:
    messages = pit_messages(2000)
    await asyncio.to_thread(publish, mosquitto.host, mosquitto.port, messages)
    await _stored(gateway, 2000)
    await asyncio.sleep(0.3)  # anything extra would have arrived by now
    assert await gateway.store.count() == 2000
    rows = await gateway.store.readings(SeriesQuery("elm-12", node_id="pit", limit=5000))
    assert sorted(r.seq for r in rows) == list(range(2000))
    for r in rows:
        assert r.values["level_cm"] == float(r.seq % 60)
        assert r.values["pump_on"] is (r.seq % 2 == 1)
        assert r.values["water_temp_c"] == 10.5
    assert gateway.metrics.duplicates == 0


async def test_the_heap_start_up_built_is_left_out_of_later_collections(gateway: Runtime) -> None:
    # A full collection walking the imports, the registry and the packs again paused
    # ingest for 135-146 ms at 5,000 msg/s from 1,000 sites (bench/latency.py).
    assert gc.get_freeze_count() > 0


async def test_messages_published_while_the_gateway_is_down_are_stored_after_restart(
    gateway_settings: Settings, mosquitto: BrokerProcess
) -> None:
    # First run creates the persistent session at the broker.
    async with run_gateway(gateway_settings) as runtime:
        await wait_connected(runtime)
    messages = pit_messages(5000)
    await asyncio.to_thread(publish, mosquitto.host, mosquitto.port, messages)
    async with run_gateway(gateway_settings) as runtime:
        await _stored(runtime, 5000)
        await asyncio.sleep(0.3)
        assert await runtime.store.count() == 5000


async def test_a_backlog_that_delays_the_suback_keeps_the_connection(
    gateway_settings: Settings, mosquitto: BrokerProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The broker sends a persistent session's queue right after the CONNACK and the
    # SUBACK behind it: the gateway handles the backlog before it reads the answer. A
    # client timeout shorter than that (aiomqtt's 10 s under a 20,000-message backlog on
    # a loaded machine; 0.5 s here against ~3 s of handling) must not drop the link.
    async with run_gateway(gateway_settings) as runtime:
        await wait_connected(runtime)
    await asyncio.to_thread(publish, mosquitto.host, mosquitto.port, pit_messages(3000))
    real_client, real_handle = mqtt_source.aiomqtt_client, Pipeline.handle

    def short_timeout(conn: MqttConnection) -> aiomqtt.Client:
        client = real_client(conn)
        client.timeout = 0.5
        return client

    def slow_handle(self: Pipeline, *args: Any) -> None:
        time.sleep(0.001)
        real_handle(self, *args)

    monkeypatch.setattr(mqtt_source, "aiomqtt_client", short_timeout)
    monkeypatch.setattr(Pipeline, "handle", slow_handle)
    async with run_gateway(gateway_settings) as runtime:
        await _stored(runtime, 3000)
        assert runtime.source.last_error is None
        assert runtime.metrics.duplicates == 0  # nothing was sent twice


async def test_without_the_fast_path_aiomqtts_own_loop_stores_and_acknowledges_everything(
    gateway_settings: Settings, mosquitto: BrokerProcess
) -> None:
    settings = gateway_settings.updated(mqtt={"fast_path": False})
    async with run_gateway(settings) as runtime:
        await wait_connected(runtime)
    messages = pit_messages(2000)
    await asyncio.to_thread(publish, mosquitto.host, mosquitto.port, messages)
    async with run_gateway(settings) as runtime:
        await _stored(runtime, 2000)
        await asyncio.sleep(0.3)
    # Every message was acknowledged after its commit: the broker sends none again.
    async with run_gateway(settings) as runtime:
        await wait_connected(runtime)
        await asyncio.sleep(1.0)
        assert runtime.metrics.received == 0
        assert await runtime.store.count() == 2000


async def test_a_slow_store_holds_at_most_hold_max_messages_and_loses_none(
    gateway: Runtime, mosquitto: BrokerProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The broker may send more than the Receive Maximum (Mosquitto 2.0.11 does when
    # acks come in batches), and here it may send all 2,000 (the Receive Maximum is
    # 20,000): what the gateway takes in while its store is slow is bounded by its own
    # gate; the rest waits unread, and everything is stored once the store answers.
    gateway.writer.hold_max = 300
    store_free = asyncio.Event()
    real_write = gateway.store.write

    async def slow_write(readings: Any) -> int:
        await store_free.wait()
        return await real_write(readings)

    monkeypatch.setattr(gateway.store, "write", slow_write)
    messages = pit_messages(2000, boot="g4te")
    await asyncio.to_thread(publish, mosquitto.host, mosquitto.port, messages)

    async def held() -> bool:
        return gateway.metrics.received >= 300

    await wait_until(held, 15)
    await asyncio.sleep(1.0)  # time for the broker's rest to arrive, were it read
    assert gateway.metrics.received == 300
    assert gateway.writer.pending == 300
    store_free.set()
    await _stored(gateway, 2000)
    await asyncio.sleep(0.3)
    assert await gateway.store.count() == 2000
    assert gateway.metrics.duplicates == 0
    assert gateway.source.pauses + gateway.source._fast.pauses >= 2  # type: ignore[union-attr]


async def test_the_source_announces_no_larger_receive_maximum_than_the_writer_holds(
    gateway_settings: Settings,
) -> None:
    class Holding:
        hold_max = 10_000

        def full(self) -> bool:
            return False

        def when_room(self, callback: Any) -> None:
            callback()

    def announced(gate: Any) -> int:
        source = mqtt_source.MqttSource(
            gateway_settings.mqtt, lambda raw, token: None, client_id="gw", gate=gate
        )
        client = source._make_client()
        return int(client._properties.ReceiveMaximum)  # type: ignore[union-attr]

    assert gateway_settings.mqtt.receive_maximum == 20_000
    assert announced(Holding()) == 10_000
    assert announced(None) == 20_000


async def test_the_same_message_delivered_twice_yields_one_row(
    gateway: Runtime, mosquitto: BrokerProcess
) -> None:
    message = pit_messages(1)[0]
    await asyncio.to_thread(publish, mosquitto.host, mosquitto.port, [message, message])

    async def both_seen() -> bool:
        return gateway.metrics.stored + gateway.metrics.duplicates >= 2

    await wait_until(both_seen)
    assert await gateway.store.count() == 1
    assert gateway.metrics.duplicates == 1


async def test_a_rebooted_node_restarting_its_sequence_does_not_collide(
    gateway: Runtime, mosquitto: BrokerProcess
) -> None:
    first = pit_messages(10, boot="boot1")
    second = pit_messages(10, boot="boot2")  # same seq numbers 0..9, new boot id
    await asyncio.to_thread(publish, mosquitto.host, mosquitto.port, first + second)
    await _stored(gateway, 20)
    assert await gateway.store.count() == 20


def _payload(**changes: object) -> bytes:
    payload = pit_payload()
    for key, value in changes.items():
        if key.startswith("readings."):
            payload["readings"][key.split(".", 1)[1]] = value
        elif value is ...:
            del payload[key]
        else:
            payload[key] = value
    return json.dumps(payload).encode()


MALFORMED = {
    "not_json": ("sumpwatch/v1/elm-12/pit/telemetry", b"{not json"),
    "wrong_type": ("sumpwatch/v1/elm-12/pit/telemetry", _payload(**{"readings.level_cm": "20"})),
    "missing_field": ("sumpwatch/v1/elm-12/pit/telemetry", _payload(seq=...)),
    "out_of_range": ("sumpwatch/v1/elm-12/pit/telemetry", _payload(**{"readings.level_cm": 900})),
    "unknown_topic": ("sumpwatch/v1/elm-12/pit/extra/telemetry", _payload()),
}


@pytest.mark.parametrize("reason", sorted(MALFORMED))
async def test_a_malformed_message_is_dead_lettered_and_valid_traffic_keeps_flowing(
    reason: str, gateway: Runtime, mosquitto: BrokerProcess
) -> None:
    topic, payload = MALFORMED[reason]
    # The bad topic must still reach the gateway's subscription to be judged.
    if reason == "unknown_topic":
        topic = "sumpwatch/v1/Elm 12/pit/telemetry"
    await asyncio.to_thread(publish, mosquitto.host, mosquitto.port, [(topic, payload)])
    await asyncio.to_thread(publish, mosquitto.host, mosquitto.port, pit_messages(5))
    await _stored(gateway, 5)

    async def dead_lettered() -> bool:
        return bool(await gateway.state.deadletters())

    await wait_until(dead_lettered)
    letters = await gateway.state.deadletters()
    assert [d.reason for d in letters] == [reason]
    assert letters[0].payload == payload
    assert letters[0].topic == topic
    assert letters[0].detail
    assert gateway.metrics.rejected[reason] == 1


async def test_the_embedded_amqtt_fallback_broker_feeds_the_gateway_over_mqtt_3_1_1(
    gateway_settings: Settings, tmp_path: Path
) -> None:
    broker = start_broker(tmp_path / "amqtt", prefer="amqtt")
    try:
        assert broker.kind == "amqtt" and broker.protocol == "3.1.1"
        settings = gateway_settings.updated(mqtt={"port": broker.port, "protocol": "3.1.1"})
        async with run_gateway(settings) as runtime:
            await wait_connected(runtime)
            messages = pit_messages(200)
            await asyncio.to_thread(publish, broker.host, broker.port, messages)
            await _stored(runtime, 200)
            rows = await runtime.store.readings(SeriesQuery("elm-12", limit=500))
            assert sorted(r.seq for r in rows) == list(range(200))
            assert all(r.values["level_cm"] == float(r.seq % 60) for r in rows)
            assert not runtime.metrics.rejected
    finally:
        broker.stop()
