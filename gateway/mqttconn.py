"""One description of an MQTT connection, and the clients built from it.

Kernel: imports nothing of ours. Settings turns its ``mqtt`` section into an
:class:`MqttConnection` (:meth:`gateway.settings.MqttSettings.connection`); the
gateway's ingest, the alerts publisher and the Home Assistant bridge build their
aiomqtt clients with :func:`aiomqtt_client`, the simulator its paho clients with
:func:`paho_client`, so TLS, credentials, protocol and will are set in one place.
"""

from __future__ import annotations

import dataclasses
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import aiomqtt
import paho.mqtt.client as paho
from paho.mqtt.enums import CallbackAPIVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties


@dataclass(frozen=True)
class MqttWill:
    """The message the broker publishes for us when we vanish without DISCONNECT."""

    topic: str
    payload: bytes | str
    qos: int = 1
    retain: bool = True


@dataclass(frozen=True)
class MqttConnection:
    """Where and how to connect. ``session_expiry_s`` None: a clean session."""

    host: str = "127.0.0.1"
    port: int = 1883
    client_id: str = ""
    username: str | None = None
    password: str | None = None
    protocol: Literal["5", "3.1.1"] = "5"
    tls: bool = False
    ca_file: Path | None = None
    keepalive_s: int = 60
    will: MqttWill | None = None
    session_expiry_s: int | None = None
    receive_maximum: int | None = None
    timeout_s: float = 10.0

    def replace(self, **changes: Any) -> MqttConnection:
        """A copy with ``changes`` (a stage's own client id, will, session)."""
        return dataclasses.replace(self, **changes)

    def tls_context(self) -> ssl.SSLContext | None:
        """The TLS context (None without TLS), verifying against ``ca_file`` if given."""
        if not self.tls:
            return None
        return ssl.create_default_context(cafile=str(self.ca_file) if self.ca_file else None)


def _connect_properties(conn: MqttConnection) -> Properties | None:
    if conn.protocol != "5" or (conn.session_expiry_s is None and conn.receive_maximum is None):
        return None
    props = Properties(PacketTypes.CONNECT)
    if conn.session_expiry_s is not None:
        props.SessionExpiryInterval = conn.session_expiry_s
    if conn.receive_maximum is not None:
        props.ReceiveMaximum = min(conn.receive_maximum, 65535)
    return props


def aiomqtt_client(conn: MqttConnection) -> aiomqtt.Client:
    """An aiomqtt client for ``conn`` (not yet connected: ``async with`` it)."""
    w = conn.will
    will = aiomqtt.Will(w.topic, w.payload, qos=w.qos, retain=w.retain) if w else None
    v5 = conn.protocol == "5"
    session: dict[str, Any] = {
        "protocol": aiomqtt.ProtocolVersion.V5 if v5 else aiomqtt.ProtocolVersion.V311
    }
    if conn.session_expiry_s is not None:
        # 3.1.1 has no session expiry: clean_session=False keeps the session until the
        # broker's persistent_client_expiration.
        session["clean_start" if v5 else "clean_session"] = False
    return aiomqtt.Client(
        conn.host,
        conn.port,
        identifier=conn.client_id or None,
        username=conn.username,
        password=conn.password,
        tls_context=conn.tls_context(),
        keepalive=conn.keepalive_s,
        will=will,
        timeout=conn.timeout_s,
        properties=_connect_properties(conn),
        **session,
    )


def paho_client(conn: MqttConnection) -> paho.Client:
    """A paho client for ``conn`` with credentials, TLS and will set; the caller
    connects with ``client.connect(conn.host, conn.port, conn.keepalive_s)``."""
    client = paho.Client(
        CallbackAPIVersion.VERSION2,
        client_id=conn.client_id,
        protocol=paho.MQTTv5 if conn.protocol == "5" else paho.MQTTv311,
    )
    if conn.username is not None:
        client.username_pw_set(conn.username, conn.password)
    context = conn.tls_context()
    if context is not None:
        client.tls_set_context(context)
    if conn.will is not None:
        will = conn.will
        client.will_set(will.topic, will.payload, qos=will.qos, retain=will.retain)
    return client
