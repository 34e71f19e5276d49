"""The composition root: builds every stage from Settings, runs them in one
TaskGroup, and shuts them down in order (drain, then stop, then close)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from gateway.ingest import MqttSource
from gateway.metrics import Metrics
from gateway.pipeline import Pipeline
from gateway.registry import SiteRegistry, load_registry
from gateway.settings import Settings
from gateway.store.base import TimeSeriesStore
from gateway.store.database import SqliteDatabase
from gateway.store.deadletters import StateRepository
from gateway.store.factory import make_store
from gateway.store.writer import BatchWriter
from gateway.validate import Validator

log = logging.getLogger(__name__)


@dataclass
class Runtime:
    """Everything one gateway instance is made of; the API reads it from app.state."""

    settings: Settings
    registry: SiteRegistry
    db: SqliteDatabase
    store: TimeSeriesStore
    state: StateRepository
    metrics: Metrics
    pipeline: Pipeline
    source: MqttSource
    started_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    extras: dict[str, Any] = field(default_factory=dict)

    @property
    def writer(self) -> BatchWriter:
        """The batching writer."""
        return self.pipeline.writer


@contextlib.asynccontextmanager
async def run_gateway(settings: Settings) -> AsyncIterator[Runtime]:
    """Open stores, start ingest, yield the running Runtime, and stop it cleanly."""
    registry = load_registry(settings.sites_file)
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    async with contextlib.AsyncExitStack() as stack:
        db = SqliteDatabase(settings.sqlite_file)
        await db.open()
        stack.push_async_callback(db.close)
        store = make_store(settings, db)
        await store.open()
        stack.push_async_callback(store.close)
        state = StateRepository(db)
        await state.open()
        metrics = Metrics()
        validator = Validator(
            max_future_skew_s=settings.max_future_skew_s, max_age_s=settings.max_age_s
        )
        source_ref: list[MqttSource] = []
        writer = BatchWriter(
            store,
            state,
            metrics,
            batch_max=settings.batch_max,
            interval_s=settings.batch_interval_s,
            ack=lambda tokens: source_ref[0].ack(tokens),
        )
        pipeline = Pipeline(validator, writer, metrics)

        def on_connection(up: bool) -> None:
            metrics.broker_connected = up

        source = MqttSource(settings, pipeline.handle, on_connection=on_connection)
        source_ref.append(source)
        runtime = Runtime(settings, registry, db, store, state, metrics, pipeline, source)

        async with asyncio.TaskGroup() as tg:
            tasks = [
                tg.create_task(writer.run(), name="writer"),
                tg.create_task(pipeline.run_sinks(), name="finding-sinks"),
                tg.create_task(pipeline.run_ticks(), name="detector-ticks"),
                tg.create_task(source.run(), name="mqtt-source"),
            ]
            try:
                yield runtime
            finally:
                # Commit (and ack) what was received before the connection closes.
                await pipeline.drain()
                for task in reversed(tasks):
                    task.cancel()
        log.info("gateway stopped; %d readings stored this run", metrics.stored)
