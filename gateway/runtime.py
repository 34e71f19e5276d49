"""The composition root: builds every stage from Settings, handing each its own
section (``settings.mqtt`` to ingest, ``settings.store`` and ``settings.influx`` to
the store, ...), runs them in one TaskGroup, and shuts them down in order (drain,
then stop, then close)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import logging
import signal
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from alerts import AlertManager
from alerts.channels.mqtt import MqttPublisher
from alerts.config import AlertsConfig, load_alerts_config
from gateway.aiotasks import cancel_and_wait
from gateway.cases.escalation import DeadlineWatch, has_order_step
from gateway.cases.repository import CaseRepository
from gateway.cases.service import CaseService
from gateway.cluster.state_queue import QueuedStateRepository, StateQueue
from gateway.cluster.warmup import warm_up
from gateway.domain import Finding, FindingEvent, NotEvaluated
from gateway.errors import ConfigError, StoreError
from gateway.homeassistant import HomeAssistantBridge
from gateway.ingest import MqttSource
from gateway.ingest.mqtt import SitePartition, gateway_client_id
from gateway.metrics import Metrics
from gateway.pipeline import FindingSink, Pipeline
from gateway.registry import SiteRegistry, load_registry
from gateway.reports.schedule import ReportTimes, run_report_schedule
from gateway.reports.sources import ReportSources, sources_from_services
from gateway.rules.engine import RulesEngine
from gateway.rules.pack import DEFAULT_SEASON_START, RulePack, load_packs
from gateway.services import Ingest, Services
from gateway.settings import MqttSettings, Settings, ValidationSettings
from gateway.state.database import Database, SqliteDatabase
from gateway.state.deadletters import StateRepository
from gateway.state.factory import state_database
from gateway.state.findings import FindingRepository
from gateway.state.locks import AdvisoryLock, run_exclusively, run_while_held
from gateway.state.snapshots import (
    SnapshotContext,
    events_to_snapshot,
    pack_version,
    reading_record,
)
from gateway.store.base import SeriesQuery, TimeSeriesStore
from gateway.store.factory import make_store
from gateway.store.rollups import refresh_forever
from gateway.store.writer import BatchWriter
from gateway.validate import Validator
from gateway.validate.admission import Admission

log = logging.getLogger(__name__)

#: How much of a site's telemetry a frozen snapshot keeps (before the finding's time).
SNAPSHOT_WINDOW = timedelta(hours=1)
#: How long a stop waits to commit what is buffered (well inside systemd's 90 s).
DRAIN_TIMEOUT_S = 15.0
SNAPSHOT_MAX_READINGS = 2000


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
    home_assistant: HomeAssistantBridge | None = None
    cases: CaseService | None = None  # enforcement cases (issue 16)
    #: The state database when it is not ``db`` (``state_url``: PostgreSQL).
    state_db: Database | None = None

    @property
    def writer(self) -> BatchWriter:
        """The batching writer."""
        return self.pipeline.writer

    @functools.cached_property
    def services(self) -> Services:
        """What the edges may use (routes get it through ``ServicesDep``)."""
        return Services(
            data_dir=self.settings.data_dir,
            registry=self.registry,
            packs=self.packs,
            store=self.store,
            db=self.db,
            state_db=self.state_db,
            findings=self.findings,
            alerts=self.alerts,
            state=self.state,
            metrics=self.metrics,
            ingest=Ingest(self.source, self.pipeline),
            started_at=self.started_at,
            detectors=self.settings.detectors,
            map=self.settings.map,
            **({} if self.cases is None else {"confirmations": self.cases, "ledger": self.cases}),
        )


def _own_sites(settings: Settings, registry: SiteRegistry) -> SiteRegistry:
    """The sites this gateway judges: all, or its partition's share when scaled out
    (else the detectors' silence check would flag every other gateway's sites)."""
    if settings.mqtt.shard is None or settings.mqtt.shards <= 1:
        return registry
    partition = SitePartition(settings.mqtt.shard, settings.mqtt.shards)
    return registry.subset(partition.owns_site)


async def snapshot_context(
    finding: Finding,
    *,
    store: TimeSeriesStore,
    state: StateRepository,
    packs: dict[str, RulePack],
    registry: SiteRegistry,
) -> SnapshotContext:
    """What surrounded ``finding`` now: its site's readings window, node health and the
    exact rule pack (issue 15.5: frozen evidence)."""
    end = finding.updated_at
    start = end - SNAPSHOT_WINDOW
    note = ""
    try:
        readings = await store.readings(
            SeriesQuery(finding.site_id, start=start, end=end, limit=SNAPSHOT_MAX_READINGS)
        )
    except StoreError as exc:
        # The finding is recorded all the same; the snapshot says what it lacks.
        readings, note = [], f"readings window not available: {exc}"
    health = await state.statuses(finding.site_id)
    site = registry.get(finding.site_id)
    pack = packs.get(site.jurisdiction) if site is not None else None
    return SnapshotContext(
        pack="" if pack is None else pack_version(pack.id, pack.source),
        window_start=start,
        window_end=end,
        readings=tuple(reading_record(r) for r in readings),
        sensor_health=tuple(
            {"node_id": h.node_id, "online": h.online, "changed_at": h.changed_at.isoformat()}
            for h in health
        ),
        note=note,
    )


async def snapshot_contexts(
    events: Sequence[FindingEvent],
    *,
    store: TimeSeriesStore,
    state: StateRepository,
    packs: dict[str, RulePack],
    registry: SiteRegistry,
) -> dict[str, SnapshotContext]:
    """Each event's snapshot context by finding id, all read at once. Each is two
    reads (the store's window, the nodes' health): awaited one finding after the
    other, each read waited for a turn of an event loop busy with ingest, and a
    burst of openings took seconds to record (bench/latency.py)."""
    contexts = await asyncio.gather(
        *(
            snapshot_context(e.finding, store=store, state=state, packs=packs, registry=registry)
            for e in events
        )
    )
    return {e.finding.id: context for e, context in zip(events, contexts, strict=True)}


async def _state_database(
    settings: Settings, db: SqliteDatabase, stack: contextlib.AsyncExitStack
) -> Database:
    """The state database: ``db`` itself, or PostgreSQL when ``state_url`` is set (the
    SQLite file then holds only the time-series store's tables)."""
    if settings.store.state_url is None:
        return db
    state_db = state_database(settings.sqlite_file, settings.store.state_url)
    await state_db.open()
    stack.push_async_callback(state_db.close)
    log.info("state: in %s", state_db.label)
    return state_db


async def _amended_registry(
    db: Database, registry: SiteRegistry
) -> tuple[SiteRegistry, CaseRepository]:
    """The registry every stage reads: the file's sites with what enforcement cases
    recorded since merged in at each read (waivers granted, installation facts
    inspected; issue 16.3, 16.4), and the case repository that holds those records."""
    repo = CaseRepository(db)
    await repo.open()  # loads the confirmations, waivers and inspections
    return registry.amended(repo), repo


def _home_assistant(
    settings: Settings, client_id: str, registry: SiteRegistry, engine: RulesEngine
) -> HomeAssistantBridge | None:
    """The Home Assistant discovery bridge, when the deployment turned it on, showing
    the findings open at start."""
    if not settings.ha.discovery:
        return None
    bridge = HomeAssistantBridge(
        registry,
        connection=settings.mqtt.connection(f"{client_id}-ha"),
        dashboard_url=settings.api.public_url or f"http://{settings.api.host}:{settings.api.port}",
        prefix=settings.ha.discovery_prefix,
    )
    bridge.restore((f.site_id, f.rule_id) for f in engine.open_findings())
    return bridge


async def _alert_publisher(
    mqtt: MqttSettings, client_id: str, enabled: bool, stack: contextlib.AsyncExitStack
) -> MqttPublisher | None:
    """The retained alert-state publisher, when the alert routing turns MQTT on."""
    if not enabled:
        return None
    return await stack.enter_async_context(MqttPublisher(mqtt.connection(f"{client_id}-alerts")))


def _alert_manager(
    db: Database,
    registry: SiteRegistry,
    config: AlertsConfig,
    publisher: MqttPublisher | None,
    packs: dict[str, RulePack],
    cases: CaseRepository,
) -> AlertManager:
    """The alert manager, with each pack's grace periods and winter season, and the
    cases' clock: the order date starts it, and a rule whose pack has an order step
    reaches public works through its case deadlines (issue 15.7, 16.2)."""

    def grace_period(jurisdiction: str, rule_id: str) -> timedelta | None:
        pack = packs.get(jurisdiction)
        return pack.grace_period(rule_id) if pack is not None else None

    def follows_case(jurisdiction: str, rule_id: str) -> bool:
        pack = packs.get(jurisdiction)
        return pack is not None and has_order_step(pack, rule_id)

    return AlertManager(
        db=db,
        registry=registry,
        config=config,
        mqtt=publisher,
        grace_period=grace_period,
        order_date=cases.order_date,
        follows_case=follows_case,
        season_start=lambda jurisdiction: (
            packs[jurisdiction].season.start if jurisdiction in packs else DEFAULT_SEASON_START
        ),
        ordinances={pack.file: pack.title for pack in packs.values()},
    )


def _finding_sinks(
    findings: FindingRepository,
    alerts: AlertManager,
    store: TimeSeriesStore,
    state: StateRepository,
    packs: dict[str, RulePack],
    registry: SiteRegistry,
    ha: HomeAssistantBridge | None,
) -> list[FindingSink]:
    """Where finding events go, in order: the repository (with frozen snapshots), the
    alert manager, the time-series store, and Home Assistant when it is on."""

    async def record_findings(events: list[FindingEvent]) -> None:
        # Gather context only for the events that freeze a snapshot (rare).
        due = events_to_snapshot(events, await findings.levels([e.finding.id for e in events]))
        contexts = await snapshot_contexts(
            due, store=store, state=state, packs=packs, registry=registry
        )
        await findings.apply(events, contexts)

    async def copy_to_store(events: list[FindingEvent]) -> None:
        # InfluxDB keeps a finding series for Grafana; SQLite ignores this.
        await store.write_events(findings=events)

    sinks: list[FindingSink] = [record_findings, alerts.on_events, copy_to_store]
    if ha is not None:
        sinks.append(ha.on_events)
    return sinks


def _not_evaluated_recorder(
    findings: FindingRepository, metrics: Metrics
) -> Callable[[NotEvaluated], None]:
    """Count each late reading and store its span off the ingest path (the engine is
    synchronous). Writes go to the database's one writer thread in the order started."""
    pending: set[asyncio.Task[None]] = set()

    async def write(span: NotEvaluated) -> None:
        try:
            await findings.record_not_evaluated(span)
        except StoreError:
            log.exception("could not record not-evaluated span %s", span.id)

    def record(span: NotEvaluated) -> None:
        metrics.not_evaluated += 1
        task = asyncio.get_running_loop().create_task(write(span))
        pending.add(task)  # keep a reference until done (asyncio holds tasks weakly)
        task.add_done_callback(pending.discard)

    return record


async def _drain_bounded(pipeline: Pipeline, writer: BatchWriter) -> None:
    """Commit (and ack) what was received before the connection closes.

    Bounded: what cannot be committed in time stays unacknowledged and the broker
    redelivers it to the next run, so a failing store cannot hold a stop."""
    try:
        async with asyncio.timeout(DRAIN_TIMEOUT_S):
            await pipeline.drain()
    except TimeoutError:
        log.warning(
            "stopping with %d readings uncommitted (the broker redelivers them)", writer.pending
        )


def _registry_and_packs(settings: Settings) -> tuple[SiteRegistry, dict[str, RulePack]]:
    """The registry file and the rule packs, every site's jurisdiction among them."""
    registry = load_registry(settings.sites_file)
    packs = load_packs(settings.rule_packs_dir)
    unknown = sorted({s.jurisdiction for s in registry} - set(packs))
    if unknown:
        raise ConfigError(
            f"sites name jurisdictions with no rule pack: {unknown}; have {sorted(packs)}"
        )
    return registry, packs


@dataclass(frozen=True)
class WebRuntime:
    """What a web server without ingestion is made of (``sumpwatch api``)."""

    services: Services
    cases: CaseService


@dataclass(frozen=True)
class _Opened:
    """What a gateway and a web server both open first, in this order."""

    file_registry: SiteRegistry
    packs: dict[str, RulePack]
    alerts_config: AlertsConfig
    db: SqliteDatabase
    state_db: Database
    #: The registry every stage reads: sites as the cases' records amend them.
    registry: SiteRegistry
    cases: CaseRepository
    store: TimeSeriesStore


async def _open_stores(settings: Settings, stack: contextlib.AsyncExitStack) -> _Opened:
    """Registry, packs, alert routing, the SQLite file, the state database, the amended
    registry and the time-series store, each closed by ``stack``."""
    file_registry, packs = _registry_and_packs(settings)
    alerts_config = load_alerts_config(
        settings.alerts.file,
        smtp_password=settings.alerts.smtp_password,
        webhook_secret=settings.alerts.webhook_secret,
    )
    settings.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)  # private: docs/security.md
    db = SqliteDatabase(settings.sqlite_file)
    await db.open()
    stack.push_async_callback(db.close)
    state_db = await _state_database(settings, db, stack)
    registry, case_repo = await _amended_registry(state_db, file_registry)
    store = make_store(settings.store, settings.influx, db, spool_dir=settings.data_dir / "spool")
    await store.open()
    stack.push_async_callback(store.close)
    return _Opened(file_registry, packs, alerts_config, db, state_db, registry, case_repo, store)


