"""How the app is wired for the pages: static files, routers, HTML error pages."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.responses import Response
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from gateway.web import routes
from gateway.web.templating import STATIC_DIR, render

#: What a person can do about an error, by status code.
ADVICE = {
    401: "Sign in again; your session may have ended.",
    403: "Your account cannot see this. If you think it should, ask your administrator.",
    404: "Check the address, or go back to your home page and follow a link from there.",
    409: "Someone else changed this a moment ago. Reload the page to see its current state.",
    429: "Wait a moment, then try again.",
    503: "This part of SumpWatch is not running. Try again later or tell your administrator.",
}


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


def install_web(app: FastAPI) -> None:
    """Mount ``/static`` and add the page routes and HTML error pages."""
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    app.include_router(routes.router)
    app.include_router(routes.api)
    app.add_exception_handler(StarletteHTTPException, _html_errors)
