"""Issue 7, security: the shipped Mosquitto auth and ACL, against a real Mosquitto.

The broker runs the shipped ``deploy/mosquitto/mosquitto.conf`` limits with the
shipped ``deploy/mosquitto/acl``, a password file written by ``gateway.provision``,
and a TLS listener with certificates from ``scripts/make_certs.sh``.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import subprocess
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion
from paho.mqtt.reasoncodes import ReasonCode
from typer.testing import CliRunner

from gateway.broker import (
    BrokerProcess,
    free_port,
    node_listener_auth,
    start_broker,
    wait_for_port,
)
from gateway.contract import status_topic, telemetry_topic
from gateway.ingest.mqtt import gateway_client_id
from gateway.provision import (
    check_password,
    node_username,
    provision,
    provision_nodes,
    read_passwd,
    set_password,
)
from gateway.runtime import run_gateway
from gateway.settings import REPO_DIR, MqttSettings, Settings
from tests.conftest import DEMO_SITES, MakeSettings
from tests.mqtt_helpers import pit_messages, wait_connected, wait_until

pytestmark = pytest.mark.integration

ACL = REPO_DIR / "deploy" / "mosquitto" / "acl"
MAKE_CERTS = REPO_DIR / "scripts" / "make_certs.sh"
GATEWAY_USER = "sumpwatch-gateway"
GATEWAY_PASSWORD = "gateway-secret"
NOT_AUTHORIZED = 0x87


@dataclass
class SecureBroker:
    """A Mosquitto with auth, ACL and TLS, and the logins made for it."""

    broker: BrokerProcess
    tls_port: int
    ca_file: Path
    passwords: dict[str, str] = field(default_factory=dict)  # username -> password

    @property
    def port(self) -> int:
        """The nodes' listener."""
        return self.broker.port

    @property
    def gateway_port(self) -> int:
        """The gateways' listener."""
        assert self.broker.gateway_port is not None
        return self.broker.gateway_port


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    root = tmp_path_factory.mktemp("secure-broker")
    certs = root / "certs"
    subprocess.run(["bash", str(MAKE_CERTS), str(certs)], check=True, capture_output=True)
    passwd = root / "passwd"
    logins: dict[str, str] = {}
    for site in ("elm-12", "elm-14"):
        for cred in provision_nodes(passwd, site, ["pit", "outlet"]):
            logins[cred.username] = cred.password
    gateways = root / "passwd.gateway"
    set_password(gateways, GATEWAY_USER, GATEWAY_PASSWORD)
    logins[GATEWAY_USER] = GATEWAY_PASSWORD
    tls_port = free_port()
    tls = "\n".join(
        [
            f"listener {tls_port} 127.0.0.1",
            "use_username_as_clientid true",
            *node_listener_auth(passwd, ACL),
            f"cafile {certs / 'ca.crt'}",
            f"certfile {certs / 'server.crt'}",
            f"keyfile {certs / 'server.key'}",
            "tls_version tlsv1.2",
        ]
    )
    broker = start_broker(
        root / "mosquitto",
        password_file=passwd,
        acl_file=ACL,
        extra_conf=tls,
        gateway_password_file=gateways,
    )
    wait_for_port(broker.host, tls_port)
    yield SecureBroker(broker, tls_port, certs / "ca.crt", logins)
    broker.stop()


