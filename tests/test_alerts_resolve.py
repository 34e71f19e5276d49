"""Issue 20.4: a resolve must not silence a live violation.

The rule lives in the pure lifecycle (alerts.lifecycle.resolve_by_hand and
repeat_due); the last tests drive it through the real app (uvicorn, Mosquitto,
accounts) as public works and an administrator would.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from alerts.lifecycle import (
    SYSTEM,
    Escalation,
    Notified,
    Policy,
    Send,
    Step,
    To,
    Tracked,
    on_event,
    repeat_due,
    resolve_by_hand,
)
from alerts.models import (
    Alert,
    AlertState,
    ConditionPersists,
    InvalidTransition,
    NotYourAlert,
    Reason,
)
from gateway.domain import Audience, Citation, Finding, FindingChange, FindingEvent, Severity
from gateway.state.database import SqliteDatabase
from tests.browser_fixtures import LiveApp, csrf_of, publish_pit, signed_in
from tests.mqtt_helpers import wait_until
from tests.test_alerts_manager import Harness, ev, make, violation

T0 = datetime(2026, 1, 15, 18, 0, tzinfo=UTC)
POLICY = Policy(flap_window=timedelta(minutes=10), repeat_interval=timedelta(minutes=15))
NO_GRACE = Escalation(grace=None, clock_start=T0)


def _finding(*, sanitary: bool) -> Finding:
    return Finding(
        id="f1", rule_id="sanitary_discharge" if sanitary else "high_water", site_id="elm-12",
        severity=Severity.WARNING if sanitary else Severity.CRITICAL, title="t",
        opened_at=T0, updated_at=T0,
        audience=(Audience.HOMEOWNER, Audience.PUBLIC_WORKS) if sanitary
        else (Audience.HOMEOWNER,),
        citations=(Citation("000_86c7187f3bed6ca5.txt", "(b)", "No"),) if sanitary else (),
    )  # fmt: skip


def _open(f: Finding) -> Alert:
    decision = on_event(
        None, FindingEvent(FindingChange.OPENED, f), T0, POLICY,
        new_id="a1", jurisdiction="edgar", escalation=NO_GRACE,
    )  # fmt: skip
    assert decision.alert is not None
    return decision.alert


def _resolve(alert: Alert, **kw: object) -> Alert:
    args: dict[str, object] = {"by": "crew-7", "note": "hose removed", "audience": None}
    args.update(kw)
    decision = resolve_by_hand(alert, T0, POLICY, confirm=True, **args)  # type: ignore[arg-type]
    assert decision.alert is not None
    return decision.alert


def test_resolving_an_alert_whose_condition_is_still_detected_needs_confirmation() -> None:
    alert = _open(_finding(sanitary=True))
    with pytest.raises(ConditionPersists, match="still detected"):
        resolve_by_hand(alert, T0, POLICY, by="crew-7", note=None, audience=None, confirm=False)


def test_public_works_cannot_resolve_a_homeowner_only_alert() -> None:
    alert = _open(_finding(sanitary=False))
    with pytest.raises(NotYourAlert, match="for homeowner only; public works cannot"):
        resolve_by_hand(
            alert, T0, POLICY, by="crew-7", note=None,
            audience=Audience.PUBLIC_WORKS, confirm=True,
        )  # fmt: skip


def test_public_works_may_resolve_a_violation_addressed_to_it() -> None:
    alert = _resolve(_open(_finding(sanitary=True)), audience=Audience.PUBLIC_WORKS)
    assert alert.state is AlertState.RESOLVED


def test_a_confirmed_resolve_is_recorded_with_who_why_and_that_the_condition_persisted() -> None:
    alert = _open(_finding(sanitary=True))
    decision = resolve_by_hand(
        alert, T0, POLICY, by="crew-7", note="hose removed", audience=None, confirm=True
    )
    (entry,) = decision.history
    assert (entry.step, entry.actor, entry.note, entry.condition_persisted) == (
        Step.RESOLVED, "crew-7", "hose removed", True,
    )  # fmt: skip
    assert decision.alert is not None and decision.alert.condition_persists


def test_a_resolved_alert_whose_condition_stays_re_opens_after_the_repeat_interval() -> None:
    resolved = _resolve(_open(_finding(sanitary=True)))
    assert repeat_due(resolved, T0 + timedelta(minutes=14), POLICY).alert is None
    decision = repeat_due(resolved, T0 + POLICY.repeat_interval, POLICY)
    assert decision.alert is not None
    assert decision.alert.state is AlertState.OPEN
    assert decision.alert.resolved_by is None
    assert decision.sends == (Send(To.TOLD, Reason.REPEAT),)
    assert decision.history[0].step is Step.REOPENED


def test_a_resolved_alert_whose_condition_then_clears_stays_resolved_and_quiet() -> None:
    f = _finding(sanitary=True)
    resolved = _resolve(_open(f))
    tracked = Tracked(resolved, Notified(resolved.severity, resolved.level))
    decision = on_event(
        tracked, FindingEvent(FindingChange.CLEARED, f), T0 + timedelta(minutes=5), POLICY,
        new_id="x", jurisdiction="edgar", escalation=NO_GRACE,
    )  # fmt: skip
    assert decision.alert is not None
    assert not decision.alert.condition_persists
    assert repeat_due(decision.alert, T0 + timedelta(hours=1), POLICY).alert is None
    assert decision.history[0].actor == SYSTEM


def test_a_resolved_alert_cannot_be_resolved_again() -> None:
    with pytest.raises(InvalidTransition):
        _resolve(_resolve(_open(_finding(sanitary=True))))


# ---------------------------------------------------------------- through the live app


async def _high_water_alert(live_app: LiveApp) -> str:
    await publish_pit(live_app, "elm-16", [60.0, 61.0, 62.0])

    async def found() -> list[str]:
        alerts = await live_app.runtime.alerts.list_alerts()
        return [a.id for a in alerts if a.site_id == "elm-16" and a.rule_id == "high_water"]

    async def any_found() -> bool:
        return bool(await found())

    await wait_until(any_found, timeout=15)
    return (await found())[0]


@pytest.mark.integration
@pytest.mark.asyncio(loop_scope="session")
async def test_public_works_gets_403_resolving_a_homeowner_only_alert_over_the_api(
    live_app: LiveApp,
) -> None:
    alert_id = await _high_water_alert(live_app)
    async with signed_in(live_app, "edgar-pw") as staff:
        csrf = csrf_of((await staff.get("/account")).text)
        response = await staff.post(
            f"/alerts/{alert_id}/resolve",
            json={"by": "edgar-pw", "note": "x", "confirm": True},
            headers={"x-csrf-token": csrf},
        )
    assert response.status_code == 403
    assert "public works cannot resolve it" in response.json()["detail"]
    assert (await live_app.runtime.alerts.get(alert_id)).state is not AlertState.RESOLVED


@pytest.mark.integration
@pytest.mark.asyncio(loop_scope="session")
async def test_the_resolve_form_warns_and_the_history_page_shows_resolver_and_note(
    live_app: LiveApp,
) -> None:
    alert_id = await _high_water_alert(live_app)
    async with signed_in(live_app, "admin") as admin:
        page = (await admin.get("/site/elm-16")).text
        assert "The condition is still detected: resolve anyway" in page
        csrf = csrf_of(page)
        headers = {"accept": "application/json", "x-csrf-token": csrf}
        refused = await admin.post(
            f"/ui/alerts/{alert_id}/resolve", data={"note": "pumped out"}, headers=headers
        )
        assert refused.status_code == 409
        assert "still detected" in refused.json()["detail"]
        done = await admin.post(
            f"/ui/alerts/{alert_id}/resolve",
            data={"note": "pumped out", "confirm": "true"},
            headers=headers,
        )
        assert done.status_code == 200
        history = (await admin.get(f"/alerts/{alert_id}/history")).json()
        assert [h["step"] for h in history][-1] == "resolved"
        assert (history[-1]["actor"], history[-1]["note"]) == ("admin", "pumped out")
        listed = (await admin.get(f"/alerts/{alert_id}")).json()
        assert listed["condition_persists"] is True
        html = (await admin.get(f"/ui/alerts/{alert_id}/history")).text
        assert "pumped out" in html and "still detected" in html


# ---------------------------------------------------------------- through the outbox (SQLite)


@pytest.fixture
async def h(tmp_path: Path) -> AsyncIterator[Harness]:
    """The alert manager of tests/test_alerts_manager.py on a fresh SQLite file."""
    database = SqliteDatabase(tmp_path / "alerts.db")
    await database.open()
    harness = make(database)
    await harness.manager.open()
    yield harness
    await database.close()


async def test_a_sanitary_alert_resolved_while_the_hose_is_connected_re_alerts(
    h: Harness,
) -> None:
    await h.manager.on_events([ev(FindingChange.OPENED, violation())])
    await h.drain()
    (alert,) = await h.manager.list_alerts()
    await h.manager.resolve(
        alert.id, by="pw-1", note="owner says fixed", audience=Audience.PUBLIC_WORKS, confirm=True
    )
    await h.drain()
    told_before = len(h.email.reasons())
    h.clock.advance(minutes=16)  # past the repeat interval, the finding still open
    await h.drain()
    again = await h.manager.get(alert.id)
    assert again.state is AlertState.OPEN
    # Everyone told before (the homeowner, and public works: no grace period) hears again.
    again_told = h.email.reasons()[told_before:]
    assert again_told and set(again_told) == {"repeat"}
    steps = [(r.entry.step, r.entry.actor) for r in await h.manager.history([alert.id])]
    assert steps == [
        (Step.OPENED, SYSTEM),
        (Step.RESOLVED, "pw-1"),
        (Step.REOPENED, SYSTEM),
    ]


async def test_a_test_alert_reaches_the_homeowner_and_is_never_an_open_problem(
    h: Harness,
) -> None:
    alert = await h.manager.send_test("elm-12", by="admin")
    await h.drain()
    assert h.email.reasons() == ["opened"]
    assert (await h.manager.get(alert.id)).state is AlertState.RESOLVED
