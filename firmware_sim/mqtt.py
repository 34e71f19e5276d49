"""Publishing simulated nodes to a real MQTT broker with paho-mqtt.

Live mode (:func:`publish_simulation`): one paho client per node, MQTT 5, QoS 1,
a retained ``offline`` last will on the node's status topic and a retained
``online`` published on every (re)connect, automatic reconnection with
exponential backoff (paho's ``reconnect_delay_set``). A node that goes silent in
the scenario disconnects with reason code 0x04 ("disconnect with will message"),
so the broker itself publishes its will, as it would for a node that lost power.

Load mode (:func:`run_load`): pre-shaped payloads for many homes published from
a few processes at a target aggregate rate, reporting the rate achieved.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import random
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
from paho.mqtt.enums import MQTTProtocolVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.reasoncodes import ReasonCode

from firmware_sim.engine import Message, Simulation
from gateway.contract import STATUS_OFFLINE, STATUS_ONLINE, status_topic, telemetry_topic
from gateway.errors import BrokerError, ConfigError
from gateway.mqttconn import MqttConnection, MqttWill, paho_client
from gateway.tomlfile import read_toml

KEEPALIVE_S = 60
RECONNECT_MIN_S = 1
RECONNECT_MAX_S = 60
#: Unacknowledged QoS 1 messages a client may have in flight.
MAX_INFLIGHT = 1000


@dataclass(frozen=True)
class BrokerOptions:
    """Where and how to connect; ``credentials`` maps ``"site/node"`` to (user, password)."""

    host: str = "127.0.0.1"
    port: int = 1883
    username: str | None = None
    password: str | None = None
    tls: bool = False
    ca_file: Path | None = None
    credentials: dict[str, tuple[str, str | None]] = field(default_factory=dict)
    protocol: MQTTProtocolVersion | None = None  # None: try MQTT 5, then 3.1.1

    def login(self, site_id: str, node_id: str) -> tuple[str | None, str | None]:
        """The username/password of one node (its own, else the shared one)."""
        own = self.credentials.get(f"{site_id}/{node_id}")
        if own is not None:
            return own
        return self.username, self.password


def load_credentials(path: Path) -> dict[str, tuple[str, str | None]]:
    """Per-node logins from TOML: ``["site/node"]`` tables with ``username`` and ``password``."""
    data = read_toml(path, "node credentials")
    out: dict[str, tuple[str, str | None]] = {}
    for key, entry in data.items():
        if not isinstance(entry, dict) or "username" not in entry:
            raise ConfigError(f"{path}: [{key!r}] needs a username")
        out[key] = (str(entry["username"]), entry.get("password"))
    return out


def _client(
    opts: BrokerOptions,
    site_id: str,
    node_id: str,
    client_id: str,
    protocol: MQTTProtocolVersion,
    will: MqttWill | None = None,
) -> mqtt.Client:
    """A paho client of one node, built by the kernel's one MQTT client factory."""
    username, password = opts.login(site_id, node_id)
    conn = MqttConnection(
        host=opts.host,
        port=opts.port,
        client_id=client_id,
        username=username,
        password=password,
        protocol="5" if protocol == mqtt.MQTTv5 else "3.1.1",
        tls=opts.tls,
        ca_file=opts.ca_file,
        keepalive_s=KEEPALIVE_S,
        will=will,
    )
    client = paho_client(conn)
    client.reconnect_delay_set(RECONNECT_MIN_S, RECONNECT_MAX_S)
    client.max_inflight_messages_set(MAX_INFLIGHT)
    client.max_queued_messages_set(0)
    return client