class Client:
    """A blocking MQTT v5 test client that records what the broker answers."""

    def __init__(
        self,
        port: int,
        username: str | None = None,
        password: str | None = None,
        *,
        client_id: str | None = None,
        ca_file: Path | None = None,
    ) -> None:
        self.client = mqtt.Client(
            CallbackAPIVersion.VERSION2,
            client_id=client_id or f"t-{uuid.uuid4().hex[:8]}",
            protocol=mqtt.MQTTv5,
        )
        if username is not None:
            self.client.username_pw_set(username, password)
        if ca_file is not None:
            self.client.tls_set(ca_certs=str(ca_file), cert_reqs=ssl.CERT_REQUIRED)
        self.connack: ReasonCode | None = None
        self.answered = threading.Event()
        self.acks: dict[int, ReasonCode] = {}
        self.subacks: dict[int, list[ReasonCode]] = {}
        self.messages: list[tuple[str, bytes]] = []
        self._cv = threading.Condition()
        self.client.on_connect = self._on_connect
        self.client.on_disconnect = self._on_disconnect
        self.client.on_publish = self._on_publish
        self.client.on_subscribe = self._on_subscribe
        self.client.on_message = self._on_message
        self.port = port

    def _on_connect(self, _c: Any, _u: Any, _f: Any, rc: ReasonCode, _p: Any) -> None:
        self.connack = rc
        self.answered.set()

    def _on_disconnect(self, *_args: Any) -> None:
        self.answered.set()

    def _on_publish(self, _c: Any, _u: Any, mid: int, rc: ReasonCode, _p: Any) -> None:
        with self._cv:
            self.acks[mid] = rc
            self._cv.notify_all()

    def _on_subscribe(self, _c: Any, _u: Any, mid: int, rcs: list[ReasonCode], _p: Any) -> None:
        with self._cv:
            self.subacks[mid] = rcs
            self._cv.notify_all()

    def _on_message(self, _c: Any, _u: Any, msg: mqtt.MQTTMessage) -> None:
        with self._cv:
            self.messages.append((msg.topic, bytes(msg.payload)))
            self._cv.notify_all()

    def connect(self) -> bool:
        """Connect; True when the broker accepted the login."""
        self.client.connect("127.0.0.1", self.port, keepalive=10)
        self.client.loop_start()
        assert self.answered.wait(10), "no CONNACK"
        return self.connack is not None and not self.connack.is_failure

    def publish(self, topic: str, payload: bytes, *, retain: bool = False) -> int:
        """Publish at QoS 1 and return the PUBACK reason code."""
        info = self.client.publish(topic, payload, qos=1, retain=retain)
        with self._cv:
            assert self._cv.wait_for(lambda: info.mid in self.acks, 10), "no PUBACK"
            return self.acks[info.mid].value

    def subscribe(self, topic: str) -> int:
        """Subscribe at QoS 1 and return the SUBACK reason code."""
        _, mid = self.client.subscribe(topic, qos=1)
        assert mid is not None
        with self._cv:
            assert self._cv.wait_for(lambda: mid in self.subacks, 10), "no SUBACK"
            return self.subacks[mid][0].value

    def received(self, count: int, timeout: float = 5.0) -> list[tuple[str, bytes]]:
        """Wait for at least ``count`` messages (or the timeout); return all."""
        with self._cv:
            self._cv.wait_for(lambda: len(self.messages) >= count, timeout)
            return list(self.messages)

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


@pytest.fixture
def clients() -> Iterator[list[Client]]:
    made: list[Client] = []
    yield made
    for c in made:
        c.close()


def node(secure: SecureBroker, clients: list[Client], site: str, node_id: str) -> Client:
    """A connected node with its own login and client id."""
    user = node_username(site, node_id)
    c = Client(secure.port, user, secure.passwords[user], client_id=user)
    clients.append(c)
    assert c.connect()
    return c


def subscribe_all(spy: Client, *topics: str) -> None:
    """Subscribe to each topic. Mosquitto 2.0.11 grants the SUBACK and checks "read"
    on each message at delivery (later versions refuse in the SUBACK); either way
    nothing the ACL withholds reaches the spy."""
    for topic in topics:
        assert spy.subscribe(topic) in (1, NOT_AUTHORIZED), topic


def gateway_reader(secure: SecureBroker, clients: list[Client], topic: str) -> Client:
    """A client logged in as the gateway on its listener, subscribed to ``topic``."""
    c = Client(secure.gateway_port, GATEWAY_USER, GATEWAY_PASSWORD)
    clients.append(c)
    assert c.connect()
    assert c.subscribe(topic) < 0x80
    return c


def test_an_anonymous_client_is_refused(secure: SecureBroker, clients: list[Client]) -> None:
    c = Client(secure.port)
    clients.append(c)
    assert not c.connect()
    assert c.connack is not None and c.connack.is_failure


def test_a_wrong_password_is_refused(secure: SecureBroker, clients: list[Client]) -> None:
    c = Client(secure.port, "elm-12/pit", "not-the-password", client_id="elm-12/pit")
    clients.append(c)
    assert not c.connect()


def test_a_node_publishes_its_own_telemetry_and_status_to_the_gateway(
    secure: SecureBroker, clients: list[Client]
) -> None:
    gw = gateway_reader(secure, clients, "sumpwatch/v1/elm-12/+/#")
    pit = node(secure, clients, "elm-12", "pit")
    assert pit.publish(telemetry_topic("elm-12", "pit"), b'{"own": 1}') < 0x80
    assert pit.publish(status_topic("elm-12", "pit"), b"online", retain=True) < 0x80
    topics = [t for t, _ in gw.received(2)]
    assert topics == [telemetry_topic("elm-12", "pit"), status_topic("elm-12", "pit")]


