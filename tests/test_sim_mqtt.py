"""Issue 3 (and 2): the simulator publishing to a real Mosquitto, and on into the gateway."""

from __future__ import annotations

import asyncio
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import paho.mqtt.client as mqtt
import pytest
from typer.testing import CliRunner

from firmware_sim.mqtt import BrokerOptions, publish_simulation, run_load
from firmware_sim.offline import build_simulation, registry_homes
from firmware_sim.scenario import load_scenario
from gateway.broker import BrokerProcess
from gateway.registry.models import load_registry
from gateway.runtime import Runtime
from gateway.settings import REPO_DIR
from tests.mqtt_helpers import wait_until

pytestmark = pytest.mark.integration


class Recorder:
    """A paho subscriber on everything under sumpwatch/v1/."""

    def __init__(self, broker: BrokerProcess) -> None:
        self.messages: list[tuple[str, bytes, bool]] = []
        self.lock = threading.Lock()
        self.ready = threading.Event()
        self.client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="sim-test-sub")
        self.client.on_connect = lambda c, *_: c.subscribe("sumpwatch/v1/#", qos=1)
        self.client.on_subscribe = lambda *_: self.ready.set()
        self.client.on_message = self._on_message
        self.client.connect(broker.host, broker.port)
        self.client.loop_start()
        assert self.ready.wait(10)

    def _on_message(self, _c: mqtt.Client, _u: object, msg: mqtt.MQTTMessage) -> None:
        with self.lock:
            self.messages.append((msg.topic, bytes(msg.payload), msg.retain))

    def wait_for(self, predicate, timeout: float = 30.0) -> None:  # type: ignore[no-untyped-def]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if predicate(list(self.messages)):
                    return
            time.sleep(0.05)
        raise TimeoutError("messages did not arrive")

    def close(self) -> None:
        self.client.loop_stop()
        self.client.disconnect()


def _opts(broker: BrokerProcess) -> BrokerOptions:
    return BrokerOptions(broker.host, broker.port)


def test_every_simulated_message_reaches_a_subscriber(mosquitto: BrokerProcess) -> None:
    recorder = Recorder(mosquitto)
    sim = build_simulation("normal_summer", homes=2, duration=timedelta(minutes=5))
    stats = publish_simulation(sim, _opts(mosquitto), speed=0)
    telemetry = lambda ms: [m for m in ms if m[0].endswith("/telemetry")]  # noqa: E731
    recorder.wait_for(lambda ms: len(telemetry(ms)) >= stats.published)
    recorder.close()
    assert stats.published > 100
    assert len(telemetry(recorder.messages)) == stats.published
    online = {t for t, p, _ in recorder.messages if t.endswith("/status") and p == b"online"}
    assert len(online) == 6  # one client per node, each announced itself


def test_a_silent_node_gets_its_last_will_published_by_the_broker(
    mosquitto: BrokerProcess,
) -> None:
    recorder = Recorder(mosquitto)
    sim = build_simulation("sensor_offline", homes=1, duration=timedelta(hours=3, minutes=3))
    publish_simulation(sim, _opts(mosquitto), speed=0)
    status = "sumpwatch/v1/offline-pit/pit/status"
    recorder.wait_for(lambda ms: (status, b"offline", False) in ms)
    recorder.close()
    statuses = [p for t, p, _ in recorder.messages if t == status]
    assert statuses[:2] == [b"online", b"offline"]


def test_load_mode_holds_a_modest_target_rate(mosquitto: BrokerProcess) -> None:
    result = run_load(mosquitto.host, mosquitto.port, homes=60, rate=400, duration_s=3, processes=2)
    assert result.acked == result.sent
    assert 0.8 * 400 < result.achieved_rate < 1.1 * 400