@contextlib.asynccontextmanager
async def run_web(settings: Settings) -> AsyncIterator[WebRuntime]:
    """The API and pages without ingestion (``sumpwatch api``), over the state the
    gateways write (PostgreSQL, ``state_url``) and the time-series store; any number
    of them behind a load balancer, a session valid on each (it is in the state)."""
    async with contextlib.AsyncExitStack() as stack:
        opened = await _open_stores(settings, stack)
        packs, db, state_db, store = opened.packs, opened.db, opened.state_db, opened.store
        registry, case_repo, alerts_config = opened.registry, opened.cases, opened.alerts_config
        findings = FindingRepository(state_db)
        # An action on an alert (acknowledge, resolve) queues its notifications in the
        # shared outbox; the gateways' delivery loops send them. Not opened: taking
        # back interrupted claims is a delivering gateway's business.
        alerts = _alert_manager(state_db, registry, alerts_config, None, packs, case_repo)
        cases = CaseService(case_repo, registry, packs, findings=findings)
        services = Services(
            data_dir=settings.data_dir,
            registry=registry,
            packs=packs,
            store=store,
            db=db,
            findings=findings,
            alerts=alerts,
            state=StateRepository(state_db),
            confirmations=cases,
            ledger=cases,
            state_db=None if state_db is db else state_db,
            detectors=settings.detectors,
            map=settings.map,
        )
        yield WebRuntime(services, cases)


