"""Issue 2: the HTTP API returns what was stored (real app, real broker, real SQLite)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from fastapi.testclient import TestClient

from gateway.app import create_app
from gateway.broker import BrokerProcess
from gateway.settings import Settings
from tests.mqtt_helpers import pit_messages, publish

pytestmark = pytest.mark.integration


@pytest.fixture
def client(gateway_settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(gateway_settings)) as client:
        deadline = time.monotonic() + 10
        while not client.get("/health").json()["broker_connected"]:
            assert time.monotonic() < deadline, "gateway never connected"
            time.sleep(0.05)
        yield client


def _wait_stored(client: TestClient, site: str, count: int) -> None:
    deadline = time.monotonic() + 30
    while client.get(f"/sites/{site}/readings").json()["count"] < count:
        assert time.monotonic() < deadline, "readings were not stored in time"
        time.sleep(0.05)


def test_health_reports_broker_store_and_lag(client: TestClient) -> None:
    body = client.get("/health").json()
    assert body["status"] == "ok"
    assert body["broker_connected"] is True
    assert body["store"] == "sqlite"
    assert body["store_writable"] is True
    assert body["ingest_lag_s"] < 30


def test_sites_lists_the_registry(client: TestClient) -> None:
    sites = client.get("/sites").json()
    assert len(sites) == 12
    assert {"id": "elm-12", "jurisdiction": "edgar"}.items() <= sites[0].items()


def test_unknown_site_is_404_with_a_clear_message(client: TestClient) -> None:
    for path in ("/sites/nope", "/sites/nope/readings"):
        response = client.get(path)
        assert response.status_code == 404
        assert response.json() == {"detail": "no site with id 'nope'"}


def test_readings_returns_what_was_stored_filtered_by_node_field_and_time(
    client: TestClient, mosquitto: BrokerProcess
) -> None:
    messages = pit_messages(50, site="oak-3")
    publish(mosquitto.host, mosquitto.port, messages)
    _wait_stored(client, "oak-3", 50)
    body = client.get("/sites/oak-3/readings", params={"node": "pit", "field": "level_cm"}).json()
    assert body["count"] == 50
    assert [r["values"] for r in body["readings"][:3]] == [
        {"level_cm": 0.0},
        {"level_cm": 1.0},
        {"level_cm": 2.0},
    ]
    middle = body["readings"][10]["ts"]
    later = client.get("/sites/oak-3/readings", params={"from": middle}).json()
    assert later["count"] == 40
    before = client.get("/sites/oak-3/readings", params={"to": middle}).json()
    assert before["count"] == 10


def test_site_detail_shows_nodes_with_last_seen(
    client: TestClient, mosquitto: BrokerProcess
) -> None:
    publish(mosquitto.host, mosquitto.port, pit_messages(3, site="elm-14"))
    _wait_stored(client, "elm-14", 3)
    body = client.get("/sites/elm-14").json()
    nodes = {n["id"]: n for n in body["nodes"]}
    assert set(nodes) == {"pit", "outlet", "air"}
    last_seen = datetime.fromisoformat(nodes["pit"]["last_seen"])
    assert datetime.now(UTC) - last_seen < timedelta(minutes=5)
    assert nodes["outlet"]["last_seen"] is None
    assert body["installation"]["destination"] == "grade"


def test_unknown_field_is_rejected_with_the_known_ones(client: TestClient) -> None:
    response = client.get("/sites/elm-12/readings", params={"field": "depth_ft"})
    assert response.status_code == 422
    assert "level_cm" in response.json()["detail"]


def test_deadletters_lists_refused_messages_with_counts(
    client: TestClient, mosquitto: BrokerProcess
) -> None:
    publish(mosquitto.host, mosquitto.port, [("sumpwatch/v1/elm-12/pit/telemetry", b"\xff\x00")])
    deadline = time.monotonic() + 10
    while not client.get("/deadletters").json()["items"]:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    body = client.get("/deadletters").json()
    assert body["counts"] == {"not_json": 1}
    assert body["items"][0]["topic"] == "sumpwatch/v1/elm-12/pit/telemetry"
    assert body["items"][0]["payload_bytes"] == 2


def test_metrics_exposes_counters_in_prometheus_format(
    client: TestClient, mosquitto: BrokerProcess
) -> None:
    publish(mosquitto.host, mosquitto.port, pit_messages(7, site="mill-9"))
    _wait_stored(client, "mill-9", 7)
    response = client.get("/metrics")
    assert response.headers["content-type"].startswith("text/plain")
    text = response.text
    assert "sumpwatch_messages_received_total 7.0" in text
    assert "sumpwatch_readings_stored_total 7.0" in text
    assert "sumpwatch_batch_write_seconds_bucket" in text