def test_a_node_cannot_publish_as_another_site(secure: SecureBroker, clients: list[Client]) -> None:
    gw = gateway_reader(secure, clients, "sumpwatch/v1/elm-14/#")
    intruder = node(secure, clients, "elm-12", "pit")
    assert intruder.publish(telemetry_topic("elm-14", "pit"), b"forged") == NOT_AUTHORIZED
    assert intruder.publish(status_topic("elm-14", "pit"), b"offline") == NOT_AUTHORIZED
    assert gw.received(1, timeout=1.0) == []


def test_a_node_cannot_publish_as_another_node_of_its_own_site(
    secure: SecureBroker, clients: list[Client]
) -> None:
    gw = gateway_reader(secure, clients, "sumpwatch/v1/elm-12/outlet/#")
    pit = node(secure, clients, "elm-12", "pit")
    assert pit.publish(telemetry_topic("elm-12", "outlet"), b"forged") == NOT_AUTHORIZED
    assert gw.received(1, timeout=1.0) == []


def test_a_node_cannot_publish_alerts_or_outside_the_contract(
    secure: SecureBroker, clients: list[Client]
) -> None:
    pit = node(secure, clients, "elm-12", "pit")
    assert pit.publish("sumpwatch/v1/elm-12/alerts", b"fake alarm") == NOT_AUTHORIZED
    assert pit.publish("sumpwatch/v1/elm-12/pit/telemetry/extra", b"x") == NOT_AUTHORIZED
    assert pit.publish("elsewhere", b"x") == NOT_AUTHORIZED


def test_a_node_cannot_subscribe_to_others_data(
    secure: SecureBroker, clients: list[Client]
) -> None:
    spy = node(secure, clients, "elm-12", "pit")
    subscribe_all(
        spy,
        "sumpwatch/v1/elm-14/pit/telemetry",
        "sumpwatch/v1/+/+/telemetry",
        "sumpwatch/v1/elm-12/#",
        "#",
    )
    victim = node(secure, clients, "elm-14", "pit")
    neighbour = node(secure, clients, "elm-12", "outlet")
    assert victim.publish(telemetry_topic("elm-14", "pit"), b"private") < 0x80
    assert neighbour.publish(telemetry_topic("elm-12", "outlet"), b"private") < 0x80
    assert spy.received(1, timeout=1.0) == []


def test_the_gateway_login_reads_telemetry_but_cannot_forge_it(
    secure: SecureBroker, clients: list[Client]
) -> None:
    gw = gateway_reader(secure, clients, "$share/gw/sumpwatch/v1/+/+/telemetry")
    assert gw.subscribe("sumpwatch/v1/+/alerts") in (1, NOT_AUTHORIZED)
    assert gw.publish(telemetry_topic("elm-12", "pit"), b"forged") == NOT_AUTHORIZED
    # It may publish alerts, but reads only what it needs: not even its own alerts.
    assert gw.publish("sumpwatch/v1/elm-12/alerts", b'{"alert": 1}') < 0x80
    pit = node(secure, clients, "elm-12", "pit")
    assert pit.publish(telemetry_topic("elm-12", "pit"), b"{}") < 0x80
    assert gw.received(2, timeout=1.0) == [(telemetry_topic("elm-12", "pit"), b"{}")]


def test_the_tls_listener_serves_clients_that_trust_the_ca(
    secure: SecureBroker, clients: list[Client], tmp_path: Path
) -> None:
    user = node_username("elm-12", "pit")
    ok = Client(secure.tls_port, user, secure.passwords[user], ca_file=secure.ca_file)
    clients.append(ok)
    assert ok.connect()
    assert ok.publish(telemetry_topic("elm-12", "pit"), b"over tls") < 0x80
    # A client that trusts another CA refuses the broker's certificate.
    other = tmp_path / "other"
    subprocess.run(["bash", str(MAKE_CERTS), str(other)], check=True, capture_output=True)
    wary = Client(secure.tls_port, user, secure.passwords[user], ca_file=other / "ca.crt")
    with pytest.raises(ssl.SSLCertVerificationError):
        wary.connect()