@contextlib.asynccontextmanager
async def report_sources(settings: Settings) -> AsyncIterator[ReportSources]:
    """What ``sumpwatch report`` reads: the same sources as a running gateway's reports
    (state on SQLite or PostgreSQL, the sites as cases amend them, frozen snapshots,
    the ledger), without ingestion, so a command-line report and the API's agree."""
    async with run_web(settings) as web:
        yield sources_from_services(web.services)


def _validator(v: ValidationSettings, file_registry: SiteRegistry) -> Validator:
    """The validation stage, from the validation section."""
    return Validator(
        max_future_skew_s=v.max_future_skew_s,
        max_age_s=v.max_age_s,
        admission=Admission(
            file_registry,  # nodes only: what cases amend does not matter here
            open_enrolment=v.open_enrolment,
            rate_factor=v.rate_limit_factor,
            burst=v.rate_limit_burst,
        ),
    )


async def _alerting(
    mqtt: MqttSettings, client_id: str, opened: _Opened, stack: contextlib.AsyncExitStack
) -> AlertManager:
    """The alert manager, open (closed by ``stack``), claiming as this gateway."""
    config = opened.alerts_config
    publisher = await _alert_publisher(mqtt, client_id, config.mqtt.enabled, stack)
    alerts = _alert_manager(
        opened.state_db, opened.registry, config, publisher, opened.packs, opened.cases
    )
    alerts.delivery.owner = client_id  # whose claims (shared outbox)
    await alerts.open()
    stack.push_async_callback(alerts.close)
    return alerts


