"""Jinja2 templates and static files of the pages (``dashboards/web``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates

from gateway import __version__
from gateway.accounts.models import Principal
from gateway.settings import REPO_DIR

WEB_DIR = REPO_DIR / "dashboards" / "web"
TEMPLATES_DIR: Path = WEB_DIR / "templates"
STATIC_DIR: Path = WEB_DIR / "static"

templates = Jinja2Templates(directory=str(TEMPLATES_DIR))
templates.env.globals["version"] = __version__


def render(
    request: Request,
    name: str,
    principal: Principal | None = None,
    *,
    status_code: int = 200,
    **context: Any,
) -> HTMLResponse:
    """Render a page with the common context (who is logged in, CSRF token, units)."""
    from gateway.web.units import units_of  # the web package imports this module

    base = {
        "principal": principal,
        "csrf_token": principal.csrf_token if principal else "",
        "units": units_of(request),
        "auth_enabled": bool(getattr(request.app.state.settings, "auth_enabled", False)),
    }
    base.update(context)
    return templates.TemplateResponse(request, name, base, status_code=status_code)
