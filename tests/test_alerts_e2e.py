"""End to end: simulator telemetry published to a real Mosquitto, through the real
gateway (validate, store, rules), to an alert e-mail received by a real SMTP server.

The composition root does not wire the rules engine and the alert manager yet, so
this test plugs them into the running pipeline the way the gateway will (detectors
+ a finding sink).
"""

from __future__ import annotations

import asyncio
import contextlib
import tomllib
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import tomli_w

from alerts import AlertManager, AlertsConfig
from firmware_sim.offline import run_offline
from gateway.broker import BrokerProcess, free_port
from gateway.rules.engine import RulesEngine
from gateway.rules.pack import load_packs
from gateway.runtime import run_gateway
from gateway.settings import Settings
from tests.mqtt_helpers import publish, wait_connected, wait_until
from tests.test_alerts_delivery import smtp_server

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def registry_with_contacts(sites_toml: str) -> str:
    """The simulator's registry, with an e-mail contact for every home."""
    data = tomllib.loads(sites_toml)
    for site in data["site"]:
        site["contacts"] = [{"name": f"Owner of {site['id']}",
                             "email": f"owner-{site['id']}@example.org"}]
    return tomli_w.dumps(data)


async def test_a_failed_pump_in_simulated_telemetry_ends_in_one_high_water_email(
    tmp_path: Path, mosquitto: BrokerProcess,
) -> None:
    start = datetime.now(UTC) - timedelta(hours=4)
    run = run_offline("pump_failure_high_water", homes=1, start=start,
                      duration=timedelta(hours=4))
    (home,) = run.labels["homes"]
    assert [c["condition"] for c in home["conditions"]] == ["high_water"]
    sites = tmp_path / "sites.toml"
    sites.write_text(registry_with_contacts(run.sites_toml))
    settings = Settings(
        _env_file=None,
        data_dir=tmp_path / "data", sites_file=sites,
        mqtt_host=mosquitto.host, mqtt_port=mosquitto.port,
        mqtt_client_id=f"gw-{uuid.uuid4().hex[:8]}", batch_interval_s=0.02,
    )
    packs = load_packs()

    def grace(jurisdiction: str, rule_id: str) -> timedelta | None:
        pack = packs.get(jurisdiction)
        return pack.grace_period(rule_id) if pack is not None else None

    port = free_port()
    config = AlertsConfig.model_validate({
        "poll_interval_s": 0.05, "mqtt": {"enabled": False},
        "smtp": {"host": "127.0.0.1", "port": port, "security": "none",
                 "sender": "SumpWatch <alerts@sumpwatch.test>"},
    })
    with smtp_server(port) as smtp:
        async with run_gateway(settings) as runtime:
            await wait_connected(runtime)
            manager = AlertManager(db=runtime.db, registry=runtime.registry, config=config,
                                   grace_period=grace)
            await manager.open()
            runtime.pipeline.detectors = RulesEngine(runtime.registry, packs)
            runtime.pipeline.sinks.append(manager.on_events)
            task = asyncio.create_task(manager.run())
            try:
                await asyncio.to_thread(publish, mosquitto.host, mosquitto.port, run.messages,
                                        client_id="sim-e2e")

                async def emailed() -> bool:
                    return any("high water" in m["Subject"].lower() for m in smtp.messages)

                await wait_until(emailed, timeout=60)
                await asyncio.sleep(0.5)  # more findings updates keep flowing: no more mail
            finally:
                alerts = await manager.list_alerts()
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
                await manager.close()
    assert [(a.rule_id, a.severity.value, a.state.value) for a in alerts] == [
        ("high_water", "critical", "open")]
    (mail,) = smtp.messages  # one alert, one e-mail, despite many finding updates
    assert mail["Subject"] == "[SumpWatch] CRITICAL: High water in the sump pit - fail-dead"
    assert mail["To"] == "Owner of fail-dead <owner-fail-dead@example.org>"
    body = mail.get_body(("plain",))
    assert body is not None and "What to do:" in body.get_content()
