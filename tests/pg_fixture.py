"""A throwaway PostgreSQL cluster for the session: ``initdb`` + ``pg_ctl`` on a free
port in a temp dir, never a server already running on the machine.

PostgreSQL refuses to run as root, and CI runs as root: then the cluster belongs to
the ``postgres`` system user (``runuser``) in a folder it owns. Each test gets its
own database (``CREATE DATABASE``, dropped after), so tests share the one cluster
and nothing else.
"""

from __future__ import annotations

import asyncio
import glob
import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest

from gateway.broker import free_port
from gateway.state.database import Database, SqliteDatabase
from gateway.state.postgres import PostgresDatabase

StateDbFactory = Callable[[], Database]


@dataclass(frozen=True)
class PgCluster:
    """A running cluster: where it listens and how to reach its admin database."""

    host: str
    port: int
    user: str

    def url(self, database: str = "postgres") -> str:
        """A libpq URL for one database (trust authentication on 127.0.0.1 only)."""
        return f"postgresql://{self.user}@{self.host}:{self.port}/{database}"

    def create_database(self, template: str = "template0") -> str:
        """A new database (empty, or a copy of ``template``); its name. Its default
        collation is ICU's en-US, as on a typical production server, not the cluster's
        C: the schema must not depend on the byte order a C locale would give for free."""
        name = f"t_{uuid.uuid4().hex[:12]}"
        locale = " LOCALE_PROVIDER icu ICU_LOCALE 'en-US'" if template == "template0" else ""
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"{locale}'.encode())
        return name

    def drop_database(self, name: str) -> None:
        """Drop a test's database, closing whatever the test left connected."""
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'.encode())


def _bin_dir() -> Path | None:
    """Where initdb is: on PATH, or Debian's versioned folder (newest first)."""
    found = shutil.which("initdb")
    if found is not None:
        return Path(found).resolve().parent
    folders = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(p.split("/")[4]))
    for folder in reversed(folders):
        if (Path(folder) / "initdb").exists():
            return Path(folder)
    return None


def _install() -> Path:
    """``apt-get install postgresql`` (as scripts/setup.sh --system does), then find it."""
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
    subprocess.run(
        ["apt-get", "install", "-y", "-qq", "--no-install-recommends", "postgresql"],
        check=True,
        env=env,
    )
    found = _bin_dir()
    if found is None:
        pytest.fail("postgresql was installed but no initdb was found")
    return found


def _as_owner(argv: list[str]) -> list[str]:
    """Run as the postgres system user when we are root (the server refuses root)."""
    if os.geteuid() != 0:
        return argv
    return ["runuser", "-u", "postgres", "--", *argv]


def _owned_dir() -> Path:
    root = Path(tempfile.mkdtemp(prefix="sumpwatch-pg-"))
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
    return root


def _run(argv: list[str], root: Path) -> None:
    """Run a cluster command as its owner; fail the session with its output (and the
    server's log) when it fails, which a bare CalledProcessError would not show."""
    done = subprocess.run(_as_owner(argv), capture_output=True, text=True, check=False)
    if done.returncode != 0:
        log = root / "log"
        server = log.read_text(errors="replace")[-2000:] if log.exists() else ""
        pytest.fail(f"{Path(argv[0]).name} failed:\n{done.stdout}{done.stderr}\n{server}")


def _wait_ready(host: str, port: int) -> None:
    with socket.create_connection((host, port), timeout=5):
        pass


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[PgCluster]:
    """One PostgreSQL cluster for the whole session, stopped and removed after."""
    bin_dir = _bin_dir() or _install()
    root = _owned_dir()
    data, port = root / "data", free_port()
    user = "postgres" if os.geteuid() == 0 else os.environ.get("USER", "postgres")
    _run(
        [str(bin_dir / "initdb"), "-D", str(data), "-U", user, "--auth=trust",
         "--encoding=UTF8", "--locale=C.UTF-8", "--no-sync"],
        root,
    )  # fmt: skip
    # Durability off: a test cluster trades crash safety for speed.
    options = (
        f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off"
        " -c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
    )
    _run(
        [str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(root / "log"), "-o", options,
         "-w", "-t", "60", "start"],
        root,
    )  # fmt: skip
    try:
        _wait_ready("127.0.0.1", port)
        yield PgCluster("127.0.0.1", port, user)
    finally:
        subprocess.run(
            _as_owner([str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"]),
            check=False,
            capture_output=True,
        )
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_migrated(pg_cluster: PgCluster) -> str:
    """A database at the latest schema, copied for each test that needs one (copying
    is faster than migrating each time); tests of migrating itself use ``pg_url``."""
    name = pg_cluster.create_database()

    async def migrate() -> None:
        db = PostgresDatabase(pg_cluster.url(name))
        await db.open()
        await db.close()

    asyncio.run(migrate())
    return name


@pytest.fixture
def pg_url(pg_cluster: PgCluster) -> Iterator[str]:
    """The URL of a fresh database for one test."""
    name = pg_cluster.create_database()
    yield pg_cluster.url(name)
    pg_cluster.drop_database(name)


def _factories(
    request: pytest.FixtureRequest, tmp_path: Path, *, migrated: bool
) -> Iterator[StateDbFactory]:
    if request.param == "sqlite":
        yield lambda: SqliteDatabase(tmp_path / "state.db")
        return
    cluster: PgCluster = request.getfixturevalue("pg_cluster")
    template = request.getfixturevalue("pg_migrated") if migrated else "template0"
    name = cluster.create_database(template=template)
    yield lambda: PostgresDatabase(cluster.url(name))
    cluster.drop_database(name)


@pytest.fixture(params=["sqlite", "postgresql"])
def state_db_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StateDbFactory]:
    """Makes unopened state databases on one backend per run of the test: the same
    SQLite file or PostgreSQL database each call (a restart reopens the same state).
    The PostgreSQL one starts migrated (a copy of ``pg_migrated``); the SQLite file
    is migrated when opened."""
    yield from _factories(request, tmp_path, migrated=True)


@pytest.fixture(params=["sqlite", "postgresql"])
def empty_state_db_factory(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[StateDbFactory]:
    """As ``state_db_factory``, on a database never migrated (the migration tests)."""
    yield from _factories(request, tmp_path, migrated=False)


@pytest.fixture
async def state_db(state_db_factory: StateDbFactory) -> AsyncIterator[Database]:
    """An open, migrated state database on each backend (the test runs twice)."""
    db = state_db_factory()
    await db.open()
    yield db
    await db.close()
