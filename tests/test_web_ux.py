"""Issue 20 items 3, 5, 6, 7, 8, 13 and 14 in a real browser: Debian's headless
Chromium driven by Playwright against the app served by uvicorn over a live
pipeline (real Mosquitto). axe-core (tests/vendor/axe-core, tests only) checks
contrast and accessible names.

``SUMPWATCH_SCREENSHOTS=1`` saves the pages to docs/screenshots/.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from playwright.async_api import expect
from pydantic import SecretStr

from gateway.broker import BrokerProcess
from gateway.contract import telemetry_topic
from gateway.domain import Finding, FindingChange, FindingEvent, Severity
from gateway.settings import Settings
from tests.browser_fixtures import (
    LiveApp,
    _serve,
    browser_login,
    feed_homes,
    password,
    publish_messages,
    shot,
)
from tests.mqtt_helpers import pit_payload

pytestmark = [
    pytest.mark.integration,
    pytest.mark.browser,
    pytest.mark.asyncio(loop_scope="session"),
]

TIMEOUT_MS = 15_000
AXE = Path(__file__).parent / "vendor" / "axe-core" / "axe.min.js"


@pytest_asyncio.fixture(loop_scope="session")
async def axe_context(chromium: Any) -> AsyncIterator[Any]:
    """A browser profile that lets the test inject axe-core despite the pages' CSP."""
    context = await chromium.new_context(viewport={"width": 1280, "height": 900}, bypass_csp=True)
    try:
        yield context
    finally:
        await context.close()


async def _serious_violations(page: Any) -> list[dict[str, Any]]:
    await page.add_script_tag(path=str(AXE))
    found: list[dict[str, Any]] = await page.evaluate(
        """async () => {
          const r = await axe.run(document, { resultTypes: ["violations"] });
          return r.violations.filter((v) => v.impact === "serious" || v.impact === "critical")
            .map((v) => ({ id: v.id, nodes: v.nodes.map((n) => n.target.join(" ")) }));
        }"""
    )
    return found


def _pit_messages(site_id: str, levels: list[float], step_s: float) -> list[tuple[str, bytes]]:
    """Pit readings ending now, ``step_s`` apart in device time."""
    now = datetime.now(UTC).replace(microsecond=0)
    boot = uuid.uuid4().hex[:8]
    n = len(levels)
    return [
        (
            telemetry_topic(site_id, "pit"),
            json.dumps(
                pit_payload(
                    site_id,
                    "pit",
                    i,
                    boot=boot,
                    ts=now - timedelta(seconds=(n - 1 - i) * step_s),
                    level_cm=level,
                    pump_on=False,
                )
            ).encode(),
        )
        for i, level in enumerate(levels)
    ]


async def _open_finding(live: LiveApp, site_id: str, rule_id: str, title: str) -> None:
    """Record an open finding the way the rules engine does (the finding repository)."""
    now = datetime.now(UTC)
    finding = Finding(
        id=uuid.uuid4().hex,
        rule_id=rule_id,
        site_id=site_id,
        severity=Severity.CRITICAL,
        title=title,
        opened_at=now - timedelta(minutes=20),
        updated_at=now,
        action="Check the pump's power and float; call a plumber if it does not run.",
    )
    await live.runtime.findings.apply([FindingEvent(FindingChange.OPENED, finding)])


# ---------------------------------------------------------------------- 13


async def test_dashboard_and_console_have_no_serious_accessibility_violations(
    live_app: LiveApp, axe_context: Any
) -> None:
    await feed_homes(live_app, ["elm-16", "oak-5"], hours=1.0)
    page = await axe_context.new_page()
    await page.goto(f"{live_app.base_url}/login")
    assert await _serious_violations(page) == []
    await browser_login(page, live_app, "edgar-pw", "/site/elm-16")
    await page.goto(f"{live_app.base_url}/site/elm-16")
    await page.wait_for_selector("body[data-charts-ready='24h']", timeout=TIMEOUT_MS)
    assert await _serious_violations(page) == []
    await page.goto(f"{live_app.base_url}/console/edgar")
    await page.wait_for_selector("#sites-table", timeout=TIMEOUT_MS)
    assert await _serious_violations(page) == []


