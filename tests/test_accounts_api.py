"""Issues 7 and 8: authentication, roles and scope on every HTTP endpoint, over the
real app served by uvicorn on a live gateway (Mosquitto on a free port)."""

from __future__ import annotations

import logging
import re

import httpx
import pytest
from fastapi.routing import iter_route_contexts

from tests.browser_fixtures import (
    LiveApp,
    csrf_of,
    login_form_token,
    password,
    publish_pit,
    signed_in,
)
from tests.mqtt_helpers import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

SAMPLE_PARAMS = {
    "site_id": "elm-16",
    "alert_id": "no-such-alert",
    "jurisdiction": "edgar",
    "token_id": "1",
    "finding_id": "no-such-finding",
}


def _route_templates(live: LiveApp) -> list[tuple[str, str]]:
    """(method, path template) of every HTTP route of the app (mounts excluded)."""
    out = []
    for ctx in iter_route_contexts(live.app.routes):
        if ctx.path is None or ctx.methods is None:
            continue  # the /static mount: public files
        for method in sorted(ctx.methods - {"HEAD"}):
            out.append((method, ctx.path))
    return out


def _routes(live: LiveApp) -> list[tuple[str, str]]:
    """(method, concrete path) of every route, path parameters filled in."""
    out = []
    for method, template in _route_templates(live):
        path = template
        for name in re.findall(r"{(\w+)}", template):
            path = path.replace("{" + name + "}", SAMPLE_PARAMS.get(name, "x"))
        out.append((method, path))
    return out


async def test_every_endpoint_but_health_and_login_needs_credentials(live_app: LiveApp) -> None:
    async with httpx.AsyncClient(base_url=live_app.base_url) as client:
        routes = _routes(live_app)
        assert len(routes) > 10
        for method, path in routes:
            if path in ("/health", "/login"):
                continue
            response = await client.request(method, path, headers={"accept": "application/json"})
            assert response.status_code == 401, f"{method} {path}: {response.status_code}"
            assert response.headers["www-authenticate"] == "Bearer"
        health = await client.get("/health")
        assert health.status_code in (200, 503)
        assert "status" in health.json()


async def test_a_page_without_a_session_redirects_to_the_login_form(live_app: LiveApp) -> None:
    async with httpx.AsyncClient(base_url=live_app.base_url) as client:
        response = await client.get("/site/elm-16", headers={"accept": "text/html"})
    assert response.status_code == 303
    assert response.headers["location"] == "/login?next=/site/elm-16"


async def test_a_homeowner_gets_404_from_every_endpoint_of_another_site(live_app: LiveApp) -> None:
    async with signed_in(live_app, "elm16") as client:
        html = (await client.get("/account")).text
        csrf = csrf_of(html)
        checked = 0
        for method, template in _route_templates(live_app):
            if "{site_id}" not in template:
                continue
            path = template.replace("{site_id}", "elm-14")
            response = await client.request(
                method, path, headers={"accept": "application/json", "x-csrf-token": csrf}
            )
            assert response.status_code == 404, f"{method} {path}: {response.status_code}"
            checked += 1
        assert checked >= 5
        own = await client.get("/sites/elm-16")
        assert own.status_code == 200
        assert own.json()["id"] == "elm-16"
        # Query-parameter scoping too: a list filtered to someone else's site.
        other = await client.get("/sites/elm-16/readings", params={"site": "elm-14"})
        assert other.status_code == 404


async def test_a_homeowner_lists_only_their_own_sites(live_app: LiveApp) -> None:
    async with signed_in(live_app, "elm16") as client:
        sites = (await client.get("/sites")).json()
        assert [s["id"] for s in sites] == ["elm-16"]
        me = (await client.get("/me")).json()
        assert me == {
            "username": "elm16",
            "role": "homeowner",
            "site_ids": ["elm-16"],
            "jurisdictions": [],
            "via": "session",
        }


async def test_operational_endpoints_are_for_administrators_only(live_app: LiveApp) -> None:
    async with signed_in(live_app, "edgar-pw") as staff:
        assert (await staff.get("/deadletters")).status_code == 403
        assert (await staff.get("/metrics")).status_code == 403
    async with signed_in(live_app, "admin") as admin:
        assert (await admin.get("/deadletters")).status_code == 200
        assert (await admin.get("/metrics")).status_code == 200


async def test_public_works_sees_its_jurisdiction_and_not_another(live_app: LiveApp) -> None:
    async with signed_in(live_app, "edgar-pw") as client:
        sites = {s["id"] for s in (await client.get("/sites")).json()}
        expected = {s.id for s in live_app.runtime.registry.in_jurisdiction("edgar")}
        assert sites == expected
        assert (await client.get("/sites/main-101")).status_code == 404
        assert (await client.get("/console/edgar/view.json")).status_code == 200
        assert (await client.get("/console/local-law-6-2024/view.json")).status_code == 404