def probe_protocol(opts: BrokerOptions, site_id: str, node_id: str) -> MQTTProtocolVersion:
    """The MQTT version the broker speaks: 5 if it accepts it, else 3.1.1 (e.g. amqtt)."""
    refusals: list[str] = []
    for protocol in (mqtt.MQTTv5, mqtt.MQTTv311):
        accepted = threading.Event()
        answered = threading.Event()
        client = _client(
            opts, site_id, node_id, f"sim-probe-{random.getrandbits(32):08x}", protocol
        )

        def on_connect(
            _c: mqtt.Client,
            _u: Any,
            _f: Any,
            rc: Any,
            _p: Any,
            ok: threading.Event = accepted,
            done: threading.Event = answered,
        ) -> None:
            if rc.is_failure:
                refusals.append(str(rc))
            else:
                ok.set()
            done.set()

        def on_disconnect(*_args: Any, done: threading.Event = answered) -> None:
            done.set()  # a 3.1.1-only broker hangs up on an MQTT 5 CONNECT

        client.on_connect = on_connect
        client.on_disconnect = on_disconnect
        try:
            client.connect(opts.host, opts.port, keepalive=10)
        except OSError as exc:
            raise BrokerError(
                f"cannot connect to MQTT broker {opts.host}:{opts.port}: {exc}"
            ) from exc
        client.loop_start()
        answered.wait(5)
        ok = accepted.is_set()
        client.disconnect()
        client.loop_stop()
        if ok:
            return protocol
        if refusals and "protocol" not in refusals[-1].lower():
            break  # refused for another reason than the protocol version (e.g. login)
    reason = refusals[-1] if refusals else "no answer to MQTT 5 or 3.1.1"
    raise BrokerError(f"MQTT broker {opts.host}:{opts.port} refused us: {reason}")


class NodeClient:
    """One simulated node's MQTT connection."""

    def __init__(
        self,
        opts: BrokerOptions,
        site_id: str,
        node_id: str,
        tag: str,
        protocol: MQTTProtocolVersion,
    ) -> None:
        self.site_id = site_id
        self.node_id = node_id
        self.status_topic = status_topic(site_id, node_id)
        self.connected = threading.Event()
        self.disconnected = threading.Event()
        will = MqttWill(self.status_topic, STATUS_OFFLINE)
        self.client = _client(
            opts, site_id, node_id, f"sim-{site_id}-{node_id}-{tag}", protocol, will
        )
        self.v5 = protocol == mqtt.MQTTv5
        self.client.on_connect = self._on_connect
        self.client.on_disconnect = self._on_disconnect
        self._opts = opts
        self.silent = False

    def _on_connect(self, client: mqtt.Client, _u: Any, _f: Any, rc: Any, _p: Any) -> None:
        if rc.is_failure:
            return
        client.publish(self.status_topic, STATUS_ONLINE, qos=1, retain=True)
        self.connected.set()

    def _on_disconnect(self, _c: mqtt.Client, _u: Any, _f: Any, _rc: Any, _p: Any) -> None:
        self.connected.clear()
        self.disconnected.set()

    def start(self) -> None:
        """Connect in the background; paho retries with backoff until it succeeds."""
        self.client.connect_async(self._opts.host, self._opts.port, keepalive=KEEPALIVE_S)
        self.client.loop_start()

    def go_silent(self) -> None:
        """Drop off the network the way a dead node does: the broker sends our will."""
        if self.silent:
            return
        self.silent = True
        self.disconnected.clear()
        if self.v5:
            self.client.disconnect(reasoncode=ReasonCode(PacketTypes.DISCONNECT, identifier=4))
        else:
            # MQTT 3.1.1 has no "disconnect with will": publish what the broker would.
            info = self.client.publish(self.status_topic, STATUS_OFFLINE, qos=1, retain=True)
            info.wait_for_publish(timeout=5)
            self.client.disconnect()
        # Let the network thread send DISCONNECT before stopping it, or the broker
        # would only notice 1.5 keep-alives later.
        self.disconnected.wait(5)
        self.client.loop_stop()

    def come_back(self) -> None:
        """Reconnect after a silent spell (``online`` is published on connect)."""
        if not self.silent:
            return
        self.silent = False
        self.start()

    def publish(self, topic: str, payload: bytes) -> mqtt.MQTTMessageInfo:
        """Queue a QoS 1 telemetry message (paho sends it once connected)."""
        return self.client.publish(topic, payload, qos=1)

    def stop(self) -> None:
        """Clean shutdown: say ``offline`` ourselves, then disconnect."""
        if not self.silent:
            info = self.client.publish(self.status_topic, STATUS_OFFLINE, qos=1, retain=True)
            info.wait_for_publish(timeout=5)
            self.disconnected.clear()
            self.client.disconnect()
            self.disconnected.wait(5)
        self.client.loop_stop()


