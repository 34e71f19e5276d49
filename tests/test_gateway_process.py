"""Issue 12 items 9, 10, 12 and 14 against ``sumpwatch gateway`` and ``sumpwatch demo``
run as processes (real Mosquitto, real SQLite): memory under a 100 MB POST, the
``--trusted-proxy`` option, the secret key, and the modes of the files it writes."""

from __future__ import annotations

import json
import os
import re
import socket
import stat
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from gateway.broker import BrokerProcess, free_port
from tests.browser_fixtures import login_form_token
from tests.gateway_process import (
    GatewayProcess,
    environment,
    gateway_config,
    start_cli,
    stop_process,
    wait_http,
)

pytestmark = pytest.mark.integration

MB = 1024 * 1024


@pytest.fixture
def gateway_process(tmp_path: Path, mosquitto: BrokerProcess) -> Iterator[GatewayProcess]:
    """``sumpwatch gateway --trusted-proxy 127.0.0.9`` with auth on and the demo users."""
    port = free_port()
    config = gateway_config(tmp_path, mosquitto, port, secret_key="process-test-secret-key")
    log = tmp_path / "gateway.log"
    proc = start_cli(["gateway", "-c", str(config), "--trusted-proxy", "127.0.0.9"], log, tmp_path)
    try:
        wait_http(proc, port, log)
        yield GatewayProcess(proc, port, tmp_path / "data", log)
    finally:
        stop_process(proc)


def _raw_request(port: int, head: bytes, body_mb: int = 0) -> tuple[bytes, int]:
    """Send a request head, then up to ``body_mb`` MB of chunked body while the server
    reads; return what it answered and how many body bytes it took."""
    sent = 0
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(head)
        chunk = b"a" * (64 * 1024)
        framed = f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n"
        try:
            for _ in range(body_mb * 16):
                sock.sendall(framed)
                sent += len(chunk)
        except OSError:
            pass  # the server answered and closed: the rest is refused unread
        try:
            return sock.recv(65536), sent
        except OSError:
            return b"", sent


def _post_login(port: int, source: str, forwarded_for: str) -> None:
    """A failed sign-in through the form, from ``source``, claiming ``forwarded_for``."""
    transport = httpx.HTTPTransport(local_address=source)
    headers = {"x-forwarded-for": forwarded_for}
    with httpx.Client(
        base_url=f"http://127.0.0.1:{port}", transport=transport, headers=headers
    ) as client:
        token = login_form_token(client.get("/login").text)
        form = {"username": "nobody", "password": "wrong-password-x", "csrf_token": token}
        assert client.post("/login", data=form).status_code == 401


# ---------------------------------------------------------------------- item 9


def test_a_100_mb_post_before_sign_in_is_refused_without_growing_the_process(
    gateway_process: GatewayProcess,
) -> None:
    port = gateway_process.port
    for _ in range(5):  # warm up: first requests allocate caches
        urllib.request.urlopen(gateway_process.url("/health"), timeout=5).close()
    before = gateway_process.rss()
    declared = (
        "POST /login HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\n"
        f"Content-Length: {100 * MB}\r\n\r\n"
    ).encode()
    answer, _ = _raw_request(port, declared)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    chunked = (
        b"POST /alerts/x/ack HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n"
    )
    answer, sent = _raw_request(port, chunked, body_mb=100)
    growth = gateway_process.rss() - before
    print(f"RSS {before / MB:.1f} MB, +{growth / MB:.1f} MB; sent {sent}; {answer[:12]!r}")
    if answer:  # the reply can be lost to the reset of a refused upload
        assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert growth < 20 * MB
    assert gateway_process.proc.poll() is None


# ---------------------------------------------------------------------- item 10


def test_the_trusted_proxy_option_decides_whose_forwarded_address_is_counted(
    gateway_process: GatewayProcess,
) -> None:
    _post_login(gateway_process.port, "127.0.0.9", "198.51.100.23")  # the declared proxy
    _post_login(gateway_process.port, "127.0.0.10", "198.51.100.24")  # anyone else
    deadline = time.monotonic() + 10
    while "198.51.100.23" not in gateway_process.log.read_text():
        assert time.monotonic() < deadline, gateway_process.log.read_text()
        time.sleep(0.1)
    text = gateway_process.log.read_text()
    assert "failed sign-in for 'nobody' from 198.51.100.23" in text
    assert "198.51.100.24" not in text
    assert "failed sign-in for 'nobody' from 127.0.0.10" in text


