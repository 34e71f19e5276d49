"""Login, logout, the account page (API tokens) and ``GET /me``."""

from __future__ import annotations

import hashlib
import logging
import secrets
import time
from typing import Annotated

from fastapi import APIRouter, Form, HTTPException, Request
from fastapi.responses import RedirectResponse, Response
from pydantic import BaseModel

from gateway.accounts.access import (
    CSRF_FIELD,
    SESSION_COOKIE,
    PrincipalDep,
    accounts_of,
    auth_enabled,
)
from gateway.accounts.models import Principal
from gateway.accounts.ratelimit import LoginLimiter
from gateway.errors import NotFound
from gateway.pages import api_settings, render

log = logging.getLogger(__name__)
router = APIRouter(tags=["accounts"])

LOGIN_CSRF_COOKIE = "sumpwatch_login_csrf"


def _secure(request: Request) -> bool:
    forced = api_settings(request).cookie_secure
    return bool(forced) if forced is not None else request.url.scheme == "https"


def _safe_next(target: str | None) -> str:
    """Only local paths: an open redirect would let a phishing link borrow our login."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    return target


def _client(request: Request) -> str:
    return request.client.host if request.client else "unknown"


def _login_page(
    request: Request, next_url: str, error: str = "", status_code: int = 200
) -> Response:
    token = request.cookies.get(LOGIN_CSRF_COOKIE) or secrets.token_urlsafe(24)
    response = render(
        request,
        "login.html",
        None,
        status_code=status_code,
        login_csrf=token,
        next_url=next_url,
        error=error,
    )
    response.set_cookie(
        LOGIN_CSRF_COOKIE, token, httponly=True, samesite="strict", secure=_secure(request)
    )
    return response


@router.get("/login", include_in_schema=False)
async def login_form(request: Request, next: str | None = None) -> Response:
    """The sign-in form."""
    if not auth_enabled(request):
        return RedirectResponse(_safe_next(next), status_code=303)
    return _login_page(request, _safe_next(next))


@router.post("/login", include_in_schema=False)
async def login(
    request: Request,
    username: Annotated[str, Form(max_length=128)],
    password: Annotated[str, Form(max_length=1024)],
    csrf_token: Annotated[str, Form(alias=CSRF_FIELD, max_length=256)] = "",
    next: Annotated[str, Form(max_length=2048)] = "/",
) -> Response:
    """Check the password (rate-limited), start a session, set its cookie."""
    next_url = _safe_next(next)
    if not auth_enabled(request):
        return RedirectResponse(next_url, status_code=303)
    expected = request.cookies.get(LOGIN_CSRF_COOKIE, "")
    if not expected or not secrets.compare_digest(csrf_token.encode(), expected.encode()):
        return _login_page(request, next_url, "Your sign-in form expired; try again.", 403)
    limiter: LoginLimiter = request.app.state.login_limiter
    address = _client(request)
    wait = limiter.retry_after(address, username)
    if wait is not None:
        response = _login_page(
            request, next_url, f"Too many failed sign-ins. Try again in {wait} seconds.", 429
        )
        response.headers["Retry-After"] = str(wait)
        return response
    store = accounts_of(request)
    user = await store.authenticate(username, password)
    if user is None:
        limiter.failed(address, username)
        log.info("failed sign-in for %r from %s", username, address)
        return _login_page(request, next_url, "Wrong username or password.", 401)
    limiter.succeeded(address, username)
    secret, _ = await store.create_session(user)
    log.info("%s signed in from %s", user.username, address)
    response = RedirectResponse(next_url, status_code=303)
    response.set_cookie(
        SESSION_COOKIE,
        secret,
        max_age=int(store.session_ttl_s),
        httponly=True,
        samesite="lax",
        secure=_secure(request),
    )
    response.delete_cookie(LOGIN_CSRF_COOKIE)
    return response


@router.post("/logout", include_in_schema=False)
async def logout(request: Request, principal: PrincipalDep) -> Response:
    """End the session (CSRF-checked like every cookie-authenticated POST)."""
    cookie = request.cookies.get(SESSION_COOKIE)
    if cookie and auth_enabled(request):
        await accounts_of(request).end_session(cookie)
    response = RedirectResponse("/login" if auth_enabled(request) else "/", status_code=303)
    response.delete_cookie(SESSION_COOKIE)
    return response


class MePublic(BaseModel):
    """The caller's identity and scope."""

    username: str
    role: str
    site_ids: list[str]
    jurisdictions: list[str]
    via: str


