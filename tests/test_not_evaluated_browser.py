"""Issue 20.10 in a real browser: readings that arrived behind their node's newest are
shaded on the dashboard's charts and named as not evaluated (headless Chromium over
the app served by uvicorn, live pipeline, real Mosquitto)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from playwright.async_api import expect

from gateway.contract import telemetry_topic
from tests.browser_fixtures import LiveApp, browser_login, publish_messages
from tests.mqtt_helpers import pit_payload

pytestmark = [
    pytest.mark.integration,
    pytest.mark.browser,
    pytest.mark.asyncio(loop_scope="session"),
]

TIMEOUT_MS = 15_000


def _pit(seq: int, ts: datetime) -> tuple[str, bytes]:
    payload = pit_payload("oak-5", "pit", seq, boot="late", ts=ts, level_cm=30.0)
    return telemetry_topic("oak-5", "pit"), json.dumps(payload).encode()


async def test_late_readings_are_shaded_and_named_not_evaluated_on_the_dashboard(
    live_app: LiveApp, browser_context: Any
) -> None:
    now = datetime.now(UTC).replace(microsecond=0)
    live = [_pit(seq, now - timedelta(seconds=60 - 10 * seq)) for seq in range(6)]
    late = [_pit(100 + i, now - timedelta(minutes=20, seconds=-10 * i)) for i in range(3)]
    await publish_messages(live_app, [*live, *late])
    page = await browser_context.new_page()
    await browser_login(page, live_app, "oak5")
    await page.wait_for_selector("body[data-charts-ready='24h']", timeout=TIMEOUT_MS)
    assert await page.get_attribute("#chart-level", "data-not-evaluated") == "1"
    note = page.locator("[data-testid=charts-not-evaluated]")
    await expect(note).to_be_visible()
    await expect(note).to_contain_text("Shaded grey: not evaluated.")
    await expect(note).to_contain_text("pit sensor,")
    await expect(note).to_contain_text("(3 readings)")