async def test_the_gateway_ingests_through_the_authenticated_broker(
    secure: SecureBroker, make_settings: MakeSettings
) -> None:
    settings = make_settings(
        mqtt={
            "host": "127.0.0.1",
            "port": secure.gateway_port,
            "username": GATEWAY_USER,
            "password": GATEWAY_PASSWORD,
            "client_id": f"gw-{uuid.uuid4().hex[:6]}",
        },
        store={"batch_interval_s": 0.02},
    )
    user = node_username("elm-12", "pit")
    async with run_gateway(settings) as runtime:
        await wait_connected(runtime)
        pit = Client(secure.port, user, secure.passwords[user], client_id=user)
        assert pit.connect()
        try:
            for topic, payload in pit_messages(20, "elm-12", "pit"):
                assert pit.publish(topic, payload) < 0x80
            forged = json.dumps({"site_id": "elm-14"}).encode()
            assert pit.publish(telemetry_topic("elm-14", "pit"), forged) == NOT_AUTHORIZED
        finally:
            pit.close()

        async def stored() -> bool:
            return await runtime.store.count() >= 20

        await wait_until(stored, 15)
        await asyncio.sleep(0.2)
        assert await runtime.store.count("elm-12") == 20
        assert await runtime.store.count() == 20


def test_provision_writes_entries_mosquitto_accepts_and_prints_node_settings(
    tmp_path: Path,
) -> None:
    import tomllib

    import typer

    passwd = tmp_path / "passwd"
    app = typer.Typer()
    app.command()(provision)
    result = CliRunner().invoke(
        app,
        ["elm-12", "--passwd-file", str(passwd), "--sites", str(DEMO_SITES), "--host", "mq.lan"],
    )
    assert result.exit_code == 0, result.output
    settings = tomllib.loads(result.stdout)
    assert sorted(settings) == ["elm-12/air", "elm-12/outlet", "elm-12/pit"]
    pit = settings["elm-12/pit"]
    assert pit["username"] == pit["client_id"] == "elm-12/pit"
    assert pit["host"] == "mq.lan"
    assert pit["telemetry_topic"] == "sumpwatch/v1/elm-12/pit/telemetry"
    assert pit["status_topic"] == "sumpwatch/v1/elm-12/pit/status"
    entries = read_passwd(passwd)
    assert sorted(entries) == sorted(settings)
    assert check_password(pit["password"], entries["elm-12/pit"])
    assert passwd.stat().st_mode & 0o077 == 0  # owner only

    # A second run refuses to overwrite working logins unless asked to rotate.
    again = CliRunner().invoke(
        app, ["elm-12", "pit", "--passwd-file", str(passwd), "--sites", str(DEMO_SITES)]
    )
    assert again.exit_code != 0
    assert "--rotate" in again.output
    # Unknown sites and nodes are refused (typos would make logins nobody uses).
    stranger = CliRunner().invoke(
        app, ["elm-99", "--passwd-file", str(passwd), "--sites", str(DEMO_SITES)]
    )
    assert stranger.exit_code != 0

    broker = start_broker(tmp_path / "b", password_file=passwd, acl_file=ACL)
    try:
        c = Client(broker.port, "elm-12/pit", pit["password"], client_id="elm-12/pit")
        try:
            assert c.connect()
            assert c.publish(pit["telemetry_topic"], b"{}") < 0x80
        finally:
            c.close()
    finally:
        broker.stop()


# -- issue 12: client ids are bound to logins; $share groups cannot be joined by nodes ---


def _gateway_settings(secure: SecureBroker, data_dir: Path, **mqtt_keys: Any) -> Settings:
    """A gateway on the secure broker's gateway listener; ``mqtt_keys`` add to its
    mqtt section."""
    return Settings(
        _env_file=None,
        data_dir=data_dir,
        sites_file=DEMO_SITES,
        mqtt={
            "host": "127.0.0.1",
            "port": secure.gateway_port,
            "username": GATEWAY_USER,
            "password": GATEWAY_PASSWORD,
            **mqtt_keys,
        },
        store={"batch_interval_s": 0.02},
        reports={"schedule": False},
    )


def test_the_gateways_client_id_is_generated_per_data_dir_and_kept(tmp_path: Path) -> None:
    first = gateway_client_id(MqttSettings(), tmp_path / "a")
    again = gateway_client_id(MqttSettings(), tmp_path / "a")
    other = gateway_client_id(MqttSettings(), tmp_path / "b")
    assert first == again != other
    assert first != "sumpwatch-gateway" and len(first) >= 24