def test_the_cli_writes_the_same_bytes_for_the_same_seed(tmp_path: Path) -> None:
    import typer

    from firmware_sim.cli import simulate

    app = typer.Typer()
    app.command()(simulate)
    outputs = []
    for run in ("a", "b"):
        out, labels = tmp_path / f"{run}.jsonl", tmp_path / f"{run}.json"
        result = CliRunner().invoke(
            app,
            [
                "--scenario",
                "icy_walkway",
                "--homes",
                "2",
                "--seed",
                "4",
                "--start",
                "2026-12-20",
                "--duration",
                "3h",
                "--out",
                str(out),
                "--labels",
                str(labels),
            ],
        )
        assert result.exit_code == 0, result.output
        outputs.append((out.read_bytes(), labels.read_bytes()))
    assert outputs[0] == outputs[1]
    assert outputs[0][0].count(b"\n") > 1000


async def test_the_demo_sites_published_live_reach_the_gateway_store(
    gateway: Runtime, mosquitto: BrokerProcess
) -> None:
    registry = load_registry(REPO_DIR / "deploy" / "sites.example.toml")
    homes = registry_homes(registry, load_scenario("normal_summer"))
    sim = build_simulation(
        "normal_summer",
        start=datetime.now(UTC) - timedelta(minutes=10),
        duration=timedelta(minutes=3),
        home_specs=homes,
    )
    stats = await asyncio.to_thread(publish_simulation, sim, _opts(mosquitto), speed=0)
    assert stats.published > len(registry) * 30

    async def stored() -> bool:
        return await gateway.store.count() >= stats.published

    await wait_until(stored, timeout=60)
    assert await gateway.store.count() == stats.published
    for site in registry:
        assert await gateway.store.count(site.id) > 0


def test_a_broker_that_only_speaks_mqtt_3_1_1_still_gets_every_message(tmp_path: Path) -> None:
    from gateway.broker import start_broker

    broker = start_broker(tmp_path / "amqtt", prefer="amqtt")
    try:
        recorder = Recorder(broker)
        sim = build_simulation("sensor_offline", homes=1, duration=timedelta(hours=3, minutes=3))
        stats = publish_simulation(sim, _opts(broker), speed=0)
        status = "sumpwatch/v1/offline-pit/pit/status"
        recorder.wait_for(
            lambda ms: (
                sum(1 for m in ms if m[0].endswith("/telemetry")) >= stats.published
                and any(t == status and p == b"offline" for t, p, _ in ms)
            )
        )
        recorder.close()
    finally:
        broker.stop()


def test_each_node_can_log_in_with_its_own_credentials(tmp_path: Path) -> None:
    import subprocess

    from gateway.broker import start_broker

    logins = {f"summer-grade/{n}": (f"u-{n}", f"pw-{n}") for n in ("pit", "outlet", "air")}
    passwords = tmp_path / "passwd"
    passwords.touch()
    for user, password in [*logins.values(), ("reader", "pw-reader")]:
        subprocess.run(["mosquitto_passwd", "-b", str(passwords), user, password], check=True)
    passwords.chmod(0o600)
    broker = start_broker(tmp_path / "auth", password_file=passwords)
    try:
        received: list[str] = []
        ready = threading.Event()
        reader = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="sim-test-reader")
        reader.username_pw_set("reader", "pw-reader")
        reader.on_connect = lambda c, *_: c.subscribe("sumpwatch/v1/#", qos=1)
        reader.on_subscribe = lambda *_: ready.set()
        reader.on_message = lambda _c, _u, m: received.append(m.topic)
        reader.connect(broker.host, broker.port)
        reader.loop_start()
        assert ready.wait(10)
        sim = build_simulation("normal_summer", homes=1, duration=timedelta(minutes=3))
        opts = BrokerOptions(broker.host, broker.port, credentials=dict(logins))
        stats = publish_simulation(sim, opts, speed=0)
        deadline = time.monotonic() + 20
        while sum(t.endswith("/telemetry") for t in received) < stats.published:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        reader.loop_stop()
        assert {t.split("/")[3] for t in received if t.endswith("/telemetry")} == {
            "pit",
            "outlet",
            "air",
        }
    finally:
        broker.stop()


