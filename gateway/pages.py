"""The page kit every HTML edge shares: templates, static files, ``render``.

Templates and static assets are package data of ``dashboards.web`` and are found
with :mod:`importlib.resources`, so an installed wheel serves its pages from
site-packages, not from a source checkout. The login pages (gateway.accounts)
and the dashboards (gateway.web) both render through here, which is why this
sits below both instead of inside either.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path
from typing import Any, Protocol

from fastapi import Request
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates

from gateway import __version__
from gateway.settings import ApiSettings
from gateway.units import UnitSystem

#: pip installs wheels unpacked, so package data is a real folder.
WEB_DIR = Path(str(files("dashboards.web")))
TEMPLATES_DIR: Path = WEB_DIR / "templates"
STATIC_DIR: Path = WEB_DIR / "static"

UNITS_COOKIE = "sumpwatch_units"

templates = Jinja2Templates(directory=str(TEMPLATES_DIR))
templates.env.globals["version"] = __version__


class Viewer(Protocol):
    """Who a page is drawn for (``gateway.accounts.models.Principal``)."""

    @property
    def csrf_token(self) -> str | None:
        """The token forms must echo back."""


def units_of(request: Request) -> UnitSystem:
    """The person's choice: ``?units=`` first, then the cookie, else US customary."""
    value = request.query_params.get("units") or request.cookies.get(UNITS_COOKIE)
    return "metric" if value == "metric" else "us"


def api_settings(request: Request) -> ApiSettings:
    """The ``api`` section the app was built with (the only section the accounts and
    page kit read; put on ``app.state.api`` by :func:`gateway.app.create_app`)."""
    api: ApiSettings = request.app.state.api
    return api


def _email_configured(request: Request) -> bool:
    """Pages promise e-mail only when an SMTP server is configured (issue 20.11)."""
    services = getattr(request.app.state, "services", None)
    alerts = getattr(services, "alerts", None)
    return bool(alerts is not None and alerts.email_configured)


def render(
    request: Request,
    name: str,
    principal: Viewer | None = None,
    *,
    status_code: int = 200,
    **context: Any,
) -> HTMLResponse:
    """Render a page with the common context (who is logged in, CSRF token, units)."""
    base = {
        "principal": principal,
        "csrf_token": principal.csrf_token if principal else "",
        "units": units_of(request),
        "auth_enabled": api_settings(request).auth_enabled,
        "email_configured": _email_configured(request),
    }
    base.update(context)
    return templates.TemplateResponse(request, name, base, status_code=status_code)
