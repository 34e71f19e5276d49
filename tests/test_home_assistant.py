"""Issue 19, Home Assistant MQTT discovery, against a real Mosquitto and the real gateway:
every retained config matches HA's documented schema, state follows readings and
findings, the gateway's availability follows its life, a removed site's entities go."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import paho.mqtt.client as mqtt
import pytest

from gateway.broker import BrokerProcess
from gateway.contract import telemetry_topic
from gateway.homeassistant.discovery import AVAILABILITY_TOPIC, ENTITIES, state_topic
from gateway.registry import load_registry
from gateway.runtime import Runtime, run_gateway
from gateway.settings import Settings
from tests.conftest import DEMO_SITES, MakeSettings
from tests.ha_discovery_schema import SCHEMAS
from tests.mqtt_helpers import pit_payload, publish, wait_until

pytestmark = pytest.mark.integration


def retained(broker: BrokerProcess, pattern: str, settle_s: float = 1.0) -> dict[str, bytes]:
    """Every retained message under ``pattern`` the broker holds now."""
    found: dict[str, bytes] = {}
    done = threading.Event()

    def on_message(_c: mqtt.Client, _u: object, msg: mqtt.MQTTMessage) -> None:
        if msg.retain:
            found[msg.topic] = msg.payload

    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=f"ha-probe-{time.time_ns()}")
    client.on_message = on_message
    client.on_connect = lambda c, *_: (c.subscribe(pattern, qos=1), done.set())
    client.connect(broker.host, broker.port)
    client.loop_start()
    try:
        done.wait(5)
        time.sleep(settle_s)
    finally:
        client.disconnect()
        client.loop_stop()
    return found


def _settings(
    make_settings: MakeSettings, broker: BrokerProcess, sites: Path = DEMO_SITES
) -> Settings:
    return make_settings(
        sites_file=sites,
        mqtt={"host": broker.host, "port": broker.port, "client_id": f"gw-ha-{time.time_ns()}"},
        store={"batch_interval_s": 0.02},
        ha={"discovery": True},
        api={"public_url": "http://sump.village.example"},
    )


@pytest.fixture
async def ha_gateway(
    make_settings: MakeSettings, mosquitto: BrokerProcess
) -> AsyncIterator[Runtime]:
    async with run_gateway(_settings(make_settings, mosquitto)) as runtime:
        bridge = runtime.home_assistant
        assert bridge is not None
        await wait_until(lambda: _is_set(bridge.connected), 15)
        yield runtime


async def _is_set(event: object) -> bool:
    return bool(event.is_set())  # type: ignore[attr-defined]


async def test_every_discovery_config_matches_home_assistants_documented_schema(
    ha_gateway: Runtime, mosquitto: BrokerProcess
) -> None:
    configs = retained(mosquitto, "homeassistant/#")
    sites = list(ha_gateway.registry)
    assert len(configs) == len(sites) * len(ENTITIES)  # the demo sites have all three nodes
    for topic, payload in configs.items():
        _, component, object_id, leaf = topic.split("/")
        assert leaf == "config"
        config = SCHEMAS[component].model_validate(json.loads(payload))
        assert config.unique_id == f"sumpwatch_{object_id}"
        assert config.device is not None and config.device.configuration_url is not None
        assert config.device.configuration_url.startswith("http://sump.village.example/site/")


async def test_each_site_is_one_device_with_its_dashboard_url(
    ha_gateway: Runtime, mosquitto: BrokerProcess
) -> None:
    configs = [json.loads(p) for p in retained(mosquitto, "homeassistant/#").values()]
    devices = {tuple(c["device"]["identifiers"]): c["device"] for c in configs}
    assert len(devices) == len(ha_gateway.registry)
    elm = devices[("sumpwatch_elm-12",)]
    assert elm["name"] == "12 Elm St"
    assert elm["configuration_url"] == "http://sump.village.example/site/elm-12"


async def test_measurement_entities_are_unavailable_when_their_node_or_the_gateway_is(
    ha_gateway: Runtime, mosquitto: BrokerProcess
) -> None:
    configs = retained(mosquitto, "homeassistant/#")
    level = json.loads(configs["homeassistant/sensor/elm_12_pit_level/config"])
    assert level["availability_mode"] == "all"
    assert [a["topic"] for a in level["availability"]] == [
        AVAILABILITY_TOPIC,
        "sumpwatch/v1/elm-12/pit/status",
    ]
    assert retained(mosquitto, AVAILABILITY_TOPIC)[AVAILABILITY_TOPIC] == b"online"


async def test_state_follows_the_pit_readings(
    ha_gateway: Runtime, mosquitto: BrokerProcess
) -> None:
    start = datetime.now(UTC) - timedelta(seconds=60)
    levels = [(30.0, False), (40.5, True), (30.0, True), (18.0, False), (18.5, False)]
    messages = [
        (
            telemetry_topic("elm-12", "pit"),
            json.dumps(
                pit_payload(
                    seq=i, ts=start + timedelta(seconds=5 * i), level_cm=lv, pump_on=on,
                    boot="haboot",
                )
            ).encode(),
        )
        for i, (lv, on) in enumerate(levels)
    ]  # fmt: skip
    publish(mosquitto.host, mosquitto.port, messages)

    async def shown() -> bool:
        payload = retained(mosquitto, state_topic("elm-12"), settle_s=0.3).get(
            state_topic("elm-12")
        )
        return payload is not None and json.loads(payload)["cycles_today"] == 1

    await wait_until(shown, 20, interval=0.5)
    doc = json.loads(retained(mosquitto, state_topic("elm-12"))[state_topic("elm-12")])
    assert doc["pit_level"] == 18.5
    assert doc["pump_running"] == "OFF"
    pit_area_l_per_cm = 3.141592653589793 * 23.0**2 / 1000.0  # the demo's 46 cm pit
    assert doc["pumped_today"] == pytest.approx(22.5 * pit_area_l_per_cm / 3.785411784, abs=0.1)
    assert doc["high_water"] == "OFF"


async def test_a_high_water_finding_turns_its_problem_sensor_on(
    ha_gateway: Runtime, mosquitto: BrokerProcess
) -> None:
    start = datetime.now(UTC) - timedelta(seconds=30)
    messages = [
        (
            telemetry_topic("elm-12", "pit"),
            json.dumps(
                pit_payload(seq=i, ts=start + timedelta(seconds=5 * i), level_cm=62.0,
                            pump_on=False, boot="hwboot")
            ).encode(),
        )
        for i in range(4)
    ]  # fmt: skip
    publish(mosquitto.host, mosquitto.port, messages)

    async def on() -> bool:
        payload = retained(mosquitto, state_topic("elm-12"), settle_s=0.3).get(
            state_topic("elm-12")
        )
        return payload is not None and json.loads(payload)["high_water"] == "ON"

    await wait_until(on, 20, interval=0.5)


async def test_the_gateway_stopping_marks_every_entity_unavailable(
    make_settings: MakeSettings, mosquitto: BrokerProcess
) -> None:
    async with run_gateway(_settings(make_settings, mosquitto)) as runtime:
        assert runtime.home_assistant is not None
        await wait_until(lambda: _is_set(runtime.home_assistant.connected), 15)  # type: ignore[union-attr]
        assert retained(mosquitto, AVAILABILITY_TOPIC)[AVAILABILITY_TOPIC] == b"online"
    assert retained(mosquitto, AVAILABILITY_TOPIC)[AVAILABILITY_TOPIC] == b"offline"


async def test_a_site_removed_from_the_registry_loses_its_entities(
    tmp_path: Path, make_settings: MakeSettings, mosquitto: BrokerProcess
) -> None:
    async with run_gateway(_settings(make_settings, mosquitto)) as runtime:
        await wait_until(lambda: _is_set(runtime.home_assistant.connected), 15)  # type: ignore[union-attr]
    kept = tmp_path / "one-site.toml"
    text = DEMO_SITES.read_text()
    kept.write_text("[[site]]" + text.split("[[site]]")[1])  # only the first site, elm-12
    assert [s.id for s in load_registry(kept)] == ["elm-12"]
    async with run_gateway(_settings(make_settings, mosquitto, sites=kept)) as runtime:
        await wait_until(lambda: _is_set(runtime.home_assistant.connected), 15)  # type: ignore[union-attr]
        assert runtime.home_assistant is not None
        assert runtime.home_assistant.removed_configs == (len(load_registry(DEMO_SITES)) - 1) * len(
            ENTITIES
        )
    configs = retained(mosquitto, "homeassistant/#")
    assert configs, "the kept site's configs stay"
    assert all("elm_12_" in topic for topic in configs)


async def test_a_silent_node_turns_the_sensor_offline_problem_sensor_on(
    make_settings: MakeSettings, mosquitto: BrokerProcess
) -> None:
    # Demo nodes report every 5-30 s; at a silence factor of 1 a quiet node is noticed
    # at the next detector tick.
    settings = _settings(make_settings, mosquitto).updated(detectors={"silence_factor": 1.0})
    async with run_gateway(settings) as runtime:
        await wait_until(lambda: _is_set(runtime.home_assistant.connected), 15)  # type: ignore[union-attr]

        async def offline() -> bool:
            payload = retained(mosquitto, state_topic("elm-12"), settle_s=0.3).get(
                state_topic("elm-12")
            )
            return payload is not None and json.loads(payload)["sensor_offline"] == "ON"

        await wait_until(offline, 60, interval=1.0)
