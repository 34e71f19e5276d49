"""Issue 12 item 7: who may call every route, with and without smuggled parameters.

Every route of the app (the OpenAPI document's and the pages') is declared once in
:data:`ACCESS`; a route missing from it fails :func:`test_every_route_is_declared`,
so a new route is covered the day it is added. The matrix test then calls each
route as each role over the real app (uvicorn, live gateway, real SQLite), once
plainly and once with the caller's own site and jurisdiction smuggled into the
query (``?site=elm-16`` once opened admin-only routes to a homeowner), and checks
the answer against the declared access.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import Enum
from typing import Any

import httpx
import pytest
import pytest_asyncio
from fastapi.routing import iter_route_contexts

from gateway.app import create_app
from tests.browser_fixtures import USERS, LiveApp, publish_pit
from tests.conftest import MakeSettings
from tests.mqtt_helpers import wait_until

pytestmark = pytest.mark.integration


class Access(Enum):
    """What a route returns decides who may call it."""

    PUBLIC = "anyone, signed in or not"
    SIGNED_IN = "any account; the answer is filtered to the caller's own scope"
    SITE = "accounts that can see the site the path names (elm-16 here)"
    SITE_STAFF = "public works of the site's jurisdiction, and admins"
    JURISDICTION = "public works of the jurisdiction the path names, and admins"
    STAFF = "public works of any jurisdiction and admins (the body or scope names the site)"
    #: Resolving the matrix's alert: it is a homeowner-only high-water alert, which
    #: public works may not resolve (issue 20 item 4); only an admin may.
    SITE_ADMIN_ACTS = "seen by the site's scope, acted on by admins only"
    ADMIN = "administrators only (every site's data, or none)"


#: Every route of the app, and who may call it. Add a new route here.
ACCESS: dict[tuple[str, str], Access] = {
    ("GET", "/health"): Access.PUBLIC,
    ("GET", "/login"): Access.PUBLIC,
    ("POST", "/login"): Access.PUBLIC,
    ("GET", "/openapi.json"): Access.SIGNED_IN,
    ("GET", "/docs"): Access.SIGNED_IN,
    ("GET", "/metrics"): Access.ADMIN,
    ("GET", "/deadletters"): Access.ADMIN,
    ("GET", "/deliveries"): Access.ADMIN,
    ("GET", "/sites"): Access.SIGNED_IN,
    ("GET", "/sites/{site_id}"): Access.SITE,
    ("GET", "/sites/{site_id}/readings"): Access.SITE,
    ("GET", "/findings"): Access.SIGNED_IN,
    ("GET", "/sites/{site_id}/findings"): Access.SITE,
    ("GET", "/sites/{site_id}/not-evaluated"): Access.SITE,
    ("GET", "/findings/{finding_id}"): Access.SITE,
    ("GET", "/audit"): Access.SIGNED_IN,
    ("GET", "/sites/{site_id}/audit"): Access.SITE,
    ("GET", "/alerts"): Access.SIGNED_IN,
    ("GET", "/alerts/{alert_id}"): Access.SITE,
    ("POST", "/alerts/{alert_id}/ack"): Access.SITE,
    ("POST", "/alerts/{alert_id}/assign"): Access.SITE_STAFF,
    ("POST", "/alerts/{alert_id}/resolve"): Access.SITE_ADMIN_ACTS,
    ("GET", "/alerts/{alert_id}/deliveries"): Access.SITE,
    ("GET", "/reports/winter"): Access.SIGNED_IN,
    ("POST", "/logout"): Access.SIGNED_IN,
    ("GET", "/me"): Access.SIGNED_IN,
    ("GET", "/account"): Access.SIGNED_IN,
    ("POST", "/account/tokens"): Access.SIGNED_IN,
    ("POST", "/account/tokens/{token_id}/revoke"): Access.SIGNED_IN,
    ("GET", "/"): Access.SIGNED_IN,
    ("GET", "/units"): Access.SIGNED_IN,
    ("GET", "/site/{site_id}"): Access.SITE,
    ("GET", "/console/{jurisdiction}"): Access.JURISDICTION,
    ("POST", "/ui/alerts/{alert_id}/ack"): Access.SITE,
    ("POST", "/ui/alerts/{alert_id}/assign"): Access.SITE_STAFF,
    ("POST", "/ui/alerts/{alert_id}/resolve"): Access.SITE_ADMIN_ACTS,
    ("GET", "/site/{site_id}/overview.json"): Access.SITE,
    ("GET", "/site/{site_id}/charts.json"): Access.SITE,
    ("GET", "/site/{site_id}/events"): Access.SITE,
    ("GET", "/console/{jurisdiction}/view.json"): Access.JURISDICTION,
    ("GET", "/console/{jurisdiction}/events"): Access.JURISDICTION,
    ("GET", "/findings/{finding_id}/snapshots"): Access.SITE,
    ("GET", "/sites/{site_id}/verdict"): Access.SITE,
    # Enforcement cases (issue 16): a case is its site's; lists and the ledger filter.
    ("GET", "/cases"): Access.SIGNED_IN,
    ("POST", "/cases"): Access.STAFF,
    ("GET", "/cases/{case_id}"): Access.SITE,
    ("POST", "/cases/{case_id}/steps"): Access.SITE,
    ("POST", "/cases/{case_id}/proof"): Access.SITE,
    ("GET", "/cases/{case_id}/documents/{doc_id}"): Access.SITE,
    ("GET", "/cases/{case_id}/evidence.json"): Access.SITE_STAFF,
    ("GET", "/cases/{case_id}/evidence.pdf"): Access.SITE_STAFF,
    ("POST", "/cases/notices.pdf"): Access.STAFF,
    ("POST", "/observations"): Access.STAFF,
    ("GET", "/ledger"): Access.SIGNED_IN,
    ("GET", "/ledger.csv"): Access.STAFF,
    ("GET", "/cases/queue/{jurisdiction}"): Access.JURISDICTION,
    ("GET", "/case/{case_id}"): Access.SITE,
    ("GET", "/site/{site_id}/cases"): Access.SITE,
    ("POST", "/ui/cases/notices.pdf"): Access.STAFF,
    ("POST", "/ui/cases/{case_id}/step"): Access.SITE,
    ("POST", "/ui/cases/{case_id}/proof"): Access.SITE,
    # An alert's history (issue 20 item 4) and the admin pages (item 11).
    ("GET", "/alerts/{alert_id}/history"): Access.SITE,
    ("GET", "/ui/alerts/{alert_id}/history"): Access.SITE,
    ("GET", "/admin/deadletters"): Access.ADMIN,
    ("GET", "/admin/deliveries"): Access.ADMIN,
    ("GET", "/admin/outbox"): Access.ADMIN,
    ("POST", "/admin/test-alert"): Access.ADMIN,
    ("GET", "/admin/metrics"): Access.ADMIN,
    # The demo's "inject a scenario into a site" (issue 20 item 1): page, form, API.
    ("GET", "/admin/inject"): Access.ADMIN,
    ("POST", "/admin/inject"): Access.ADMIN,
    ("POST", "/demo/inject"): Access.ADMIN,
}

#: Query parameters a route needs to get past validation to its handler.
REQUIRED_QUERY = {"/reports/winter": {"format": "csv"}}
JSON_BODIES: dict[str, Any] = {
    "/alerts/{alert_id}/ack": {"by": "someone"},
    "/alerts/{alert_id}/assign": {"assignee": None},
    "/alerts/{alert_id}/resolve": {"by": "someone", "note": "checked"},
}
FORM_BODIES = {"/account/tokens": {"name": "matrix"}}

SITE = "elm-16"  # elm16's site, in edgar
JURISDICTION = "edgar"


@dataclass(frozen=True)
class Caller:
    """A role as the matrix calls it: its account and what it smuggles."""

    name: str
    username: str | None  # None: anonymous
    outcome: dict[Access, str]  # "ok", or the status code refused with
    smuggle: dict[str, str]  # its own scope, added to the query


#: Someone signed in who cannot see elm-16: out-of-scope ids are 404, as if absent.
STRANGER = {
    Access.PUBLIC: "ok",
    Access.SIGNED_IN: "ok",
    Access.SITE: "404",
    Access.SITE_STAFF: "404",
    Access.JURISDICTION: "404",
    Access.ADMIN: "403",
    Access.SITE_ADMIN_ACTS: "404",
}
#: Staff routes whose site comes in the body: any public works account gets past the door.
STAFF_ELSEWHERE = {**STRANGER, Access.STAFF: "ok"}
HOMEOWNER_ELSEWHERE = {**STRANGER, Access.STAFF: "403"}

CALLERS = [
    Caller(
        "admin",
        "admin",
        dict.fromkeys(Access, "ok"),
        {"site": SITE, "site_id": SITE, "jurisdiction": JURISDICTION},
    ),
    Caller(
        "public works of the site",
        "edgar-pw",
        {
            Access.PUBLIC: "ok",
            Access.SIGNED_IN: "ok",
            Access.SITE: "ok",
            Access.SITE_STAFF: "ok",
            Access.JURISDICTION: "ok",
            Access.STAFF: "ok",
            Access.ADMIN: "403",
            Access.SITE_ADMIN_ACTS: "403",
        },
        {"site": SITE, "site_id": SITE, "jurisdiction": JURISDICTION},
    ),
    Caller(
        "public works elsewhere",
        "ll6-pw",
        STAFF_ELSEWHERE,
        {"site": "main-101", "site_id": "main-101", "jurisdiction": "local-law-6-2024"},
    ),
    Caller(
        "homeowner of the site",
        "elm16",
        {
            Access.PUBLIC: "ok",
            Access.SIGNED_IN: "ok",
            Access.SITE: "ok",
            Access.SITE_STAFF: "403",
            Access.JURISDICTION: "404",
            Access.STAFF: "403",
            Access.ADMIN: "403",
            Access.SITE_ADMIN_ACTS: "403",
        },
        {"site": SITE, "site_id": SITE},
    ),
    Caller(
        "another homeowner",
        "oak5",
        HOMEOWNER_ELSEWHERE,
        {"site": "oak-5", "site_id": "oak-5"},
    ),
    Caller(
        "anonymous",
        None,
        {a: ("ok" if a is Access.PUBLIC else "401") for a in Access},
        {"site": SITE, "site_id": SITE, "jurisdiction": JURISDICTION},
    ),
]


def app_routes(app: Any) -> set[tuple[str, str]]:
    """(method, path template) of every HTTP route (HEAD and the /static mount aside)."""
    out = set()
    for ctx in iter_route_contexts(app.routes):
        if ctx.path is None or ctx.methods is None:
            continue
        out |= {(m, ctx.path) for m in ctx.methods - {"HEAD"}}
    return out


def test_every_route_is_declared_in_the_access_table(make_settings: MakeSettings) -> None:
    app = create_app(make_settings())
    routes = app_routes(app)
    missing = sorted(routes - set(ACCESS))
    assert not missing, f"declare who may call these routes in ACCESS: {missing}"
    assert not sorted(set(ACCESS) - routes), "ACCESS names routes the app no longer has"
    documented = {
        (method.upper(), path) for path, item in app.openapi()["paths"].items() for method in item
    }
    assert documented <= routes  # so every OpenAPI operation is in the matrix


@dataclass
class Fixtures:
    """Real resources of the site for the path parameters."""

    alert_id: str
    finding_id: str
    season: str
    case_id: str
    doc_id: str


@pytest_asyncio.fixture(loop_scope="session")
async def resources(live_app: LiveApp) -> Fixtures:
    """A high-water alert (and its finding) at elm-16, another at oak-5."""
    await publish_pit(live_app, SITE, [60.0, 61.0, 62.0])
    await publish_pit(live_app, "oak-5", [60.0, 61.0, 62.0])

    async def alerts() -> bool:
        sites = {a.site_id for a in await live_app.runtime.alerts.list_alerts()}
        return {SITE, "oak-5"} <= sites

    await wait_until(alerts, timeout=20)
    alert = next(a for a in await live_app.runtime.alerts.list_alerts() if a.site_id == SITE)
    year = datetime.now(UTC).year
    case_id, doc_id = await _case_with_a_document(live_app)
    return Fixtures(alert.id, alert.finding_id, f"{year - 1}-{year}", case_id, doc_id)


async def _case_with_a_document(live: LiveApp) -> tuple[str, str]:
    """A complaint case at elm-16 holding one photo (for the case routes' paths)."""
    from gateway.cases.models import Document, Origin
    from gateway.cases.service import Actor

    service = live.runtime.cases
    assert service is not None
    photo = b"\x89PNG\r\n\x1a\n matrix"
    doc = Document("doc-matrix", "photo.png", "image/png", hashlib.sha256(photo).hexdigest(), 16)
    actor = Actor("admin", "admin")
    case = await service.open_case(
        SITE, "sanitary_discharge", Origin.COMPLAINT, actor, note="matrix", documents=(doc,)
    )
    await service.repo.add_document(case.id, doc, photo)
    return case.id, doc.id


@pytest_asyncio.fixture(loop_scope="session")
async def tokens(live_app: LiveApp) -> AsyncIterator[dict[str, str]]:
    """An API token per account (bearer requests need no CSRF token)."""
    out = {}
    for username in USERS:
        user = await live_app.accounts.get_user(username)
        assert user is not None
        out[username], _ = await live_app.accounts.create_token(user, "matrix")
    yield out


async def _path(live: LiveApp, template: str, caller: Caller, res: Fixtures) -> str:
    values = {
        "site_id": SITE,
        "jurisdiction": JURISDICTION,
        "alert_id": res.alert_id,
        "finding_id": res.finding_id,
        "token_id": "1",
        "case_id": res.case_id,
        "doc_id": res.doc_id,
    }
    if "{token_id}" in template and caller.username is not None:
        # A fresh token of the caller's own, so revoking it is allowed every time.
        user = await live.accounts.get_user(caller.username)
        assert user is not None
        _, token = await live.accounts.create_token(user, "to-revoke")
        values["token_id"] = str(token.id)
    for name in re.findall(r"{(\w+)}", template):
        template = template.replace("{" + name + "}", values[name])
    return template


def _verdict(status: int) -> str:
    assert status < 500, f"server error {status}"
    return str(status) if status in (401, 403, 404) else "ok"


async def _call(
    client: httpx.AsyncClient, method: str, template: str, path: str, query: dict[str, str]
) -> tuple[int, str]:
    """Status and (unless an event stream) body of one request."""
    kwargs: dict[str, Any] = {"params": query, "headers": {"accept": "application/json"}}
    if template in JSON_BODIES:
        kwargs["json"] = JSON_BODIES[template]
    if template in FORM_BODIES:
        kwargs["data"] = FORM_BODIES[template]
    async with client.stream(method, path, **kwargs) as response:
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            return response.status_code, ""
        return response.status_code, (await response.aread()).decode(errors="replace")


@pytest.mark.asyncio(loop_scope="session")
async def test_every_route_answers_each_role_as_declared_whatever_the_query_smuggles(
    live_app: LiveApp, resources: Fixtures, tokens: dict[str, str]
) -> None:
    # Sites a caller must never read about in an answer it is given.
    foreign = {"elm16": "oak-5", "oak5": SITE}
    wrong: list[str] = []
    checked = 0
    for caller in CALLERS:
        headers = {}
        if caller.username is not None:
            headers["authorization"] = f"Bearer {tokens[caller.username]}"
        async with httpx.AsyncClient(
            base_url=live_app.base_url, headers=headers, timeout=60
        ) as client:
            for (method, template), access in sorted(ACCESS.items(), key=lambda kv: kv[0][1]):
                if template == "/reports/winter":
                    base = {**REQUIRED_QUERY[template], "season": resources.season}
                else:
                    base = {}
                for smuggled in (False, True):
                    query = {**base, **(caller.smuggle if smuggled else {})}
                    path = await _path(live_app, template, caller, resources)
                    status, body = await _call(client, method, template, path, query)
                    got, expected = _verdict(status), caller.outcome[access]
                    if got != expected:
                        wrong.append(
                            f"{caller.name}: {method} {path} {query or ''} -> {status}, "
                            f"expected {expected} ({access.name})"
                        )
                    other = foreign.get(caller.username or "")
                    if got == "ok" and other and other in body:
                        wrong.append(f"{caller.name}: {method} {path} {query} shows {other}")
                    checked += 1
    assert checked == len(ACCESS) * len(CALLERS) * 2
    assert not wrong, "\n".join(wrong)
