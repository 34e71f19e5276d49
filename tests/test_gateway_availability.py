"""The gateway's availability topic on a real Mosquitto: a retained ``online`` once it
has connected, and its last will ``offline`` when the process dies without a word."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import paho.mqtt.client as mqtt
import pytest

from gateway.broker import BrokerProcess
from gateway.contract import SUBSCRIPTIONS
from gateway.ingest.mqtt import availability_topic
from tests.conftest import DEMO_SITES

pytestmark = pytest.mark.integration

CLIENT_ID = "gw-availability"


@pytest.fixture
def watched(mosquitto: BrokerProcess) -> Iterator[queue.Queue[bytes]]:
    """Payloads arriving on the gateway's availability topic."""
    seen: queue.Queue[bytes] = queue.Queue()
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="availability-watcher")
    client.on_message = lambda _c, _u, msg: seen.put(msg.payload)
    client.connect(mosquitto.host, mosquitto.port)
    client.subscribe(availability_topic(CLIENT_ID), qos=1)
    client.loop_start()
    yield seen
    client.disconnect()
    client.loop_stop()


def _gateway(tmp_path: Path, broker: BrokerProcess) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SUMPWATCH_")}
    env.update(
        SUMPWATCH_DATA_DIR=str(tmp_path / "data"),
        SUMPWATCH_SITES_FILE=str(DEMO_SITES),
        SUMPWATCH_MQTT__HOST=broker.host,
        SUMPWATCH_MQTT__PORT=str(broker.port),
        SUMPWATCH_MQTT__CLIENT_ID=CLIENT_ID,
        SUMPWATCH_REPORTS__SCHEDULE="false",
    )
    log = (tmp_path / "gateway.log").open("wb")
    return subprocess.Popen(
        [sys.executable, "-m", "gateway.cli", "gateway", "--no-api"],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )


def test_the_gateway_says_online_and_its_will_says_offline_when_killed(
    tmp_path: Path, mosquitto: BrokerProcess, watched: queue.Queue[bytes]
) -> None:
    proc = _gateway(tmp_path, mosquitto)
    try:
        assert watched.get(timeout=30) == b"online", (tmp_path / "gateway.log").read_text()
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    # Killed: no DISCONNECT, so the broker publishes the will.
    assert watched.get(timeout=30) == b"offline"


def test_no_subscription_of_the_gateway_matches_its_availability_topic() -> None:
    topic = availability_topic(CLIENT_ID)
    assert not any(mqtt.topic_matches_sub(f, topic) for f in SUBSCRIPTIONS)
