"""End to end: simulator telemetry published to a real Mosquitto, through the real
gateway (validate, store, rules), to an alert e-mail received by a real SMTP server.

The composition root wires the rules engine and the alert manager; the test only
gives the gateway an alert routing file that points at its SMTP server.
"""

from __future__ import annotations

import asyncio
import tomllib
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import tomli_w

from firmware_sim.offline import run_offline
from gateway.broker import BrokerProcess, free_port
from gateway.runtime import run_gateway
from tests.conftest import MakeSettings
from tests.mqtt_helpers import publish, wait_connected, wait_until
from tests.test_alerts_delivery import smtp_server

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def registry_with_contacts(sites_toml: str) -> str:
    """The simulator's registry, with an e-mail contact for every home."""
    data = tomllib.loads(sites_toml)
    for site in data["site"]:
        site["contacts"] = [
            {"name": f"Owner of {site['id']}", "email": f"owner-{site['id']}@example.org"}
        ]
    return tomli_w.dumps(data)


async def test_a_failed_pump_in_simulated_telemetry_ends_in_one_high_water_email(
    tmp_path: Path,
    make_settings: MakeSettings,
    mosquitto: BrokerProcess,
) -> None:
    start = datetime.now(UTC) - timedelta(hours=4)
    run = run_offline("pump_failure_high_water", homes=1, start=start, duration=timedelta(hours=4))
    (home,) = run.labels["homes"]
    # The simulator also labels the pump failure itself (issue 14); the pit does rise.
    assert "high_water" in {c["condition"] for c in home["conditions"]}
    sites = tmp_path / "sites.toml"
    sites.write_text(registry_with_contacts(run.sites_toml))
    settings = make_settings(
        sites_file=sites,
        mqtt={
            "host": mosquitto.host,
            "port": mosquitto.port,
            "client_id": f"gw-{uuid.uuid4().hex[:8]}",
        },
        store={"batch_interval_s": 0.02},
    )
    port = free_port()
    alerts_file = tmp_path / "alerts.toml"
    alerts_file.write_text(
        tomli_w.dumps(
            {
                "poll_interval_s": 0.05,
                "mqtt": {"enabled": False},
                "smtp": {
                    "host": "127.0.0.1",
                    "port": port,
                    "security": "none",
                    "sender": "SumpWatch <alerts@sumpwatch.test>",
                },
            }
        )
    )
    settings = settings.updated(alerts={"file": alerts_file})
    with smtp_server(port) as smtp:
        async with run_gateway(settings) as runtime:
            await wait_connected(runtime)
            await asyncio.to_thread(
                publish, mosquitto.host, mosquitto.port, run.messages, client_id="sim-e2e"
            )

            async def emailed() -> bool:
                return any("high water" in m["Subject"].lower() for m in smtp.messages)

            await wait_until(emailed, timeout=60)
            await asyncio.sleep(0.5)  # more findings updates keep flowing: no more mail
            alerts = await runtime.alerts.list_alerts()
            # Messages name each ordinance by its pack's title (issue 20.3).
            assert runtime.alerts.ordinances["000_86c7187f3bed6ca5.txt"] == (
                "Village of Edgar Sump Pump Ordinance"
            )
    # The dead pump is also a pump failure (its own alert); high water stays separate.
    assert sorted((a.rule_id, a.severity.value, a.state.value) for a in alerts) == [
        ("high_water", "critical", "open"),
        ("pump_failure", "critical", "open"),
    ]
    # One high-water alert, one e-mail, despite many finding updates.
    (mail,) = [m for m in smtp.messages if "high water" in m["Subject"].lower()]
    assert mail["Subject"] == "[SumpWatch] CRITICAL: High water in the sump pit - fail-dead"
    assert mail["To"] == "Owner of fail-dead <owner-fail-dead@example.org>"
    body = mail.get_body(("plain",))
    assert body is not None and "What to do:" in body.get_content()
