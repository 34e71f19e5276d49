"""The findings and audit routes on a tiny app with a real SQLite store."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from fastapi import Depends, FastAPI

from gateway.accounts.access import access_control
from gateway.api.routes.findings import router
from gateway.domain import Audience, Citation, Finding, FindingChange, FindingEvent, Severity
from gateway.problems import install_error_handlers
from gateway.registry.models import load_registry
from gateway.rules.pack import load_packs
from gateway.services import Services
from gateway.settings import REPO_DIR, ApiSettings
from gateway.state.database import SqliteDatabase
from gateway.state.deadletters import StateRepository
from gateway.state.findings import FindingRepository
from gateway.store.sqlite import SqliteStore

T0 = datetime(2026, 12, 1, 6, tzinfo=UTC)


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    db = SqliteDatabase(tmp_path / "api.db")
    await db.open()
    repo = FindingRepository(db)
    await repo.open()
    f = Finding(
        id="f1", rule_id="sanitary_discharge", site_id="elm-14", severity=Severity.CRITICAL,
        title="Sump water is going into the sanitary sewer", opened_at=T0, updated_at=T0,
        level="violation", audience=(Audience.HOMEOWNER, Audience.PUBLIC_WORKS),
        evidence={"pit_volume_l": 36.5}, action="Remove the hose.",
        citations=(Citation("000_86c7187f3bed6ca5.txt", "(b)", "No ... sump pump"),),
    )  # fmt: skip
    g = Finding(
        id="f2", rule_id="high_water", site_id="oak-3", severity=Severity.WARNING,
        title="High water", opened_at=T0 + timedelta(hours=1),
        updated_at=T0 + timedelta(hours=2), cleared_at=T0 + timedelta(hours=2),
    )  # fmt: skip
    await repo.apply(
        [FindingEvent(FindingChange.OPENED, f), FindingEvent(FindingChange.CLEARED, g)]
    )
    app = FastAPI(dependencies=[Depends(access_control)])
    app.include_router(router)
    install_error_handlers(app)
    app.state.api = ApiSettings()  # auth off: every request is an administrator
    app.state.services = Services(
        data_dir=tmp_path,
        registry=load_registry(REPO_DIR / "deploy" / "sites.example.toml"),
        packs=load_packs(),
        store=SqliteStore(db),
        db=db,
        findings=repo,
        alerts=None,
        state=StateRepository(db),
    )
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://test"
    ) as c:
        yield c
    await db.close()


async def test_list_findings_newest_first_with_citations(client: httpx.AsyncClient) -> None:
    r = await client.get("/findings")
    assert r.status_code == 200
    body = r.json()
    assert [f["id"] for f in body] == ["f2", "f1"]
    f1 = body[1]
    assert f1["citations"][0]["text"] == "000_86c7187f3bed6ca5.txt §(b)"
    assert f1["audience"] == ["homeowner", "public_works"]
    assert f1["open"] is True and f1["evidence"] == {"pit_volume_l": 36.5}


@pytest.mark.parametrize(
    ("query", "ids"),
    [
        ("?open=true", ["f1"]),
        ("?rule=high_water", ["f2"]),
        ("?site=elm-14", ["f1"]),
        ("?from=2026-12-01T08:30:00Z", ["f1"]),
        ("?to=2026-12-01T06:30:00Z", ["f1"]),
    ],
)
async def test_list_findings_filters(client: httpx.AsyncClient, query: str, ids: list[str]) -> None:
    r = await client.get("/findings" + query)
    assert [f["id"] for f in r.json()] == ids


async def test_site_findings_and_one_finding(client: httpx.AsyncClient) -> None:
    assert [f["id"] for f in (await client.get("/sites/oak-3/findings")).json()] == ["f2"]
    assert (await client.get("/findings/f1")).json()["rule_id"] == "sanitary_discharge"


async def test_unknown_site_rule_or_finding_is_refused(client: httpx.AsyncClient) -> None:
    r = await client.get("/sites/nowhere/findings")
    assert r.status_code == 404 and "nowhere" in r.json()["detail"]
    assert (await client.get("/sites/nowhere/audit")).status_code == 404
    assert (await client.get("/findings?site=nowhere")).status_code == 404
    assert (await client.get("/findings?rule=bogus")).status_code == 422
    assert (await client.get("/findings/nope")).status_code == 404


async def test_site_audit_lists_failed_requirements_with_citations(
    client: httpx.AsyncClient,
) -> None:
    r = await client.get("/sites/oak-7/audit")
    assert r.status_code == 200
    body = r.json()
    assert body["compliant"] is False and body["failures"] == 3
    by_id = {i["requirement_id"]: i for i in body["items"]}
    assert by_id["pipe_min_diameter"]["actual"] == 0.75
    assert by_id["pipe_min_diameter"]["citations"][0]["section"] == "(c)(2)b"


async def test_audit_of_all_sites_by_jurisdiction(client: httpx.AsyncClient) -> None:
    everyone = (await client.get("/audit")).json()
    assert len(everyone) == 12
    law = (await client.get("/audit?jurisdiction=local-law-6-2024")).json()
    assert {a["site_id"] for a in law} == {"main-101", "main-103", "main-105"}
    assert all(a["compliant"] for a in law)


async def test_a_findings_frozen_snapshot_is_served_with_its_hash(
    client: httpx.AsyncClient,
) -> None:
    r = await client.get("/findings/f1/snapshots")
    assert r.status_code == 200
    [snap] = r.json()
    assert snap["change"] == "opened" and snap["level"] == "violation"
    assert snap["intact"] is True
    assert hashlib.sha256(snap["content"].encode()).hexdigest() == snap["sha256"]
    assert snap["snapshot"]["finding"]["evidence"] == {"pit_volume_l": 36.5}
    assert (await client.get("/findings/nope/snapshots")).status_code == 404