@router.get("/me", response_model=MePublic, tags=["accounts"])
async def me(principal: PrincipalDep) -> MePublic:
    """Who the credentials belong to and what they may see."""
    return MePublic(
        username=principal.username,
        role=principal.role.value,
        site_ids=sorted(principal.site_ids),
        jurisdictions=sorted(principal.jurisdictions),
        via=principal.via,
    )


async def _account_page(request: Request, principal: Principal, new_token: str = "") -> Response:
    tokens = []
    if principal.user_id is not None:
        user = await accounts_of(request).get_user(principal.username)
        if user is not None:
            tokens = await accounts_of(request).tokens(user)
    return render(
        request,
        "account.html",
        principal,
        tokens=tokens,
        new_token=new_token,
    )


@router.get("/account", include_in_schema=False)
async def account(request: Request, principal: PrincipalDep) -> Response:
    """The account page: role, scope and API tokens (a new token's secret, once)."""
    new_token = _flashes(request).take(_flash_key(request, principal))
    return await _account_page(request, principal, new_token=new_token)


@router.post("/account/tokens", include_in_schema=False)
async def create_token(
    request: Request, principal: PrincipalDep, name: Annotated[str, Form(max_length=80)]
) -> Response:
    """Create an API token, then show its secret once on the account page.

    Post/redirect/get: the secret waits in memory for the next GET of /account
    with the same credentials (never in a URL), so reloading the page does not
    make a second token and nobody else's GET can collect it.
    """
    user = await accounts_of(request).get_user(principal.username)
    if user is None or principal.via == "open":
        raise HTTPException(400, detail="API tokens need sign-in to be enabled")
    secret, _ = await accounts_of(request).create_token(user, name.strip() or "integration")
    _flashes(request).put(_flash_key(request, principal), secret)
    return RedirectResponse("/account", status_code=303)


def _flash_key(request: Request, principal: Principal) -> str:
    """Who may collect a new token's secret: this account over these credentials.

    The session's CSRF token (one per session) or a digest of the bearer token;
    never an empty key shared by every bearer caller.
    """
    if principal.via == "session":
        credential = principal.csrf_token or ""
    else:
        credential = request.headers.get("authorization", "")
    material = f"{principal.user_id}\x00{principal.via}\x00{credential}"
    return hashlib.sha256(material.encode()).hexdigest()


class TokenFlashes:
    """New token secrets waiting to be shown once, for at most ``ttl_s``."""

    def __init__(self, ttl_s: float = 600.0) -> None:
        self.ttl_s = ttl_s
        self._items: dict[str, tuple[str, float]] = {}

    def put(self, key: str, secret: str) -> None:
        """Keep ``secret`` for the next :meth:`take` with ``key``."""
        now = time.monotonic()
        self._items = {k: v for k, v in self._items.items() if now - v[1] < self.ttl_s}
        self._items[key] = (secret, now)

    def take(self, key: str) -> str:
        """The waiting secret of ``key`` (then forgotten), or ""."""
        secret, at = self._items.pop(key, ("", 0.0))
        return secret if time.monotonic() - at < self.ttl_s else ""


def _flashes(request: Request) -> TokenFlashes:
    flashes: TokenFlashes | None = getattr(request.app.state, "token_flashes", None)
    if flashes is None:
        flashes = request.app.state.token_flashes = TokenFlashes()
    return flashes


@router.post("/account/tokens/{token_id}/revoke", include_in_schema=False)
async def revoke_token(request: Request, principal: PrincipalDep, token_id: int) -> Response:
    """Revoke one of your tokens."""
    user = await accounts_of(request).get_user(principal.username)
    if user is None:
        raise HTTPException(404, detail="no such token")
    try:
        await accounts_of(request).revoke_token(user, token_id)
    except NotFound as exc:
        raise HTTPException(404, detail="no such token") from exc
    return RedirectResponse("/account", status_code=303)
