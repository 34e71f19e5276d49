"""The composition root: builds every stage from Settings, runs them in one
TaskGroup, and shuts them down in order (drain, then stop, then close)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from alerts import AlertManager
from alerts.channels.mqtt import MqttPublisher
from alerts.config import load_alerts_config
from gateway.domain import FindingEvent
from gateway.errors import ConfigError
from gateway.ingest import MqttSource
from gateway.ingest.mqtt import SitePartition, gateway_client_id, tls_context
from gateway.metrics import Metrics
from gateway.pipeline import Pipeline
from gateway.registry import SiteRegistry, load_registry
from gateway.reports.schedule import run_report_schedule
from gateway.reports.sources import sources_from_runtime
from gateway.rules.engine import RulesEngine
from gateway.rules.pack import RulePack, load_packs
from gateway.rules.repository import FindingRepository
from gateway.settings import Settings
from gateway.store.base import TimeSeriesStore
from gateway.store.database import SqliteDatabase
from gateway.store.deadletters import StateRepository
from gateway.store.factory import make_store
from gateway.store.rollups import refresh_forever
from gateway.store.writer import BatchWriter
from gateway.validate import Validator
from gateway.validate.admission import Admission

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
    packs: dict[str, RulePack]
    engine: RulesEngine
    findings: FindingRepository
    alerts: AlertManager
    started_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    extras: dict[str, Any] = field(default_factory=dict)

    @property
    def writer(self) -> BatchWriter:
        """The batching writer."""
        return self.pipeline.writer


def _own_sites(settings: Settings, registry: SiteRegistry) -> SiteRegistry:
    """The sites this gateway judges: all, or its partition's share when scaled out
    (else the detectors' silence check would flag every other gateway's sites)."""
    if settings.mqtt_shard is None or settings.mqtt_shards <= 1:
        return registry
    partition = SitePartition(settings.mqtt_shard, settings.mqtt_shards)
    return SiteRegistry([site for site in registry if partition.owns_site(site.id)])


@contextlib.asynccontextmanager
async def run_gateway(settings: Settings) -> AsyncIterator[Runtime]:
    """Open stores, start ingest, yield the running Runtime, and stop it cleanly."""
    registry = load_registry(settings.sites_file)
    packs = load_packs(settings.rule_packs_dir)
    unknown = sorted({s.jurisdiction for s in registry} - set(packs))
    if unknown:
        raise ConfigError(
            f"sites name jurisdictions with no rule pack: {unknown}; have {sorted(packs)}"
        )
    alerts_config = load_alerts_config(settings.alerts_file).with_secrets(
        smtp_password=settings.smtp_password, webhook_secret=settings.webhook_secret
    )
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
            max_future_skew_s=settings.max_future_skew_s,
            max_age_s=settings.max_age_s,
            admission=Admission(
                registry,
                open_enrolment=settings.open_enrolment,
                rate_factor=settings.rate_limit_factor,
                burst=settings.rate_limit_burst,
            ),
        )
        writer = BatchWriter(
            store,
            state,
            metrics,
            batch_max=settings.batch_max,
            interval_s=settings.batch_interval_s,
            # `source` is bound below; the writer acks only after it is running.
            ack=lambda tokens: source.ack(tokens),
        )
        publisher = None
        if alerts_config.mqtt.enabled:
            publisher = await stack.enter_async_context(
                MqttPublisher(
                    settings.mqtt_host,
                    settings.mqtt_port,
                    client_id=f"{gateway_client_id(settings)}-alerts",
                    username=settings.mqtt_username,
                    password=(
                        settings.mqtt_password.get_secret_value()
                        if settings.mqtt_password
                        else None
                    ),
                    tls_context=tls_context(settings),
                )
            )

        def grace_period(jurisdiction: str, rule_id: str) -> timedelta | None:
            pack = packs.get(jurisdiction)
            return pack.grace_period(rule_id) if pack is not None else None

        alerts = AlertManager(
            db=db,
            registry=registry,
            config=alerts_config,
            mqtt=publisher,
            grace_period=grace_period,
        )
        await alerts.open()
        stack.push_async_callback(alerts.close)
        findings = FindingRepository(db)
        await findings.open()
        engine = RulesEngine(
            _own_sites(settings, registry), packs, silence_factor=settings.silence_factor
        )
        # Continue what was open before a restart instead of raising it again.
        engine.restore(await findings.open_findings())

        async def copy_to_store(events: list[FindingEvent]) -> None:
            # InfluxDB keeps a finding series for Grafana; SQLite ignores this.
            await store.write_events(findings=events)

        pipeline = Pipeline(
            validator,
            writer,
            metrics,
            detectors=engine,
            sinks=[findings.apply, alerts.on_events, copy_to_store],
        )

        def on_connection(up: bool) -> None:
            metrics.broker_connected = up

        source = MqttSource(settings, pipeline.handle, on_connection=on_connection)
        runtime = Runtime(
            settings,
            registry,
            db,
            store,
            state,
            metrics,
            pipeline,
            source,
            packs,
            engine,
            findings,
            alerts,
        )

        async with asyncio.TaskGroup() as tg:
            tasks = [
                tg.create_task(writer.run(), name="writer"),
                tg.create_task(pipeline.run_sinks(), name="finding-sinks"),
                tg.create_task(pipeline.run_ticks(), name="detector-ticks"),
                tg.create_task(alerts.run(), name="alert-delivery"),
                tg.create_task(refresh_forever(store, settings.rollup_interval_s), name="rollups"),
                tg.create_task(source.run(), name="mqtt-source"),
            ]
            if settings.report_schedule:
                tasks.append(
                    tg.create_task(
                        run_report_schedule(sources_from_runtime(runtime), settings.reports_folder),
                        name="report-schedule",
                    )
                )
            try:
                yield runtime
            finally:
                # Commit (and ack) what was received before the connection closes.
                await pipeline.drain()
                for task in reversed(tasks):
                    task.cancel()
        log.info("gateway stopped; %d readings stored this run", metrics.stored)