async def test_a_wrong_password_is_refused_and_repeated_failures_are_rate_limited(
    live_app: LiveApp,
) -> None:
    async with httpx.AsyncClient(base_url=live_app.base_url) as client:
        form = await client.get("/login")
        token = login_form_token(form.text)
        codes = []
        for _ in range(6):
            response = await client.post(
                "/login", data={"username": "oak5", "password": "wrong", "csrf_token": token}
            )
            codes.append(response.status_code)
        assert codes[:5] == [401] * 5
        assert codes[5] == 429
        assert int(response.headers["retry-after"]) > 0
        # Even the right password waits now.
        response = await client.post(
            "/login",
            data={"username": "oak5", "password": password("oak5"), "csrf_token": token},
        )
        assert response.status_code == 429


async def test_a_login_form_post_without_its_csrf_token_is_refused(live_app: LiveApp) -> None:
    async with httpx.AsyncClient(base_url=live_app.base_url) as client:
        response = await client.post(
            "/login", data={"username": "elm16", "password": password("elm16")}
        )
        assert response.status_code == 403
        assert "sumpwatch_session" not in response.cookies


async def test_the_session_cookie_is_http_only_and_same_site(live_app: LiveApp) -> None:
    async with httpx.AsyncClient(base_url=live_app.base_url) as client:
        form = await client.get("/login")
        token = login_form_token(form.text)
        response = await client.post(
            "/login",
            data={"username": "elm16", "password": password("elm16"), "csrf_token": token},
        )
        cookie = next(
            h for h in response.headers.get_list("set-cookie") if h.startswith("sumpwatch_session=")
        )
        assert "HttpOnly" in cookie
        assert "SameSite=lax" in cookie


async def test_state_changing_requests_need_the_session_csrf_token(live_app: LiveApp) -> None:
    async with signed_in(live_app, "elm16") as client:
        html = (await client.get("/account")).text
        refused = await client.post("/account/tokens", data={"name": "x"})
        assert refused.status_code == 403
        wrong = await client.post("/account/tokens", data={"name": "x", "csrf_token": "nope"})
        assert wrong.status_code == 403
        ok = await client.post("/account/tokens", data={"name": "x", "csrf_token": csrf_of(html)})
        assert ok.status_code == 303


async def test_logout_ends_the_session(live_app: LiveApp) -> None:
    async with signed_in(live_app, "elm16") as client:
        csrf = csrf_of((await client.get("/account")).text)
        cookie = client.cookies.get("sumpwatch_session")
        assert (await client.post("/logout", data={"csrf_token": csrf})).status_code == 303
    async with httpx.AsyncClient(base_url=live_app.base_url) as replay:
        replay.cookies.set("sumpwatch_session", cookie or "")
        assert (await replay.get("/me")).status_code == 401


async def test_an_api_token_authenticates_with_the_owners_scope_until_revoked(
    live_app: LiveApp,
) -> None:
    user = await live_app.accounts.get_user("elm16")
    assert user is not None
    secret, token = await live_app.accounts.create_token(user, "integration")
    headers = {"authorization": f"Bearer {secret}"}
    async with httpx.AsyncClient(base_url=live_app.base_url, headers=headers) as client:
        assert (await client.get("/sites/elm-16")).status_code == 200
        assert (await client.get("/sites/elm-14")).status_code == 404
        # No CSRF token needed: a bearer token is not sent by browsers on their own.
        assert (await client.get("/me")).json()["via"] == "token"
        await live_app.accounts.revoke_token(user, token.id)
        assert (await client.get("/sites/elm-16")).status_code == 401
    bad = {"authorization": "Bearer swt_not-a-real-token"}
    async with httpx.AsyncClient(base_url=live_app.base_url, headers=bad) as client:
        assert (await client.get("/sites")).status_code == 401


async def test_responses_carry_security_headers(live_app: LiveApp) -> None:
    async with signed_in(live_app, "elm16") as client:
        for path in ("/health", "/site/elm-16", "/sites/elm-16"):
            response = await client.get(path)
            headers = response.headers
            assert headers["x-content-type-options"] == "nosniff"
            assert headers["x-frame-options"] == "DENY"
            assert "frame-ancestors 'none'" in headers["content-security-policy"]
            assert "script-src 'self'" in headers["content-security-policy"]
            assert headers["referrer-policy"] == "same-origin"
            assert headers["cache-control"] == "no-store"


