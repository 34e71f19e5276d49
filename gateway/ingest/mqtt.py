"""The MQTT source: one persistent-session subscription with manual QoS 1 acks.

* Fixed client id, MQTT v5, ``clean_start=False`` and a long session expiry: the
  broker queues what nodes publish while the gateway is down.
* Manual acknowledgements: a message is acked only after the batch holding it is
  committed (see :class:`gateway.store.writer.BatchWriter`). The broker may send at
  most ``receive_maximum`` unacked messages, which is also our back-pressure when
  the store is slow or down.
* Reconnects with capped, jittered exponential backoff; one bad message never
  stops the loop (validation never raises).
"""

from __future__ import annotations

import asyncio
import logging
import random
import ssl
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import aiomqtt
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from paho.mqtt.subscribeoptions import SubscribeOptions

from gateway.contract import SUBSCRIPTIONS
from gateway.domain import RawMessage
from gateway.settings import Settings

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class AckToken:
    """Identifies a received QoS>0 message on one connection."""

    generation: int
    mid: int
    qos: int


Handler = Callable[[RawMessage, AckToken | None], None]


class MqttSource:
    """Subscribes to the contract's topics and hands every message to ``handler``."""

    def __init__(
        self,
        settings: Settings,
        handler: Handler,
        *,
        on_connection: Callable[[bool], None] | None = None,
    ) -> None:
        self._settings = settings
        self._handler = handler
        self._on_connection = on_connection
        self._client: aiomqtt.Client | None = None
        self._generation = 0
        self.connected = False
        self.last_error: str | None = None

    def _make_client(self) -> aiomqtt.Client:
        s = self._settings
        props = Properties(PacketTypes.CONNECT)
        props.SessionExpiryInterval = s.mqtt_session_expiry_s
        props.ReceiveMaximum = min(s.mqtt_receive_maximum, 65535)
        tls: ssl.SSLContext | None = None
        if s.mqtt_tls:
            tls = ssl.create_default_context(cafile=str(s.mqtt_ca_file) if s.mqtt_ca_file else None)
        password = s.mqtt_password.get_secret_value() if s.mqtt_password else None
        if s.mqtt_protocol == "3.1.1":
            # No session expiry or receive maximum in 3.1.1: clean_session=False
            # keeps the session until the broker's persistent_client_expiration.
            return aiomqtt.Client(
                s.mqtt_host,
                s.mqtt_port,
                identifier=s.mqtt_client_id,
                username=s.mqtt_username,
                password=password,
                protocol=aiomqtt.ProtocolVersion.V311,
                clean_session=False,
                tls_context=tls,
                keepalive=30,
            )
        return aiomqtt.Client(
            s.mqtt_host,
            s.mqtt_port,
            identifier=s.mqtt_client_id,
            username=s.mqtt_username,
            password=password,
            protocol=aiomqtt.ProtocolVersion.V5,
            clean_start=False,
            properties=props,
            tls_context=tls,
            keepalive=30,
        )

    def _topics(self) -> list[str]:
        group = self._settings.mqtt_shared_group
        return [f"$share/{group}/{t}" if group else t for t in SUBSCRIPTIONS]

    async def run(self) -> None:
        """Receive until cancelled, reconnecting with capped jittered backoff."""
        delay = 0.5
        while True:
            try:
                async with self._make_client() as client:
                    # aiomqtt has no public manual-ack switch; paho's client does.
                    client._client.manual_ack_set(True)
                    self._client = client
                    self._generation += 1
                    generation = self._generation
                    if self._settings.mqtt_protocol == "5":
                        await client.subscribe(
                            [(t, SubscribeOptions(qos=1)) for t in self._topics()]
                        )
                    else:
                        await client.subscribe([(t, 1) for t in self._topics()])
                    self._set_connected(True)
                    delay = 0.5
                    log.info("subscribed to %s", self._topics())
                    async for message in client.messages:
                        payload = message.payload
                        if not isinstance(payload, bytes | bytearray):
                            payload = str(payload).encode()
                        token = (
                            AckToken(generation, message.mid, message.qos)
                            if message.qos > 0
                            else None
                        )
                        self._handler(
                            RawMessage(
                                topic=message.topic.value,
                                payload=bytes(payload),
                                received_at=datetime.now(UTC),
                                mid=message.mid,
                                qos=message.qos,
                                retain=message.retain,
                            ),
                            token,
                        )
            except aiomqtt.MqttError as exc:
                self.last_error = str(exc)
                log.warning("MQTT connection lost (%s); reconnecting in %.1fs", exc, delay)
            finally:
                self._client = None
                self._set_connected(False)
            await asyncio.sleep(delay * random.uniform(0.5, 1.0))
            delay = min(delay * 2, self._settings.mqtt_reconnect_max_s)

    def ack(self, tokens: Sequence[AckToken]) -> None:
        """Acknowledge committed messages received on the current connection.

        Tokens of an older connection are dropped: the broker redelivers those
        messages on the new session and the store ignores the duplicates.
        """
        client = self._client
        if client is None:
            return
        paho = client._client
        generation = self._generation
        for token in tokens:
            if token.generation == generation:
                paho.ack(token.mid, token.qos)

    def _set_connected(self, value: bool) -> None:
        if value != self.connected:
            self.connected = value
            if self._on_connection is not None:
                self._on_connection(value)
