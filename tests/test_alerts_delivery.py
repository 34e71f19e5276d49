"""Alert delivery through real servers the suite starts: an aiosmtpd SMTP server, a
local HTTP server that verifies webhook signatures, and a Mosquitto broker."""

from __future__ import annotations

import asyncio
import contextlib
import email
import email.policy
import json
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.message import EmailMessage
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import aiomqtt
import pytest
from aiosmtpd.controller import Controller

from alerts import AlertManager, AlertsConfig
from alerts.channels.mqtt import MqttPublisher
from alerts.channels.webhook import DELIVERY_HEADER, verify
from alerts.config import RetryPolicy
from gateway.broker import BrokerProcess, free_port
from gateway.domain import Audience, Citation, Finding, FindingChange, FindingEvent, Severity
from gateway.mqttconn import MqttConnection
from gateway.registry.models import Contact, NodeConfig, SiteConfig, SiteRegistry
from gateway.rules.pack import load_packs
from gateway.state.database import Database

pytestmark = pytest.mark.integration

SECRET = "test-webhook-secret"
CITE = Citation(
    "000_86c7187f3bed6ca5.txt", "(c)(2)b", "No sump pump shall discharge into the sanitary sewer"
)


# ----------------------------------------------------------------- real servers


class KeepMessages:
    """aiosmtpd handler that keeps every message it accepts."""

    def __init__(self) -> None:
        self.messages: list[EmailMessage] = []
        self.envelopes: list[tuple[str, list[str]]] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        msg = email.message_from_bytes(envelope.content, policy=email.policy.default)
        assert isinstance(msg, EmailMessage)
        self.messages.append(msg)
        self.envelopes.append((envelope.mail_from, list(envelope.rcpt_tos)))
        return "250 Message accepted for delivery"


@contextlib.contextmanager
def smtp_server(port: int) -> Iterator[KeepMessages]:
    handler = KeepMessages()
    controller = Controller(handler, hostname="127.0.0.1", port=port)
    controller.start()
    try:
        yield handler
    finally:
        controller.stop()


@dataclass
class WebhookReceiver:
    url: str
    received: list[dict[str, Any]] = field(default_factory=list)
    delay_s: float = 0.0


@contextlib.contextmanager
def webhook_server(delay_s: float = 0.0, signed: bool = True) -> Iterator[WebhookReceiver]:
    """A real HTTP server that verifies the signature like a receiver would
    (``signed=False``: takes any JSON POST, as an Apprise ``json://`` target)."""
    port = free_port()
    receiver = WebhookReceiver(url=f"http://127.0.0.1:{port}/hook", delay_s=delay_s)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            ok = verify(SECRET.encode(), dict(self.headers.items()), body)
            receiver.received.append(
                {
                    "verified": ok,
                    "body": json.loads(body),
                    "delivery": self.headers[DELIVERY_HEADER],
                    "path": self.path,
                }
            )
            if receiver.delay_s:
                threading.Event().wait(receiver.delay_s)
            self.send_response(204 if ok or not signed else 401)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()


# ----------------------------------------------------------------- helpers


async def eventually(check: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not check():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.02)


#: Each ordinance text's title by file, as the runtime hands the packs' to the manager.
ORDINANCES = {pack.file: pack.title for pack in load_packs().values()}


def registry(contact: Contact) -> SiteRegistry:
    return SiteRegistry(
        [
            SiteConfig(
                id="elm-12",
                name="12 Elm St",
                address="12 Elm St, Edgar, WI",
                jurisdiction="edgar",
                nodes=(NodeConfig(id="pit", kind="pit"),),
                contacts=(contact,),
            )
        ]
    )


def config(smtp_port: int | None = None, **extra: Any) -> AlertsConfig:
    data: dict[str, Any] = {
        "poll_interval_s": 0.02,
        "retry": RetryPolicy(initial_s=0.1, multiplier=2, max_s=0.4, jitter=0.1, max_attempts=50),
        "mqtt": {"enabled": False},
        **extra,
    }
    if smtp_port is not None:
        data["smtp"] = {
            "host": "127.0.0.1",
            "port": smtp_port,
            "security": "none",
            "sender": "SumpWatch <alerts@sumpwatch.test>",
            "timeout_s": 2,
        }
    return AlertsConfig.model_validate(data).with_secrets(webhook_secret=SECRET)


