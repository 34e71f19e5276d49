"""Issue 6: the whole gateway on InfluxDB: MQTT -> gateway -> influxd, through an
outage and a gateway restart with a non-empty spool (real Mosquitto, real influxd)."""

from __future__ import annotations

import asyncio

import pytest

from gateway.broker import BrokerProcess
from gateway.runtime import Runtime, run_gateway
from gateway.settings import Settings
from gateway.store.base import SeriesQuery
from gateway.store.influx import InfluxStore
from tests import influx_fixture
from tests.influx_fixture import InfluxServer
from tests.mqtt_helpers import pit_messages, publish, wait_connected, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow]

influxd_private = influx_fixture.influxd_private
influx_database = influx_fixture.influx_database


@pytest.fixture
def influx_gateway_settings(
    gateway_settings: Settings, influxd_private: InfluxServer, influx_database: str
) -> Settings:
    return gateway_settings.updated(
        store={"backend": "influxdb"},
        influx={"url": influxd_private.url, "database": influx_database},
    )


def _influx(runtime: Runtime) -> InfluxStore:
    assert isinstance(runtime.store, InfluxStore)
    store = runtime.store
    store.retry_min_s, store.retry_max_s = 0.05, 0.3  # keep the test short
    return store


async def test_messages_flowing_through_an_influxdb_outage_and_a_gateway_restart_are_all_stored(
    influx_gateway_settings: Settings, influxd_private: InfluxServer, mosquitto: BrokerProcess
) -> None:
    async with run_gateway(influx_gateway_settings) as runtime:
        await wait_connected(runtime)
        store = _influx(runtime)
        await asyncio.to_thread(publish, mosquitto.host, mosquitto.port, pit_messages(300))

        async def first_stored() -> bool:
            return await store.count() == 300

        await wait_until(first_stored)

        influxd_private.stop()
        outage = pit_messages(700, start_seq=300)
        await asyncio.to_thread(publish, mosquitto.host, mosquitto.port, outage)

        async def spooled() -> bool:
            return store.stats()["points_spooled"] >= 700

        await wait_until(spooled)
        assert store.stats()["influx_up"] == 0.0
    # The gateway stopped with InfluxDB still down: the spool holds the outage.
    assert any((influx_gateway_settings.data_dir / "spool").glob("*.seg"))

    influxd_private.start()
    async with run_gateway(influx_gateway_settings) as runtime:
        await wait_connected(runtime)
        store = _influx(runtime)

        async def replayed() -> bool:
            return store.spool.empty and await store.count() == 1000

        await wait_until(replayed)
        rows = await store.readings(SeriesQuery("elm-12", node_id="pit", limit=2000))
        assert sorted(r.seq for r in rows) == list(range(1000))
        assert all(r.values["level_cm"] == float(r.seq % 60) for r in rows)