async def test_no_password_or_token_reaches_the_logs(
    live_app: LiveApp, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    user = await live_app.accounts.get_user("elm16")
    assert user is not None
    secret, _ = await live_app.accounts.create_token(user, "logs")
    async with httpx.AsyncClient(base_url=live_app.base_url) as client:
        form = await client.get("/login")
        token = login_form_token(form.text)
        await client.post(
            "/login",
            data={"username": "elm16", "password": "a-wrong-secret-pw", "csrf_token": token},
        )
        await client.post(
            "/login",
            data={"username": "elm16", "password": password("elm16"), "csrf_token": token},
        )
        await client.get("/sites", headers={"authorization": f"Bearer {secret}"})
        await client.get("/sites", headers={"authorization": "Bearer swt_wrong-token-value"})
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert "failed sign-in" in text  # the events are logged ...
    for leaked in (password("elm16"), "a-wrong-secret-pw", secret, "swt_wrong-token-value"):
        assert leaked not in text  # ... their secrets are not


async def test_a_signed_in_page_offers_to_sign_out(live_app: LiveApp) -> None:
    async with signed_in(live_app, "elm16") as client:
        html = (await client.get("/account")).text
    assert 'action="/logout"' in html


async def test_with_auth_off_no_page_offers_to_sign_out(open_app: LiveApp) -> None:
    async with httpx.AsyncClient(base_url=open_app.base_url) as client:
        page = await client.get("/account")
    assert page.status_code == 200
    assert 'action="/logout"' not in page.text


async def test_with_auth_off_every_request_is_served_as_before(open_app: LiveApp) -> None:
    async with httpx.AsyncClient(base_url=open_app.base_url) as client:
        assert (await client.get("/sites")).status_code == 200
        assert (await client.get("/deadletters")).status_code == 200
        assert (await client.get("/me")).json()["role"] == "admin"


async def test_a_homeowner_may_acknowledge_but_not_resolve_an_alert_of_their_site(
    live_app: LiveApp,
) -> None:
    await publish_pit(live_app, "elm-16", [60.0, 61.0, 62.0])

    async def alert_open() -> list[str]:
        alerts = await live_app.runtime.alerts.list_alerts()
        return [a.id for a in alerts if a.site_id == "elm-16" and a.rule_id == "high_water"]

    async def has_alert() -> bool:
        return bool(await alert_open())

    await wait_until(has_alert, timeout=15)
    alert_id = (await alert_open())[0]
    async with signed_in(live_app, "oak5") as stranger:
        csrf = csrf_of((await stranger.get("/account")).text)
        response = await stranger.post(
            f"/ui/alerts/{alert_id}/ack",
            data={"csrf_token": csrf},
            headers={"accept": "application/json"},
        )
        assert response.status_code == 404
    async with signed_in(live_app, "elm16") as owner:
        csrf = csrf_of((await owner.get("/account")).text)
        headers = {"accept": "application/json", "x-csrf-token": csrf}
        resolve = await owner.post(f"/ui/alerts/{alert_id}/resolve", headers=headers)
        assert resolve.status_code == 403
        ack = await owner.post(f"/ui/alerts/{alert_id}/ack", headers=headers)
        assert ack.status_code == 200
        assert ack.json()["state"] == "acknowledged"
    alert = await live_app.runtime.alerts.get(alert_id)
    assert alert.acknowledged_by == "elm16"


async def test_the_alert_api_lists_only_the_callers_alerts_and_records_who_acted(
    live_app: LiveApp,
) -> None:
    await publish_pit(live_app, "elm-16", [60.0, 61.0, 62.0])
    await publish_pit(live_app, "oak-5", [60.0, 61.0, 62.0])

    async def both() -> bool:
        alerts = await live_app.runtime.alerts.list_alerts()
        return {a.site_id for a in alerts} >= {"elm-16", "oak-5"}

    await wait_until(both, timeout=15)
    async with signed_in(live_app, "elm16") as owner:
        mine = (await owner.get("/alerts")).json()
        assert {a["site_id"] for a in mine} == {"elm-16"}
        csrf = csrf_of((await owner.get("/account")).text)
        headers = {"x-csrf-token": csrf}
        alert_id = mine[0]["id"]
        resolve = await owner.post(
            f"/alerts/{alert_id}/resolve", json={"by": "elm16", "note": "x"}, headers=headers
        )
        assert resolve.status_code == 403
        ack = await owner.post(f"/alerts/{alert_id}/ack", json={"by": "mayor"}, headers=headers)
        assert ack.status_code == 200
        assert ack.json()["acknowledged_by"] == "elm16"  # the account, not the claim
    async with signed_in(live_app, "edgar-pw") as staff:
        assert {a["site_id"] for a in (await staff.get("/alerts")).json()} == {"elm-16", "oak-5"}
    async with signed_in(live_app, "ll6-pw") as other:
        assert (await other.get("/alerts")).json() == []