def test_node_logins_cannot_log_in_on_the_gateways_listener(secure: SecureBroker) -> None:
    user = node_username("elm-12", "pit")
    c = Client(secure.gateway_port, user, secure.passwords[user], client_id="sumpwatch-gateway")
    try:
        assert not c.connect()
    finally:
        c.close()


class _Hijacker(threading.Thread):
    """A node login that keeps reconnecting with the gateway's client id, clean_start
    false, subscribed to everything, until stopped."""

    def __init__(self, secure: SecureBroker, client_id: str) -> None:
        super().__init__(daemon=True)
        self.user = node_username("elm-12", "outlet")
        self.secure = secure
        self.client_id = client_id
        self.stop = threading.Event()
        self.received: list[str] = []
        self.attempts = 0

    def run(self) -> None:
        while not self.stop.is_set():
            c = mqtt.Client(
                CallbackAPIVersion.VERSION2, client_id=self.client_id, protocol=mqtt.MQTTv5
            )
            c.username_pw_set(self.user, self.secure.passwords[self.user])
            c.on_message = lambda _c, _u, msg: self.received.append(msg.topic)
            props = mqtt.Properties(mqtt.PacketTypes.CONNECT)
            props.SessionExpiryInterval = 3600
            try:
                c.connect("127.0.0.1", self.secure.port, clean_start=False, properties=props)
            except OSError:
                continue
            c.loop_start()
            c.subscribe("#", qos=1)
            self.attempts += 1
            self.stop.wait(0.2)
            c.disconnect()
            c.loop_stop()


async def test_a_node_login_using_the_gateways_client_id_gets_nothing_and_takes_nothing(
    secure: SecureBroker, tmp_path: Path
) -> None:
    settings = _gateway_settings(secure, tmp_path / "gw")
    hijacker = _Hijacker(secure, gateway_client_id(settings.mqtt, settings.data_dir))
    user = node_username("elm-12", "pit")
    async with run_gateway(settings) as runtime:
        await wait_connected(runtime)
        hijacker.start()
        pit = Client(secure.port, user, secure.passwords[user], client_id=user)
        assert pit.connect()
        try:
            # N QoS 1 messages, each acknowledged by the broker, while the login tries.
            for topic, payload in pit_messages(200, "elm-12", "pit", boot="h1jack"):
                assert pit.publish(topic, payload) < 0x80
                await asyncio.sleep(0.005)
        finally:
            pit.close()

        async def stored() -> bool:
            return await runtime.store.count() >= 200

        try:
            await wait_until(stored, 20)
        finally:
            hijacker.stop.set()
            hijacker.join(5)
        assert await runtime.store.count() == 200
    assert hijacker.attempts >= 5
    assert hijacker.received == []


async def test_in_scale_out_a_node_cannot_join_the_gateways_shared_subscription(
    secure: SecureBroker, clients: list[Client], tmp_path: Path
) -> None:
    spy = node(secure, clients, "elm-12", "outlet")
    # The group name is in the operator's settings and our docs; the spy tries it all.
    subscribe_all(
        spy,
        "$share/gateways/sumpwatch/v1/+/+/telemetry",
        "$share/gateways/sumpwatch/v1/#",
        "$share/gateways/#",
        "sumpwatch/v1/+/+/telemetry",
    )
    user = node_username("elm-12", "pit")
    async with (
        run_gateway(_gateway_settings(secure, tmp_path / "a", shared_group="gateways")) as a,
        run_gateway(_gateway_settings(secure, tmp_path / "b", shared_group="gateways")) as b,
    ):
        await wait_connected(a)
        await wait_connected(b)
        pit = Client(secure.port, user, secure.passwords[user], client_id=user)
        assert pit.connect()
        try:
            for topic, payload in pit_messages(100, "elm-12", "pit", boot="sh4re"):
                assert pit.publish(topic, payload) < 0x80
        finally:
            pit.close()

        async def all_stored() -> bool:
            return await a.store.count() + await b.store.count() >= 100

        await wait_until(all_stored, 15)
        await asyncio.sleep(0.3)
        counts = (await a.store.count(), await b.store.count())
    assert sum(counts) == 100
    assert min(counts) > 0  # the two gateways did share the work
    assert spy.received(1, timeout=0.5) == []
