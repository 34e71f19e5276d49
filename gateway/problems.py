"""One set of exception handlers: domain errors to HTTP, HTML for people, JSON for programs.

Routes raise the product's own errors (:mod:`gateway.errors`, and the alert
lifecycle's ``InvalidTransition``) and never translate them one by one; the app
installs these handlers once (:func:`install_error_handlers`). A browser asking
for ``text/html`` gets the error page with advice, anything else the usual
``{"detail": ...}`` JSON.
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.responses import Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from alerts.models import InvalidTransition, NotYourAlert
from gateway.errors import ConfigError, NotEnabled, NotFound, StoreUnavailable, SumpWatchError
from gateway.pages import render

#: The HTTP status of each domain error a request can run into (first match wins).
STATUS_OF: tuple[tuple[type[SumpWatchError], int], ...] = (
    (NotFound, 404),
    (InvalidTransition, 409),
    (NotYourAlert, 403),
    (ConfigError, 400),
    (NotEnabled, 503),
    (StoreUnavailable, 503),
)

#: What a person can do about an error, by status code.
ADVICE = {
    400: "Check what you asked for (the address or the form) and try again.",
    401: "Sign in again; your session may have ended.",
    403: "Your account cannot see this. If you think it should, ask your administrator.",
    404: "Check the address, or go back to your home page and follow a link from there.",
    409: "Someone else changed this a moment ago. Reload the page to see its current state.",
    429: "Wait a moment, then try again.",
    503: "This part of SumpWatch is not running. Try again later or tell your administrator.",
}


def status_of(exc: SumpWatchError) -> int | None:
    """The HTTP status a domain error maps to; None for one that is our own bug (500)."""
    for kind, status in STATUS_OF:
        if isinstance(exc, kind):
            return status
    return None


async def _html_errors(request: Request, exc: Exception) -> Response:
    """HTML error pages for people; JSON stays JSON for API clients."""
    assert isinstance(exc, StarletteHTTPException)
    if "text/html" in request.headers.get("accept", "") and exc.status_code in ADVICE:
        principal = getattr(request.state, "principal", None)
        return render(
            request,
            "error.html",
            principal,
            status_code=exc.status_code,
            code=exc.status_code,
            detail=str(exc.detail),
            advice=ADVICE[exc.status_code],
        )
    return await http_exception_handler(request, exc)


async def _domain_errors(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, SumpWatchError)
    status = status_of(exc)
    if status is None:
        raise exc  # not a request's fault: the server error it is
    return await _html_errors(request, StarletteHTTPException(status, detail=str(exc)))


def install_error_handlers(app: FastAPI) -> None:
    """Answer domain errors and HTTP errors the same way on every route."""
    app.add_exception_handler(SumpWatchError, _domain_errors)
    app.add_exception_handler(StarletteHTTPException, _html_errors)
