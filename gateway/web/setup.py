"""How the app is wired for the pages: static files, routers, HTML error pages."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from gateway.pages import STATIC_DIR
from gateway.problems import install_error_handlers
from gateway.web import admin, routes


def install_web(app: FastAPI) -> None:
    """Mount ``/static``, add the page routes, and install the app's one set of
    exception handlers (:mod:`gateway.problems`: domain errors and HTTP errors, as
    HTML pages for people and JSON for programs)."""
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    app.include_router(routes.router)
    app.include_router(routes.api)
    app.include_router(admin.router)
    app.include_router(admin.api_router)
    install_error_handlers(app)
