"""Shared fixtures: real service processes on free ports with temp dirs."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, Protocol

import pytest

from gateway.broker import BrokerProcess, mosquitto_binary, start_broker
from gateway.runtime import Runtime, run_gateway
from gateway.settings import REPO_DIR, Settings
from gateway.settings import merge_overrides as _merge
from tests.influx_fixture import influx_database, influxd, influxd_private  # noqa: F401
from tests.mqtt_helpers import wait_connected
from tests.pg_fixture import (  # noqa: F401
    empty_state_db_factory,
    pg_cluster,
    pg_migrated,
    pg_url,
    state_db,
    state_db_factory,
)

DEMO_SITES = REPO_DIR / "deploy" / "sites.example.toml"
#: The web/accounts fixtures (served app, demo users, Chromium), shared by their tests.
pytest_plugins = ["tests.browser_fixtures"]


@pytest.fixture
def mosquitto(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A real Mosquitto started with the shipped limits on a free port."""
    if mosquitto_binary() is None:
        pytest.fail("mosquitto is not installed (scripts/test.sh installs it)")
    broker = start_broker(tmp_path / "mosquitto")
    yield broker
    broker.stop()


class MakeSettings(Protocol):
    """The ``make_settings`` fixture: Settings from nested overrides."""

    def __call__(self, **overrides: Any) -> Settings: ...


@pytest.fixture
def make_settings(tmp_path: Path) -> MakeSettings:
    """Settings with the data dir under tmp_path, no ``.env`` and no schedule, plus
    nested overrides: ``make_settings(mqtt={"port": 1884}, store={"batch_max": 10})``."""

    def make(**overrides: Any) -> Settings:
        base: dict[str, Any] = {
            "data_dir": tmp_path / "data",
            "sites_file": DEMO_SITES,
            "reports": {"schedule": False},
        }
        return Settings(_env_file=None, **_merge(base, overrides))  # type: ignore[call-arg]

    return make


@pytest.fixture
def gateway_settings(make_settings: MakeSettings, mosquitto: BrokerProcess) -> Settings:
    """Settings for a gateway on the test broker with its store in a temp dir."""
    return make_settings(
        mqtt={
            "host": mosquitto.host,
            "port": mosquitto.port,
            "client_id": f"gw-{uuid.uuid4().hex[:8]}",
        },
        store={"batch_interval_s": 0.02},
        # These tests publish thousands of one node's readings 1 ms of device time
        # apart: a flood, by design, to load the pipeline. The per-node rate limit
        # would rightly refuse it; tests/test_admission.py tests the limit itself.
        validation={"rate_limit_factor": 0},
    )


@pytest.fixture
async def gateway(gateway_settings: Settings) -> AsyncIterator[Runtime]:
    """A running gateway (ingest, store, rules) without HTTP."""
    async with run_gateway(gateway_settings) as runtime:
        await wait_connected(runtime)
        yield runtime
