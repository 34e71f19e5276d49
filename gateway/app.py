"""The FastAPI application; its lifespan is the composition root."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from gateway import __version__
from gateway.api.routes import deadletters, health, sites
from gateway.runtime import run_gateway
from gateway.settings import Settings


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the app; the gateway starts and stops with it."""
    settings = settings or Settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with run_gateway(settings) as runtime:
            app.state.runtime = runtime
            yield

    app = FastAPI(
        title="SumpWatch",
        version=__version__,
        description="Sump-pump monitoring: telemetry, ordinance findings, alerts.",
        lifespan=lifespan,
    )
    app.state.settings = settings
    for module in (health, sites, deadletters):
        app.include_router(module.router)
    return app
