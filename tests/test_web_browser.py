"""Issue 8 in a real browser: Debian's headless Chromium driven by Playwright against
the app served by uvicorn over a live pipeline (real Mosquitto, simulated homes).

``SUMPWATCH_SCREENSHOTS=1`` saves every page to docs/screenshots/ for review.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from playwright.async_api import expect

from tests.browser_fixtures import (
    LiveApp,
    browser_login,
    feed_homes,
    publish_messages,
    publish_pit,
    shot,
    simulated_messages,
)

pytestmark = [
    pytest.mark.integration,
    pytest.mark.browser,
    pytest.mark.asyncio(loop_scope="session"),
]

TIMEOUT_MS = 15_000


async def _points(page: Any, canvas: str) -> int:
    return int(await page.get_attribute(canvas, "data-points") or 0)


async def test_the_homeowner_page_renders_charts_with_data_and_updates_live(
    live_app: LiveApp, browser_context: Any
) -> None:
    await feed_homes(live_app, ["elm-16"], hours=1.0)
    page = await browser_context.new_page()
    await browser_login(page, live_app, "elm16")
    assert page.url.endswith("/site/elm-16")
    await page.wait_for_selector("body[data-charts-ready='24h']", timeout=TIMEOUT_MS)
    assert await _points(page, "#chart-level") > 30  # an hour of minutes, at least
    assert await _points(page, "#chart-temperature") > 30
    assert await page.is_hidden("#charts-empty")
    assert await page.inner_text("[data-testid=status]") != ""
    await page.wait_for_selector("#live.on", timeout=TIMEOUT_MS)
    before = await _points(page, "#chart-level")

    # A new reading arrives through Mosquitto: the gauge and the chart follow, no reload.
    await publish_pit(live_app, "elm-16", [33.0, 34.0])
    await expect(page.locator("[data-testid=level]")).to_have_text("13.4 in", timeout=TIMEOUT_MS)
    assert await _points(page, "#chart-level") > before
    await shot(page, "homeowner-dashboard")

    for range_ in ("7d", "season"):  # hourly rollups (and days), completed from raw
        await page.click(f"button[data-range='{range_}']")
        await page.wait_for_selector(f"body[data-charts-ready='{range_}']", timeout=TIMEOUT_MS)
        assert await _points(page, "#chart-level") > 0
    await page.set_viewport_size({"width": 390, "height": 844})
    await shot(page, "homeowner-dashboard-phone")


async def test_a_high_water_alert_appears_on_the_homeowner_page_and_can_be_acknowledged(
    live_app: LiveApp, browser_context: Any
) -> None:
    # The simulator's failing-pump scenario at 16 Elm St: the motor dies and the pit
    # fills. The page is opened before the water reaches the alarm mark.
    messages = simulated_messages(
        live_app.runtime.registry, ["elm-16"], hours=2.5, scenario="pump_failure_high_water"
    )
    alarm_cm = live_app.runtime.registry.require("elm-16").pit.alarm_cm
    first_high = next(
        i
        for i, (topic, payload) in enumerate(messages)
        if topic.endswith("/pit/telemetry")
        and json.loads(payload)["readings"]["level_cm"] >= alarm_cm
    )
    await publish_messages(live_app, messages[:first_high])
    page = await browser_context.new_page()
    await browser_login(page, live_app, "elm16")
    await page.wait_for_selector("#live.on", timeout=TIMEOUT_MS)
    assert await page.locator(".alert[data-rule='high_water']").count() == 0

    await publish_messages(live_app, messages[first_high:])
    alert = page.locator(".alert[data-rule='high_water']")
    await alert.wait_for(timeout=TIMEOUT_MS)
    assert await page.get_attribute("[data-testid=status]", "data-state") == "problem"
    assert "High water" in await alert.inner_text()
    assert "What to do" in await alert.inner_text()
    await shot(page, "homeowner-high-water-alert")

    await alert.locator("[data-testid=ack]").click()
    await expect(
        page.locator(".alert[data-rule='high_water'] [data-testid=alert-state]")
    ).to_have_text("acknowledged", timeout=TIMEOUT_MS)
    stored = [a for a in await live_app.runtime.alerts.list_alerts() if a.rule_id == "high_water"]
    assert stored[0].state.value == "acknowledged"
    assert stored[0].acknowledged_by == "elm16"
    await shot(page, "homeowner-alert-acknowledged")


async def test_public_works_sees_all_its_sites_and_not_another_jurisdictions(
    live_app: LiveApp, browser_context: Any
) -> None:
    edgar = [s.id for s in live_app.runtime.registry.in_jurisdiction("edgar")]
    await feed_homes(live_app, [*edgar[:3], "main-101"], hours=0.25)
    page = await browser_context.new_page()
    await browser_login(page, live_app, "edgar-pw")
    assert page.url.endswith("/console/edgar")
    rows = page.locator("#sites-table tbody tr")
    assert sorted(await rows.evaluate_all("rs => rs.map(r => r.dataset.site)")) == sorted(edgar)
    assert await page.locator("tr[data-site='main-101']").count() == 0
    # One pin per site (the street map, or its offline schematic once the tiles fail).
    assert await page.get_attribute("[data-testid=street-map]", "data-pins") == str(len(edgar))

    await page.fill("#filter-text", "oak")
    assert await page.get_attribute("#sites-table", "data-shown") == "3"
    await page.fill("#filter-text", "")
    await page.click("#sites-table th:first-child")  # sort by name
    names = await rows.evaluate_all("rs => rs.map(r => r.cells[0].dataset.value)")
    assert names == sorted(names)
    await shot(page, "public-works-console")

    response = await page.goto(f"{live_app.base_url}/console/local-law-6-2024")
    assert response is not None and response.status == 404
    response = await page.goto(f"{live_app.base_url}/site/main-101")
    assert response is not None and response.status == 404


async def test_public_works_assigns_and_resolves_an_alert_from_the_console(
    live_app: LiveApp, browser_context: Any
) -> None:
    await publish_pit(live_app, "oak-5", [58.0, 60.0, 61.0])
    page = await browser_context.new_page()
    await browser_login(page, live_app, "edgar-pw")
    alert = page.locator(".alert[data-rule='high_water']")
    await alert.wait_for(timeout=TIMEOUT_MS)
    await alert.locator("input[name=assignee]").fill("crew-7")
    await alert.locator("[data-testid=assign]").click()
    await expect(page.locator(".alert[data-rule='high_water']")).to_contain_text(
        "Assigned to crew-7", timeout=TIMEOUT_MS
    )
    await shot(page, "public-works-alert-assigned")
    # High water is the homeowner's alert: public works may assign it, not resolve it.
    await expect(
        page.locator(".alert[data-rule='high_water'] [data-testid=resolve]")
    ).to_have_count(0)
    await page.close()
    admin = await browser_context.new_page()
    await browser_login(admin, live_app, "admin", "/console/edgar")
    mine = admin.locator(".alert[data-rule='high_water']").filter(has_text="Assigned to crew-7")
    await mine.locator("input[name=note]").fill("pump replaced")
    await expect(mine.locator("[data-testid=resolve-warning]")).to_contain_text("still detected")
    await mine.locator("input[name=confirm]").check()
    await mine.locator("[data-testid=resolve]").click()
    await mine.wait_for(state="detached", timeout=TIMEOUT_MS)
    resolved = [a for a in await live_app.runtime.alerts.list_alerts() if a.site_id == "oak-5"]
    assert resolved[0].state.value == "resolved"
    assert resolved[0].resolved_by == "admin"
    assert resolved[0].assignee == "crew-7"


async def test_a_homeowner_cannot_reach_another_site(
    live_app: LiveApp, browser_context: Any
) -> None:
    page = await browser_context.new_page()
    await browser_login(page, live_app, "elm16")
    response = await page.goto(f"{live_app.base_url}/site/elm-14")
    assert response is not None and response.status == 404
    assert "Not found" in await page.inner_text("h1")
    await shot(page, "homeowner-other-site-404")
    # Nor through the API or the live stream, with the browser's own session.
    statuses = await page.evaluate(
        """async () => Promise.all(['/sites/elm-14', '/sites/elm-14/readings',
            '/site/elm-14/charts.json', '/site/elm-14/events', '/console/edgar/view.json']
            .map(u => fetch(u, {headers: {accept: 'application/json'}}).then(r => r.status)))"""
    )
    assert statuses == [404, 404, 404, 404, 404]


async def test_the_login_page_says_what_went_wrong(live_app: LiveApp, browser_context: Any) -> None:
    page = await browser_context.new_page()
    await page.goto(f"{live_app.base_url}/site/elm-16")
    assert "/login" in page.url
    await page.fill("input[name=username]", "elm16")
    await page.fill("input[name=password]", "not-the-password")
    await page.click("button[type=submit]")
    assert "Wrong username or password" in await page.inner_text("#login-error")
    await shot(page, "login-error")


async def test_the_unit_switch_shows_metric_values(live_app: LiveApp, browser_context: Any) -> None:
    await publish_pit(live_app, "elm-16", [25.4])
    page = await browser_context.new_page()
    await browser_login(page, live_app, "elm16")
    await expect(page.locator("[data-testid=level]")).to_have_text("10.0 in")
    await page.click("text=Metric")
    await expect(page.locator("[data-testid=level]")).to_have_text("25 cm")
    assert "°C" in await page.inner_text("#line-h + p + dl")
    await page.click("text=US")
    await expect(page.locator("[data-testid=level]")).to_have_text("10.0 in")


async def test_an_api_token_made_on_the_account_page_works_for_integrations(
    live_app: LiveApp, browser_context: Any
) -> None:
    page = await browser_context.new_page()
    await browser_login(page, live_app, "edgar-pw", "/account")
    await page.fill("input[name=name]", "village GIS")
    await page.click("form.row button[type=submit]")
    token = (await page.inner_text("#new-token")).strip()
    assert token.startswith("swt_")
    await shot(page, "account-api-token")
    async with httpx.AsyncClient(
        base_url=live_app.base_url, headers={"authorization": f"Bearer {token}"}
    ) as client:
        sites = {s["id"] for s in (await client.get("/sites")).json()}
    assert sites == {s.id for s in live_app.runtime.registry.in_jurisdiction("edgar")}
    await page.reload()
    assert await page.locator("#new-token").count() == 0  # shown once, made once
    assert await page.locator("table tbody tr").count() == 1
    assert "village GIS" in await page.inner_text("table")


async def test_an_administrator_is_offered_every_console_and_site(
    live_app: LiveApp, browser_context: Any
) -> None:
    page = await browser_context.new_page()
    await browser_login(page, live_app, "admin")
    links = await page.locator("a[href^='/console/']").count()
    assert links == len({s.jurisdiction for s in live_app.runtime.registry})
    assert await page.locator("a[href^='/site/']").count() == len(live_app.runtime.registry)
    await shot(page, "admin-home")


async def test_a_site_without_readings_says_what_to_do(
    live_app: LiveApp, browser_context: Any
) -> None:
    page = await browser_context.new_page()
    await browser_login(page, live_app, "oak5")
    assert page.url.endswith("/site/oak-5")
    await expect(page.locator("[data-testid=status] h2")).to_have_text("No readings yet")
    assert "sensors are plugged in" in await page.inner_text("[data-testid=status]")
    await page.wait_for_selector("body[data-charts-ready='24h']", timeout=TIMEOUT_MS)
    assert await page.is_visible("#charts-empty")
    await shot(page, "homeowner-no-data")
