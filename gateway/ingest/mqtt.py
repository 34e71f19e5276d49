"""The MQTT source: one persistent-session subscription with manual QoS 1 acks.

* Fixed client id, MQTT v5, ``clean_start=False`` and a long session expiry: the
  broker queues what nodes publish while the gateway is down.
* Manual acknowledgements: a message is acked only after the batch holding it is
  committed (see :class:`gateway.store.writer.BatchWriter`). The broker may send at
  most ``receive_maximum`` unacked messages, which is also our back-pressure when
  the store is slow or down; and since Mosquitto 2.0.11 overshoots it when acks come
  in batches, the fast path also stops reading while the writer holds its
  ``hold_max`` (``gate``), so what the gateway holds is bounded whatever the broker
  sends.
* Reconnects with capped, jittered exponential backoff; one bad message never
  stops the loop (validation never raises).

Speed (see docs/performance.md, measured with bench/ingest.py): aiomqtt on paho
reads one MQTT packet per event-loop turn with a ``recv`` per header byte, wraps
each message twice and creates an asyncio task per message; acks cost two or three
syscalls each. That capped the gateway at ~3,000 msg/s. The fast path
(:mod:`gateway.ingest._paho_fastpath`, the one module touching paho internals) keeps
aiomqtt for connecting, subscribing and reconnecting but (1) reads the socket in
large chunks and parses the PUBLISH packets itself, many per readiness event, (2)
hands each straight to the handler, and (3) writes a batch's PUBACKs in one send.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import math
import random
import secrets
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import NamedTuple

import aiomqtt
from paho.mqtt.subscribeoptions import SubscribeOptions

from gateway.contract import SUBSCRIPTIONS, TOPIC_ROOT
from gateway.domain import RawMessage
from gateway.errors import ConfigError
from gateway.ingest._paho_fastpath import (
    FastPath,
    Gate,
    OnPublish,
    PlainPath,
    enable_manual_ack,
    unless_disconnected,
)
from gateway.mqttconn import MqttWill, aiomqtt_client
from gateway.settings import MqttSettings

log = logging.getLogger(__name__)


GATEWAY_AVAILABILITY_TOPIC = TOPIC_ROOT + "/gateway/{client_id}/availability"
"""Retained ``online`` / ``offline`` (the will) of one gateway. Five levels ending in
``availability``: no node filter (``+/+/status``, ``+/+/telemetry``) matches it."""
AVAILABILITY_ONLINE = b"online"
AVAILABILITY_OFFLINE = b"offline"


def availability_topic(client_id: str) -> str:
    """The availability topic of the gateway with MQTT client id ``client_id``."""
    return GATEWAY_AVAILABILITY_TOPIC.format(client_id=client_id)


def _deliver(message: aiomqtt.Message, receive: OnPublish, path: FastPath | PlainPath) -> None:
    """One message of aiomqtt's own loop to the handler (the plain path), or acked and
    dropped when it is another shard's site (that gateway gets its own copy)."""
    topic = message.topic.value
    if isinstance(path, PlainPath) and path.owns is not None and not path.owns(topic):
        path.skipped += 1
        if message.qos:
            path.ack([message.mid])
        return
    payload = message.payload
    body = payload if isinstance(payload, bytes) else str(payload).encode()
    receive(topic, body, message.mid, message.qos, message.retain, datetime.now(UTC))


CLIENT_ID_FILE = "mqtt-client-id"


def gateway_client_id(mqtt: MqttSettings, data_dir: Path) -> str:
    """The gateway's MQTT client id: configured, or generated once per ``data_dir``.

    The persistent session (and the queue the broker keeps while we are down) is
    keyed on it, so it must be stable across restarts; it is random so nobody can
    read it in our docs (the broker's listeners also keep nodes away from it:
    docs/security.md).
    """
    if mqtt.client_id:
        return mqtt.client_id
    path = data_dir / CLIENT_ID_FILE
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        pass
    data_dir.mkdir(parents=True, exist_ok=True)
    client_id = f"sumpwatch-gw-{secrets.token_hex(8)}"
    path.write_text(client_id + "\n")
    return client_id