async def test_the_homeowners_dashboard_with_an_open_alert_has_no_serious_accessibility_violations(
    live_app: LiveApp, axe_context: Any
) -> None:
    # What a homeowner sees on a bad day: the high-water alert with its note field and
    # buttons, the escalated status, the rim mark, time-to-rim, the evidence opened.
    site = live_app.runtime.registry.require("elm-16")
    levels = [site.pit.alarm_cm - 8 + i * (2 / 6) for i in range(31)]
    await publish_messages(live_app, _pit_messages("elm-16", levels, 10.0))
    page = await axe_context.new_page()
    await browser_login(page, live_app, "elm16")
    alert = page.locator(".alert[data-rule='high_water']")
    await expect(alert).to_be_visible(timeout=TIMEOUT_MS)
    await page.wait_for_selector("body[data-charts-ready='24h']", timeout=TIMEOUT_MS)
    await alert.locator("details.evidence summary").click()
    assert await _serious_violations(page) == []


async def test_charts_have_an_accessible_name_and_a_table_and_the_page_a_skip_link(
    live_app: LiveApp, browser_context: Any
) -> None:
    await feed_homes(live_app, ["elm-16"], hours=1.0)
    page = await browser_context.new_page()
    await browser_login(page, live_app, "elm16")
    await page.wait_for_selector("body[data-charts-ready='24h']", timeout=TIMEOUT_MS)
    await page.keyboard.press("Tab")  # the first stop is the skip link
    assert await page.evaluate("document.activeElement.className") == "skip-link"
    name = await page.get_attribute("#chart-level", "aria-label") or ""
    assert name.startswith("Pit level over the last 24 hours: Pit level from ")
    await page.click(".chart-table[data-chart='level'] summary")
    assert await page.locator(".chart-table[data-chart='level'] tbody tr").count() > 10
    assert await page.get_attribute("#announce", "aria-live") == "polite"


# ---------------------------------------------------------------------- 3


async def test_citations_name_the_ordinance_and_quote_it_on_demand(
    live_app: LiveApp, browser_context: Any
) -> None:
    page = await browser_context.new_page()
    await browser_login(page, live_app, "edgar-pw")
    await page.goto(f"{live_app.base_url}/console/edgar")
    cite = page.locator("[data-testid=audit-table] details.cite").first
    summary = (await cite.locator("summary").inner_text()).strip()
    assert summary.startswith("Village of Edgar Sump Pump Ordinance §")
    assert ".txt" not in await page.inner_text("main")
    quote = cite.locator("blockquote")
    assert not await quote.is_visible()
    await cite.locator("summary").focus()
    await page.keyboard.press("Enter")  # the keyboard opens it too, no hover needed
    await expect(quote).to_be_visible()
    # Machine outputs keep the file: the console's JSON names it beside the title.
    view = await page.evaluate("() => fetch('/console/edgar/view.json').then((r) => r.json())")
    cited = [c for row in view["audit"] for c in row["citations"]]
    assert cited and all(c["file"].endswith(".txt") for c in cited)
    assert all(c["text"].startswith("Village of Edgar Sump Pump Ordinance §") for c in cited)


# ---------------------------------------------------------------------- 6, 8, 14


async def test_rising_water_tells_the_time_to_the_rim_then_overflows_and_is_acked_with_a_note(
    live_app: LiveApp, browser_context: Any
) -> None:
    site = live_app.runtime.registry.require("elm-16")
    alarm, depth = site.pit.alarm_cm, site.pit.depth_cm
    # Five minutes rising 2 cm a minute, ending above the alarm mark.
    levels = [alarm - 8 + i * (2 / 6) for i in range(31)]
    await publish_messages(live_app, _pit_messages("elm-16", levels, 10.0))
    page = await browser_context.new_page()
    await browser_login(page, live_app, "elm16")
    trend = page.locator("[data-testid=trend]")
    await expect(trend).to_contain_text(
        "Rising 0.8 in/min: at the rim in about", timeout=TIMEOUT_MS
    )
    await expect(page.locator(".gauge-mark.rim")).to_have_count(1)
    alert = page.locator(".alert[data-rule='high_water']")
    await expect(alert).to_be_visible(timeout=TIMEOUT_MS)
    await alert.locator("details.evidence summary").click()
    evidence = await alert.locator("details.evidence").inner_text()
    assert "Pit level" in evidence and " in" in evidence
    assert "_" not in evidence and "level cm" not in evidence
    assert await alert.locator("details.evidence a").get_attribute("href") == (
        "/site/elm-16?range=24h#charts-h"
    )
    await shot(page, "homeowner-high-water")

    await alert.locator("[data-testid=ack-note]").fill("Plumber coming at 6")
    await alert.locator("[data-testid=ack]").click()
    await expect(alert).to_contain_text("Plumber coming at 6", timeout=TIMEOUT_MS)
    alert_id = await alert.get_attribute("data-alert-id")
    assert live_app.runtime.alerts is not None and alert_id
    assert (await live_app.runtime.alerts.get(alert_id)).ack_note == "Plumber coming at 6"

    await publish_messages(live_app, _pit_messages("elm-16", [depth, depth], 1.0))
    await expect(page.locator("[data-testid=status] h2")).to_have_text(
        "The pit is overflowing", timeout=TIMEOUT_MS
    )
    await expect(page.locator("[data-testid=overflow]")).to_be_visible()
    await expect(page.locator("#announce")).to_have_text("The pit is overflowing")


