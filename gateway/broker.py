"""Start an MQTT broker for the demo and the tests.

A real ``mosquitto`` process is used whenever the binary exists, configured from
the shipped ``deploy/mosquitto/mosquitto.conf`` (its limits kept; listeners, paths
and auth replaced). Only when Mosquitto is not installed does the demo fall back
to the embedded pure-Python amqtt broker, run as a child process.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from gateway.errors import BrokerError
from gateway.examples import MOSQUITTO_CONF

SHIPPED_CONF = MOSQUITTO_CONF
_REPLACED = (
    "listener",
    "persistence_location",
    "password_file",
    "acl_file",
    "allow_anonymous",
    "certfile",
    "keyfile",
    "cafile",
    "tls_version",
    "require_certificate",
    "log_dest",
    "log_type",
    "connection_messages",
    "user",
    "per_listener_settings",
    "use_username_as_clientid",
)


def free_port() -> int:
    """A TCP port that is free on 127.0.0.1 right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def mosquitto_binary() -> str | None:
    """Path of the mosquitto binary, if installed (Debian puts it in /usr/sbin)."""
    return shutil.which("mosquitto") or (
        "/usr/sbin/mosquitto" if os.access("/usr/sbin/mosquitto", os.X_OK) else None
    )


def render_mosquitto_conf(
    port: int,
    data_dir: Path,
    *,
    shipped: Path = SHIPPED_CONF,
    password_file: Path | None = None,
    acl_file: Path | None = None,
    extra: str = "",
    gateway_port: int | None = None,
    gateway_password_file: Path | None = None,
) -> str:
    """The shipped config with a loopback listener on ``port`` and local paths.

    With ``gateway_port`` and ``gateway_password_file`` (and a ``password_file``),
    the shipped two-listener layout: nodes on ``port``, gateways on ``gateway_port``.
    """
    kept = []
    for line in shipped.read_text().splitlines():
        key = line.strip().split(" ", 1)[0]
        if key and not key.startswith("#") and key in _REPLACED:
            continue
        kept.append(line)
    kept += [f"persistence_location {data_dir}/"]
    if gateway_port is not None and gateway_password_file is not None and password_file:
        # The shipped layout (docs/security.md): nodes on their own listener, where
        # the client id is forced to the username; the gateway on another listener
        # that only gateway logins can use.
        kept += [
            "per_listener_settings true",
            f"listener {port} 127.0.0.1",
            "use_username_as_clientid true",
            *node_listener_auth(password_file, acl_file),
            f"listener {gateway_port} 127.0.0.1",
            "allow_anonymous false",
            f"password_file {gateway_password_file}",
            *([f"acl_file {acl_file}"] if acl_file else []),
        ]
        password_file = acl_file = None  # written per listener above
    else:
        kept += [
            "per_listener_settings false",
            f"listener {port} 127.0.0.1",
            f"allow_anonymous {'false' if password_file else 'true'}",
        ]
    kept += [
        "log_dest stderr",
        "log_type error",
        "log_type warning",
        # Mosquitto started as root drops to the "mosquitto" user, which then cannot
        # write its persistence file into our temp dir (queued messages would be lost
        # across a restart). Run as whoever started it.
        f"user {getpass.getuser()}",
    ]
    if password_file:
        kept.append(f"password_file {password_file}")
    if acl_file:
        kept.append(f"acl_file {acl_file}")
    if extra:
        kept.append(extra)
    return "\n".join(kept) + "\n"


def node_listener_auth(password_file: Path, acl_file: Path | None) -> list[str]:
    """The auth lines of a node listener (per_listener_settings true), e.g. for TLS."""
    lines = ["allow_anonymous false", f"password_file {password_file}"]
    return lines + ([f"acl_file {acl_file}"] if acl_file else [])


def wait_for_port(host: str, port: int, timeout: float = 15.0) -> None:
    """Block until something accepts TCP connections on host:port."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=0.5):
            return
        time.sleep(0.05)
    raise BrokerError(f"nothing listens on {host}:{port} after {timeout:.0f}s")


@dataclass
class BrokerProcess:
    """A running broker child process."""

    kind: str  # "mosquitto" or "amqtt"
    host: str
    port: int
    process: subprocess.Popen[bytes]
    data_dir: Path
    conf_file: Path | None = None
    gateway_port: int | None = None  # the gateways' listener, when separate

    @property
    def protocol(self) -> str:
        """The MQTT version the gateway should speak to it."""
        return "5" if self.kind == "mosquitto" else "3.1.1"

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM, then SIGKILL if it lingers (Mosquitto saves its persistence file)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def restart(self) -> None:
        """Stop and start again on the same port and data (for fault tests)."""
        self.stop()
        self.process = _spawn(self.kind, self.port, self.conf_file)
        wait_for_port(self.host, self.port)


def _spawn(kind: str, port: int, conf_file: Path | None) -> subprocess.Popen[bytes]:
    if kind == "mosquitto":
        binary = mosquitto_binary()
        if binary is None or conf_file is None:
            raise BrokerError("mosquitto is not installed")
        cmd = [binary, "-c", str(conf_file)]
    else:
        cmd = [sys.executable, "-m", "gateway.embedded_broker", "--port", str(port)]
    return subprocess.Popen(cmd, stdin=subprocess.DEVNULL, start_new_session=True)


def start_broker(
    data_dir: Path | None = None,
    *,
    port: int | None = None,
    prefer: str = "mosquitto",
    password_file: Path | None = None,
    acl_file: Path | None = None,
    extra_conf: str = "",
    gateway_password_file: Path | None = None,
) -> BrokerProcess:
    """Start Mosquitto (or amqtt when Mosquitto is missing) on a free loopback port.

    With ``gateway_password_file`` (and ``password_file``) the gateways get their own
    listener on another free port (``BrokerProcess.gateway_port``).
    """
    data_dir = data_dir or Path(tempfile.mkdtemp(prefix="sumpwatch-broker-"))
    data_dir.mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    kind = "mosquitto" if prefer == "mosquitto" and mosquitto_binary() else "amqtt"
    conf_file: Path | None = None
    gateway_port = free_port() if gateway_password_file is not None else None
    if kind == "mosquitto":
        conf_file = data_dir / "mosquitto.conf"
        conf_file.write_text(
            render_mosquitto_conf(
                port,
                data_dir,
                password_file=password_file,
                acl_file=acl_file,
                extra=extra_conf,
                gateway_port=gateway_port,
                gateway_password_file=gateway_password_file,
            )
        )
    process = _spawn(kind, port, conf_file)
    broker = BrokerProcess(kind, "127.0.0.1", port, process, data_dir, conf_file, gateway_port)
    try:
        wait_for_port(broker.host, port)
        if gateway_port is not None:
            wait_for_port(broker.host, gateway_port)
    except BrokerError:
        broker.stop()
        raise
    if process.poll() is not None:
        raise BrokerError(f"{kind} exited with code {process.returncode}")
    return broker


@contextlib.contextmanager
def running_broker(data_dir: Path | None = None, **kwargs: object) -> Iterator[BrokerProcess]:
    """A broker for the duration of a with-block."""
    broker = start_broker(data_dir, **kwargs)  # type: ignore[arg-type]
    try:
        yield broker
    finally:
        broker.stop()