def test_wrong_credentials_are_reported_as_a_broker_error(tmp_path: Path) -> None:
    import subprocess

    from gateway.broker import start_broker
    from gateway.errors import BrokerError

    passwords = tmp_path / "passwd"
    passwords.touch()
    subprocess.run(["mosquitto_passwd", "-b", str(passwords), "node", "right"], check=True)
    passwords.chmod(0o600)
    broker = start_broker(tmp_path / "auth", password_file=passwords)
    try:
        sim = build_simulation("normal_summer", homes=1, duration=timedelta(minutes=1))
        opts = BrokerOptions(broker.host, broker.port, username="node", password="wrong")
        with pytest.raises(BrokerError, match=r"(?i)password|authori"):
            publish_simulation(sim, opts, speed=0)
    finally:
        broker.stop()


def _make_certs(folder: Path) -> tuple[Path, Path, Path]:
    """A throw-away CA and a server certificate for 127.0.0.1 (openssl CLI)."""
    import subprocess

    ca_key, ca_crt = folder / "ca.key", folder / "ca.crt"
    key, csr, crt = folder / "server.key", folder / "server.csr", folder / "server.crt"
    ext = folder / "san.ext"
    ext.write_text("subjectAltName = IP:127.0.0.1\n")
    run = lambda *args: subprocess.run(args, check=True, capture_output=True)  # noqa: E731
    run(
        "openssl",
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "2",
        "-subj",
        "/CN=sumpwatch-test-ca",
        "-keyout",
        str(ca_key),
        "-out",
        str(ca_crt),
    )
    run(
        "openssl",
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-subj",
        "/CN=127.0.0.1",
        "-keyout",
        str(key),
        "-out",
        str(csr),
    )
    run(
        "openssl",
        "x509",
        "-req",
        "-in",
        str(csr),
        "-CA",
        str(ca_crt),
        "-CAkey",
        str(ca_key),
        "-CAcreateserial",
        "-days",
        "2",
        "-extfile",
        str(ext),
        "-out",
        str(crt),
    )
    return ca_crt, crt, key


def test_nodes_publish_over_tls_to_a_broker_with_its_own_ca(tmp_path: Path) -> None:
    from gateway.broker import start_broker

    ca, crt, key = _make_certs(tmp_path)
    broker = start_broker(
        tmp_path / "tls", extra_conf=f"cafile {ca}\ncertfile {crt}\nkeyfile {key}"
    )
    try:
        received: list[str] = []
        ready = threading.Event()
        reader = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="sim-test-tls-reader")
        reader.tls_set(ca_certs=str(ca))
        reader.on_connect = lambda c, *_: c.subscribe("sumpwatch/v1/#", qos=1)
        reader.on_subscribe = lambda *_: ready.set()
        reader.on_message = lambda _c, _u, m: received.append(m.topic)
        reader.connect(broker.host, broker.port)
        reader.loop_start()
        assert ready.wait(10)
        sim = build_simulation("normal_summer", homes=1, duration=timedelta(minutes=3))
        opts = BrokerOptions(broker.host, broker.port, tls=True, ca_file=ca)
        stats = publish_simulation(sim, opts, speed=0)
        deadline = time.monotonic() + 20
        while sum(t.endswith("/telemetry") for t in received) < stats.published:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        reader.loop_stop()
        assert stats.published > 30
    finally:
        broker.stop()


def test_nodes_reconnect_after_a_broker_restart_and_announce_themselves_again(
    mosquitto: BrokerProcess,
) -> None:
    recorder = Recorder(mosquitto)
    sim = build_simulation("normal_summer", homes=1, duration=timedelta(hours=1))
    done = threading.Event()

    def run() -> None:
        publish_simulation(sim, _opts(mosquitto), speed=500)  # ~7 s of wall time
        done.set()

    worker = threading.Thread(target=run)
    worker.start()
    time.sleep(2.0)
    mosquitto.restart()
    worker.join(60)
    assert done.is_set()
    pit = "sumpwatch/v1/summer-grade/pit/"
    recorder.wait_for(lambda ms: sum(1 for t, p, _ in ms if t == pit + "status") >= 3)
    recorder.close()
    statuses = [p for t, p, _ in recorder.messages if t == pit + "status"]
    # online at start, online again after the restart, offline at the clean stop
    assert statuses.count(b"online") >= 2
    last = [p for t, p, _ in recorder.messages if t == pit + "telemetry"][-1]
    assert b'"ts":"2026-07-10T05:59:' in last or b'"ts":"2026-07-10T06:00:' in last