def shared_group(mqtt: MqttSettings) -> str | None:
    """The ``$share`` group actually joined: the configured name keyed by our password.

    Mosquitto 2.0's ACL file cannot refuse a SUBSCRIBE, so any login may join a
    shared group it can name and take its share of the messages (which the ACL
    then withholds from it: lost for everyone). Gateways of one group log in with
    the same password, so they all derive the same name; a node cannot.
    """
    group = mqtt.shared_group
    if not group or mqtt.password is None:
        return group
    key = mqtt.password.get_secret_value().encode()
    return f"{group}-{hmac.new(key, group.encode(), hashlib.sha256).hexdigest()[:24]}"


class AckToken(NamedTuple):
    """Identifies a received QoS>0 message on one connection. Immutable; a named tuple,
    not a frozen dataclass: one is made per message, at a sixth of the cost."""

    generation: int
    mid: int
    qos: int


Handler = Callable[[RawMessage, AckToken | None], None]

_SUBSCRIBE_CHUNK = 500


@dataclass(frozen=True, slots=True)
class SitePartition:
    """One gateway's share of the sites when several gateways split the load.

    Mosquitto's shared subscriptions hand each message to any member, so a site's
    readings would be scattered over gateways and no detector would see a whole
    site. A partition gives each site to exactly one gateway, the one with
    ``crc32(site_id) % shards == shard``, so its detector state lives in one place:

    * with ``sites`` (the registry's site ids), the gateway subscribes only to its
      own sites' topics: the broker sends each message to one gateway, as with
      ``$share``. A site missing from the registry is heard by no gateway; with
      the shipped ACL such a site has no logins, so nothing is lost.
    * without ``sites``, every gateway subscribes to the whole stream and acks
      other shards' messages at once, unparsed: every topic is covered, at the cost
      of each gateway reading the full stream.

    See docs/performance.md (scale-out) for the figures of both.
    """

    shard: int
    shards: int
    sites: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not 0 <= self.shard < self.shards:
            raise ConfigError(f"shard {self.shard} is not in 0..{self.shards - 1}")

    def owns_site(self, site_id: str) -> bool:
        """True when this gateway handles ``site_id``."""
        return zlib.crc32(site_id.encode()) % self.shards == self.shard

    def owns(self, topic: str) -> bool:
        """True when this gateway handles ``topic`` (keyed on its site level)."""
        parts = topic.split("/", 3)
        return self.owns_site(parts[2] if len(parts) > 3 else topic)

    def topics(self) -> list[str]:
        """The topic filters to subscribe to."""
        if not self.sites:
            return list(SUBSCRIPTIONS)
        return [
            f"{TOPIC_ROOT}/{site}/+/{channel}"
            for site in sorted(self.sites)
            if self.owns_site(site)
            for channel in ("telemetry", "status")
        ]


