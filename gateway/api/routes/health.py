"""GET /health and GET /metrics."""

from __future__ import annotations

from datetime import UTC, datetime

from fastapi import APIRouter, Response
from prometheus_client import CONTENT_TYPE_LATEST

from gateway.api.deps import RuntimeDep
from gateway.api.models import HealthPublic

router = APIRouter(tags=["health"])

#: Messages older than this in the write buffer make the gateway "degraded".
LAG_LIMIT_S = 30.0


@router.get("/health", response_model=HealthPublic)
async def health(runtime: RuntimeDep, response: Response) -> HealthPublic:
    """Broker connection, store writability and ingest lag; 503 when degraded."""
    writable = await runtime.store.healthy()
    lag = runtime.writer.oldest_pending_age()
    ok = runtime.source.connected and writable and lag < LAG_LIMIT_S
    if not ok:
        response.status_code = 503
    return HealthPublic(
        status="ok" if ok else "degraded",
        broker_connected=runtime.source.connected,
        store=runtime.store.name,
        store_writable=writable,
        ingest_lag_s=round(lag, 3),
        pending=runtime.writer.pending,
        last_message_at=runtime.pipeline.last_message_at,
        last_flush_at=runtime.writer.last_flush_at,
        uptime_s=round((datetime.now(UTC) - runtime.started_at).total_seconds(), 1),
    )


@router.get("/metrics", response_class=Response)
async def metrics(runtime: RuntimeDep) -> Response:
    """Prometheus text format."""
    stats = getattr(runtime.store, "stats", None)
    if stats is not None:  # InfluxDB store: spool size, spool_full, influx_up, ...
        runtime.metrics.extra_gauges = {f"store_{k}": v for k, v in stats().items()}
    return Response(runtime.metrics.render(), media_type=CONTENT_TYPE_LATEST)
