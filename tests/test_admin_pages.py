"""Issue 20.11: the admin pages (refused messages, deliveries, outbox, ingest
counters) read by an administrator in headless Chromium, and closed to others."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from playwright.async_api import expect

from gateway.contract import telemetry_topic
from gateway.web.admin import hour_table
from tests.browser_fixtures import LiveApp, browser_login, csrf_of, shot, signed_in
from tests.mqtt_helpers import pit_payload, publish, wait_until

TIMEOUT_MS = 15_000


def test_dead_letters_are_tabled_per_hour_newest_first_with_a_total() -> None:
    hour = int(datetime(2026, 11, 30, 13, tzinfo=UTC).timestamp()) // 3600
    table = hour_table([(hour, "clock_ahead", 5), (hour, "schema", 2), (hour - 1, "schema", 1)])
    assert [(h.hour, h.counts, h.total) for h in table] == [
        ("2026-11-30 13:00", {"clock_ahead": 5, "schema": 2}, 7),
        ("2026-11-30 12:00", {"schema": 1}, 1),
    ]


async def _too_fast_simulator(live: LiveApp, count: int) -> None:
    """Readings stamped an hour ahead of the gateway's clock, as a simulator run at a
    speed the gateway refuses would send them."""
    ahead = datetime.now(UTC) + timedelta(hours=1)
    messages = [
        (
            telemetry_topic("elm-16", "pit"),
            json.dumps(
                pit_payload("elm-16", "pit", 900_000 + i, ts=ahead + timedelta(seconds=i),
                            level_cm=20.0)
            ).encode(),
        )
        for i in range(count)
    ]  # fmt: skip
    before = (await live.runtime.state.deadletter_counts()).get("clock_ahead", 0)
    await asyncio.to_thread(publish, live.broker.host, live.broker.port, messages, client_id="fast")

    async def refused() -> bool:
        counts = await live.runtime.state.deadletter_counts()
        return counts.get("clock_ahead", 0) >= before + count

    await wait_until(refused, timeout=20)


@pytest.mark.integration
@pytest.mark.browser
@pytest.mark.asyncio(loop_scope="session")
async def test_an_admin_sees_a_too_fast_simulators_refused_messages_on_a_page(
    live_app: LiveApp, browser_context: Any
) -> None:
    await _too_fast_simulator(live_app, 7)
    page = await browser_context.new_page()
    await browser_login(page, live_app, "admin", "/")
    home = page.locator("[data-testid=admin-links]")
    await expect(home).to_contain_text("Refused messages")
    await home.get_by_role("link", name="Refused messages").click()
    totals = page.locator("[data-testid=deadletter-totals]")
    await expect(totals).to_contain_text("clock_ahead", timeout=TIMEOUT_MS)
    await expect(page.locator("[data-testid=deadletter-hours]")).to_contain_text("clock_ahead")
    await expect(page.locator("[data-testid=deadletter-examples]")).to_contain_text("ahead of")
    await shot(page, "admin-refused-messages")
    await page.goto(f"{live_app.base_url}/admin/metrics")
    await expect(page.locator("[data-testid=metric-rejected]")).to_contain_text("clock_ahead")


@pytest.mark.integration
@pytest.mark.browser
@pytest.mark.asyncio(loop_scope="session")
async def test_the_send_test_alert_button_queues_a_message_shown_in_the_local_outbox(
    live_app: LiveApp, browser_context: Any
) -> None:
    page = await browser_context.new_page()
    await browser_login(page, live_app, "admin", "/admin/outbox")
    await expect(page.locator("[data-testid=no-email]")).to_contain_text("No e-mail server")
    await page.select_option("select[name=site_id]", "elm-16")
    await page.click("[data-testid=send-test-alert]")
    await expect(page.locator("[data-testid=test-sent]")).to_contain_text("elm-16")
    rows = page.locator("[data-testid=outbox-rows] tbody tr").filter(has_text="elm-16")
    await expect(rows.first).to_contain_text("homeowner")
    await expect(rows.first).to_contain_text("opened")
    await rows.first.locator("summary").click()
    await expect(rows.first.locator("[data-testid=outbox-text]")).to_contain_text(
        "Nothing to do: this message checks that alerts reach you."
    )
    await shot(page, "admin-outbox")
    (test,) = [a for a in await live_app.runtime.alerts.list_alerts() if a.rule_id == "test_alert"]
    assert test.state.value == "resolved"  # never an open problem on anyone's page
    await page.goto(f"{live_app.base_url}/admin/deliveries")
    await expect(page.locator("h1")).to_have_text("Alert deliveries")


@pytest.mark.integration
@pytest.mark.asyncio(loop_scope="session")
async def test_the_admin_pages_are_closed_to_a_homeowner_and_to_public_works(
    live_app: LiveApp,
) -> None:
    for user in ("elm16", "edgar-pw"):
        async with signed_in(live_app, user) as client:
            for path in ("/admin/deadletters", "/admin/deliveries", "/admin/outbox",
                         "/admin/metrics", "/admin/inject"):  # fmt: skip
                response = await client.get(path, headers={"accept": "application/json"})
                assert response.status_code == 403, (user, path)


@pytest.mark.integration
@pytest.mark.asyncio(loop_scope="session")
async def test_outside_the_demo_the_inject_page_says_plainly_why_it_cannot_inject(
    live_app: LiveApp,
) -> None:
    # A gateway not started by `sumpwatch demo` has no simulated homes to give a fault.
    async with signed_in(live_app, "admin") as client:
        page = await client.get("/admin/inject")
        assert page.status_code == 200
        assert "only in the demo (sumpwatch demo)" in page.text
        assert 'data-testid="inject-form"' not in page.text
        api = await client.post(
            "/demo/inject",
            json={"site_id": "elm-16", "scenario": "sensor_offline"},
            headers={"x-csrf-token": csrf_of(page.text)},
        )
        assert api.status_code == 409 and "only in the demo" in api.json()["detail"]