class MqttSource:
    """Subscribes to the contract's topics and hands every message to ``handler``.

    Takes the ``mqtt`` section only; ``client_id`` is :func:`gateway_client_id`'s, and
    ``site_ids`` the registry's sites, which a site partition (``shards`` > 1)
    subscribes to one by one unless ``partition_all_topics``.
    """

    def __init__(
        self,
        mqtt: MqttSettings,
        handler: Handler,
        *,
        client_id: str,
        site_ids: Iterable[str] = (),
        on_connection: Callable[[bool], None] | None = None,
        partition: SitePartition | None = None,
        gate: Gate | None = None,
    ) -> None:
        self._mqtt = mqtt
        #: Bounds what the fast path hands on while earlier messages are uncommitted
        #: (the batch writer: ``BatchWriter.full``); the plain path has no such bound.
        self._gate = gate
        self._client_id = client_id
        self._handler = handler
        if partition is None and mqtt.shard is not None and mqtt.shards > 1:
            sites = () if mqtt.partition_all_topics else tuple(site_ids)
            partition = SitePartition(mqtt.shard, mqtt.shards, sites)
        if partition is not None and mqtt.shared_group:
            raise ConfigError("site partitions and a $share group exclude each other")
        self.partition = partition
        self._on_connection = on_connection
        self._client: aiomqtt.Client | None = None
        self._fast: FastPath | PlainPath | None = None
        self._generation = 0
        self.skipped = 0  # other shards' messages acked unprocessed, earlier connections
        self.pauses = 0  # times the gate stopped the reading, earlier connections
        self.connected = False
        self.last_error: str | None = None

    def _make_client(self) -> aiomqtt.Client:
        client_id = self._client_id
        conn = self._mqtt.connection(client_id, persistent=True)
        hold = None if self._gate is None else self._gate.hold_max
        if hold is not None and conn.receive_maximum is not None:
            # Announce no more than the writer holds: a broker keeping to it stops
            # there and the reading never pauses behind a PINGRESP (a store outage
            # longer than the keepalive would otherwise cost the connection).
            conn = conn.replace(receive_maximum=min(conn.receive_maximum, hold))
        return aiomqtt_client(
            conn.replace(will=MqttWill(availability_topic(client_id), AVAILABILITY_OFFLINE))
        )

    async def _announce(self, client: aiomqtt.Client) -> None:
        """The birth message: retained, so a late subscriber sees we are up (the will
        replaces it with ``offline`` if we vanish)."""
        topic = availability_topic(self._client_id)
        await client.publish(topic, AVAILABILITY_ONLINE, qos=1, retain=True, timeout=math.inf)

    def _topics(self) -> list[str]:
        if self.partition is not None:
            return self.partition.topics()
        group = shared_group(self._mqtt)
        return [f"$share/{group}/{t}" if group else t for t in SUBSCRIPTIONS]

    async def run(self) -> None:
        """Receive until cancelled, reconnecting with capped jittered backoff."""
        delay = 0.5
        while True:
            try:
                client = self._make_client()
                enable_manual_ack(client)
                self._generation += 1
                receive = self._receiver(self._generation)
                # Installed before connecting: a persistent session's queued messages
                # follow the CONNACK at once, and must all reach the handler.
                # Per-site subscriptions deliver only our sites; no filter needed.
                owns = (
                    self.partition.owns
                    if self.partition is not None and not self.partition.sites
                    else None
                )
                v5 = self._mqtt.protocol == "5"
                path: FastPath | PlainPath = (
                    FastPath(client, receive, owns, v5=v5, gate=self._gate)
                    if self._mqtt.fast_path
                    else PlainPath(client, owns)
                )
                self._fast = path
                async with client:
                    self._client = client
                    topics = self._topics()
                    # Chunks keep each SUBSCRIBE under the broker's max_packet_size
                    # (a partition of a large registry has thousands of filters).
                    for i in range(0, len(topics), _SUBSCRIBE_CHUNK):
                        chunk = topics[i : i + _SUBSCRIBE_CHUNK]
                        # No fixed timeout: see unless_disconnected.
                        if v5:
                            options = [(t, SubscribeOptions(qos=1)) for t in chunk]
                            call = client.subscribe(options, timeout=math.inf)
                        else:  # 3.1.1 (the demo's amqtt fallback) takes plain QoS levels
                            call = client.subscribe([(t, 1) for t in chunk], timeout=math.inf)
                        await unless_disconnected(client, call)
                    await unless_disconnected(client, self._announce(client))
                    self._set_connected(True)
                    delay = 0.5
                    log.info("subscribed to %d filters, e.g. %s", len(topics), topics[:2])
                    # With the fast path, messages go straight to the handler and this
                    # only waits for the connection to end (which raises MqttError);
                    # with the plain path (mqtt_fast_path off), every message comes here.
                    async for message in client.messages:
                        _deliver(message, receive, path)
            except aiomqtt.MqttError as exc:
                self.last_error = str(exc)
                log.warning("MQTT connection lost (%s); reconnecting in %.1fs", exc, delay)
            finally:
                self._client = None
                if self._fast is not None:
                    self.skipped += self._fast.skipped
                    if isinstance(self._fast, FastPath):
                        self.pauses += self._fast.pauses
                self._fast = None
                self._set_connected(False)
            await asyncio.sleep(delay * random.uniform(0.5, 1.0))
            delay = min(delay * 2, self._mqtt.reconnect_max_s)

    def _receiver(self, generation: int) -> OnPublish:
        handler = self._handler

        def receive(
            topic: str, payload: bytes, mid: int, qos: int, retain: bool, at: datetime
        ) -> None:
            handler(
                RawMessage(topic, payload, at, mid, qos, retain),
                AckToken(generation, mid, qos) if qos else None,
            )

        return receive

    def ack(self, tokens: Sequence[AckToken]) -> None:
        """Acknowledge committed messages received on the current connection.

        Tokens of an older connection are dropped: the broker redelivers those
        messages on the new session and the store ignores the duplicates.
        """
        fast = self._fast
        if fast is None:
            return
        generation = self._generation
        fast.ack([t.mid for t in tokens if t.generation == generation and t.qos == 1])

    def _set_connected(self, value: bool) -> None:
        if value != self.connected:
            self.connected = value
            if self._on_connection is not None:
                self._on_connection(value)
