"""Issue 12 (items 4, 5, 6, 16): what the gateway admits of telemetry from logins it
trusts: registered sites and nodes of their registered kind, at a sane rate; fresh
telemetry wins over a stale ``offline``; a reused message identity is kept aside.

Through a real Mosquitto and the real gateway (``run_gateway``)."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import paho.mqtt.client as mqtt
import pytest

from gateway.broker import BrokerProcess
from gateway.contract import status_topic, telemetry_topic
from gateway.rules.detectors.silence import SensorSilenceDetector
from gateway.runtime import Runtime, run_gateway
from gateway.settings import Settings
from tests.conftest import MakeSettings
from tests.mqtt_helpers import pit_payload, publish, wait_connected, wait_until

pytestmark = pytest.mark.integration


def _settings(make_settings: MakeSettings, broker: BrokerProcess, **validation: object) -> Settings:
    """A gateway on ``broker``; ``validation`` overrides keys of the validation section."""
    return make_settings(
        mqtt={"host": broker.host, "port": broker.port, "client_id": f"gw-{uuid.uuid4().hex[:8]}"},
        store={"batch_interval_s": 0.02},
        validation=validation,
    )


@pytest.fixture
async def default_gateway(
    make_settings: MakeSettings, mosquitto: BrokerProcess
) -> AsyncIterator[Runtime]:
    """A gateway with the shipped defaults: closed enrolment, rate limit on."""
    async with run_gateway(_settings(make_settings, mosquitto)) as runtime:
        await wait_connected(runtime)
        yield runtime


async def _judged(runtime: Runtime, stored: int, dead: int, timeout: float = 20) -> None:
    async def done() -> bool:
        letters = sum((await runtime.state.deadletter_counts()).values())
        return await runtime.store.count() >= stored and letters >= dead

    await wait_until(done, timeout)
    await asyncio.sleep(0.3)  # nothing more arrives


def _message(site: str, node: str, seq: int = 0, **fields: object) -> tuple[str, bytes]:
    return telemetry_topic(site, node), json.dumps(pit_payload(site, node, seq, **fields)).encode()


async def test_telemetry_of_unregistered_sites_nodes_and_kinds_is_dead_lettered_by_reason(
    default_gateway: Runtime, mosquitto: BrokerProcess
) -> None:
    messages = [
        _message("elm-12", "pit", 0),  # registered: stored
        _message("nowhere-1", "pit", 0),  # no such site
        _message("elm-12", "sump2", 0),  # no such node at a real site
        _message("elm-12", "air", 0),  # the air node claiming to be a pit
        (status_topic("nowhere-1", "pit"), b"online"),
        (status_topic("elm-12", "sump2"), b"offline"),
    ]
    await asyncio.to_thread(publish, mosquitto.host, mosquitto.port, messages)
    await _judged(default_gateway, stored=1, dead=5)
    assert await default_gateway.store.count() == 1
    assert await default_gateway.state.deadletter_counts() == {
        "unknown_site": 2,
        "unknown_node": 2,
        "kind_mismatch": 1,
    }
    assert default_gateway.metrics.rejected["unknown_site"] == 2
    assert await default_gateway.state.statuses() == []  # strangers get no status row


async def test_open_enrolment_stores_unregistered_nodes_but_still_checks_kinds(
    make_settings: MakeSettings, mosquitto: BrokerProcess
) -> None:
    async with run_gateway(_settings(make_settings, mosquitto, open_enrolment=True)) as runtime:
        await wait_connected(runtime)
        messages = [
            _message("nowhere-1", "pit", 0),
            _message("elm-12", "sump2", 0),
            _message("elm-12", "air", 0),
        ]
        await asyncio.to_thread(publish, mosquitto.host, mosquitto.port, messages)
        await _judged(runtime, stored=2, dead=1)
        assert await runtime.store.count() == 2
        assert await runtime.state.deadletter_counts() == {"kind_mismatch": 1}


async def test_a_flooding_node_is_rate_limited_and_other_nodes_are_not(
    default_gateway: Runtime, mosquitto: BrokerProcess
) -> None:
    # elm-12/pit (registered every 5 s; 10x that and a burst of 600 allowed) sends
    # 5,000 readings stamped within 5 s; elm-14/pit sends an hour's backlog of
    # 720 readings 5 s apart, just as fast.
    now = datetime.now(UTC)
    flood = [
        _message("elm-12", "pit", seq, boot="fl00d", ts=now - timedelta(milliseconds=5000 - seq))
        for seq in range(5000)
    ]
    backlog = [
        _message("elm-14", "pit", seq, boot="back1og", ts=now - timedelta(seconds=5 * (720 - seq)))
        for seq in range(720)
    ]
    mixed = [m for pair in zip(flood, backlog, strict=False) for m in pair]
    mixed += flood[len(backlog) :]
    await asyncio.to_thread(publish, mosquitto.host, mosquitto.port, mixed)
    await _judged(default_gateway, stored=720 + 600, dead=5000 - 610)
    limited = (await default_gateway.state.deadletter_counts())["rate_limited"]
    flood_stored = await default_gateway.store.count("elm-12")
    assert flood_stored + limited == 5000
    # The burst (600) plus 10 per 5 s of device time: about 610 of the flood pass.
    assert 600 <= flood_stored <= 620
    assert await default_gateway.store.count("elm-14") == 720
    assert default_gateway.metrics.rejected["rate_limited"] == limited
    letters = await default_gateway.state.deadletters(reason="rate_limited", limit=5)
    assert {d.topic for d in letters} == {telemetry_topic("elm-12", "pit")}


def _retain(broker: BrokerProcess, topic: str, payload: bytes) -> None:
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="node-will")
    client.connect(broker.host, broker.port)
    client.loop_start()
    try:
        client.publish(topic, payload, qos=1, retain=True).wait_for_publish(10)
    finally:
        client.disconnect()
        client.loop_stop()


async def test_fresh_telemetry_wins_over_a_stale_retained_offline(
    mosquitto: BrokerProcess, make_settings: MakeSettings
) -> None:
    # The broker holds an old retained "offline" (the node's last will from long ago).
    topic = status_topic("elm-12", "pit")
    await asyncio.to_thread(_retain, mosquitto, topic, b"offline")
    # The gateway subscribes now and gets the retained status first...
    async with run_gateway(_settings(make_settings, mosquitto)) as runtime:
        await wait_connected(runtime)

        async def offline_seen() -> bool:
            return [s.online for s in await runtime.state.statuses("elm-12")] == [False]

        async def silent_finding() -> bool:
            return any(
                f.rule_id == SensorSilenceDetector.rule_id and f.site_id == "elm-12"
                for f in await runtime.findings.open_findings()
            )

        await wait_until(offline_seen, 10)
        await wait_until(silent_finding, 10)  # the page shows "not reporting"
        # ...then readings taken after it was heard: the node is reporting.
        fresh = [_message("elm-12", "pit", seq, boot="fr3sh") for seq in range(3)]
        await asyncio.to_thread(publish, mosquitto.host, mosquitto.port, fresh)

        async def online() -> bool:
            return [s.online for s in await runtime.state.statuses("elm-12")] == [True]

        async def not_silent() -> bool:
            return not await silent_finding()

        await wait_until(online, 10)  # what GET /sites/{id} reports as "online"
        await wait_until(not_silent, 10)
        # A reading older than a status heard later does not undo it (a backlog
        # arriving after a real last will).
        await asyncio.to_thread(publish, mosquitto.host, mosquitto.port, [(topic, b"offline")])
        await wait_until(offline_seen, 10)
        old = _message(
            "elm-12", "pit", 9, boot="fr3sh", ts=datetime.now(UTC) - timedelta(minutes=5)
        )
        await asyncio.to_thread(publish, mosquitto.host, mosquitto.port, [old])
        await wait_until(lambda: _count(runtime, 4), 10)
        assert [s.online for s in await runtime.state.statuses("elm-12")] == [False]


async def _count(runtime: Runtime, n: int) -> bool:
    return await runtime.store.count() >= n


async def test_a_reused_identity_with_other_content_is_dead_lettered_not_dropped(
    default_gateway: Runtime, mosquitto: BrokerProcess
) -> None:
    first = [_message("elm-12", "pit", seq, boot="same", level_cm=10.0) for seq in range(5)]
    await asyncio.to_thread(publish, mosquitto.host, mosquitto.port, first)
    await _judged(default_gateway, stored=5, dead=0)
    # The same five again (a redelivery: harmless) and five new readings that reuse
    # the identities (a node that restarted seq under the same boot id).
    reused = [_message("elm-12", "pit", seq, boot="same", level_cm=30.0) for seq in range(5)]
    await asyncio.to_thread(publish, mosquitto.host, mosquitto.port, first + reused)
    await _judged(default_gateway, stored=5, dead=5)
    assert await default_gateway.store.count() == 5
    assert await default_gateway.state.deadletter_counts() == {"identity_reuse": 5}
    assert default_gateway.metrics.duplicates == 5
    assert default_gateway.metrics.rejected["identity_reuse"] == 5
    letter = (await default_gateway.state.deadletters(limit=1))[0]
    assert json.loads(letter.payload)["readings"]["level_cm"] == 30.0
