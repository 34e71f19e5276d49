"""``GET /docs``: Swagger UI served from this origin, under the same CSP as every page.

FastAPI's own page loads an unpinned Swagger UI from a CDN with an inline script,
so it could not run under ``script-src 'self'`` and trusted a third party with a
signed-in administrator's page. This one uses the pinned copy vendored in
``dashboards/web/static/vendor/swagger-ui/`` (version and licence: docs/ui.md) and
starts it from ``static/js/api-docs.js``. ReDoc and the OAuth2 redirect page are off.
"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import HTMLResponse

router = APIRouter(include_in_schema=False)

#: The vendored Swagger UI release (npm ``swagger-ui-dist``).
SWAGGER_UI_VERSION = "5.35.0"

_PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>SumpWatch API</title>
<link rel="icon" href="/static/favicon.svg" type="image/svg+xml">
<link rel="stylesheet" href="/static/vendor/swagger-ui/swagger-ui.css">
</head>
<body>
<div id="swagger-ui" data-openapi-url="/openapi.json"></div>
<script src="/static/vendor/swagger-ui/swagger-ui-bundle.js"></script>
<script src="/static/js/api-docs.js"></script>
</body>
</html>
"""


@router.get("/docs")
async def api_docs() -> HTMLResponse:
    """The interactive API description (any signed-in account)."""
    return HTMLResponse(_PAGE)
