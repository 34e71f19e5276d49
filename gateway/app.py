"""The FastAPI application; its lifespan is the composition root."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import Depends, FastAPI

from gateway import __version__
from gateway.accounts.access import access_control
from gateway.accounts.security import tile_origin
from gateway.accounts.setup import install_accounts, open_accounts
from gateway.api.routes import alerts, deadletters, findings, health, sites
from gateway.cases import routes as case_routes
from gateway.reports import routes as report_routes
from gateway.runtime import run_gateway
from gateway.settings import Settings
from gateway.web.setup import install_web


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the app; the gateway starts and stops with it."""
    settings = settings or Settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with run_gateway(settings) as runtime:
            app.state.runtime = runtime  # for tests and tools; routes read services
            app.state.services = runtime.services
            app.state.cases = runtime.cases  # the case routes' service (gateway.cases.routes)
            await open_accounts(app, runtime.services, settings)
            yield

    app = FastAPI(
        title="SumpWatch",
        version=__version__,
        description="Sump-pump monitoring: telemetry, ordinance findings, alerts.",
        lifespan=lifespan,
        # Authentication and site/jurisdiction scope on every route (accounts.access).
        dependencies=[Depends(access_control)],
    )
    app.state.settings = settings
    for module in (health, sites, deadletters, findings, alerts, report_routes):
        app.include_router(module.router)
    app.include_router(case_routes.router)
    app.include_router(case_routes.pages)
    # The console's street map loads its tiles from the configured tile server.
    install_accounts(app, img_sources=(tile_origin(settings.map_tile_url),))
    install_web(app)
    return app