def opened(
    rule: str = "sanitary_discharge",
    severity: Severity = Severity.CRITICAL,
    citations: tuple[Citation, ...] = (CITE,),
) -> FindingEvent:
    now = datetime.now(UTC)
    return FindingEvent(
        FindingChange.OPENED,
        Finding(
            id="f-1",
            rule_id=rule,
            site_id="elm-12",
            severity=severity,
            title="Sump water is going to the sanitary sewer",
            opened_at=now,
            updated_at=now,
            audience=(Audience.HOMEOWNER,),
            citations=citations,
            evidence={"level_drop_cm": 12.5, "outlet_flow_lpm": 0.0, "pump_runs": 4},
            action="Remove the hose to the floor drain & <reconnect> the discharge line.",
        ),
    )


@pytest.fixture
def db(state_db: Database) -> Database:
    """The outbox's database, on SQLite and on PostgreSQL (each test runs on both)."""
    return state_db


@contextlib.asynccontextmanager
async def running(manager: AlertManager) -> AsyncIterator[AlertManager]:
    await manager.open()
    task = asyncio.create_task(manager.run())
    try:
        yield manager
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await manager.close()


OWNER = Contact(name="Pat Owner", email="owner@example.org")


# ----------------------------------------------------------------- email


async def test_email_arrives_with_plain_and_html_evidence_citation_and_stable_message_id(
    db: Database,
) -> None:
    port = free_port()
    with smtp_server(port) as smtp:
        manager = AlertManager(
            db=db, registry=registry(OWNER), config=config(port), ordinances=ORDINANCES
        )
        async with running(manager):
            await manager.on_events([opened()])
            await eventually(lambda: len(smtp.messages) == 1)
            (alert,) = await manager.list_alerts()
            (note,) = await manager.notifications(alert.id)
    msg = smtp.messages[0]
    assert smtp.envelopes[0] == ("alerts@sumpwatch.test", ["owner@example.org"])
    assert msg["Subject"] == (
        "[SumpWatch] CRITICAL: Sump water is going to the sanitary sewer - 12 Elm St"
    )
    assert msg["Message-ID"] == f"<{note.id}@sumpwatch.test>"
    plain = msg.get_body(("plain",))
    html = msg.get_body(("html",))
    assert plain is not None and html is not None
    text, markup = plain.get_content(), html.get_content()
    assert "level drop: 4.9 in" in text  # 12.5 cm in the contact's US units
    # The ordinance by its title and section; its file name is for machines only.
    assert "Village of Edgar Sump Pump Ordinance §(c)(2)b" in text
    assert ".txt" not in text and ".txt" not in markup
    assert "No sump pump shall discharge into the sanitary sewer" in text
    assert "Remove the hose to the floor drain & <reconnect>" in text
    assert "&amp; &lt;reconnect&gt;" in markup and "<reconnect>" not in markup
    assert "Village of Edgar Sump Pump Ordinance §(c)(2)b" in markup


async def test_smtp_down_for_a_while_then_back_delivers_once_after_retries(
    db: Database,
) -> None:
    port = free_port()  # nothing listens yet
    manager = AlertManager(db=db, registry=registry(OWNER), config=config(port))
    async with running(manager):
        await manager.on_events([opened()])
        (alert,) = await manager.list_alerts()
        failures = lambda: manager.deliveries(alert_id=alert.id)  # noqa: E731
        await eventually_async(lambda: _count(failures, ok=False, at_least=2))
        with smtp_server(port) as smtp:
            await eventually(lambda: len(smtp.messages) == 1)
            await asyncio.sleep(0.5)  # several more loop passes: nothing else may arrive
            assert len(smtp.messages) == 1
        log = await manager.deliveries(alert_id=alert.id)
    assert [a.ok for a in reversed(log)][-1] is True
    assert sum(a.ok is False for a in log) >= 2
    assert all("SMTP unavailable" in a.detail for a in log if a.ok is False)


