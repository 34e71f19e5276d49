"""Security headers on every response, and redaction of secrets in log records."""

from __future__ import annotations

import logging
import re

from starlette.types import ASGIApp, Message, Receive, Scope, Send

#: Pages load scripts, styles and data only from this origin; nothing may frame them.
#: Images may also come from the map's tile server (its origin is added at start).
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:{img}; "
    "connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'self'; "
    "form-action 'self'; frame-ancestors 'none'"
)


def tile_origin(tile_url: str) -> str:
    """The CSP source of an XYZ tile URL: its origin, ``{s}`` subdomains as ``*``."""
    from urllib.parse import urlsplit

    parts = urlsplit(tile_url.replace("{s}", "SUBDOMAIN"))
    host = parts.netloc.replace("SUBDOMAIN", "*")
    return f"{parts.scheme}://{host}"


_COMMON = [
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"same-origin"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"permissions-policy", b"camera=(), microphone=(), geolocation=(), payment=()"),
]


class SecurityHeadersMiddleware:
    """Adds CSP, nosniff, frame denial, referrer policy and (over HTTPS) HSTS.

    Dynamic responses also get ``Cache-Control: no-store`` unless they set their
    own, so a shared computer's browser cache does not keep someone's dashboard.
    """

    def __init__(self, app: ASGIApp, img_sources: tuple[str, ...] = ()) -> None:
        self.app = app
        self.csp = CSP.format(img="".join(" " + src for src in img_sources)).encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope.get("path", "")
        https = scope.get("scheme") == "https"

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                present = {name.lower() for name, _ in headers}
                extra = [h for h in _COMMON if h[0] not in present]
                # Every page, /docs included (its Swagger UI is served from /static).
                if b"content-security-policy" not in present:
                    extra.append((b"content-security-policy", self.csp))
                if https:
                    extra.append((b"strict-transport-security", b"max-age=31536000"))
                if not path.startswith("/static/") and b"cache-control" not in present:
                    extra.append((b"cache-control", b"no-store"))
                message["headers"] = headers + extra
            await send(message)

        await self.app(scope, receive, send_with_headers)


_SECRET_PATTERNS = (
    # API tokens and session cookies, wherever they appear in a message.
    (re.compile(r"swt_[A-Za-z0-9_-]{8,}"), "swt_[REDACTED]"),
    (re.compile(r"(sumpwatch_session=)[^;\s\"']+"), r"\1[REDACTED]"),
    (re.compile(r"(?i)(authorization:?\s*bearer\s+)\S+"), r"\1[REDACTED]"),
    (re.compile(r"(?i)(password[\"']?\s*[:=]\s*[\"']?)[^\s\"'&,]+"), r"\1[REDACTED]"),
)


def redact(text: str) -> str:
    """``text`` with API tokens, session ids, bearer headers and passwords masked."""
    for pattern, replacement in _SECRET_PATTERNS:
        text = pattern.sub(replacement, text)
    return text


class RedactSecretsFilter(logging.Filter):
    """A handler filter that masks secrets in the formatted message."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        return True


_FILTER = RedactSecretsFilter()


def install_log_redaction() -> None:
    """Attach the redacting filter to every handler of the root and uvicorn loggers.

    Filters on a logger do not see records propagated from child loggers, so the
    filter goes on the handlers, where every record ends up.
    """
    for name in (None, "uvicorn", "uvicorn.access", "uvicorn.error"):
        for handler in logging.getLogger(name).handlers:
            if _FILTER not in handler.filters:
                handler.addFilter(_FILTER)