def _acked(info: mqtt.MQTTMessageInfo) -> bool:
    """True once the broker acknowledged the message (False while unknown or failed)."""
    try:
        return info.is_published()
    except (RuntimeError, ValueError):
        return False


def _from(sim: Simulation, skip_before_s: float) -> Iterator[Message]:
    """The simulation's messages, without telemetry up to ``skip_before_s`` (status
    changes are kept: they drive the nodes' connections)."""
    return (m for m in sim.messages() if m.retain or m.t_s > skip_before_s)


@dataclass(frozen=True)
class PublishStats:
    """What a live run did."""

    published: int
    simulated_s: float
    wall_s: float


def publish_simulation(
    sim: Simulation,
    opts: BrokerOptions,
    *,
    speed: float,
    connect_timeout_s: float = 30.0,
    on_message: Callable[[str, bytes], None] | None = None,
    stop: threading.Event | None = None,
    lead_s: float = 0.0,
    due_at: float | None = None,
    skip_before_s: float = 0.0,
) -> PublishStats:
    """Publish a simulation's messages, pacing simulated time at ``speed`` x real time.

    ``speed <= 0`` publishes as fast as the broker takes it. ``on_message`` sees
    every publication (the CLI uses it to also write ``--out``). The first
    ``lead_s`` simulated seconds (a backfill of history that ends now) go out at
    once; pacing starts after them, at ``due_at`` (a ``time.time()``; default: once
    connected). A run that starts "now" passes the time it read as now, so that
    connecting and building the fleet do not leave device time behind real time.
    Telemetry up to ``skip_before_s`` is simulated but not sent (history the
    gateway already holds from an earlier run).
    """
    # A seeded scenario draws the same boot ids on every run, and seq restarts at 0:
    # a rerun would repeat (boot, seq) identities the gateway already stored. A real
    # node draws a new boot id at each power-up, so each process start (each "power
    # up" of the simulated fleet) prefixes every boot id with its own random salt.
    # Only what goes to the broker changes; ``--out`` without a broker keeps its bytes.
    booted = _BOOT_FIELD + secrets.token_hex(3).encode()
    clients = _connect_fleet(sim, opts, connect_timeout_s)
    wall0 = time.monotonic()
    paced_from = wall0 if due_at is None else wall0 - (time.time() - due_at)
    published = 0
    pending: list[tuple[NodeClient, mqtt.MQTTMessageInfo]] = []
    try:
        for msg in _from(sim, skip_before_s):
            if speed > 0 and _stopped_before(paced_from + (msg.t_s - lead_s) / speed, stop):
                break
            if stop is not None and stop.is_set():
                break
            payload = msg.payload.replace(_BOOT_FIELD, booted, 1)
            if on_message is not None:
                on_message(msg.topic, payload)
            client = clients[(msg.site_id, msg.node_id)]
            if msg.retain:
                _availability(client, msg)
                continue
            pending.append((client, _send(client, msg.topic, payload, stop)))
            published += 1
            if len(pending) >= 5000:
                pending = [(c, p) for c, p in pending if not _acked(p)]
        _flush(pending)
    finally:
        for c in clients.values():
            c.stop()
    return PublishStats(published, sim.elapsed_s, time.monotonic() - wall0)


_BOOT_FIELD = b'"boot":"'


