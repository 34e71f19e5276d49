"""A real ``influxd`` (Debian package ``influxdb``) on free ports in a temp dir.

Use the fixtures by importing them into a test module or conftest::

    from tests.influx_fixture import influxd, influxd_private  # noqa: F401

``influxd`` is session-scoped and shared (each test uses its own database name);
``influxd_private`` is a server of the test's own that it may stop and start again
(outage tests). The module also builds readings for store tests (no MQTT).
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from gateway.contract import NodeKind
from gateway.domain import Reading

_CONFIG = """\
reporting-disabled = true
bind-address = "127.0.0.1:{rpc_port}"

[meta]
  dir = "{root}/meta"
  logging-enabled = false

[data]
  dir = "{root}/data"
  wal-dir = "{root}/wal"
  query-log-enabled = false
  trace-logging-enabled = false

[http]
  bind-address = "127.0.0.1:{http_port}"
  log-enabled = false
  max-row-limit = 0

[logging]
  level = "error"
  suppress-logo = true

[monitor]
  store-enabled = false

[continuous_queries]
  enabled = false

[subscriber]
  enabled = false
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class InfluxServer:
    """One influxd process with its config and data under ``root``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.http_port = _free_port()
        self.rpc_port = _free_port()
        self.config = root / "influxd.conf"
        self.log = root / "influxd.log"
        root.mkdir(parents=True, exist_ok=True)
        self.config.write_text(
            _CONFIG.format(root=root, http_port=self.http_port, rpc_port=self.rpc_port)
        )
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """Base URL of the HTTP API."""
        return f"http://127.0.0.1:{self.http_port}"

    def start(self, timeout_s: float = 20.0) -> None:
        """Start influxd and wait until ``/ping`` answers 204."""
        binary = shutil.which("influxd") or "/usr/bin/influxd"
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [binary, "-config", str(self.config)], stdout=log, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"influxd exited: {self.log.read_text()[-2000:]}")
            try:
                if httpx.get(f"{self.url}/ping", timeout=0.5).status_code == 204:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"influxd did not answer /ping within {timeout_s}s")

    def stop(self) -> None:
        """Stop influxd (SIGTERM, then SIGKILL) and wait for it."""
        if self.proc is None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def query(self, database: str, q: str) -> dict[str, object]:
        """Run InfluxQL directly (for assertions independent of the store)."""
        resp = httpx.post(
            f"{self.url}/query", params={"db": database, "q": q, "epoch": "ns"}, timeout=10
        )
        resp.raise_for_status()
        result: dict[str, object] = resp.json()
        return result


def _require_influxd() -> None:
    if shutil.which("influxd") is None and not Path("/usr/bin/influxd").exists():
        pytest.fail("influxd is not installed (apt-get install influxdb)")


@pytest.fixture(scope="session")
def influxd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InfluxServer]:
    """A shared influxd for the whole session."""
    _require_influxd()
    server = InfluxServer(tmp_path_factory.mktemp("influxd"))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def influxd_private(tmp_path: Path) -> Iterator[InfluxServer]:
    """An influxd of this test's own, which the test may stop and restart."""
    _require_influxd()
    server = InfluxServer(tmp_path / "influxd")
    server.start()
    yield server
    server.stop()


@pytest.fixture
def influx_database() -> str:
    """A database name no other test uses."""
    return f"t_{uuid.uuid4().hex[:12]}"


# -- readings for store tests ---------------------------------------------------------

T0 = datetime(2026, 1, 15, 6, 0, tzinfo=UTC)


def reading(
    kind: NodeKind,
    seq: int,
    *,
    site: str = "elm-12",
    node: str | None = None,
    ts: datetime | None = None,
    boot: str = "b00t",
    battery_v: float | None = 3.61,
    rssi_dbm: float | None = -71.0,
    **values: float | bool,
) -> Reading:
    """One reading of a node; ``ts`` defaults to T0 + seq seconds."""
    ts = ts or T0 + timedelta(seconds=seq)
    return Reading(
        site_id=site,
        node_id=node or kind.value,
        kind=kind,
        ts=ts,
        seq=seq,
        boot=boot,
        values=values,
        received_at=ts + timedelta(milliseconds=250),
        battery_v=battery_v,
        rssi_dbm=rssi_dbm,
    )


def one_of_each_kind(seq: int = 0, site: str = "elm-12") -> list[Reading]:
    """A pit (every optional field too), a discharge and an air reading."""
    return [
        reading(
            NodeKind.PIT,
            seq,
            site=site,
            node="pit",
            level_cm=31.25,
            pump_on=True,
            water_temp_c=9.5,
            backup_pump_on=False,
            pump_current_a=6.75,
        ),
        reading(
            NodeKind.DISCHARGE,
            seq,
            site=site,
            node="outlet",
            flow_lpm=118.5,
            pressure_kpa=21.0,
            pipe_temp_c=-1.5,
        ),
        reading(NodeKind.AIR, seq, site=site, node="air", battery_v=None, air_temp_c=-12.25),
    ]


def pit_series(
    count: int,
    *,
    site: str = "elm-12",
    node: str = "pit",
    start: datetime = T0,
    interval_s: float = 5.0,
    start_seq: int = 0,
) -> list[Reading]:
    """A pit's readings every ``interval_s``; the pump runs for 4 samples in every 12."""
    out = []
    for i in range(count):
        seq = start_seq + i
        out.append(
            reading(
                NodeKind.PIT,
                seq,
                site=site,
                node=node,
                ts=start + timedelta(seconds=interval_s * i),
                level_cm=float(20 + seq % 12),
                pump_on=seq % 12 >= 8,
                water_temp_c=10.0,
            )
        )
    return out
