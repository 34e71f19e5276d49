"""Issue 4 end to end: a simulated scenario published to a real Mosquitto yields the
expected findings, with evidence and citations, through the HTTP API."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from firmware_sim.offline import run_offline
from gateway.app import create_app
from gateway.broker import BrokerProcess
from tests.conftest import MakeSettings
from tests.mqtt_helpers import publish

pytestmark = [pytest.mark.integration, pytest.mark.slow]

HOURS = 6


def _client(
    make_settings: MakeSettings, tmp_path: Path, mosquitto: BrokerProcess, sites_toml: str
) -> Iterator[TestClient]:
    sites = tmp_path / "sites.toml"
    sites.write_text(sites_toml)
    settings = make_settings(
        sites_file=sites,
        mqtt={
            "host": mosquitto.host,
            "port": mosquitto.port,
            "client_id": f"gw-{uuid.uuid4().hex[:8]}",
        },
        store={"batch_interval_s": 0.02},
        # The scenarios run in their own simulated dates (winter 2026-27): the
        # gateway's device-clock window is opened to take them as they are.
        validation={"max_future_skew_s": 400 * 86400, "max_age_s": 3650 * 86400},
    )
    with TestClient(create_app(settings)) as client:
        deadline = time.monotonic() + 10
        while not client.get("/health").json()["broker_connected"]:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        yield client


@pytest.mark.parametrize(
    ("scenario", "site", "expected"),
    [
        ("illegal_sanitary_hose", "hose-always", {"sanitary_discharge"}),
        ("icy_walkway", "icy-near", {"icing_risk"}),
        ("frozen_discharge_line", "frozen-sag", {"frozen_line", "high_water"}),
    ],
)
def test_a_published_scenario_yields_its_findings_through_the_api(
    scenario: str,
    site: str,
    expected: set[str],
    make_settings: MakeSettings,
    tmp_path: Path,
    mosquitto: BrokerProcess,
) -> None:
    # Each scenario at its own start: its weather, and so its labels, do not depend
    # on the day or the hour the test runs.
    run = run_offline(scenario, homes=1, duration=timedelta(hours=HOURS))
    (home,) = run.labels["homes"]
    assert home["site_id"] == site
    assert {c["condition"] for c in home["conditions"]} == expected
    for client in _client(make_settings, tmp_path, mosquitto, run.sites_toml):
        publish(mosquitto.host, mosquitto.port, run.messages, client_id="scenario")
        deadline = time.monotonic() + 60
        while True:
            findings = client.get(f"/sites/{site}/findings").json()
            if {f["rule_id"] for f in findings} >= expected or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert {f["rule_id"] for f in findings} == expected
        for finding in findings:
            assert finding["evidence"], finding
            assert finding["action"], finding
        ordinance = [f for f in findings if f["rule_id"] in ("sanitary_discharge", "icing_risk")]
        for finding in ordinance:
            assert finding["citations"], finding
            assert all(c["file"].endswith(".txt") and c["section"] for c in finding["citations"])
        # The same findings are listed village-wide.
        listed = {f["id"] for f in client.get("/findings", params={"site": site}).json()}
        assert listed == {f["id"] for f in findings}