def _connect_fleet(
    sim: Simulation, opts: BrokerOptions, timeout_s: float
) -> dict[tuple[str, str], NodeClient]:
    """One connected client per node of the simulation, by (site, node)."""
    tag = f"{random.getrandbits(32):08x}"
    first = sim.homes[0].spec
    protocol = opts.protocol or probe_protocol(opts, first.site_id, first.nodes[0].node_id)
    clients: dict[tuple[str, str], NodeClient] = {}
    for home in sim.homes:
        for node in home.spec.nodes:
            clients[(home.spec.site_id, node.node_id)] = NodeClient(
                opts, home.spec.site_id, node.node_id, tag, protocol
            )
    for c in clients.values():
        c.start()
    deadline = time.monotonic() + timeout_s
    for c in clients.values():
        if not c.connected.wait(max(0.0, deadline - time.monotonic())):
            for other in clients.values():
                other.client.loop_stop()
            raise BrokerError(f"cannot connect to MQTT broker {opts.host}:{opts.port}")
    return clients


def _stopped_before(due: float, stop: threading.Event | None) -> bool:
    """Wait until ``due`` (``time.monotonic()``); True when ``stop`` was set meanwhile."""
    delay = due - time.monotonic()
    if delay <= 0:
        return False
    if stop is None:
        time.sleep(delay)
        return False
    return stop.wait(delay)


def _availability(client: NodeClient, msg: Message) -> None:
    """Availability is the broker's job: silence publishes the will, reconnecting
    publishes "online" from on_connect."""
    if msg.payload == STATUS_OFFLINE.encode():
        client.go_silent()
    elif msg.t_s > 0:
        client.come_back()


def _send(
    client: NodeClient, topic: str, payload: bytes, stop: threading.Event | None
) -> mqtt.MQTTMessageInfo:
    # During a broker outage the node buffers: wait for paho's reconnection
    # (backoff 1-60 s) rather than hand it a message it cannot send.
    while not client.connected.wait(0.5):
        if stop is not None and stop.is_set():
            break
    return client.publish(topic, payload)


def _flush(pending: list[tuple[NodeClient, mqtt.MQTTMessageInfo]]) -> None:
    """Wait for what is still in flight."""
    for sender, info in pending:
        # A node that went silent lost what it had in flight, like a real one.
        if not sender.silent and not _acked(info):
            # RuntimeError: the connection dropped under it; paho resends on reconnect.
            with contextlib.suppress(RuntimeError, ValueError):
                info.wait_for_publish(timeout=10)


# -- load mode ---------------------------------------------------------------------------


@dataclass(frozen=True)
class LoadResult:
    """What a load run achieved (rates in messages per second)."""

    target_rate: float
    achieved_rate: float
    sent: int
    acked: int
    duration_s: float
    processes: int
    homes: int


def load_site_ids(homes: int) -> list[str]:
    """The site ids load mode publishes for (``load-00001`` ...)."""
    return [f"load-{i + 1:05d}" for i in range(homes)]


def load_sites_toml(homes: int) -> str:
    """A site registry for the load homes (so a gateway accepts their messages)."""
    lines = ["# Site registry for sumpwatch simulate --rate (load mode).", ""]
    for site in load_site_ids(homes):
        lines += [
            "[[site]]",
            f'id = "{site}"',
            f'name = "Load home {site}"',
            'jurisdiction = "edgar"',
            'nodes = [{ id = "pit", kind = "pit", interval_s = 10 }, '
            '{ id = "outlet", kind = "discharge", interval_s = 10 }, '
            '{ id = "air", kind = "air", interval_s = 60 }]',
            "",
        ]
    return "\n".join(lines)


def _load_payload(site: str, node: str, seq: int, boot: str, rng: random.Random) -> bytes:
    now = datetime.now(UTC)
    ts = now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"
    if node == "pit":
        kind = "pit"
        on = rng.random() < 0.1
        readings = (
            f'"level_cm":{round(rng.uniform(18, 40), 1)!r},"pump_on":{"true" if on else "false"},'
            f'"water_temp_c":{round(rng.uniform(8, 10), 1)!r},'
            f'"pump_current_a":{5.8 if on else 0.0!r}'
        )
    elif node == "outlet":
        kind = "discharge"
        readings = (
            f'"flow_lpm":0.0,"pressure_kpa":{round(rng.gauss(0, 0.3), 1)!r},'
            f'"pipe_temp_c":{round(rng.uniform(2, 6), 1)!r}'
        )
    else:
        kind = "air"
        readings = f'"air_temp_c":{round(rng.uniform(-15, 0), 1)!r}'
    return (
        f'{{"v":1,"site_id":"{site}","node_id":"{node}","ts":"{ts}","seq":{seq},'
        f'"boot":"{boot}","kind":"{kind}","readings":{{{readings}}}}}'
    ).encode()


