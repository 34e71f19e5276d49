"""Issue 16.7 in real Chromium: the public-works case queue and the homeowner's case page."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from playwright.async_api import expect

from gateway.cases.models import Method, Origin, Party, Service, StepKind
from gateway.cases.service import Actor, CaseService
from tests.browser_fixtures import LiveApp, browser_login, shot

pytestmark = [
    pytest.mark.integration,
    pytest.mark.browser,
    pytest.mark.asyncio(loop_scope="session"),
]

TIMEOUT_MS = 15_000
CLERK = Actor("edgar-pw", "public_works")


def _cases(live: LiveApp) -> CaseService:
    service = live.runtime.cases
    assert service is not None
    return service


async def _with_order(live: LiveApp, site: str, days_ago: int) -> str:
    service = _cases(live)
    case = await service.open_case(site, "sanitary_discharge", Origin.COMPLAINT, CLERK)
    served = datetime.now(UTC) - timedelta(days=days_ago)
    order = service.new_step(StepKind.ORDER, served, service=Service(Party.OWNER, Method.IN_PERSON))
    await service.record(case.id, order, CLERK)
    return case.id


async def test_the_case_queue_groups_overdue_and_waiting_cases(
    live_app: LiveApp, browser_context: Any
) -> None:
    overdue = await _with_order(live_app, "elm-16", days_ago=45)
    waiting = await _with_order(live_app, "oak-5", days_ago=2)
    page = await browser_context.new_page()
    await browser_login(page, live_app, "edgar-pw", "/cases/queue/edgar")
    await expect(page.locator("[data-testid=count-overdue]")).to_have_text("1", timeout=TIMEOUT_MS)
    overdue_row = page.locator(f"[data-testid=queue-overdue] [data-case='{overdue}']")
    await expect(overdue_row).to_contain_text("16 Elm St")
    waiting_row = page.locator(f"[data-testid=queue-waiting_on_owner] [data-case='{waiting}']")
    await expect(waiting_row).to_contain_text("5 Oak Ave")
    await shot(page, "cases-queue")

    await overdue_row.locator("a").click()
    await expect(page.locator("[data-testid=case-state]")).to_have_text("correction due")
    await expect(page.locator("[data-testid=deadline][data-id=correct]")).to_have_attribute(
        "data-status", "overdue"
    )
    await expect(page.locator("[data-testid=step][data-kind=order]")).to_contain_text(
        "Served on the owner in person"
    )


async def test_the_homeowner_sees_the_deadline_and_requests_an_inspection_and_sends_proof(
    live_app: LiveApp, browser_context: Any
) -> None:
    case_id = await _with_order(live_app, "elm-16", days_ago=3)
    page = await browser_context.new_page()
    await browser_login(page, live_app, "elm16", "/site/elm-16/cases")
    await page.wait_for_url(f"**/case/{case_id}", timeout=TIMEOUT_MS)
    view = _cases(live_app).view(await _cases(live_app).repo.get(case_id))
    due = next(d for d in view.deadlines if d.id == "correct").due_on
    await expect(page.locator("[data-testid=due-correct]")).to_have_text(str(due))
    assert await page.locator("[data-testid=actions]").count() == 0  # no village actions
    await shot(page, "case-homeowner")

    await page.fill("form:has([data-testid=request-inspection]) input[name=note]", "mornings")
    await page.click("[data-testid=request-inspection]")
    await expect(page.locator("[data-testid=case-state]")).to_have_text("inspection requested")
    step = page.locator("[data-testid=step][data-kind=inspection_requested]")
    await expect(step).to_contain_text("elm16 (homeowner)")

    await page.set_input_files(
        "[data-testid=proof-file]",
        files=[
            {"name": "certificate.pdf", "mimeType": "application/pdf", "buffer": b"%PDF-1.4 test"}
        ],
    )
    await page.click("[data-testid=upload-proof]")
    proof = page.locator("[data-testid=step][data-kind=correction_proof]")
    await expect(proof).to_contain_text("certificate.pdf", timeout=TIMEOUT_MS)
    await expect(page.locator("[data-testid=case-state]")).to_have_text("proof submitted")


async def test_public_works_serves_an_order_from_the_case_page_and_the_deadline_appears(
    live_app: LiveApp, browser_context: Any
) -> None:
    case = await _cases(live_app).open_case(
        "oak-5", "sanitary_discharge", Origin.COMPLAINT, CLERK, note="neighbour complaint"
    )
    page = await browser_context.new_page()
    await browser_login(page, live_app, "edgar-pw", f"/case/{case.id}")
    await expect(page.locator("[data-testid=case-state]")).to_have_text("suspected")
    order_form = page.locator("form:has([data-testid=record-order])")
    await order_form.locator("select[name=party]").select_option("occupant")
    await order_form.locator("select[name=method]").select_option("first_class_mail")
    await page.click("[data-testid=record-order]")
    await expect(page.locator("[data-testid=case-state]")).to_have_text("correction due")
    await expect(page.locator("[data-testid=deadline][data-id=correct]")).to_have_attribute(
        "data-status", "open"
    )
    await expect(page.locator("[data-testid=step][data-kind=order]")).to_contain_text(
        "Served on the occupant by first-class mail"
    )
    # A case of another jurisdiction does not exist for Edgar's public works.
    other = await _cases(live_app).open_case(
        "main-101", "icing_risk", Origin.OBSERVATION, Actor("admin", "admin"), confirms=True
    )
    response = await page.goto(f"{live_app.base_url}/case/{other.id}")
    assert response is not None and response.status == 404