# ---------------------------------------------------------------------- item 14


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_data_dir_is_private_and_every_file_in_it_is_mode_600(
    gateway_process: GatewayProcess,
) -> None:
    data = gateway_process.data_dir
    db = data / "sumpwatch.db"
    assert _mode(data) == 0o700
    assert db.exists() and (data / "sumpwatch.db-wal").exists()
    files = [p for p in data.rglob("*") if p.is_file()]
    assert {f"sumpwatch.db{s}" for s in ("", "-wal", "-shm")} <= {p.name for p in files}
    loose = {str(p): oct(_mode(p)) for p in files if _mode(p) & 0o077}
    assert not loose
    folders = {str(p): oct(_mode(p)) for p in data.rglob("*") if p.is_dir() and _mode(p) & 0o077}
    assert not folders


# ---------------------------------------------------------------------- item 12


def test_the_gateway_refuses_to_start_with_the_placeholder_secret_key(
    tmp_path: Path, mosquitto: BrokerProcess
) -> None:
    config = gateway_config(tmp_path, mosquitto, free_port())  # secret_key left at its default
    result = subprocess.run(
        [sys.executable, "-m", "gateway.cli", "gateway", "-c", str(config)],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
        env=environment(),
        cwd=tmp_path,
    )
    assert result.returncode == 2
    assert "SUMPWATCH_API__SECRET_KEY" in result.stdout + result.stderr
    assert not (tmp_path / "data" / "sumpwatch.db").exists()  # refused before starting


def _me(port: int, token: str) -> dict[str, object]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/me", headers={"authorization": f"Bearer {token}"}
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        result: dict[str, object] = json.loads(response.read())
        return result


def _demo_port(proc: subprocess.Popen[bytes], log: Path) -> int:
    """The port the demo serves on (it picks another if the asked one is taken)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text()
        found = re.search(r"SumpWatch demo: http://127\.0\.0\.1:(\d+)/", log.read_text())
        if found:
            port = int(found.group(1))
            wait_http(proc, port, log)
            return port
        time.sleep(0.2)
    pytest.fail(f"the demo never said where it serves:\n{log.read_text()}")


@pytest.mark.slow
def test_a_user_token_made_for_the_demo_works_against_it_across_restarts(
    tmp_path: Path,
) -> None:
    data = tmp_path / "demo"
    port = free_port()
    args = ["demo", "--homes", "1", "--port", str(port), "--data-dir", str(data)]
    log = tmp_path / "demo.log"
    proc = start_cli(args, log, tmp_path)
    try:
        port = _demo_port(proc, log)
        key = data / "secret_key"
        assert _mode(key) == 0o600
        assert _mode(data) == 0o700
        made = subprocess.run(
            [sys.executable, "-m", "gateway.cli", "user", "token", "admin"],
            check=False,
            capture_output=True,
            text=True,
            timeout=60,
            env={**environment(), "SUMPWATCH_DATA_DIR": str(data)},
            cwd=tmp_path,
        )
        assert made.returncode == 0, made.stderr
        token = made.stdout.strip()
        assert _me(port, token)["username"] == "admin"
    finally:
        stop_process(proc)
    first_key = key.read_text()
    proc = start_cli(args, log, tmp_path)
    try:
        port = _demo_port(proc, log)
        assert key.read_text() == first_key
        assert _me(port, token)["username"] == "admin"
    finally:
        stop_process(proc)


async def test_the_sqlite_file_and_its_folder_are_private_whatever_the_umask(
    tmp_path: Path,
) -> None:
    from gateway.state.database import SqliteDatabase

    previous = os.umask(0o022)  # a typical shell's: files 644, folders 755
    try:
        db = SqliteDatabase(tmp_path / "new" / "store.db")
        await db.open()
        await db.write(lambda conn: conn.execute("CREATE TABLE t (x INTEGER)"))
        await db.write(lambda conn: conn.execute("INSERT INTO t VALUES (1)"))
        await db.read(lambda conn: conn.execute("SELECT x FROM t").fetchall())
        made = {p.name: _mode(p) for p in (tmp_path / "new").iterdir()}
        await db.close()
    finally:
        os.umask(previous)
    assert _mode(tmp_path / "new") == 0o700
    assert made == {"store.db": 0o600, "store.db-wal": 0o600, "store.db-shm": 0o600}
