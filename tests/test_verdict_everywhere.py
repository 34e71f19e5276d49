"""One compliance verdict everywhere: the API, the dashboard and the console say the same.

A tiny app and a runtime over a real SQLite findings repository and store, the demo
registry and the packaged packs (as tests/test_rules_api.py does).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import Depends, FastAPI

from gateway.accounts.access import access_control
from gateway.accounts.models import Principal, Role
from gateway.api.routes.findings import router
from gateway.contract import NodeKind
from gateway.domain import (
    Audience,
    Citation,
    Finding,
    FindingChange,
    FindingEvent,
    Reading,
    Severity,
)
from gateway.registry.models import load_registry
from gateway.rules.pack import load_packs
from gateway.rules.verdict import VerdictStatus, site_verdict
from gateway.services import Services
from gateway.settings import REPO_DIR, ApiSettings
from gateway.state.database import SqliteDatabase
from gateway.state.deadletters import StateRepository
from gateway.state.findings import FindingRepository
from gateway.store.sqlite import SqliteStore
from gateway.web import views

NOW = datetime.now(UTC)
OWNER = Principal("h", Role.HOMEOWNER, site_ids=frozenset({"oak-7", "elm-14", "elm-12"}))
STAFF = Principal("p", Role.PUBLIC_WORKS, jurisdictions=frozenset({"edgar"}))


@pytest.fixture
async def runtime(tmp_path: Path) -> AsyncIterator[Any]:
    db = SqliteDatabase(tmp_path / "v.db")
    await db.open()
    repo = FindingRepository(db)
    await repo.open()
    store = SqliteStore(db)
    await store.open()
    opened = NOW - timedelta(days=2)
    hose = Finding(
        id="f1", rule_id="sanitary_discharge", site_id="elm-14", severity=Severity.CRITICAL,
        title="Sump water is going into the sanitary sewer", opened_at=opened,
        updated_at=opened, level="violation",
        audience=(Audience.HOMEOWNER, Audience.PUBLIC_WORKS),
        citations=(Citation("000_86c7187f3bed6ca5.txt", "(b)", "No ... sump pump"),),
    )  # fmt: skip
    await repo.apply([FindingEvent(FindingChange.OPENED, hose)])
    yield Services(
        data_dir=tmp_path,
        registry=load_registry(REPO_DIR / "deploy" / "sites.example.toml"),
        packs=load_packs(),
        store=store,
        db=db,
        findings=repo,
        alerts=None,
        state=StateRepository(db),
    )
    await db.close()


@pytest.fixture
async def client(runtime: Any) -> AsyncIterator[httpx.AsyncClient]:
    app = FastAPI(dependencies=[Depends(access_control)])
    app.include_router(router)
    app.state.api = ApiSettings()  # auth off: every request is an administrator
    app.state.services = runtime
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://test"
    ) as c:
        yield c


async def test_the_api_gives_a_failing_site_the_verdict_not_in_compliance(
    client: httpx.AsyncClient,
) -> None:
    body = (await client.get("/sites/oak-7/verdict")).json()
    assert body["status"] == "violation"
    assert body["requirements_failed"] == 3
    assert body["statement"].startswith("Not in compliance with Village of Edgar (WI)")


async def test_the_api_calls_telemetry_alone_a_suspected_violation_with_an_inspection_first(
    client: httpx.AsyncClient,
) -> None:
    body = (await client.get("/sites/elm-14/verdict")).json()
    assert body["status"] == "suspected"
    assert body["confirmed_days"] == [] and len(body["suspected_days"]) >= 2
    assert body["next_step"].startswith("inspection")
    assert [s["status"] for s in body["spells"]] == ["suspected"]


async def test_a_home_with_every_fact_recorded_is_in_compliance_through_the_api(
    client: httpx.AsyncClient,
) -> None:
    body = (await client.get("/sites/elm-12/verdict")).json()
    assert (body["status"], body["requirements_not_checked"]) == ("compliant", 0)


async def test_the_dashboard_and_the_console_read_the_same_verdict_as_the_api(
    runtime: Any, client: httpx.AsyncClient
) -> None:
    """At 4b01b62 oak-7 showed "Your pump is OK", "Lawful" and a green console row."""
    site = runtime.registry.require("oak-7")
    page = await views.site_overview(runtime, site, OWNER, "us", now=NOW)
    api = (await client.get("/sites/oak-7/verdict")).json()
    assert page.verdict_status == api["status"] == "violation"
    assert not page.compliance_ok
    assert "your installation fails 3 requirements" in page.verdict_text
    console = await views.console_view(
        runtime, "edgar", runtime.registry.in_jurisdiction("edgar"), STAFF, "us", now=NOW
    )
    row = next(r for r in console.rows if r.site_id == "oak-7")
    assert (row.verdict_status, row.status) == ("violation", "problem")
    assert "registered installation fails 3" in row.verdict_text
    assert "Your pump" not in row.status_text


async def test_the_dashboard_does_not_call_a_suspected_hose_a_fact(runtime: Any) -> None:
    site = runtime.registry.require("elm-14")
    pit = Reading("elm-14", "pit", NodeKind.PIT, NOW, 1, "b", {"level_cm": 20.0}, NOW)
    await runtime.store.write([pit])
    page = await views.site_overview(runtime, site, OWNER, "us", now=NOW)
    assert page.verdict_status == "suspected"
    assert page.status.headline == "Suspected: Sump water is going into the sanitary sewer"
    assert page.destination_lawful is None
    assert page.destination_note.startswith("Suspected, not confirmed")


def test_seasonal_citations_apply_by_date_in_the_verdict(runtime: Any) -> None:
    """Edgar (e)(1)b is a Nov 15 - Apr 15 section: an October icing spell does not cite it."""
    site = runtime.registry.require("elm-16")
    pack = runtime.packs["edgar"]

    def icing(opened: datetime) -> Finding:
        return Finding(
            id=f"i{opened:%m}", rule_id="icing_risk", site_id="elm-16",
            severity=Severity.CRITICAL, title="icing", opened_at=opened, updated_at=opened,
            cleared_at=opened + timedelta(hours=3), level="violation",
        )  # fmt: skip

    for opened, expected in (
        (datetime(2026, 10, 20, 12, tzinfo=UTC), ["(c)(2)c"]),
        (datetime(2027, 1, 20, 12, tzinfo=UTC), ["(c)(2)c", "(e)(1)b"]),
    ):
        v = site_verdict(site, pack, as_of=opened + timedelta(days=1), findings=[icing(opened)])
        assert v.status is VerdictStatus.SUSPECTED
        assert [c.section for c in v.suspected[0].citations] == expected


def test_the_strongest_first_step_wins_when_several_violations_are_confirmed(
    runtime: Any,
) -> None:
    from gateway.domain import Confirmation, ConfirmationKind

    site = runtime.registry.require("elm-16")
    jan = datetime(2027, 1, 10, 12, tzinfo=UTC)

    def finding(rule: str, opened: datetime) -> Finding:
        return Finding(
            id=rule, rule_id=rule, site_id="elm-16", severity=Severity.CRITICAL, title=rule,
            opened_at=opened, updated_at=opened, cleared_at=opened + timedelta(hours=5),
            level="violation",
        )  # fmt: skip

    records = [
        Confirmation("c1", "elm-16", "icing_risk", ConfirmationKind.OBSERVATION,
                     jan + timedelta(hours=1), True, "public works"),
        Confirmation("c2", "elm-16", "sanitary_discharge", ConfirmationKind.INSPECTION,
                     jan + timedelta(days=2, hours=1), True, "inspector"),
    ]  # fmt: skip
    v = site_verdict(
        site,
        runtime.packs["edgar"],
        as_of=jan + timedelta(days=5),
        findings=[
            finding("icing_risk", jan),
            finding("sanitary_discharge", jan + timedelta(days=2)),
        ],
        confirmations=records,
    )
    assert v.next_step is not None and v.next_step.step == "order"
    # The staff sentence cites the first step's section by the ordinance's title.
    sentence = v.sentence("staff")
    assert "[Village of Edgar Sump Pump Ordinance §" in sentence and ".txt" not in sentence
