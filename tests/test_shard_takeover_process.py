"""The shard takeover with real processes: a ``sumpwatch gateway --no-api`` holding
the shard is killed with SIGKILL; a ``--standby`` process takes the shard over under
its client id; everything published is stored (issue 18.3, 18.5 in part)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gateway.broker import BrokerProcess
from tests.conftest import DEMO_SITES
from tests.mqtt_helpers import pit_messages, publish, stored_seqs

pytestmark = pytest.mark.integration


def _start(
    tmp_path: Path, name: str, broker: BrokerProcess, pg_url: str, *extra: str
) -> tuple[subprocess.Popen[bytes], Path]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SUMPWATCH_")}
    env.update(
        SUMPWATCH_DATA_DIR=str(tmp_path / name),
        SUMPWATCH_SITES_FILE=str(DEMO_SITES),
        SUMPWATCH_MQTT__HOST=broker.host,
        SUMPWATCH_MQTT__PORT=str(broker.port),
        SUMPWATCH_MQTT__CLIENT_ID="gw-proc",  # the shard's: gw-proc-shard-0
        SUMPWATCH_STORE__STATE_URL=pg_url,
        SUMPWATCH_REPORTS__SCHEDULE="false",
        SUMPWATCH_VALIDATION__RATE_LIMIT_FACTOR="0",
    )
    log = tmp_path / f"{name}.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "gateway.cli", "gateway", "--no-api", *extra],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    return proc, log


def _wait(check: object, timeout: float, what: str, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"{what}:\n{log.read_text()[-3000:]}"
        time.sleep(0.1)


def test_a_standby_process_takes_over_the_shard_of_a_killed_gateway_and_stores_everything(
    tmp_path: Path, mosquitto: BrokerProcess, pg_url: str
) -> None:
    holder, holder_log = _start(tmp_path, "holder", mosquitto, pg_url)
    standby = None
    try:
        _wait(lambda: "subscribed" in holder_log.read_text().lower(), 30, "holder", holder_log)
        standby, standby_log = _start(tmp_path, "standby", mosquitto, pg_url, "--standby")
        before = pit_messages(50)
        publish(mosquitto.host, mosquitto.port, before)
        _wait(lambda: len(stored_seqs(tmp_path / "holder")) == 50, 30, "stored", holder_log)

        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=10)
        killed = time.monotonic()
        during = pit_messages(50, start_seq=1000)  # while the shard has no gateway
        publish(mosquitto.host, mosquitto.port, during)
        published = set(range(50)) | set(range(1000, 1050))

        def all_stored() -> bool:
            return stored_seqs(tmp_path / "holder") | stored_seqs(tmp_path / "standby") == published

        _wait(all_stored, 60, "takeover", standby_log)
        takeover_s = time.monotonic() - killed
        print(f"takeover after SIGKILL: {takeover_s:.1f} s; stored {len(published)} of 100")
        assert "lease taken" in standby_log.read_text()
        assert takeover_s < 20
    finally:
        holder.kill()
        if standby is not None:
            standby.send_signal(signal.SIGTERM)
            assert standby.wait(timeout=30) == 0
