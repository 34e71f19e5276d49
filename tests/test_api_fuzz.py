"""Issue 7, bad input to the API: schemathesis fuzzes every operation of the OpenAPI
spec over HTTP against ``sumpwatch gateway`` run as a process (real Mosquitto and
SQLite behind it): no request may end in a 5xx.

The gateway runs in its own process, not in the test's: a request that hangs or a
shutdown that stalls shows as that process failing, never as a wedged test runner.
A few examples per operation keep the whole run well under a minute; the seed is
fixed by hypothesis' database-less derandomised mode so a failure repeats.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error

from gateway.app import create_app
from gateway.broker import BrokerProcess, free_port, start_broker
from gateway.settings import Settings
from tests.gateway_process import gateway_config, start_cli, stop_process, wait_http
from tests.mqtt_helpers import pit_messages, publish

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def fuzz_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    broker = start_broker(tmp_path_factory.mktemp("api-fuzz-broker"))
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture(scope="module")
def api_url(tmp_path_factory: pytest.TempPathFactory, fuzz_broker: BrokerProcess) -> Iterator[str]:
    """``sumpwatch gateway`` (auth off: every request is an administrator's, so every
    operation is reached), with some telemetry stored to query."""
    root: Path = tmp_path_factory.mktemp("api-fuzz")
    port = free_port()
    config = gateway_config(
        root, fuzz_broker, port, auth_enabled=False, secret_key="fuzz-test-secret-key"
    )
    log = root / "gateway.log"
    proc = start_cli(["gateway", "-c", str(config)], log, root)
    try:
        wait_http(proc, port, log)
        publish(fuzz_broker.host, fuzz_broker.port, pit_messages(200))
        yield f"http://127.0.0.1:{port}"
    finally:
        stop_process(proc)


@pytest.fixture(scope="module")
def api_schema(api_url: str) -> Any:
    """The running gateway's own OpenAPI document."""
    return schemathesis.openapi.from_url(f"{api_url}/openapi.json")


def _operations() -> list[Any]:
    """(method, path) of every operation in the app's OpenAPI document."""
    spec = create_app(Settings(_env_file=None)).openapi()
    return [pytest.param(m.upper(), path) for path, item in spec["paths"].items() for m in item]


# schemathesis' own pytest plugin does not work with pytest 9 (it reads a removed
# private attribute), so each operation is one test item driving hypothesis itself.
@pytest.mark.parametrize(("method", "path"), _operations())
def test_no_request_makes_the_api_fail_with_a_server_error(
    api_schema: Any, method: str, path: str
) -> None:
    operation = api_schema[path][method]

    @given(case=operation.as_strategy())
    @settings(
        max_examples=int(os.environ.get("SUMPWATCH_FUZZ_EXAMPLES", "20")),
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    def fuzz(case: Any) -> None:
        case.call_and_validate(checks=[not_a_server_error])

    fuzz()


@pytest.mark.parametrize(
    "url",
    [
        # Found by the fuzzing: each was a 500 (integer or date overflow) before the
        # routes bounded offsets and checked query times (gateway.api.deps).
        "/deadletters?offset=9223372036854775808",
        "/alerts?offset=9223372036854775808",
        "/findings?to=0001-01-01T00:00:00%2B00:01",
        "/sites/elm-12/readings?from=0001-01-01T00:00:00%2B00:01",
        "/sites/elm-12/readings?to=9999-12-31T23:59:59-10:00",
        "/deadletters?limit=1000&offset=9223372036854775807",
        # Issue 12: a season in year 0 (no such year) or past 9999 was a 500.
        "/reports/winter?season=0000-0001",
        "/reports/winter?season=9999-10000",
    ],
)
def test_the_500s_fuzzing_found_stay_fixed(api_url: str, url: str) -> None:
    response = httpx.get(f"{api_url}{url}", timeout=30)
    assert response.status_code < 500, response.text
