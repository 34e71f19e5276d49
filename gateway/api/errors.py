"""Alert-manager errors translated to HTTP at the edge (shared by the API and the pages)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from fastapi import HTTPException

from alerts.models import InvalidTransition
from gateway.errors import NotFound


@contextlib.contextmanager
def alert_errors() -> Iterator[None]:
    """Unknown alert -> 404; a transition its state does not allow -> 409."""
    try:
        yield
    except NotFound as exc:
        raise HTTPException(status_code=404, detail=str(exc)) from exc
    except InvalidTransition as exc:
        raise HTTPException(status_code=409, detail=str(exc)) from exc
