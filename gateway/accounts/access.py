"""Access control for every endpoint: one app-wide dependency.

:func:`access_control` runs before every route (``FastAPI(dependencies=...)``), so
routers added later by anyone are covered without doing anything. Per request it

1. lets public paths through (``/health``, ``/login``, static files);
2. authenticates: ``Authorization: Bearer swt_...`` (API token) or the session
   cookie; none -> 401 (an HTML GET is redirected to the login page);
3. checks CSRF on state-changing requests authenticated by cookie (header
   ``X-CSRF-Token`` or form field ``csrf_token`` must equal the session's token);
4. checks every resource the request names against the principal's scope:
   path parameters with a registered resolver (``site_id``, ``jurisdiction``,
   ``alert_id``; add more with :func:`register_resolver`) and the query parameters
   ``site_id`` / ``site`` / ``jurisdiction``. A site or alert out of scope answers
   404 exactly as one that does not exist, so ids cannot be probed;
5. fails closed: a non-admin may call a route only if its *path* names a
   site-scoped resource (step 4) or the route declares that it filters by scope
   itself by taking :data:`ScopeDep` or :data:`PrincipalDep`. Query parameters
   never open a route (a route may ignore them). Anything else (dead letters,
   metrics, the delivery log, a new list endpoint that forgot to filter) is
   admin-only (403).

With ``settings.api.auth_enabled`` off every request is :data:`OPEN_ACCESS` (admin).
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable
from typing import Annotated

from fastapi import Depends, HTTPException, Request
from fastapi.dependencies.models import Dependant
from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Send
from starlette.types import Scope as Scope_

from gateway.accounts.models import OPEN_ACCESS, Principal, Role, Scope
from gateway.accounts.repository import TOKEN_PREFIX, AccountStore
from gateway.errors import NotFound
from gateway.pages import api_settings
from gateway.services import Services, get_services

SESSION_COOKIE = "sumpwatch_session"
CSRF_HEADER = "x-csrf-token"
CSRF_FIELD = "csrf_token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
#: Reachable without logging in.
PUBLIC_PATHS = frozenset({"/health", "/login", "/favicon.ico"})
PUBLIC_PREFIXES = ("/static/",)
#: Any logged-in principal may read these (the API description).
ANY_ROLE_PATHS = frozenset({"/openapi.json", "/docs"})

#: Given a path-parameter value, the site id it belongs to (raise NotFound if none).
Resolver = Callable[[Request, str], Awaitable[str]]


class LoginRequired(Exception):
    """No valid credentials; answered 401, or a redirect to /login for pages."""


def _runtime(request: Request) -> Services:
    return get_services(request)


def accounts_of(request: Request) -> AccountStore:
    """The account store the lifespan opened."""
    store: AccountStore = request.app.state.accounts
    return store


def auth_enabled(request: Request) -> bool:
    """Whether ``api.auth_enabled`` is on for this app."""
    return api_settings(request).auth_enabled


async def _site_of_site(request: Request, site_id: str) -> str:
    return site_id


async def _site_of_alert(request: Request, alert_id: str) -> str:
    manager = _runtime(request).alerts
    if manager is None:
        raise NotFound("alerts are not enabled")
    alert = await manager.get(alert_id)  # NotFound if absent
    return str(alert.site_id)


_RESOLVERS: dict[str, Resolver] = {
    "site_id": _site_of_site,
    "alert_id": _site_of_alert,
}


def register_resolver(param: str, resolver: Resolver) -> None:
    """Scope a new path parameter: ``resolver(request, value)`` returns its site id.

    E.g. ``register_resolver("finding_id", site_of_finding)`` makes every route with
    a ``{finding_id}`` path parameter reachable only by principals who may see
    that finding's site.
    """
    _RESOLVERS[param] = resolver


async def authenticate(request: Request) -> Principal | None:
    """The principal of the request's credentials, or None."""
    if not auth_enabled(request):
        return OPEN_ACCESS
    store = accounts_of(request)
    header = request.headers.get("authorization", "")
    scheme, _, credential = header.partition(" ")
    if scheme.lower() == "bearer" and credential.startswith(TOKEN_PREFIX):
        user = await store.token_user(credential.strip())
        return None if user is None else Principal.of(user, "token")
    cookie = request.cookies.get(SESSION_COOKIE)
    if cookie:
        info = await store.session(cookie)
        if info is not None:
            return Principal.of(info.user, "session", info.csrf_token)
    return None


async def _check_csrf(request: Request, principal: Principal) -> None:
    if request.method in SAFE_METHODS or principal.via != "session":
        return
    sent = request.headers.get(CSRF_HEADER)
    content_type = request.headers.get("content-type", "")
    if sent is None and content_type.startswith(
        ("application/x-www-form-urlencoded", "multipart/form-data")
    ):
        form = await request.form()  # cached: the endpoint reads the same form
        value = form.get(CSRF_FIELD)
        sent = value if isinstance(value, str) else None
    expected = principal.csrf_token or ""
    if not sent or not secrets.compare_digest(sent.encode(), expected.encode()):
        raise HTTPException(403, detail="missing or wrong CSRF token; reload the page")


