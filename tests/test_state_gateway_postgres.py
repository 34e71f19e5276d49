"""A gateway whose settings name a postgresql:// state_url keeps its state there:
the readings go to the time-series store, everything else to PostgreSQL."""

from __future__ import annotations

import asyncio
import sqlite3

import psycopg
from pydantic import SecretStr

from gateway.broker import BrokerProcess
from gateway.runtime import run_gateway
from gateway.settings import Settings
from tests.mqtt_helpers import pit_messages, publish, wait_connected, wait_until


async def test_a_gateway_with_a_state_url_keeps_dead_letters_in_postgresql_and_readings_in_sqlite(
    gateway_settings: Settings, mosquitto: BrokerProcess, pg_url: str
) -> None:
    settings = gateway_settings.updated(store={"state_url": SecretStr(pg_url)})
    async with run_gateway(settings) as runtime:
        await wait_connected(runtime)
        good = pit_messages(3)
        bad = [(good[0][0], b"not json")]
        await asyncio.to_thread(publish, mosquitto.host, mosquitto.port, [*good, *bad])

        async def judged() -> bool:
            letters = sum((await runtime.state.deadletter_counts()).values())
            return await runtime.store.count() >= 3 and letters >= 1

        await wait_until(judged, 20)
    with psycopg.connect(pg_url) as conn:
        [(in_postgresql,)] = conn.execute("SELECT COUNT(*) FROM deadletters").fetchall()
    with sqlite3.connect(settings.sqlite_file) as conn:
        [(in_sqlite,)] = conn.execute("SELECT COUNT(*) FROM deadletters").fetchall()
        [(readings,)] = conn.execute("SELECT COUNT(*) FROM readings").fetchall()
    assert (in_postgresql, in_sqlite, readings) == (1, 0, 3)
