"""The state database: what repositories need of it, and the SQLite backend.

Repositories write one SQL text for both backends (``?`` placeholders, the SQL
SQLite and PostgreSQL share) against :class:`Connection`, the part of the DB-API
both ``sqlite3.Connection`` and :class:`gateway.state.postgres.PgConnection` offer;
where the dialects differ a repository asks :attr:`Database.dialect`.

The SQLite backend: all writes go through one dedicated thread with one connection,
so they are serialised without locks in Python; reads use a connection per reader
thread, which WAL lets run beside the writer. The schema is versioned:
:meth:`SqliteDatabase.open` applies the numbered migrations of
:mod:`gateway.state.migrations` (``PRAGMA user_version``), so every table is created
or changed in exactly one place.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
import stat
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Generic, Literal, Protocol, TypeVar

from gateway.errors import StoreError, StoreUnavailable
from gateway.state import migrations

T = TypeVar("T")
log = logging.getLogger(__name__)

_PRAGMAS = (
    "PRAGMA journal_mode=WAL",
    # NORMAL is durable across application crashes in WAL mode; only a power loss
    # can roll back the last transactions, which the broker then redelivers.
    "PRAGMA synchronous=NORMAL",
    "PRAGMA busy_timeout=5000",
    "PRAGMA foreign_keys=ON",
)


Dialect = Literal["sqlite", "postgresql"]


class IntegrityError(StoreError):
    """A constraint refused a write (PostgreSQL's, translated by its connection)."""


#: What a repository catches for "that key exists" on either backend (SQLite's
#: callbacks get the raw ``sqlite3.Connection``, whose error is its own).
INTEGRITY_ERRORS: tuple[type[Exception], ...] = (sqlite3.IntegrityError, IntegrityError)


class Row(Protocol):
    """A result row: by column name or position, and iterable (``sqlite3.Row``'s shape)."""

    def __getitem__(self, key: int | str, /) -> Any: ...

    def __iter__(self) -> Iterator[Any]: ...

    def keys(self) -> list[str]: ...


class Cursor(Protocol):
    """The result of :meth:`Connection.execute`. No ``lastrowid``: PostgreSQL has
    none, so an insert that needs its key says ``RETURNING id``."""

    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


class Connection(Protocol):
    """What a repository's SQL runs on (``sqlite3.Connection`` is one)."""

    def execute(self, sql: str, parameters: Sequence[Any] = ..., /) -> Cursor: ...

    def executemany(self, sql: str, parameters: Iterable[Sequence[Any]], /) -> Cursor: ...


class Database(Protocol):
    """What a repository needs of the database: a transaction and a read.

    Stages (alerts, accounts) depend on this interface, not on a backend;
    :func:`gateway.state.factory.state_database` picks one from the settings.
    """

    @property
    def dialect(self) -> Dialect:
        """Which SQL the connections speak, for the few statements that differ."""
        ...

    @property
    def label(self) -> str:
        """Where the database is, fit for a log line (no password)."""
        ...

    async def open(self, *, migrate: bool = True) -> None:
        """Connect (and bring the schema to this version's unless ``migrate=False``)."""
        ...

    async def close(self) -> None:
        """Close every connection."""
        ...

    async def write(self, fn: Callable[[Connection], T]) -> T:
        """Run ``fn(conn)`` in one write transaction."""
        ...

    async def read(self, fn: Callable[[Connection], T]) -> T:
        """Run ``fn(conn)`` on a connection that sees the last commit."""
        ...

    async def migrate(self, target: int | None = None) -> migrations.UpgradeResult:
        """Bring the schema to this code's version (idempotent)."""
        ...

    async def schema_version(self) -> int:
        """The migration number the database is at (0: never migrated)."""
        ...


def _create_private(path: Path) -> None:
    """Make the folder (700) and the file (600) before SQLite opens it.

    The file holds password hashes, session and token HMACs and raw payloads.
    SQLite gives the -wal and -shm files the mode of the database file, so they
    follow. An existing file readable by others is tightened; an existing folder
    is left as it is (it may be shared, e.g. /tmp) with a warning.
    """
    folder = path.parent
    if not folder.exists():
        folder.mkdir(parents=True, mode=0o700)
    elif stat.S_IMODE(folder.stat().st_mode) & 0o077:
        log.warning("%s is open to other users; SumpWatch's own folders are mode 700", folder)
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:
        pass
    except OSError as exc:
        raise StoreUnavailable(f"cannot create {path}: {exc}") from exc
    for file in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        if file.exists() and stat.S_IMODE(file.stat().st_mode) & 0o077:
            file.chmod(0o600)


class _Closable(Protocol):
    def close(self) -> None: ...


C = TypeVar("C", bound=_Closable)


class ThreadedConnections(Generic[C]):
    """One writer thread with its connection, and reader threads each with its own:
    what both state databases hold, and how they let it go."""

    def __init__(self) -> None:
        self._writer: ThreadPoolExecutor | None = None
        self._write_conn: C | None = None
        self._readers = threading.local()
        self._reader_pool: ThreadPoolExecutor | None = None
        self._reader_conns: list[C] = []
        self._lock = threading.Lock()

    async def close(self) -> None:
        """Stop the threads and close every connection."""
        if self._writer is not None:
            conn = self._write_conn
            if conn is not None:
                await asyncio.get_running_loop().run_in_executor(self._writer, conn.close)
            self._writer.shutdown(wait=True)
            self._writer = None
            self._write_conn = None
        if self._reader_pool is not None:
            self._reader_pool.shutdown(wait=True)
            self._reader_pool = None
        with self._lock:
            for conn in self._reader_conns:
                conn.close()
            self._reader_conns.clear()


class SqliteDatabase(ThreadedConnections[sqlite3.Connection]):
    """One SQLite file: a writer thread and per-thread reader connections."""

    dialect: Dialect = "sqlite"

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path

    @property
    def label(self) -> str:
        """The file's path."""
        return str(self.path)

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        for pragma in _PRAGMAS:
            conn.execute(pragma)
        conn.row_factory = sqlite3.Row
        return conn

    async def open(self, *, migrate: bool = True) -> None:
        """Create the file (and its folder, both private), start the writer thread and
        bring the schema to this version's (``migrate=False``: leave it, e.g. to report it)."""
        _create_private(self.path)
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sqlite-writer")
        self._reader_pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="sqlite-reader")
        loop = asyncio.get_running_loop()
        try:
            self._write_conn = await loop.run_in_executor(self._writer, self._connect)
        except sqlite3.Error as exc:
            raise StoreUnavailable(f"cannot open {self.path}: {exc}") from exc
        if migrate:
            await self.migrate()

    async def write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn(conn)`` in one transaction on the writer thread."""
        if self._writer is None or self._write_conn is None:
            raise StoreUnavailable("database is not open")
        conn = self._write_conn

        def run() -> T:
            conn.execute("BEGIN IMMEDIATE")
            try:
                result = fn(conn)
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return result

        return await self._call(self._writer, run)

    async def read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn(conn)`` on a reader connection (sees the last commit)."""
        if self._reader_pool is None:
            raise StoreUnavailable("database is not open")

        def run() -> T:
            conn: sqlite3.Connection | None = getattr(self._readers, "conn", None)
            if conn is None:
                conn = self._connect()
                self._readers.conn = conn
                with self._lock:
                    self._reader_conns.append(conn)
            return fn(conn)

        return await self._call(self._reader_pool, run)

    async def migrate(self, target: int | None = None) -> migrations.UpgradeResult:
        """Apply the pending migrations (idempotent: nothing to do at the latest)."""
        if self._writer is None or self._write_conn is None:
            raise StoreUnavailable("database is not open")
        conn = self._write_conn
        return await self._call(self._writer, lambda: migrations.upgrade(conn, target))

    async def schema_version(self) -> int:
        """The migration number the file is at (0: never migrated)."""
        return await self.read(migrations.current_version)

    async def _call(self, pool: ThreadPoolExecutor, fn: Callable[[], T]) -> T:
        try:
            return await asyncio.get_running_loop().run_in_executor(pool, fn)
        except sqlite3.OperationalError as exc:
            # "database is locked", "disk I/O error", "database or disk is full":
            # transient from our point of view; the caller keeps its batch and retries.
            raise StoreUnavailable(f"{self.path.name}: {exc}") from exc
        except sqlite3.Error as exc:
            raise StoreError(f"{self.path.name}: {exc}") from exc
