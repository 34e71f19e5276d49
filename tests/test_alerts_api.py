"""The alerts API on a tiny FastAPI app over a real SQLite file."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

from alerts import AlertManager, AlertsConfig
from alerts.models import DeliveryResult, OutgoingMessage
from gateway.api.routes.alerts import router
from gateway.domain import Audience, Citation, Finding, FindingChange, FindingEvent, Severity
from gateway.problems import install_error_handlers
from gateway.registry.models import Contact, NodeConfig, SiteConfig, SiteRegistry
from gateway.rules.pack import load_packs
from gateway.services import Services
from gateway.settings import ApiSettings
from gateway.state.database import SqliteDatabase
from gateway.state.deadletters import StateRepository
from gateway.state.findings import FindingRepository
from gateway.store.sqlite import SqliteStore
from gateway.web.routes import router as page_router

T0 = datetime(2026, 2, 1, 15, 0, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


@dataclass
class Accepting:
    name: str = "email"

    async def send(self, message: OutgoingMessage) -> DeliveryResult:
        return DeliveryResult(True, "250 accepted")


@dataclass
class Api:
    client: httpx.AsyncClient
    manager: AlertManager
    clock: Clock


def event(
    rule: str, severity: Severity, site: str = "elm-12", cites: tuple[Citation, ...] = ()
) -> FindingEvent:
    return FindingEvent(
        FindingChange.OPENED,
        Finding(
            id=f"{site}-{rule}",
            rule_id=rule,
            site_id=site,
            severity=severity,
            title=rule,
            opened_at=T0,
            updated_at=T0,
            audience=(Audience.HOMEOWNER,),
            citations=cites,
            evidence={"level_cm": 58.0},
            action="Do something.",
        ),
    )


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[Api]:
    db = SqliteDatabase(tmp_path / "api.db")
    await db.open()
    sites = [
        SiteConfig(
            id=sid,
            name=sid,
            jurisdiction=j,
            nodes=(NodeConfig(id="pit", kind="pit"),),
            contacts=(Contact(email=f"{sid}@example.org"),),
        )
        for sid, j in (("elm-12", "edgar"), ("oak-3", "sewer-ord-247"))
    ]
    clock = Clock()
    manager = AlertManager(
        db=db,
        registry=SiteRegistry(sites),
        clock=clock,
        config=AlertsConfig.model_validate({"mqtt": {"enabled": False}}),
        channels={"email": Accepting()},
    )
    await manager.open()
    app = FastAPI()
    app.include_router(router)
    app.include_router(page_router)  # the page forms act through the same service
    install_error_handlers(app)
    app.state.api = ApiSettings()  # auth off: every request is an administrator
    app.state.services = Services(
        data_dir=tmp_path,
        registry=manager.registry,
        packs=load_packs(),
        store=SqliteStore(db),
        db=db,
        findings=FindingRepository(db),
        alerts=manager,
        state=StateRepository(db),
    )
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://api") as client:
        yield Api(client, manager, clock)
    await db.close()


async def seed(api: Api) -> None:
    await api.manager.on_events([event("high_water", Severity.CRITICAL)])
    api.clock.now = T0 + timedelta(hours=2)
    await api.manager.on_events([event("short_cycling", Severity.WARNING, site="oak-3")])


async def test_alerts_are_listed_newest_first_and_filtered(api: Api) -> None:
    await seed(api)
    c = api.client
    assert [a["rule_id"] for a in (await c.get("/alerts")).json()] == [
        "short_cycling",
        "high_water",
    ]
    assert [a["site_id"] for a in (await c.get("/alerts?site=elm-12")).json()] == ["elm-12"]
    assert [a["rule_id"] for a in (await c.get("/alerts?jurisdiction=sewer-ord-247")).json()] == [
        "short_cycling"
    ]
    assert [a["rule_id"] for a in (await c.get("/alerts?severity=critical")).json()] == [
        "high_water"
    ]
    assert (await c.get("/alerts?state=resolved")).json() == []
    window = {"from": "2026-02-01T16:00:00Z", "to": "2026-02-01T18:00:00Z"}
    assert [a["rule_id"] for a in (await c.get("/alerts", params=window)).json()] == [
        "short_cycling"
    ]


async def test_a_time_filter_without_a_zone_is_refused(api: Api) -> None:
    response = await api.client.get("/alerts", params={"from": "2026-02-01T16:00:00"})
    assert response.status_code == 422


async def test_acknowledge_records_who_and_a_second_ack_conflicts(api: Api) -> None:
    await seed(api)
    (alert,) = (await api.client.get("/alerts?site=elm-12")).json()
    response = await api.client.post(
        f"/alerts/{alert['id']}/ack", json={"by": "pat", "note": "bailing"}
    )
    assert response.status_code == 200
    body = response.json()
    assert (body["state"], body["acknowledged_by"], body["ack_note"]) == (
        "acknowledged",
        "pat",
        "bailing",
    )
    again = await api.client.post(f"/alerts/{alert['id']}/ack", json={"by": "pat"})
    assert again.status_code == 409


async def test_unknown_alerts_are_404(api: Api) -> None:
    assert (await api.client.get("/alerts/nope")).status_code == 404
    assert (await api.client.post("/alerts/nope/ack", json={"by": "x"})).status_code == 404
    assert (await api.client.get("/alerts/nope/deliveries")).status_code == 404


async def test_assign_and_resolve_with_a_note(api: Api) -> None:
    await seed(api)
    (alert,) = (await api.client.get("/alerts?site=oak-3")).json()
    assigned = await api.client.post(f"/alerts/{alert['id']}/assign", json={"assignee": "crew-7"})
    assert assigned.json()["assignee"] == "crew-7"
    resolved = await api.client.post(
        f"/alerts/{alert['id']}/resolve",
        json={"by": "crew-7", "note": "check valve replaced", "confirm": True},
    )
    body = resolved.json()
    assert (body["state"], body["resolved_by"], body["resolve_note"]) == (
        "resolved",
        "crew-7",
        "check valve replaced",
    )
    assert (
        await api.client.post(f"/alerts/{alert['id']}/resolve", json={"by": "x", "confirm": True})
    ).status_code == 409


async def test_the_delivery_log_shows_each_attempt_and_its_result(api: Api) -> None:
    await seed(api)
    await api.manager.run_once()
    (alert,) = (await api.client.get("/alerts?site=elm-12")).json()
    detail = (await api.client.get(f"/alerts/{alert['id']}")).json()
    # Opened at T0, still unacknowledged when the clock reads T0 + 2 h: one reminder.
    assert [(n["reason"], n["recipient"], n["status"]) for n in detail["notifications"]] == [
        ("opened", "elm-12@example.org", "sent"),
        ("repeat", "elm-12@example.org", "sent"),
    ]
    log = (await api.client.get(f"/alerts/{alert['id']}/deliveries")).json()
    assert [(d["attempt"], d["ok"], d["detail"]) for d in log] == [(1, True, "250 accepted")] * 2
    everything = (await api.client.get("/deliveries")).json()
    assert {d["alert_id"] for d in everything} == {
        a["id"] for a in (await api.client.get("/alerts")).json()
    }


async def test_the_page_form_and_the_api_act_through_one_alert_service(api: Api) -> None:
    await seed(api)
    (alert,) = (await api.client.get("/alerts?site=elm-12")).json()
    form = await api.client.post(
        f"/ui/alerts/{alert['id']}/ack",
        data={"note": "", "back": "/"},
        headers={"Accept": "application/json"},
    )
    assert form.json() == {"id": alert["id"], "state": "acknowledged", "assignee": None}
    assert (await api.client.get(f"/alerts/{alert['id']}")).json()["ack_note"] is None
    assert (
        await api.client.post(f"/alerts/{alert['id']}/ack", json={"by": "x", "confirm": True})
    ).status_code == 409
    again = await api.client.post(
        f"/ui/alerts/{alert['id']}/ack", data={"note": "x"}, headers={"Accept": "text/html"}
    )
    assert again.status_code == 409 and "Reload the page" in again.text


async def test_a_page_form_for_an_unknown_alert_is_404(api: Api) -> None:
    response = await api.client.post(
        "/ui/alerts/nope/resolve", data={"note": "x"}, headers={"Accept": "application/json"}
    )
    assert response.status_code == 404