def _not_found(kind: str, value: str) -> HTTPException:
    return HTTPException(404, detail=f"no {kind} with id {value!r}")


async def _check_site(request: Request, principal: Principal, site_id: str) -> None:
    site = _runtime(request).registry.get(site_id)
    if site is None or not principal.can_see(site):
        raise _not_found("site", site_id)


def _check_jurisdiction(request: Request, principal: Principal, jurisdiction: str) -> None:
    known = any(s.jurisdiction == jurisdiction for s in _runtime(request).registry)
    if not known or not principal.can_see_jurisdiction(jurisdiction):
        raise _not_found("jurisdiction", jurisdiction)


def _declares_scope(dependant: Dependant) -> bool:
    for dep in dependant.dependencies:
        if dep.call in (get_scope, get_principal) or _declares_scope(dep):
            return True
    return False


_AWARE: dict[int, bool] = {}


def _route_is_scope_aware(request: Request) -> bool:
    route = request.scope.get("route")
    dependant = getattr(route, "dependant", None)
    if dependant is None:
        return False
    key = id(route)
    if key not in _AWARE:
        _AWARE[key] = _declares_scope(dependant)
    return _AWARE[key]


async def _check_path_params(request: Request, principal: Principal) -> bool:
    """Check every site or jurisdiction the path names (out of scope: 404); return
    whether the path names one."""
    named_site = False
    for name, value in request.path_params.items():
        if name == "jurisdiction":
            _check_jurisdiction(request, principal, str(value))
            named_site = True
            continue
        resolver = _RESOLVERS.get(name)
        if resolver is None:
            continue
        try:
            site_id = await resolver(request, str(value))
        except NotFound as exc:
            raise _not_found(name.removesuffix("_id"), str(value)) from exc
        site = _runtime(request).registry.get(site_id)
        if site is None or not principal.can_see(site):
            raise _not_found(name.removesuffix("_id"), str(value))
        named_site = True
    return named_site


async def access_control(request: Request) -> None:
    """The app-wide dependency: authenticate, check CSRF and scope (module docstring)."""
    path = request.url.path
    if path in PUBLIC_PATHS or path.startswith(PUBLIC_PREFIXES):
        return
    principal = await authenticate(request)
    if principal is None:
        raise LoginRequired()
    request.state.principal = principal
    await _check_csrf(request, principal)
    if principal.is_admin or path in ANY_ROLE_PATHS:
        return
    named_site = await _check_path_params(request, principal)
    # Sites named in the query are checked (out of scope: 404) but never open a
    # route: what a route returns is decided by its path and its code, not by a
    # parameter it may ignore (``/deliveries?site=<own>`` once listed every site's).
    for name in ("site_id", "site"):
        for value in request.query_params.getlist(name):
            await _check_site(request, principal, value)
    for value in request.query_params.getlist("jurisdiction"):
        _check_jurisdiction(request, principal, value)
    if not named_site and not _route_is_scope_aware(request):
        raise HTTPException(403, detail="this endpoint is for administrators")


def get_principal(request: Request) -> Principal:
    """Who is asking (set by :func:`access_control`)."""
    principal: Principal | None = getattr(request.state, "principal", None)
    if principal is None:
        # access_control did not run (a router mounted alone, as in unit tests):
        # open access only if authentication is off.
        if auth_enabled(request):
            raise LoginRequired()
        return OPEN_ACCESS
    return principal


PrincipalDep = Annotated[Principal, Depends(get_principal)]


def get_scope(request: Request, principal: PrincipalDep) -> Scope:
    """The principal's visible sites, for list endpoints to filter by."""
    return Scope(principal, _runtime(request).registry)


ScopeDep = Annotated[Scope, Depends(get_scope)]


def require_role(*roles: Role) -> Callable[[Principal], Principal]:
    """A dependency allowing only some roles (admin always passes): 403 otherwise."""

    def check(principal: PrincipalDep) -> Principal:
        if principal.role is not Role.ADMIN and principal.role not in roles:
            raise HTTPException(403, detail="your account's role may not do this")
        return principal

    return check


StaffDep = Annotated[Principal, Depends(require_role(Role.PUBLIC_WORKS))]


class GuardDocsMiddleware:
    """Authentication for the API description routes FastAPI adds itself.

    ``/openapi.json`` is a plain Starlette route that the app-wide dependency does
    not reach; this middleware asks for the same credentials before it (and before
    ``/docs``, which the dependency also covers).
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope_, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope.get("path") in ANY_ROLE_PATHS:
            request = Request(scope)
            if await authenticate(request) is None:
                response = JSONResponse(
                    {"detail": "authentication required"},
                    status_code=401,
                    headers={"WWW-Authenticate": "Bearer"},
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)