async def _rules(
    settings: Settings, opened: _Opened, metrics: Metrics
) -> tuple[RulesEngine, FindingRepository]:
    """The rules engine with the findings open before a restart restored."""
    findings = FindingRepository(opened.state_db)
    await findings.open()
    engine = RulesEngine(
        _own_sites(settings, opened.registry),
        opened.packs,
        silence_factor=settings.detectors.silence_factor,
        on_not_evaluated=_not_evaluated_recorder(findings, metrics),
    )
    # Relearn the detectors from the shared series, then continue what was open
    # (after a restart or a shard takeover) instead of raising it again.
    await warm_up(
        engine,
        opened.store,
        await findings.open_findings(),
        now=datetime.now(UTC),
        window=timedelta(hours=settings.detectors.warm_up_hours),
    )
    return engine, findings


@dataclass(frozen=True)
class _Assembled:
    """A gateway's parts, wired but not yet running."""

    runtime: Runtime
    writer: BatchWriter
    state_db: Database
    cases: CaseService
    #: Finding events, and the writer's dead letters and node status, waiting for the
    #: state database (issue 18).
    state_queue: StateQueue
    state: QueuedStateRepository


def _mqtt_source(
    mqtt: MqttSettings,
    client_id: str,
    file_registry: SiteRegistry,
    pipeline: Pipeline,
    metrics: Metrics,
) -> MqttSource:
    """The ingest stage: the mqtt section, this gateway's client id, and the registry's
    sites (what a site partition subscribes to), feeding ``pipeline``."""

    def on_connection(up: bool) -> None:
        metrics.broker_connected = up

    return MqttSource(
        mqtt,
        pipeline.handle,
        client_id=client_id,
        site_ids=[site.id for site in file_registry],
        on_connection=on_connection,
        gate=pipeline.writer,
    )