def _load_worker(
    index: int,
    sites: list[str],
    opts: BrokerOptions,
    rate: float,
    duration_s: float,
    results: Any,
) -> None:
    rng = random.Random(f"load-{index}")
    nodes = [(s, n) for s in sites for n in ("pit", "outlet", "air")]
    boot = f"{rng.getrandbits(32):08x}"
    acked = 0
    lock = threading.Lock()

    def on_publish(*_args: Any) -> None:
        nonlocal acked
        with lock:
            acked += 1

    clients = []
    try:
        for k in range(4):
            client_id = f"sim-load-{index}-{k}-{boot}"
            client = _client(opts, f"load-{index}", str(k), client_id, mqtt.MQTTv311)
            client.on_publish = on_publish
            client.connect(opts.host, opts.port, keepalive=KEEPALIVE_S)
            client.loop_start()
            clients.append(client)
    except OSError as exc:
        results.put(("error", f"cannot connect to {opts.host}:{opts.port}: {exc}"))
        return
    seqs = [0] * len(nodes)
    sent = 0
    t0 = time.monotonic()
    while True:
        elapsed = time.monotonic() - t0
        if elapsed >= duration_s:
            break
        due = int(rate * elapsed) - sent
        for _ in range(min(due, 2000)):
            i = sent % len(nodes)
            site, node = nodes[i]
            payload = _load_payload(site, node, seqs[i], boot, rng)
            seqs[i] += 1
            clients[sent % len(clients)].publish(telemetry_topic(site, node), payload, qos=1)
            sent += 1
        if due <= 0:
            time.sleep(0.002)
    wait_until = time.monotonic() + 10
    while acked < sent and time.monotonic() < wait_until:
        time.sleep(0.01)
    ack_s = time.monotonic() - t0
    for client in clients:
        client.disconnect()
        client.loop_stop()
    results.put((sent, acked, ack_s))


def run_load(
    host: str,
    port: int,
    homes: int,
    rate: float,
    duration_s: float,
    processes: int = 2,
    opts: BrokerOptions | None = None,
) -> LoadResult:
    """Publish ``homes`` x 3 nodes' telemetry at ``rate`` msg/s in total for ``duration_s``.

    The homes are split over ``processes`` worker processes, each with a few
    paho clients; the achieved rate counts messages the broker acknowledged
    (QoS 1 PUBACK) over the time it took to send them and collect the acks.
    """
    if homes < 1 or rate <= 0 or duration_s <= 0 or processes < 1:
        raise ConfigError("load mode needs homes >= 1, rate > 0, duration > 0, processes >= 1")
    base = opts or BrokerOptions()
    opts = BrokerOptions(
        host,
        port,
        base.username,
        base.password,
        base.tls,
        base.ca_file,
        base.credentials,
        base.protocol,
    )
    sites = load_site_ids(homes)
    processes = min(processes, homes)
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    workers = [
        ctx.Process(
            target=_load_worker,
            args=(i, sites[i::processes], opts, rate / processes, duration_s, results),
        )
        for i in range(processes)
    ]
    for w in workers:
        w.start()
    outcomes = [results.get(timeout=duration_s + 120) for _ in workers]
    for w in workers:
        w.join(timeout=10)
    errors = [o[1] for o in outcomes if o[0] == "error"]
    if errors:
        raise BrokerError(errors[0])
    sent = sum(o[0] for o in outcomes)
    acked = sum(o[1] for o in outcomes)
    wall = max(o[2] for o in outcomes)
    return LoadResult(
        target_rate=rate,
        achieved_rate=acked / wall if wall > 0 else 0.0,
        sent=sent,
        acked=acked,
        duration_s=wall,
        processes=processes,
        homes=homes,
    )
