"""GET /deadletters."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from gateway.api.deps import MAX_OFFSET, ServicesDep
from gateway.api.models import DeadLetterPublic, DeadLettersPublic

router = APIRouter(tags=["deadletters"])


@router.get("/deadletters", response_model=DeadLettersPublic)
async def deadletters(
    services: ServicesDep,
    reason: Annotated[str | None, Query(description="Only this reason code")] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0,
) -> DeadLettersPublic:
    """Refused messages, newest first, with counts per reason."""
    items = await services.state.deadletters(reason=reason, limit=limit, offset=offset)
    return DeadLettersPublic(
        counts=await services.state.deadletter_counts(),
        items=[DeadLetterPublic.of(d) for d in items],
    )