async def _assemble(settings: Settings, stack: contextlib.AsyncExitStack) -> _Assembled:
    """Open the stores and wire every stage of a gateway (nothing runs yet)."""
    opened = await _open_stores(settings, stack)
    # Dead letters and node status queue on disk while the state is away (issue 18).
    state = QueuedStateRepository(opened.state_db, settings.data_dir / "state-queue-writer")
    await state.open()
    await state.queue.open()
    stack.push_async_callback(state.queue.close)
    metrics = Metrics()
    writer = BatchWriter(
        opened.store,
        state,
        metrics,
        batch_max=settings.store.batch_max,
        interval_s=settings.store.batch_interval_s,
        # A batch being written and the next one filling: the most the writer needs
        # to keep its batches full, and never more than the broker was told we hold
        # (it may send more: BatchWriter.full). Each held message is ~0.7 kB.
        hold_max=min(settings.mqtt.receive_maximum, 2 * settings.store.batch_max),
        # `source` is bound below; the writer acks only after it is running.
        ack=lambda tokens: source.ack(tokens),  # noqa: PLW0108 (late binding, see above)
    )
    client_id = gateway_client_id(settings.mqtt, settings.data_dir)
    alerts = await _alerting(settings.mqtt, client_id, opened, stack)
    engine, findings = await _rules(settings, opened, metrics)
    cases = CaseService(opened.cases, opened.registry, opened.packs, findings=findings)
    ha = _home_assistant(settings, client_id, opened.registry, engine)
    sinks = _finding_sinks(findings, alerts, opened.store, state, opened.packs, opened.registry, ha)
    sinks.append(cases.on_events)  # episodes gather into enforcement cases
    # The state sinks queue on disk while the state database is away (issue 18).
    queue = StateQueue(settings.data_dir / "state-queue", [sinks[0], sinks[1], sinks[-1]])
    await queue.open()
    stack.push_async_callback(queue.close)
    sinks = [queue.sink, *sinks[2:-1]]
    pipeline = Pipeline(
        _validator(settings.validation, opened.file_registry),
        writer,
        metrics,
        detectors=engine,
        sinks=sinks,
        observers=[ha.observe] if ha else [],
    )
    source = _mqtt_source(settings.mqtt, client_id, opened.file_registry, pipeline, metrics)
    runtime = Runtime(
        settings,
        opened.registry,
        opened.db,
        opened.store,
        state,
        metrics,
        pipeline,
        source,
        opened.packs,
        engine,
        findings,
        alerts,
        home_assistant=ha,
        cases=cases,
        state_db=None if opened.state_db is opened.db else opened.state_db,
    )
    return _Assembled(runtime, writer, opened.state_db, cases, queue, state)


