"""Fixtures for the web and accounts tests: the app served by uvicorn on a free port
over a live pipeline (real Mosquitto, simulated homes), demo accounts, and headless
Chromium driven by Playwright.

The tests that use them run in the session's event loop (``pytestmark =
pytest.mark.asyncio(loop_scope="session")``) so one Chromium serves them all; each
test still gets its own app, broker, database and browser context.

Screenshots: run with ``SUMPWATCH_SCREENSHOTS=1`` and each browser test saves its
pages to ``docs/screenshots/<name>.png`` for review.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
import pytest_asyncio
import uvicorn
from argon2 import PasswordHasher
from fastapi import FastAPI
from pydantic import SecretStr

from alerts.config import AlertsConfig
from alerts.manager import AlertManager
from gateway.accounts.models import Role
from gateway.accounts.repository import AccountStore
from gateway.app import create_app, server_config
from gateway.broker import BrokerProcess
from gateway.contract import telemetry_topic
from gateway.registry import SiteRegistry
from gateway.rules.engine import RulesEngine
from gateway.rules.pack import load_packs
from gateway.runtime import Runtime
from gateway.settings import REPO_DIR, Settings
from tests.mqtt_helpers import pit_payload, publish, wait_until

FAST_HASHER = PasswordHasher(time_cost=1, memory_cost=1024, parallelism=1)
SCREENSHOT_DIR = REPO_DIR / "docs" / "screenshots"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-quic",
    "--no-first-run",
    "--disable-component-update",
    "--disable-sync",
]

#: Demo accounts the tests sign in with: (username, password, role, sites, jurisdictions).
USERS: dict[str, tuple[str, Role, tuple[str, ...], tuple[str, ...]]] = {
    "elm16": ("elm16-test-password", Role.HOMEOWNER, ("elm-16",), ()),
    "oak5": ("oak5-test-password", Role.HOMEOWNER, ("oak-5",), ()),
    "edgar-pw": ("edgar-test-password", Role.PUBLIC_WORKS, (), ("edgar",)),
    "ll6-pw": ("ll6-test-password", Role.PUBLIC_WORKS, (), ("local-law-6-2024",)),
    "admin": ("admin-test-password", Role.ADMIN, (), ()),
}


def password(username: str) -> str:
    """The test password of a demo account."""
    return USERS[username][0]


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def screenshots_enabled() -> bool:
    """True when the run asked for screenshots (``SUMPWATCH_SCREENSHOTS=1``)."""
    return os.environ.get("SUMPWATCH_SCREENSHOTS", "") not in ("", "0")


async def shot(page: Any, name: str) -> None:
    """Save a full-page screenshot when screenshots are enabled."""
    if screenshots_enabled():
        SCREENSHOT_DIR.mkdir(parents=True, exist_ok=True)
        await page.screenshot(path=str(SCREENSHOT_DIR / f"{name}.png"), full_page=True)


@dataclass
class LiveApp:
    """The app served over HTTP with its running gateway."""

    base_url: str
    app: FastAPI
    settings: Settings
    broker: BrokerProcess

    @property
    def runtime(self) -> Runtime:
        """The gateway runtime the lifespan built."""
        runtime: Runtime = self.app.state.runtime
        return runtime

    @property
    def accounts(self) -> AccountStore:
        """The account store."""
        store: AccountStore = self.app.state.accounts
        return store


async def wire_rules_and_alerts(runtime: Any) -> None:
    """Plug the rules engine and alert manager into the pipeline unless the app did.

    The lead's composition root wires them in production; until every build does,
    the tests make sure findings and alerts flow from the live readings.
    """
    if getattr(runtime, "alerts", None) is not None:
        return
    packs = load_packs(runtime.settings.rule_packs_dir)
    engine = RulesEngine(runtime.registry, packs, runtime.settings.detectors.silence_factor)
    manager = AlertManager(db=runtime.db, registry=runtime.registry, config=AlertsConfig())
    await manager.open()
    runtime.pipeline.detectors = engine
    runtime.pipeline.sinks.append(manager.on_events)
    runtime.packs = packs
    runtime.engine = engine
    runtime.alerts = manager


async def seed_users(store: AccountStore) -> None:
    """Create the demo accounts of :data:`USERS`."""
    for username, (pw, role, sites, jurisdictions) in USERS.items():
        if await store.get_user(username) is None:
            await store.add_user(
                username,
                pw,
                role,
                site_ids=sites,
                jurisdictions=jurisdictions,
                display_name=username,
            )


@pytest.fixture
def web_settings(gateway_settings: Settings) -> Settings:
    """Gateway settings with authentication on."""
    return gateway_settings.updated(
        api={"auth_enabled": True, "secret_key": SecretStr("test-secret-key-for-web-tests")}
    )


async def _serve(settings: Settings, broker: BrokerProcess) -> AsyncIterator[LiveApp]:
    app = create_app(settings)
    # Bound here and handed to uvicorn, never closed in between: a port picked free
    # and bound later can be taken meanwhile (another worker's broker, a browser's
    # outgoing connection), and one such "address already in use" broke every later
    # live-app test of that worker.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = int(sock.getsockname()[1])
    # Served as `sumpwatch gateway` serves it (no proxy headers believed unless configured).
    config = server_config(
        app,
        settings.updated(api={"host": "127.0.0.1", "port": port}),
        log_level="warning",
    )
    config.timeout_graceful_shutdown = 1
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))

    async def started() -> bool:
        if task.done():
            task.result()  # raise the startup error
        return server.started

    await wait_until(started, timeout=20)
    live = LiveApp(f"http://127.0.0.1:{port}", app, settings, broker)

    async def connected() -> bool:
        return bool(live.runtime.source.connected)

    await wait_until(connected, timeout=10)
    await wire_rules_and_alerts(live.runtime)
    # Argon2 at its production cost takes ~0.4 s per hash on a small machine; the
    # tests' throw-away accounts use the same algorithm at its lowest cost.
    live.accounts.hasher = FAST_HASHER
    await seed_users(live.accounts)
    try:
        yield live
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, timeout=15)
        sock.close()


@pytest_asyncio.fixture(loop_scope="session")
async def live_app(web_settings: Settings, mosquitto: BrokerProcess) -> AsyncIterator[LiveApp]:
    """The app with auth on, served by uvicorn over a live gateway, demo users seeded."""
    async for live in _serve(web_settings, mosquitto):
        yield live


@pytest_asyncio.fixture(loop_scope="session")
async def open_app(gateway_settings: Settings, mosquitto: BrokerProcess) -> AsyncIterator[LiveApp]:
    """The app with auth off (the other features' tests run like this)."""
    async for live in _serve(gateway_settings, mosquitto):
        yield live


def login_form_token(html: str) -> str:
    """The CSRF token of the login form."""
    return html.split('name="csrf_token" value="', 1)[1].split('"', 1)[0]


@contextlib.asynccontextmanager
async def signed_in(live: LiveApp, username: str) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client signed in through the login form (it keeps the session cookie)."""
    async with httpx.AsyncClient(base_url=live.base_url, timeout=20) as client:
        form = await client.get("/login")
        response = await client.post(
            "/login",
            data={
                "username": username,
                "password": password(username),
                "csrf_token": login_form_token(form.text),
            },
        )
        assert response.status_code == 303, response.text
        yield client


def csrf_of(html: str) -> str:
    """The session's CSRF token from a rendered page."""
    return html.split('data-csrf="', 1)[1].split('"', 1)[0]


# ---------------------------------------------------------------------- simulated homes


def simulated_messages(
    registry: SiteRegistry, site_ids: list[str], hours: float, scenario: str = "normal_winter_grade"
) -> list[tuple[str, bytes]]:
    """The last ``hours`` of simulated homes at these registry sites, ending now.

    ``firmware_sim`` models each registry site's own pit, pump and line (its
    installation taken as the truth) under the scenario's weather, inflow and faults.
    """
    from firmware_sim.offline import build_simulation, registry_homes
    from firmware_sim.scenario import load_scenario

    model = load_scenario(scenario)
    sub = SiteRegistry([s for s in registry if s.id in site_ids])
    now = datetime.now(UTC).replace(microsecond=0)
    sim = build_simulation(
        model,
        home_specs=registry_homes(sub, model),
        start=now - timedelta(hours=hours),
        duration=timedelta(hours=hours),
    )
    return [(m.topic, m.payload) for m in sim.messages() if m.topic.endswith("/telemetry")]


async def publish_messages(live: LiveApp, messages: list[tuple[str, bytes]]) -> None:
    """Publish through Mosquitto and wait until the gateway stored them all."""
    before = await live.runtime.store.count()
    await asyncio.to_thread(
        publish, live.broker.host, live.broker.port, messages, client_id="sim-homes"
    )

    async def stored() -> bool:
        return await live.runtime.store.count() >= before + len(messages)

    await wait_until(stored, timeout=60)


async def feed_homes(
    live: LiveApp, site_ids: list[str], hours: float = 1.0, scenario: str = "normal_winter_grade"
) -> int:
    """Publish the simulated last ``hours`` of the sites and wait until stored."""
    messages = simulated_messages(live.runtime.registry, site_ids, hours, scenario)
    await publish_messages(live, messages)
    return len(messages)


async def publish_pit(
    live: LiveApp, site_id: str, levels: list[float], *, pump_on: bool = False, boot: str = "live"
) -> None:
    """Publish pit readings (one per second of device time, from now) and wait until stored."""
    start = datetime.now(UTC)
    seq0 = int(start.timestamp()) % 1_000_000
    messages = [
        (
            telemetry_topic(site_id, "pit"),
            json.dumps(
                pit_payload(
                    site_id,
                    "pit",
                    seq0 + i,
                    boot=boot,
                    ts=start + timedelta(seconds=i),
                    level_cm=level,
                    pump_on=pump_on,
                )
            ).encode(),
        )
        for i, level in enumerate(levels)
    ]
    before = await live.runtime.store.count(site_id)
    await asyncio.to_thread(
        publish, live.broker.host, live.broker.port, messages, client_id="live-pit"
    )

    async def stored() -> bool:
        return await live.runtime.store.count(site_id) >= before + len(messages)

    await wait_until(stored, timeout=20)


# ---------------------------------------------------------------------- browser


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def chromium() -> AsyncIterator[Any]:
    """Debian's headless Chromium, started once per test session (it takes ~1.5 s)."""
    from playwright.async_api import async_playwright

    if not os.path.exists(CHROMIUM):  # noqa: ASYNC240 (one stat per session)
        pytest.fail(f"{CHROMIUM} is not installed (apt-get install chromium)")
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
        )
        try:
            yield browser
        finally:
            await browser.close()


@pytest_asyncio.fixture(loop_scope="session")
async def browser_context(chromium: Any) -> AsyncIterator[Any]:
    """A fresh browser profile (context: no cookies, no cache) for one test."""
    context = await chromium.new_context(viewport={"width": 1280, "height": 900})
    try:
        yield context
    finally:
        await context.close()


async def browser_login(page: Any, live: LiveApp, username: str, next_path: str = "/") -> None:
    """Sign in through the login form."""
    await page.goto(f"{live.base_url}/login?next={next_path}")
    await page.fill("input[name=username]", username)
    await page.fill("input[name=password]", password(username))
    await page.click("button[type=submit]")
    await page.wait_for_load_state("domcontentloaded")
