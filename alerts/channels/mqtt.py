"""MQTT: the retained alert state of each site on ``sumpwatch/v1/<site_id>/alerts``.

:class:`MqttPublisher` is a small publishing client over aiomqtt with its own client
id; it connects on first use and reconnects after a failure. :class:`MqttChannel`
publishes the state document the manager renders at send time, so a retried or
duplicated publish only ever repeats the latest state (idempotent by nature).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from types import TracebackType
from typing import Protocol

import aiomqtt

from alerts.models import DeliveryResult, OutgoingMessage
from gateway.errors import BrokerError
from gateway.mqttconn import MqttConnection, aiomqtt_client

log = logging.getLogger(__name__)


class Publisher(Protocol):
    """Anything that can publish (the manager's ``mqtt`` argument)."""

    async def publish(self, topic: str, payload: bytes, retain: bool, qos: int) -> None:
        """Publish one message."""
        ...


def alerts_topic(prefix: str, site_id: str) -> str:
    """The retained alert-state topic of a site."""
    return f"{prefix.rstrip('/')}/{site_id}/alerts"


class MqttPublisher:
    """A publish-only MQTT client, used as ``async with MqttPublisher(conn) as pub``."""

    def __init__(self, connection: MqttConnection) -> None:
        self._conn = connection
        self._client: aiomqtt.Client | None = None
        self._lock = asyncio.Lock()

    async def __aenter__(self) -> MqttPublisher:
        try:
            await self._connected()
        except BrokerError as exc:
            # Not fatal: the outbox retries, and publish() reconnects.
            log.warning("alerts MQTT publisher not connected yet: %s", exc)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def _connected(self) -> aiomqtt.Client:
        async with self._lock:
            if self._client is not None:
                return self._client
            client = aiomqtt_client(self._conn)
            try:
                await client.__aenter__()
            except aiomqtt.MqttError as exc:
                raise BrokerError(
                    f"cannot connect to {self._conn.host}:{self._conn.port}: {exc}"
                ) from exc
            self._client = client
            return client

    async def publish(self, topic: str, payload: bytes, retain: bool, qos: int) -> None:
        """Publish, connecting first if needed; a failure drops the connection."""
        client = await self._connected()
        try:
            await client.publish(
                topic, payload, qos=qos, retain=retain, timeout=self._conn.timeout_s
            )
        except aiomqtt.MqttError as exc:
            await self._drop()
            raise BrokerError(f"publish to {topic} failed: {exc}") from exc

    async def _drop(self) -> None:
        async with self._lock:
            client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(aiomqtt.MqttError):  # already gone
                await client.__aexit__(None, None, None)

    async def close(self) -> None:
        """Disconnect."""
        await self._drop()


class MqttChannel:
    """Publishes a site's alert state, retained, to the notification's topic."""

    name = "mqtt"

    def __init__(self, publisher: Publisher, qos: int = 1) -> None:
        self._publisher = publisher
        self._qos = qos

    async def send(self, message: OutgoingMessage) -> DeliveryResult:
        """Publish the retained state document."""
        body = json.dumps(message.payload, separators=(",", ":")).encode()
        try:
            await self._publisher.publish(message.recipient, body, retain=True, qos=self._qos)
        except BrokerError as exc:
            return DeliveryResult(False, str(exc))
        return DeliveryResult(True, f"published retained to {message.recipient}")
