"""Issue 12 (blocker) and 19: the SHIPPED deploy/mosquitto/mosquitto.conf, on a real Mosquitto.

Other broker tests run on the config gateway/broker.py renders (it rewrites every
listener and auth line), so a shipped file Mosquitto refuses went unnoticed. Here the
file is used as docker-compose mounts it, with only what differs between the
container and this machine substituted: the three listener ports (bound to loopback)
and the /mosquitto/{config,certs,data}/ paths. The logins are made the way the docs
tell an operator to (`sumpwatch provision`, `provision-gateway`,
`provision-homeassistant`) and the certificates by scripts/make_certs.sh.
"""

from __future__ import annotations

import getpass
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gateway.broker import free_port, mosquitto_binary, wait_for_port
from gateway.cli import app
from gateway.contract import status_topic, telemetry_topic
from gateway.ingest.mqtt import availability_topic
from gateway.settings import REPO_DIR
from tests.test_broker_security import Client

pytestmark = pytest.mark.integration

SHIPPED = REPO_DIR / "deploy" / "mosquitto"
SHIPPED_PORTS = (1883, 8883, 1884)  # nodes, nodes over TLS, gateways


@dataclass
class ShippedBroker:
    """Mosquitto on the shipped file; ``ports`` maps each shipped port to the local one."""

    process: subprocess.Popen[bytes]
    ports: dict[int, int]
    ca_file: Path
    logins: dict[str, str]  # username -> password, as the provisioning commands printed


def substitute(conf: str, ports: dict[int, int], root: Path) -> str:
    """The shipped config with only its ports and container paths made local."""
    for shipped, local in ports.items():
        conf, count = re.subn(
            rf"^listener {shipped}$", f"listener {local} 127.0.0.1", conf, flags=re.M
        )
        assert count == 1, f"the shipped file has no 'listener {shipped}' line"
    for folder in ("config", "certs", "data"):
        conf = conf.replace(f"/mosquitto/{folder}/", f"{root / folder}/")
    # The image's broker reads files its own user owns; here they belong to whoever runs
    # the suite, and Mosquitto started as root would otherwise drop to "mosquitto".
    return conf + f"\nuser {getpass.getuser()}\n"


def printed(output: str) -> dict[str, str]:
    """``KEY=value`` lines of a provisioning command's output."""
    return dict(
        line.split("=", 1)
        for line in output.splitlines()
        if "=" in line and not line.startswith("#")
    )


def provision_as_documented(config: Path) -> dict[str, str]:
    """The logins of docs/deploy.md and docs/home-assistant.md, made with the commands."""
    runner = CliRunner()
    gateway = runner.invoke(
        app, ["provision-gateway", "--passwd-file", str(config / "passwd.gateway")]
    )
    node = runner.invoke(
        app, ["provision", "elm-12", "pit", "--passwd-file", str(config / "passwd")]
    )
    ha = runner.invoke(app, ["provision-homeassistant", "--passwd-file", str(config / "passwd")])
    for result in (gateway, node, ha):
        assert result.exit_code == 0, result.output
    gw, home = printed(gateway.stdout), printed(ha.stdout)
    pit = printed(node.stdout.replace(" = ", "=").replace('"', ""))
    return {
        gw["SUMPWATCH_MQTT_USERNAME"]: gw["SUMPWATCH_MQTT_PASSWORD"],
        pit["username"]: pit["password"],
        home["username"]: home["password"],
    }


@pytest.fixture(scope="module")
def shipped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ShippedBroker]:
    binary = mosquitto_binary()
    if binary is None:
        pytest.fail("mosquitto is not installed")
    root = tmp_path_factory.mktemp("shipped-broker")
    for folder in ("config", "data"):
        (root / folder).mkdir()
    shutil.copy(SHIPPED / "acl", root / "config" / "acl")
    make_certs = REPO_DIR / "scripts" / "make_certs.sh"
    subprocess.run(["bash", str(make_certs), str(root / "certs")], check=True, capture_output=True)
    logins = provision_as_documented(root / "config")
    ports = {port: free_port() for port in SHIPPED_PORTS}
    conf = root / "config" / "mosquitto.conf"
    conf.write_text(substitute((SHIPPED / "mosquitto.conf").read_text(), ports, root))
    process = subprocess.Popen(
        [binary, "-c", str(conf)],
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    try:
        for port in ports.values():
            try:
                wait_for_port("127.0.0.1", port, timeout=5)
            except Exception:
                process.kill()
                _, err = process.communicate()
                pytest.fail(f"Mosquitto refused the shipped file: {err.decode()}")
        yield ShippedBroker(process, ports, root / "certs" / "ca.crt", logins)
    finally:
        process.terminate()
        process.wait(10)


@pytest.fixture
def clients() -> Iterator[list[Client]]:
    made: list[Client] = []
    yield made
    for c in made:
        c.close()


def login(
    broker: ShippedBroker, clients: list[Client], port: int, user: str, *, tls: bool = False
) -> Client:
    client = Client(
        broker.ports[port],
        user,
        broker.logins[user],
        client_id=user,
        ca_file=broker.ca_file if tls else None,
    )
    clients.append(client)
    return client


@pytest.mark.parametrize("node_port", [1883, 8883], ids=["plain", "tls"])
def test_on_the_shipped_file_a_provisioned_node_publishes_and_the_gateway_receives(
    shipped: ShippedBroker, clients: list[Client], node_port: int
) -> None:
    gateway = login(shipped, clients, 1884, "sumpwatch-gateway")
    assert gateway.connect()
    assert gateway.subscribe("sumpwatch/v1/+/+/telemetry") < 0x80
    pit = login(shipped, clients, node_port, "elm-12/pit", tls=node_port == 8883)
    assert pit.connect()
    assert pit.publish(telemetry_topic("elm-12", "pit"), b'{"seq": 1}') < 0x80
    assert [t for t, _ in gateway.received(1)] == [telemetry_topic("elm-12", "pit")]


def test_on_the_shipped_file_a_node_login_is_refused_on_the_gateways_listener(
    shipped: ShippedBroker, clients: list[Client]
) -> None:
    assert not login(shipped, clients, 1884, "elm-12/pit").connect()


def test_the_provisioned_home_assistant_login_reads_status_and_writes_nothing(
    shipped: ShippedBroker, clients: list[Client]
) -> None:
    home = login(shipped, clients, 1883, "homeassistant")
    assert home.connect()
    assert home.subscribe("sumpwatch/v1/+/+/status") < 0x80
    pit = login(shipped, clients, 1883, "elm-12/pit")
    assert pit.connect()
    assert pit.publish(status_topic("elm-12", "pit"), b"online", retain=True) < 0x80
    assert home.received(1) == [(status_topic("elm-12", "pit"), b"online")]
    # Read-only: Mosquitto answers a refused QoS 1 publish with "not authorised".
    assert home.publish(telemetry_topic("elm-12", "pit"), b"{}") == 0x87


def test_on_the_shipped_file_the_gateway_publishes_its_availability_and_a_node_cannot(
    shipped: ShippedBroker, clients: list[Client]
) -> None:
    topic = availability_topic("gw-1")
    home = login(shipped, clients, 1883, "homeassistant")
    assert home.connect()
    assert home.subscribe(topic) < 0x80
    gateway = login(shipped, clients, 1884, "sumpwatch-gateway")
    assert gateway.connect()
    assert gateway.publish(topic, b"online", retain=True) < 0x80
    assert home.received(1) == [(topic, b"online")]
    pit = login(shipped, clients, 1883, "elm-12/pit")
    assert pit.connect()
    assert pit.publish(topic, b"offline") == 0x87
