"""Issue 20.10 end to end: a reading older than its node's newest, published to a real
Mosquitto, is stored, recorded as not evaluated and served by the site API."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from gateway.app import create_app
from gateway.broker import BrokerProcess
from gateway.contract import telemetry_topic
from gateway.settings import Settings
from tests.mqtt_helpers import pit_payload, publish

pytestmark = pytest.mark.integration


@pytest.fixture
def client(gateway_settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(gateway_settings)) as client:
        deadline = time.monotonic() + 10
        while not client.get("/health").json()["broker_connected"]:
            assert time.monotonic() < deadline, "gateway never connected"
            time.sleep(0.05)
        yield client


def _message(seq: int, ts: datetime) -> tuple[str, bytes]:
    payload = pit_payload("elm-12", "pit", seq, ts=ts, level_cm=30.0)
    return telemetry_topic("elm-12", "pit"), json.dumps(payload).encode()


def _wait(client: TestClient, path: str, ready: Callable[[Any], bool]) -> Any:
    deadline = time.monotonic() + 30
    while True:
        body = client.get(path).json()
        if ready(body):
            return body
        assert time.monotonic() < deadline, f"{path} never became ready: {body}"
        time.sleep(0.05)


def test_reading_behind_its_nodes_newest_is_served_as_not_evaluated(
    client: TestClient, mosquitto: BrokerProcess
) -> None:
    now = datetime.now(UTC).replace(microsecond=0)
    live = [_message(seq, now - timedelta(seconds=60 - 10 * seq)) for seq in range(3)]
    late = [_message(10 + i, now - timedelta(minutes=5, seconds=-10 * i)) for i in range(4)]
    redelivered = late[0]  # the same identity again: ignored, not counted
    publish(mosquitto.host, mosquitto.port, [*live, *late, redelivered])
    spans = _wait(client, "/sites/elm-12/not-evaluated", lambda b: b and b[0]["count"] == 4)
    (span,) = spans
    assert span["node_id"] == "pit" and span["count"] == 4
    assert span["start"] == (now - timedelta(minutes=5)).isoformat().replace("+00:00", "Z")
    # Stored and charted all the same: late readings are kept, only not judged. The
    # span is recorded as the engine sees the reading, the rows once the writer's
    # batch commits, so the count is awaited rather than read once.
    readings = _wait(
        client,
        "/sites/elm-12/readings?node=pit",
        lambda b: b["count"] >= 7,
    )
    assert readings["count"] == 7
    assert client.get("/sites/oak-3/not-evaluated").json() == []
    metrics = client.get("/metrics").text
    assert "sumpwatch_readings_not_evaluated_total 4.0" in metrics  # the redelivery is not