async def _count(fetch: Callable[[], Awaitable[list[Any]]], *, ok: bool, at_least: int) -> bool:
    return sum(a.ok is ok for a in await fetch()) >= at_least


async def eventually_async(check: Callable[[], Awaitable[bool]], timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not await check():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.02)


async def test_notifications_pending_at_shutdown_are_delivered_by_the_next_manager(
    db: Database,
) -> None:
    port = free_port()
    first = AlertManager(db=db, registry=registry(OWNER), config=config(port))
    async with running(first):
        await first.on_events([opened()])
        await asyncio.sleep(0.2)  # SMTP is down: attempts fail, the row stays queued
    with smtp_server(port) as smtp:
        second = AlertManager(db=db, registry=registry(OWNER), config=config(port))
        async with running(second):
            await eventually(lambda: len(smtp.messages) == 1)
            await asyncio.sleep(0.3)
    assert len(smtp.messages) == 1


# ----------------------------------------------------------------- webhook


async def test_webhook_posts_json_that_the_receiver_verifies_by_its_signature(
    db: Database,
) -> None:
    with webhook_server() as hook:
        contact = Contact(name="HA", webhook_url=hook.url, channels=("webhook",))
        manager = AlertManager(db=db, registry=registry(contact), config=config())
        async with running(manager):
            await manager.on_events([opened()])
            await eventually(lambda: len(hook.received) == 1)
            (alert,) = await manager.list_alerts()
            await eventually_async(
                lambda: _count(lambda: manager.deliveries(alert_id=alert.id), ok=True, at_least=1)
            )
            (note,) = await manager.notifications(alert.id)
    (got,) = hook.received
    assert got["verified"] is True
    assert got["delivery"] == note.id == got["body"]["notification_id"]
    assert got["body"]["alert"]["citations"][0]["section"] == "(c)(2)b"
    assert got["body"]["event"] == "opened"


async def test_a_webhook_with_the_wrong_secret_is_refused_by_the_receiver(
    db: Database,
) -> None:
    with webhook_server() as hook:
        contact = Contact(name="HA", webhook_url=hook.url, channels=("webhook",))
        cfg = config().with_secrets(webhook_secret="not-the-shared-secret")
        manager = AlertManager(db=db, registry=registry(contact), config=cfg)
        async with running(manager):
            await manager.on_events([opened()])
            await eventually(lambda: len(hook.received) == 1)
            (alert,) = await manager.list_alerts()
            await eventually_async(
                lambda: _count(lambda: manager.deliveries(alert_id=alert.id), ok=False, at_least=1)
            )
            (note,) = await manager.notifications(alert.id)
    assert hook.received[0]["verified"] is False
    assert note.status == "failed"  # 401: permanent, not retried


async def test_a_send_cut_short_by_a_crash_is_retried_with_the_same_idempotency_key(
    db: Database,
) -> None:
    with webhook_server(delay_s=0.5) as hook:
        contact = Contact(name="HA", webhook_url=hook.url, channels=("webhook",))
        crashed = AlertManager(db=db, registry=registry(contact), config=config())
        await crashed.open()
        task = asyncio.create_task(crashed.run())
        await crashed.on_events([opened()])
        await eventually(lambda: len(hook.received) == 1)
        task.cancel()  # "crash" between send and record: no close(), row left 'sending'
        with contextlib.suppress(asyncio.CancelledError):
            await task
        hook.delay_s = 0
        restarted = AlertManager(db=db, registry=registry(contact), config=config())
        async with running(restarted):
            await eventually(lambda: len(hook.received) == 2)
            (alert,) = await restarted.list_alerts()
            await eventually_async(
                lambda: _count(lambda: restarted.deliveries(alert_id=alert.id), ok=True, at_least=1)
            )
            log = await restarted.deliveries(alert_id=alert.id)
    assert hook.received[0]["delivery"] == hook.received[1]["delivery"]
    assert [a.detail.split(":")[0] for a in reversed(log)] == ["interrupted", "HTTP 204"]


# ----------------------------------------------------------------- MQTT


