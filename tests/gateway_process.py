"""A ``sumpwatch gateway`` run as a real process (real Mosquitto, real SQLite) for the
tests that must see the service from outside: its memory, its files, its HTTP edge."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest
import tomli_w

from gateway.broker import BrokerProcess
from gateway.settings import REPO_DIR
from tests.conftest import DEMO_SITES

DEMO_USERS = REPO_DIR / "deploy" / "users.example.toml"


@dataclass
class GatewayProcess:
    """A running ``sumpwatch gateway``."""

    proc: subprocess.Popen[bytes]
    port: int
    data_dir: Path
    log: Path

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def rss(self) -> int:
        return int(psutil.Process(self.proc.pid).memory_info().rss)


def gateway_config(tmp_path: Path, broker: BrokerProcess, port: int, **api: object) -> Path:
    """A settings TOML for a gateway process on ``broker`` serving ``port``; ``api``
    overrides keys of its api section."""
    values = {
        "data_dir": str(tmp_path / "data"),
        "sites_file": str(DEMO_SITES),
        "mqtt": {"host": broker.host, "port": broker.port, "client_id": f"gw-proc-{port}"},
        "api": {"port": port, "auth_enabled": True, "users_file": str(DEMO_USERS), **api},
        "reports": {"schedule": False},
    }
    path = tmp_path / "gateway.toml"
    path.write_text(tomli_w.dumps(values))
    return path


def environment() -> dict[str, str]:
    """This environment without SUMPWATCH_* settings (the config file decides)."""
    return {k: v for k, v in os.environ.items() if not k.startswith("SUMPWATCH_")}


def start_cli(args: list[str], log: Path, cwd: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "gateway.cli", *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=environment(),
            cwd=cwd,  # no .env file of the developer's is read
        )


def wait_http(proc: subprocess.Popen[bytes], port: int, log: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text()
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2):
                return
        except urllib.error.HTTPError:
            return  # 503 while degraded: serving all the same
        except OSError:
            time.sleep(0.2)
    pytest.fail(f"no HTTP on {port}:\n{log.read_text()}")


def stop_process(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
