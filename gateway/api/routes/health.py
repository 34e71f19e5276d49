"""GET /health and GET /metrics."""

from __future__ import annotations

from datetime import UTC, datetime

from fastapi import APIRouter, Response
from prometheus_client import CONTENT_TYPE_LATEST

from gateway.api.deps import ServicesDep
from gateway.api.models import HealthPublic

router = APIRouter(tags=["health"])

#: Messages older than this in the write buffer make the gateway "degraded".
LAG_LIMIT_S = 30.0


@router.get("/health", response_model=HealthPublic)
async def health(services: ServicesDep, response: Response) -> HealthPublic:
    """Broker connection, store writability and ingest lag; 503 when degraded."""
    writable = await services.store.healthy()
    ingest = services.ingest
    writer = ingest.pipeline.writer if ingest is not None else None
    lag = writer.oldest_pending_age() if writer is not None else 0.0
    connected = ingest is not None and ingest.source.connected
    # A web server without ingestion (``sumpwatch api``) needs no broker.
    ok = (connected or ingest is None) and writable and lag < LAG_LIMIT_S
    if not ok:
        response.status_code = 503
    return HealthPublic(
        status="ok" if ok else "degraded",
        broker_connected=connected,
        store=services.store.name,
        store_writable=writable,
        ingest_lag_s=round(lag, 3),
        pending=writer.pending if writer is not None else 0,
        last_message_at=ingest.pipeline.last_message_at if ingest is not None else None,
        last_flush_at=writer.last_flush_at if writer is not None else None,
        uptime_s=round((datetime.now(UTC) - services.started_at).total_seconds(), 1),
    )


@router.get("/metrics", response_class=Response)
async def metrics(services: ServicesDep) -> Response:
    """Prometheus text format."""
    # InfluxDB store: spool size, spool_full, influx_up, ...; SQLite has none.
    services.metrics.extra_gauges = {f"store_{k}": v for k, v in services.store.stats().items()}
    return Response(services.metrics.render(), media_type=CONTENT_TYPE_LATEST)
