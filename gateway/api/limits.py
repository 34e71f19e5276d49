"""Bounds on what a request may make the server hold, and error bodies that echo nothing.

* :class:`BodyLimitMiddleware` refuses a body over ``settings.api.max_body_bytes`` with
  413 before it is parsed: from its ``Content-Length`` before a byte is read, and by
  counting the streamed chunks when there is none (chunked transfer), so a 100 MB
  POST costs the server at most one limit's worth of memory, signed in or not.
* :func:`validation_error` answers 422 with where and why, never with the submitted
  value: pydantic's default ``input`` field would send a 64 KiB form back, and a
  value echoed into a page or a log is a reflection risk.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

#: Longest path-part of an error location sent back (a JSON key is user input too).
_MAX_LOC_PART = 64


class BodyTooLarge(HTTPException):
    """The request body exceeds the limit (413).

    An ``HTTPException``, so FastAPI re-raises it from body parsing instead of
    turning it into a 400, and the app's error handlers answer it.
    """

    def __init__(self, limit: int) -> None:
        # Close the connection after the answer: otherwise the server would go on
        # reading (and discarding) the rest of the upload to keep the connection.
        super().__init__(
            413, detail=f"request body larger than {limit} bytes", headers={"connection": "close"}
        )


def _declared_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return -1
    return None


async def _answer(send: Send, status: int, detail: str) -> None:
    response = JSONResponse({"detail": detail}, status_code=status, headers={"connection": "close"})
    await response({"type": "http"}, _no_body, send)


async def _no_body() -> Message:
    return {"type": "http.request", "body": b"", "more_body": False}


class BodyLimitMiddleware:
    """413 for bodies over ``max_bytes`` (declared or streamed), before any parsing."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _declared_length(scope)
        if declared is not None and declared < 0:
            await _answer(send, 400, "invalid Content-Length")
            return
        if declared is not None and declared > self.max_bytes:
            await _answer(send, 413, str(BodyTooLarge(self.max_bytes).detail))
            return
        received = 0
        started = False

        async def counting_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise BodyTooLarge(self.max_bytes)
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counting_receive, tracking_send)
        except BodyTooLarge as exc:
            # Raised where no handler answered it (e.g. a body read by middleware).
            if not started:
                await _answer(send, 413, str(exc.detail))


def _location(loc: Sequence[Any]) -> list[str | int]:
    return [part if isinstance(part, int) else str(part)[:_MAX_LOC_PART] for part in loc]


def _public_error(error: Mapping[str, Any]) -> dict[str, Any]:
    """Type, location and message of one validation error; no ``input``, no ``ctx``."""
    return {
        "type": str(error.get("type", "")),
        "loc": _location(error.get("loc", ())),
        "msg": str(error.get("msg", "")),
    }


async def validation_error(request: Request, exc: Exception) -> Response:
    """422 listing what was wrong where, without the submitted values."""
    assert isinstance(exc, RequestValidationError)
    return JSONResponse({"detail": [_public_error(e) for e in exc.errors()]}, status_code=422)
