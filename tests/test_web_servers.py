"""``sumpwatch api``: web servers apart from the gateways, any number over one
PostgreSQL state. A session made on one is valid on the other, and both show the
same alerts."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import uvicorn
from pydantic import SecretStr

from alerts.models import AlertState
from gateway.accounts.models import Role
from gateway.accounts.repository import AccountStore
from gateway.app import create_app, server_config
from gateway.broker import free_port
from gateway.domain import FindingChange
from gateway.settings import Settings
from gateway.state.postgres import PostgresDatabase
from tests.browser_fixtures import FAST_HASHER, login_form_token
from tests.conftest import DEMO_SITES
from tests.mqtt_helpers import wait_until
from tests.test_alerts_manager import ev, finding, make

SECRET = "a-secret-key-every-web-server-shares"


def _settings(tmp_path: Path, name: str, pg_url: str) -> Settings:
    return Settings(
        _env_file=None,
        data_dir=tmp_path / name,
        sites_file=DEMO_SITES,
        store={"state_url": SecretStr(pg_url)},
        api={
            "auth_enabled": True,
            "secret_key": SecretStr(SECRET),
            "host": "127.0.0.1",
            "port": free_port(),
        },
        reports={"schedule": False},
    )


@asynccontextmanager
async def _web_server(settings: Settings) -> AsyncIterator[str]:
    """``sumpwatch api`` on a free port; its base URL."""
    config = server_config(create_app(settings, ingest=False), settings, log_level="warning")
    config.timeout_graceful_shutdown = 1
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())

    async def started() -> bool:
        if task.done():
            task.result()
        return server.started

    await wait_until(started, timeout=20)
    try:
        yield f"http://127.0.0.1:{settings.api.port}"
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, timeout=15)


async def _shared_state(pg_url: str, *, alert: bool = True) -> None:
    """What the gateways left in the state: an admin account and one open alert."""
    db = PostgresDatabase(pg_url)
    await db.open()
    accounts = AccountStore(db, SECRET, hasher=FAST_HASHER)
    await accounts.add_user("admin", "admin-test-password", Role.ADMIN)
    if alert:
        await _gateway_raises_an_alert(db)
    await db.close()


async def _gateway_raises_an_alert(db: PostgresDatabase) -> None:
    harness = make(db)
    await harness.manager.open()
    await harness.manager.on_events([ev(FindingChange.OPENED, finding())])


async def _sign_in(client: httpx.AsyncClient) -> None:
    form = await client.get("/login")
    response = await client.post(
        "/login",
        data={
            "username": "admin",
            "password": "admin-test-password",
            "csrf_token": login_form_token(form.text),
        },
    )
    assert response.status_code == 303, response.text


async def test_a_session_from_one_web_server_is_valid_on_another_and_both_show_the_same_alerts(
    tmp_path: Path, pg_url: str
) -> None:
    await _shared_state(pg_url)
    async with (
        _web_server(_settings(tmp_path, "web-a", pg_url)) as web_a,
        _web_server(_settings(tmp_path, "web-b", pg_url)) as web_b,
        httpx.AsyncClient(base_url=web_a, timeout=20) as on_a,
    ):
        await _sign_in(on_a)
        async with httpx.AsyncClient(base_url=web_b, cookies=on_a.cookies, timeout=20) as on_b:
            seen = [(await c.get("/alerts")).json() for c in (on_a, on_b)]
            health = (await on_b.get("/health")).json()
    assert seen[0] == seen[1]
    assert [(a["site_id"], a["state"]) for a in seen[0]] == [("elm-12", AlertState.OPEN.value)]
    assert health["status"] == "ok" and health["broker_connected"] is False


async def test_a_live_page_on_a_web_server_updates_when_a_gateway_raises_an_alert(
    tmp_path: Path, pg_url: str
) -> None:
    await _shared_state(pg_url, alert=False)
    gateway = PostgresDatabase(pg_url)  # another process's connection to the state
    await gateway.open()
    async with (
        _web_server(_settings(tmp_path, "web", pg_url)) as web,
        httpx.AsyncClient(base_url=web, timeout=20) as client,
    ):
        await _sign_in(client)
        async with client.stream("GET", "/site/elm-12/events") as events:
            lines = events.aiter_lines()
            await asyncio.sleep(0.5)  # the stream has taken its first look
            await _gateway_raises_an_alert(gateway)
            async with asyncio.timeout(15):
                async for line in lines:
                    if line == "event: panels":
                        break
    await gateway.close()
