"""The FastAPI application; its lifespan is the composition root."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import uvicorn
from fastapi import Depends, FastAPI
from fastapi.exceptions import RequestValidationError
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

from gateway import __version__
from gateway.accounts.access import access_control
from gateway.accounts.security import tile_origin
from gateway.accounts.setup import install_accounts, open_accounts
from gateway.api import docs
from gateway.api.limits import BodyLimitMiddleware, validation_error
from gateway.api.routes import alerts, deadletters, findings, health, sites
from gateway.cases import routes as case_routes
from gateway.reports import routes as report_routes
from gateway.runtime import run_gateway, run_web
from gateway.settings import Settings
from gateway.web.setup import install_web


def create_app(settings: Settings | None = None, *, ingest: bool = True) -> FastAPI:
    """Build the app; the gateway starts and stops with it (``ingest=False``: a web
    server only, over the state and store the gateways write)."""
    settings = settings or Settings()

    @asynccontextmanager
    async def with_gateway(app: FastAPI) -> AsyncIterator[None]:
        async with run_gateway(settings) as runtime:
            app.state.runtime = runtime  # for tests and tools; routes read services
            app.state.services = runtime.services
            app.state.cases = runtime.cases  # the case routes' service (gateway.cases.routes)
            await open_accounts(app, runtime.services, settings.api, settings.data_dir)
            yield

    @asynccontextmanager
    async def web_only(app: FastAPI) -> AsyncIterator[None]:
        async with run_web(settings) as web:
            app.state.services = web.services
            app.state.cases = web.cases
            await open_accounts(app, web.services, settings.api, settings.data_dir)
            yield

    lifespan = with_gateway if ingest else web_only

    app = FastAPI(
        title="SumpWatch",
        version=__version__,
        description="Sump-pump monitoring: telemetry, ordinance findings, alerts.",
        lifespan=lifespan,
        # Authentication and site/jurisdiction scope on every route (accounts.access).
        dependencies=[Depends(access_control)],
        # /docs is served from local files (gateway.api.docs); no CDN pages.
        docs_url=None,
        redoc_url=None,
        swagger_ui_oauth2_redirect_url=None,
    )
    # The edges read their sections only: the api one here, the rest via Services.
    app.state.api = settings.api
    for module in (health, sites, deadletters, findings, alerts, report_routes, docs):
        app.include_router(module.router)
    app.include_router(case_routes.router)
    app.include_router(case_routes.pages)
    app.add_exception_handler(RequestValidationError, validation_error)
    # Innermost of the middleware, so its 413 still gets the security headers.
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.api.max_body_bytes)
    # The console's street map loads its tiles from the configured tile server.
    install_accounts(app, img_sources=(tile_origin(settings.map.tile_url),))
    install_web(app)
    if settings.api.trusted_proxies:
        # Outermost: the client address and scheme are the proxy's word from here on.
        app.add_middleware(ProxyHeadersMiddleware, trusted_hosts=settings.api.trusted_proxies)
    return app


def server_config(app: FastAPI, settings: Settings, log_level: str = "info") -> uvicorn.Config:
    """How ``sumpwatch gateway`` serves the app.

    uvicorn's own proxy-header handling is off: by default it believes
    ``X-Forwarded-For`` from 127.0.0.1, which would let any local client (or a proxy
    nobody declared) choose the address the login limiter counts. The app applies
    ``settings.api.trusted_proxies`` itself (see :func:`create_app`).
    """
    return uvicorn.Config(
        app,
        host=settings.api.host,
        port=settings.api.port,
        log_level=log_level,
        lifespan="on",
        timeout_graceful_shutdown=10,
        proxy_headers=False,
    )