async def test_an_open_pump_failure_says_the_pump_did_not_start_and_is_shaded_on_the_charts(
    live_app: LiveApp, browser_context: Any
) -> None:
    await feed_homes(live_app, ["elm-16"], hours=1.0)
    await _open_finding(live_app, "elm-16", "pump_failure", "The pump did not start")
    page = await browser_context.new_page()
    await browser_login(page, live_app, "elm16")
    await expect(page.locator("[data-testid=status] h2")).to_have_text("The pump did not start")
    await expect(page.locator("[data-testid=pump]")).to_have_text("Did not start")
    await page.wait_for_selector("body[data-charts-ready='24h']", timeout=TIMEOUT_MS)
    assert int(await page.get_attribute("#chart-level", "data-findings") or 0) >= 1
    note = page.locator("[data-testid=charts-findings]")
    await expect(note).to_contain_text("Shaded on the charts:")
    await expect(note).to_contain_text("The pump did not start (")


# ---------------------------------------------------------------------- 7


async def test_time_axes_tick_at_round_local_times_with_distinct_labels(
    live_app: LiveApp, browser_context: Any
) -> None:
    page = await browser_context.new_page()
    await browser_login(page, live_app, "elm16")
    await page.wait_for_selector("body[data-charts-ready]", timeout=TIMEOUT_MS)
    result = await page.evaluate(
        """() => {
          const tz = "America/Chicago";
          const end = Date.now();
          const parts = SW.partsOf(tz);
          const label = new Intl.DateTimeFormat("en-US",
            { timeZone: tz, month: "short", day: "numeric" });
          const week = SW.roundTicks(end - 7 * 86400e3, end, tz);
          const day = SW.roundTicks(end - 86400e3, end, tz);
          return {
            week: week.map((t) => ({ h: parts(t).h, label: label.format(new Date(t)) })),
            day: day.map((t) => ({ h: parts(t).h, m: new Date(t).getUTCMinutes() })),
          };
        }"""
    )
    week, day = result["week"], result["day"]
    assert 6 <= len(week) <= 8
    assert all(t["h"] == 0 for t in week)  # local midnights
    assert len({t["label"] for t in week}) == len(week)  # no "Nov 30" seven times
    assert 6 <= len(day) <= 9
    assert all(t["h"] % 3 == 0 and t["m"] == 0 for t in day)  # 3-hourly, on the hour


async def test_counts_are_whole_and_quiet_lines_keep_a_minimum_span(
    live_app: LiveApp, browser_context: Any
) -> None:
    await feed_homes(live_app, ["elm-16"], hours=2.0)
    page = await browser_context.new_page()
    await browser_login(page, live_app, "elm16")
    await page.wait_for_selector("body[data-charts-ready='24h']", timeout=TIMEOUT_MS)
    axes = await page.evaluate(
        """() => {
          const y = (id) => Chart.getChart(document.getElementById(id)).scales.y;
          const c = y("chart-cycles"), p = y("chart-pressure");
          return { cycles: c.ticks.map((t) => t.value), pmin: p.min, pmax: p.max };
        }"""
    )
    assert axes["cycles"] and all(float(v).is_integer() for v in axes["cycles"])
    assert axes["pmin"] >= 0  # no "-0.1 psi"
    assert axes["pmax"] - axes["pmin"] >= 5.0  # at least 5 psi of span
    await page.click("button[data-range='7d']")
    await page.wait_for_selector("body[data-charts-ready='7d']", timeout=TIMEOUT_MS)
    view = await page.evaluate(
        "() => fetch('/site/elm-16/charts.json?range=7d').then((r) => r.json())"
    )
    assert view["charts"]["cycles"]["bucket"] == "hour"
    assert all(float(y).is_integer() for _, y in view["charts"]["cycles"]["bars"])