def _start(tg: asyncio.TaskGroup, parts: _Assembled) -> list[asyncio.Task[Any]]:
    """Every loop of a gateway, started in ``tg``; stopped in reverse order."""
    runtime, state_db, settings = parts.runtime, parts.state_db, parts.runtime.settings
    cases, alerts, pipeline = parts.cases, runtime.alerts, runtime.pipeline
    tasks = [
        tg.create_task(parts.writer.run(), name="writer"),
        tg.create_task(pipeline.run_sinks(), name="finding-sinks"),
        tg.create_task(pipeline.run_ticks(), name="detector-ticks"),
        tg.create_task(alerts.run(), name="alert-delivery"),
        tg.create_task(parts.state_queue.run(), name="state-queue"),
        tg.create_task(parts.state.queue.run(), name="state-queue-writer"),
        # Per gateway, even with others: each rolls up the minutes it wrote
        # (their dirty marks are in its own SQLite file).
        tg.create_task(
            refresh_forever(runtime.store, settings.store.rollup_interval_s), name="rollups"
        ),
        tg.create_task(runtime.source.run(), name="mqtt-source"),
        # Due and overdue case deadlines become public-works alerts (issue 16);
        # on one gateway at a time when several share the state.
        tg.create_task(
            run_exclusively(state_db, "case-deadlines", DeadlineWatch(cases, alerts.on_events).run),
            name="case-deadlines",
        ),
    ]
    if runtime.home_assistant is not None:
        tasks.append(tg.create_task(runtime.home_assistant.run(), name="home-assistant"))
    if settings.reports.schedule:

        async def schedule() -> None:
            sources = sources_from_services(runtime.services)
            times = ReportTimes(
                settings.reports.extra_cuts, timedelta(seconds=settings.reports.settle_s)
            )
            await run_report_schedule(
                sources, settings.reports_folder, interval_s=settings.reports.check_s, times=times
            )

        tasks.append(
            tg.create_task(
                run_exclusively(state_db, "report-schedule", schedule), name="report-schedule"
            )
        )
    return tasks