async def test_site_alert_state_is_retained_on_mosquitto_for_home_automation(
    db: Database,
    mosquitto: BrokerProcess,
) -> None:
    async with MqttPublisher(MqttConnection(mosquitto.host, mosquitto.port, "alerts-test")) as pub:
        manager = AlertManager(
            db=db,
            registry=registry(OWNER),
            mqtt=pub,
            config=config(mqtt={"enabled": True, "qos": 1}),
        )
        async with running(manager):
            await manager.on_events([opened("high_water", citations=())])
            (alert,) = await manager.list_alerts()
            await eventually_async(
                lambda: _count(lambda: manager.deliveries(alert_id=alert.id), ok=True, at_least=1)
            )
    # A subscriber that connects afterwards still gets the state: it is retained.
    async with aiomqtt.Client(mosquitto.host, mosquitto.port, identifier="ha-test") as sub:
        await sub.subscribe("sumpwatch/v1/elm-12/alerts", qos=1)
        async with asyncio.timeout(5):
            message = await anext(sub.messages)
    assert message.retain
    assert isinstance(message.payload, bytes)
    state = json.loads(message.payload)
    assert state["site_id"] == "elm-12" and state["highest_severity"] == "critical"
    assert [(a["rule_id"], a["state"]) for a in state["alerts"]] == [("high_water", "open")]


# ----------------------------------------------------------------- Apprise


async def test_apprise_urls_deliver_through_apprise_and_are_redacted_in_the_log(
    db: Database,
) -> None:
    with webhook_server(signed=False) as target:
        url = target.url.replace("http://", "json://")
        contact = Contact(name="Pat", apprise_urls=(url,), channels=("apprise",))
        manager = AlertManager(
            db=db, registry=registry(contact), config=config(), ordinances=ORDINANCES
        )
        async with running(manager):
            await manager.on_events([opened()])
            await eventually(lambda: len(target.received) == 1)
            (alert,) = await manager.list_alerts()
            await eventually_async(
                lambda: _count(lambda: manager.deliveries(alert_id=alert.id), ok=True, at_least=1)
            )
            (attempt,) = await manager.deliveries(alert_id=alert.id)
    body = target.received[0]["body"]
    assert body["title"].startswith("[SumpWatch] CRITICAL:")
    assert "Village of Edgar Sump Pump Ordinance §(c)(2)b" in body["message"]
    assert ".txt" not in body["message"]
    assert attempt.recipient == "json://…"


async def test_mqtt_state_follows_the_alert_across_a_broker_restart(
    db: Database,
    mosquitto: BrokerProcess,
) -> None:
    async with MqttPublisher(MqttConnection(mosquitto.host, mosquitto.port, "alerts-rs")) as pub:
        manager = AlertManager(
            db=db,
            registry=registry(OWNER),
            mqtt=pub,
            config=config(mqtt={"enabled": True, "qos": 1}),
        )
        async with running(manager):
            await manager.on_events([opened("high_water", citations=())])
            (alert,) = await manager.list_alerts()
            await eventually_async(
                lambda: _count(lambda: manager.deliveries(alert_id=alert.id), ok=True, at_least=1)
            )
            await asyncio.to_thread(mosquitto.restart)
            await manager.acknowledge(alert.id, by="pat")
            state = await _retained(
                mosquitto, "sumpwatch/v1/elm-12/alerts", lambda s: s["unacknowledged"] == 0
            )
    assert [(a["state"], a["acknowledged_by"]) for a in state["alerts"]] == [
        ("acknowledged", "pat")
    ]


async def _retained(
    broker: BrokerProcess, topic: str, want: Callable[[dict[str, Any]], bool]
) -> dict[str, Any]:
    """Subscribe until the retained document satisfies ``want`` (fresh client each time)."""
    deadline = asyncio.get_running_loop().time() + 15
    while True:
        with contextlib.suppress(aiomqtt.MqttError, TimeoutError):
            async with aiomqtt.Client(broker.host, broker.port) as sub:
                await sub.subscribe(topic, qos=1)
                async with asyncio.timeout(1):
                    message = await anext(sub.messages)
                assert isinstance(message.payload, bytes)
                doc: dict[str, Any] = json.loads(message.payload)
                if want(doc):
                    return doc
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("retained state never matched")
        await asyncio.sleep(0.1)