# ---------------------------------------------------------------------- 8


async def test_the_installation_record_reads_in_words_for_public_works(
    live_app: LiveApp, browser_context: Any
) -> None:
    page = await browser_context.new_page()
    await browser_login(page, live_app, "edgar-pw")
    await page.goto(f"{live_app.base_url}/site/elm-16")
    record = await page.inner_text("[data-testid=installation]")
    assert "Rigid discharge pipe" in record
    assert "pipe rigid" not in record and "True" not in record and "False" not in record
    assert " m\n" not in record  # one unit system (US): no metres among the feet


# ---------------------------------------------------------------------- 14


async def test_the_console_is_one_card_per_site_on_a_phone(
    live_app: LiveApp, browser_context: Any
) -> None:
    page = await browser_context.new_page()
    await page.set_viewport_size({"width": 390, "height": 844})
    await browser_login(page, live_app, "edgar-pw")
    await page.goto(f"{live_app.base_url}/console/edgar")
    await page.wait_for_selector("#sites-table", timeout=TIMEOUT_MS)
    layout = await page.evaluate(
        """() => ({
          scroll: document.documentElement.scrollWidth,
          wide: Array.from(document.querySelectorAll("main *"))
            .filter((e) => e.scrollWidth > e.clientWidth + 1 && !e.closest("#street-map"))
            .slice(0, 5).map((e) => `${e.tagName}.${e.className}`),
          row: getComputedStyle(document.querySelector("#sites-table tbody tr")).display,
          label: getComputedStyle(
            document.querySelector("#sites-table td[data-label='Status']"), "::before").content,
        })"""
    )
    assert layout["scroll"] <= 390, layout["wide"]  # nothing scrolls sideways
    assert layout["row"] == "block"
    assert layout["label"] == '"Status"'
    await shot(page, "console-phone")


async def test_a_failed_login_keeps_the_username_and_pages_have_a_favicon(
    live_app: LiveApp, browser_context: Any
) -> None:
    page = await browser_context.new_page()
    await page.goto(f"{live_app.base_url}/login")
    await page.fill("input[name=username]", "elm16")
    await page.fill("input[name=password]", "not-the-password")
    await page.click("button[type=submit]")
    await page.wait_for_selector("#login-error")
    assert await page.input_value("input[name=username]") == "elm16"
    assert await page.evaluate("document.activeElement.name") == "password"
    icon = await page.get_attribute("link[rel=icon]", "href")
    assert icon is not None
    response = await page.request.get(f"{live_app.base_url}{icon}")
    assert response.ok and "svg" in response.headers["content-type"]
    await page.fill("input[name=password]", password("elm16"))
    await page.click("button[type=submit]")
    await page.wait_for_url("**/site/elm-16")


# ---------------------------------------------------------------------- 5


@pytest_asyncio.fixture(loop_scope="session")
async def quiet_app(gateway_settings: Settings, mosquitto: BrokerProcess) -> AsyncIterator[LiveApp]:
    """Auth on, and sensors count as silent after the shortest limit (one minute)."""
    settings = gateway_settings.updated(
        api={"auth_enabled": True, "secret_key": SecretStr("test-secret-key-for-web-tests")},
        detectors={"silence_factor": 1.0},
    )
    async for live in _serve(settings, mosquitto):
        yield live


async def test_when_nothing_arrives_the_badge_greys_and_last_seen_keeps_ticking(
    quiet_app: LiveApp, browser_context: Any
) -> None:
    await publish_messages(quiet_app, _pit_messages("elm-16", [20.0, 20.1, 20.0], 5.0))
    page = await browser_context.new_page()
    await browser_login(page, quiet_app, "elm16")
    badge = page.locator("#live")
    await expect(badge).to_have_text("live", timeout=TIMEOUT_MS)
    await expect(badge).to_have_class("live on")
    first = await page.inner_text("[data-testid=last-reading]")
    assert first.endswith("s ago")
    # Nothing more is published: within the one-minute limit plus a tick the badge
    # goes grey, and the server's re-render says the pit sensor is not reporting.
    await expect(badge).to_have_class("live idle", timeout=90_000)
    await expect(badge).to_contain_text("no new readings")
    ticked = await page.inner_text("[data-testid=last-reading]")
    assert ticked.endswith(" s ago") and int(ticked.split()[0]) >= 60, ticked
    await expect(page.locator("[data-testid=status] h2")).to_have_text(
        "The pit sensor is not reporting", timeout=45_000
    )