def _freeze_start_up_heap() -> None:
    """Leave what start-up built out of every later garbage collection.

    The imports, the registry, the packs and the stores' objects live as long as the
    process, yet each full (generation 2) collection walked them all again: pauses of
    135 ms at 5,000 msg/s from 1,000 sites (bench/latency.py), a p99 of their own.
    ``gc.freeze`` is CPython's documented way to move them to a permanent generation
    (reference counting still frees them); the collection before it keeps start-up's
    garbage out of it. Undone when the gateway stops."""
    gc.collect()
    gc.freeze()


@contextlib.asynccontextmanager
async def run_gateway(settings: Settings) -> AsyncIterator[Runtime]:
    """Open stores, start ingest, yield the running Runtime, and stop it cleanly."""
    async with contextlib.AsyncExitStack() as stack:
        parts = await _assemble(settings, stack)
        _freeze_start_up_heap()
        stack.callback(gc.unfreeze)  # a process that starts gateways again (tests)
        async with asyncio.TaskGroup() as tg:
            tasks = _start(tg, parts)
            try:
                yield parts.runtime
            finally:
                await _drain_bounded(parts.runtime.pipeline, parts.writer)
                await cancel_and_wait(tasks[::-1])
        log.info("gateway stopped; %d readings stored this run", parts.runtime.metrics.stored)


async def run_until_signalled(settings: Settings, *, standby: bool = False) -> None:
    """Ingestion without HTTP (``sumpwatch gateway --no-api``): the gateway's loops
    until SIGINT or SIGTERM, then the same ordered shutdown as with the API.

    With the state in PostgreSQL the gateway holds its shard (``mqtt_shard``) through
    a lease, and a ``standby`` takes whichever shard's lease runs out first."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    if settings.store.state_url is not None:
        shards = range(settings.mqtt.shards) if standby else [settings.mqtt.shard or 0]
        await run_shard_leases(settings, list(shards), stop)
        return
    if standby:
        raise ConfigError("a standby takes shards over through PostgreSQL: set state_url")
    async with run_gateway(settings):
        log.info("gateway running without its HTTP API")
        await stop.wait()


def shard_client_id(settings: Settings, shard: int) -> str:
    """A shard's MQTT client id, the same whichever gateway holds the shard: a standby
    that takes it over resumes its persistent session and drains the queue the broker
    kept for it."""
    return f"{settings.mqtt.client_id or 'sumpwatch'}-shard-{shard}"


@dataclass(frozen=True)
class Lease:
    """How a shard is held: the server ends a holder's session after ``lease_s``
    without a heartbeat (one every ``check_s``); a waiting gateway tries every
    ``retry_s``."""

    lease_s: float = 15.0
    check_s: float = 3.0
    retry_s: float = 2.0


async def run_shard_leases(
    settings: Settings, shards: Sequence[int], stop: asyncio.Event, lease: Lease = Lease()
) -> None:
    """Ingest one of ``shards`` at a time under its lease in PostgreSQL, until ``stop``
    (``sumpwatch gateway --no-api``: its own shard; ``--standby``: any). A shard is
    run by whoever holds its lease, as the gateway of that shard (its client id);
    when the lease is lost the gateway stops and this one waits for a lease again."""
    if settings.store.state_url is None:
        raise ConfigError("shard leases live in PostgreSQL: set state_url")
    url = settings.store.state_url.get_secret_value()
    while not stop.is_set():
        for shard in shards:
            lock = AdvisoryLock(url, f"sumpwatch-shard:{shard}", lease_s=lease.lease_s)
            if not await lock.try_acquire():
                continue
            log.info("shard %d: lease taken; running its gateway", shard)
            mine = settings.updated(
                mqtt={"shard": shard, "client_id": shard_client_id(settings, shard)}
            )
            try:
                await run_while_held(
                    lock, functools.partial(_ingest_until, mine, stop), lease.check_s
                )
            finally:
                await lock.release()
            break
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), lease.retry_s)


async def _ingest_until(settings: Settings, stop: asyncio.Event) -> None:
    async with run_gateway(settings):
        await stop.wait()
