"""One set of exception handlers: each domain error has one HTTP status, answered as
an HTML page to a browser and as JSON to everything else."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import FastAPI

from alerts.models import InvalidTransition
from gateway.errors import (
    BrokerError,
    ConfigError,
    NotEnabled,
    NotFound,
    StoreUnavailable,
    SumpWatchError,
)
from gateway.problems import install_error_handlers
from gateway.settings import ApiSettings

RAISED: dict[str, SumpWatchError] = {
    "not-found": NotFound("no alert with id 'a1'"),
    "transition": InvalidTransition("alert a1 is resolved"),
    "config": ConfigError("season must look like 2026-2027"),
    "not-enabled": NotEnabled("alerts are not enabled on this gateway"),
    "store-down": StoreUnavailable("database is locked"),
    "broker": BrokerError("our own failure, not the request's"),
}


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    app = FastAPI()
    app.state.api = ApiSettings()

    @app.get("/raise/{name}")
    async def raise_it(name: str) -> None:
        raise RAISED[name]

    install_error_handlers(app)
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as c:
        yield c


@pytest.mark.parametrize(
    ("name", "status"),
    [
        ("not-found", 404),
        ("transition", 409),
        ("config", 400),
        ("not-enabled", 503),
        ("store-down", 503),
    ],
)
async def test_a_domain_error_is_answered_with_its_status_and_message_as_json(
    client: httpx.AsyncClient, name: str, status: int
) -> None:
    response = await client.get(f"/raise/{name}", headers={"Accept": "application/json"})
    assert response.status_code == status
    assert response.json() == {"detail": str(RAISED[name])}


async def test_a_browser_gets_the_error_page_with_advice(client: httpx.AsyncClient) -> None:
    response = await client.get("/raise/transition", headers={"Accept": "text/html"})
    assert response.status_code == 409
    assert response.headers["content-type"].startswith("text/html")
    assert "alert a1 is resolved" in response.text
    assert "Reload the page" in response.text


async def test_an_error_that_is_not_the_requests_fault_stays_a_server_error(
    client: httpx.AsyncClient,
) -> None:
    response = await client.get("/raise/broker", headers={"Accept": "application/json"})
    assert response.status_code == 500
