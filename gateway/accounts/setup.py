"""How the app is wired for accounts: middleware, handlers, router, store."""

from __future__ import annotations

import logging
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, RedirectResponse, Response

from gateway.accounts import routes
from gateway.accounts.access import GuardDocsMiddleware, LoginRequired
from gateway.accounts.ratelimit import LoginLimiter
from gateway.accounts.repository import AccountStore
from gateway.accounts.secret import resolve_secret_key
from gateway.accounts.security import SecurityHeadersMiddleware, install_log_redaction
from gateway.accounts.seed import load_seed, seed_users
from gateway.services import Services
from gateway.settings import ApiSettings

log = logging.getLogger(__name__)


async def _login_required(request: Request, exc: Exception) -> Response:
    wants_html = "text/html" in request.headers.get("accept", "")
    if wants_html and request.method == "GET":
        target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        return RedirectResponse(f"/login?next={_quote(target)}", status_code=303)
    return JSONResponse(
        {"detail": "authentication required: sign in or send 'Authorization: Bearer <token>'"},
        status_code=401,
        headers={"WWW-Authenticate": "Bearer"},
    )


def _quote(path: str) -> str:
    from urllib.parse import quote

    return quote(path, safe="/")


def install_accounts(app: FastAPI, img_sources: tuple[str, ...] = ()) -> None:
    """Add security headers, the 401/redirect handler and the login routes.

    The access-control dependency itself must be given to ``FastAPI(dependencies=
    [Depends(access_control)])`` so that it precedes every router.
    """
    app.add_middleware(GuardDocsMiddleware)
    app.add_middleware(SecurityHeadersMiddleware, img_sources=img_sources)
    app.add_exception_handler(LoginRequired, _login_required)
    app.include_router(routes.router)
    app.state.login_limiter = LoginLimiter()


async def open_accounts(
    app: FastAPI, services: Services, api: ApiSettings, data_dir: Path
) -> AccountStore:
    """Open the account tables (the state database), seed users, and stop secrets reaching logs.

    With authentication on, a placeholder secret key (and no ``<data_dir>/secret_key``)
    is a ConfigError: the app does not start.
    """
    install_log_redaction()
    key = (
        resolve_secret_key(api, data_dir) if api.auth_enabled else api.secret_key.get_secret_value()
    )
    store = AccountStore(services.state_database, key)
    await store.open()
    app.state.accounts = store
    users_file = api.users_file
    if users_file is not None:
        created = await seed_users(store, load_seed(users_file))
        for user in created:
            log.info("seeded %s account %r", user.role.value, user.username)
    if not api.auth_enabled:
        log.warning("auth_enabled is off: every request is treated as an administrator")
    return store
