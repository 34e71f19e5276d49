"""Issue 12 items 8-11 and 13, over the real app served by uvicorn on a live gateway:
token secrets shown to their owner only, bounded request bodies and error bodies
that echo nothing, the login limiter's keys and proxy trust, season validation, and
the API docs page served from this origin under the CSP."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import pytest_asyncio

from gateway.broker import BrokerProcess
from gateway.settings import Settings
from tests.browser_fixtures import (
    LiveApp,
    _serve,
    browser_login,
    login_form_token,
    password,
)

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

#: A whole API token (prefix + 43 characters); the account page shows only prefixes.
FULL_TOKEN = re.compile(r"swt_[A-Za-z0-9_-]{40,}")
LIMIT = 64 * 1024


async def _bearer(live: LiveApp, username: str) -> dict[str, str]:
    user = await live.accounts.get_user(username)
    assert user is not None
    secret, _ = await live.accounts.create_token(user, "test")
    return {"authorization": f"Bearer {secret}"}


# ---------------------------------------------------------------------- item 8


async def test_a_token_minted_with_a_bearer_token_is_shown_to_its_owner_only_once(
    live_app: LiveApp,
) -> None:
    owner = await _bearer(live_app, "elm16")
    other = await _bearer(live_app, "oak5")
    async with httpx.AsyncClient(base_url=live_app.base_url) as client:
        made = await client.post("/account/tokens", data={"name": "ci"}, headers=owner)
        assert made.status_code == 303
        # Another bearer caller's account page: before the fix it collected the secret.
        assert not FULL_TOKEN.findall((await client.get("/account", headers=other)).text)
        shown = FULL_TOKEN.findall((await client.get("/account", headers=owner)).text)
        assert len(shown) == 1
        assert not FULL_TOKEN.findall((await client.get("/account", headers=owner)).text)
        me = await client.get("/me", headers={"authorization": f"Bearer {shown[0]}"})
        assert me.json()["username"] == "elm16"


# ---------------------------------------------------------------------- item 9


async def test_a_declared_body_over_64_kib_is_refused_413_before_sign_in(
    live_app: LiveApp,
) -> None:
    async with httpx.AsyncClient(base_url=live_app.base_url) as client:
        over = await client.post("/login", content=b"u=" + b"x" * LIMIT)
        assert over.status_code == 413
        assert "x" * 100 not in over.text
        under = await client.post("/login", content=b"u=" + b"x" * (LIMIT - 100))
        assert under.status_code == 422  # parsed: the form lacks its fields


async def _chunked_post(live: LiveApp, path: str, headers: dict[str, str], chunks: int) -> bytes:
    """POST 8 KiB chunks without a Content-Length, looking for an answer after each.

    The server answers 413 and closes as soon as the limit is passed; a client that
    went on writing would get a reset instead of the answer, so this one reads first.
    """
    host, port = live.base_url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    head = f"POST {path} HTTP/1.1\r\nHost: {host}\r\nTransfer-Encoding: chunked\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
    writer.write(head.encode())
    answer = b""
    try:
        for _ in range(chunks):
            writer.write(b"2000\r\n" + b"a" * 8192 + b"\r\n")
            await writer.drain()
            try:
                answer = await asyncio.wait_for(reader.read(65536), 0.2)
            except TimeoutError:
                continue
            break
    finally:
        writer.close()
    return answer


async def test_a_streamed_body_over_the_limit_is_refused_413(live_app: LiveApp) -> None:
    headers = {**await _bearer(live_app, "admin"), "content-type": "application/json"}
    # 40 x 8 KiB = 320 KiB offered; the answer comes once 64 KiB have been read.
    answer = await _chunked_post(live_app, "/alerts/x/ack", headers, chunks=40)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert b"connection: close" in answer.lower()


async def test_validation_errors_say_where_and_why_without_the_submitted_values(
    live_app: LiveApp,
) -> None:
    marker = "ECHO-MARKER-"
    headers = await _bearer(live_app, "admin")
    async with httpx.AsyncClient(base_url=live_app.base_url, headers=headers) as client:
        body = await client.post("/alerts/x/ack", json={"by": marker * 200, "note": marker})
        query = await client.get("/sites/elm-16/readings", params={"limit": marker})
        field = await client.get("/sites/elm-16/readings", params={"field": marker})
        rule = await client.get("/findings", params={"rule": marker})
    for response in (body, query, field, rule):
        assert response.status_code == 422
        assert marker not in response.text
    detail = body.json()["detail"][0]
    assert detail["loc"] == ["body", "by"]
    assert "200" in detail["msg"]  # "String should have at most 200 characters"
    assert set(detail) == {"type", "loc", "msg"}


# ---------------------------------------------------------------------- item 10


def _from(address: str, live: LiveApp) -> httpx.AsyncClient:
    """A client whose connections come from ``address`` (any 127.x.y.z is loopback)."""
    transport = httpx.AsyncHTTPTransport(local_address=address)
    return httpx.AsyncClient(base_url=live.base_url, transport=transport, timeout=20)


async def _attempt(
    client: httpx.AsyncClient, username: str, pw: str, headers: dict[str, str] | None = None
) -> int:
    form = await client.get("/login")
    response = await client.post(
        "/login",
        data={"username": username, "password": pw, "csrf_token": login_form_token(form.text)},
        headers=headers or {},
    )
    return response.status_code


async def _sign_in_from(address: str, live: LiveApp, username: str) -> int:
    async with _from(address, live) as client:
        return await _attempt(client, username, password(username))


async def test_twenty_failures_from_one_address_lock_out_that_address_not_the_accounts(
    live_app: LiveApp,
) -> None:
    async with _from("127.0.0.2", live_app) as attacker:
        # Five on admin (as many as one account allows one address), then a spray.
        names = ["admin"] * 5 + ["elm16", "oak5"] + [f"user{i}" for i in range(13)]
        codes = [await _attempt(attacker, name, "wrong-password") for name in names]
        assert codes == [401] * 20
        assert await _attempt(attacker, "admin", password("admin")) == 429
    assert await _sign_in_from("127.0.0.3", live_app, "admin") == 303
    assert await _sign_in_from("127.0.0.4", live_app, "elm16") == 303


async def test_an_account_guessed_from_one_address_still_signs_in_from_another(
    live_app: LiveApp,
) -> None:
    async with _from("127.0.0.5", live_app) as guesser:
        codes = [await _attempt(guesser, "oak5", "wrong-password") for _ in range(6)]
        assert codes == [401] * 5 + [429]
    assert await _sign_in_from("127.0.0.6", live_app, "oak5") == 303


async def test_x_forwarded_for_from_an_undeclared_proxy_does_not_change_the_address(
    live_app: LiveApp,
) -> None:
    # From 127.0.0.1: uvicorn's default believes X-Forwarded-For from there.
    async with _from("127.0.0.1", live_app) as client:
        for i in range(20):
            spoof = {"x-forwarded-for": f"203.0.113.{i}"}
            assert await _attempt(client, f"user{i}", "wrong-password", spoof) == 401
        spoof = {"x-forwarded-for": "203.0.113.99"}
        assert await _attempt(client, "admin", password("admin"), spoof) == 429


@pytest_asyncio.fixture(loop_scope="session")
async def proxied_app(web_settings: Settings, mosquitto: BrokerProcess) -> AsyncIterator[LiveApp]:
    """The app behind a declared reverse proxy at 127.0.0.8."""
    settings = web_settings.updated(api={"trusted_proxies": ["127.0.0.8"]})
    async for live in _serve(settings, mosquitto):
        yield live


async def test_a_declared_proxy_s_forwarded_address_is_the_one_counted(
    proxied_app: LiveApp,
) -> None:
    async with _from("127.0.0.8", proxied_app) as proxy:
        attacker = {"x-forwarded-for": "198.51.100.7"}
        for i in range(20):
            assert await _attempt(proxy, f"user{i}", "wrong-password", attacker) == 401
        assert await _attempt(proxy, "admin", password("admin"), attacker) == 429
        someone = {"x-forwarded-for": "198.51.100.8"}
        assert await _attempt(proxy, "admin", password("admin"), someone) == 303


# ---------------------------------------------------------------------- item 11


@pytest.mark.parametrize("season", ["0000-0001", "9999-10000", "2026-2028", "2027-2026", "x"])
async def test_an_impossible_season_is_a_422_not_a_server_error(
    live_app: LiveApp, season: str
) -> None:
    headers = await _bearer(live_app, "admin")
    async with httpx.AsyncClient(base_url=live_app.base_url, headers=headers) as client:
        response = await client.get("/reports/winter", params={"season": season, "format": "csv"})
    assert response.status_code == 422, response.text
    assert response.json()["detail"][0]["loc"] == ["query", "season"]


# ---------------------------------------------------------------------- item 13


async def test_the_api_docs_page_names_no_other_host_and_carries_the_csp(
    live_app: LiveApp,
) -> None:
    headers = await _bearer(live_app, "elm16")
    async with httpx.AsyncClient(base_url=live_app.base_url, headers=headers) as client:
        page = await client.get("/docs")
        assert page.status_code == 200
        references = re.findall(r'(?:src|href)="([^"]+)"', page.text)
        assert references, "the page loads its assets"
        assert all(ref.startswith("/") and not ref.startswith("//") for ref in references)
        assert "script-src 'self'" in page.headers["content-security-policy"]
        assert "<script>" not in page.text  # no inline script: the CSP would block it
        for ref in references:
            assert (await client.get(ref)).status_code == 200
        assert (await client.get("/redoc")).status_code == 404  # ReDoc (CDN-only) is off


async def test_swagger_ui_runs_in_chromium_from_this_origin_only(
    live_app: LiveApp, browser_context: Any
) -> None:
    page = await browser_context.new_page()
    requested: list[str] = []
    problems: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    failed: list[str] = []
    await browser_login(page, live_app, "admin")
    page.on("console", lambda msg: problems.append(msg.text) if msg.type == "error" else None)
    page.on("response", lambda r: failed.append(r.url) if r.status >= 400 else None)
    await page.goto(f"{live_app.base_url}/docs")
    await page.wait_for_selector(".opblock", timeout=20_000)
    assert await page.locator(".opblock").count() >= 10
    assert requested
    assert all(url.startswith(live_app.base_url) for url in requested), requested
    assert not problems, (problems, failed)  # a CSP violation is a console error
