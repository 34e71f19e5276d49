"""The state database on PostgreSQL (psycopg 3), for gateways and web servers on
several hosts sharing one state.

Shaped like :class:`gateway.state.database.SqliteDatabase` so repositories do not
know which one they have: callbacks run in threads on synchronous connections, one
writer connection per process (writes of one process stay serialised, as on SQLite;
other processes' writes interleave, which is what the outbox claim and the advisory
locks are for) and a connection per reader thread. :class:`PgConnection` takes the
repositories' SQLite-style ``?`` placeholders and answers rows that read like
``sqlite3.Row``.

The schema comes from the same numbered chain as SQLite's (each step's
``.postgresql.sql`` twin); the version is the one row of ``sumpwatch_schema``, and
each step takes a transaction-scoped advisory lock, so two gateways starting at
once apply every step exactly once.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg.rows import RowMaker

from gateway.errors import StoreError, StoreUnavailable
from gateway.state import migrations
from gateway.state.database import Cursor, Dialect, IntegrityError, ThreadedConnections

T = TypeVar("T")
log = logging.getLogger(__name__)

#: Key of the advisory lock every migration step holds (any fixed 64-bit number;
#: this one spells "sumpwatc" in ASCII, so it is recognisable in pg_locks).
MIGRATION_LOCK = 0x73756D7077617463

_SCHEMA_TABLE = """CREATE TABLE IF NOT EXISTS sumpwatch_schema (
    only_row BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (only_row),
    version INTEGER NOT NULL
)"""


def redact(url: str) -> str:
    """The URL without its password, for logs and command output."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port is not None:
        host += f":{parts.port}"
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))


@functools.lru_cache(maxsize=1024)
def to_pyformat(sql: str) -> str:
    """``?`` placeholders as psycopg's ``%s`` (a literal ``%`` doubled); a ``?`` inside
    a quoted string or identifier is left as it is."""
    out: list[str] = []
    quote: str | None = None
    for char in sql:
        if quote is not None:
            if char == quote:
                quote = None
        elif char in "'\"":
            quote = char
        elif char == "?":
            out.append("%s")
            continue
        out.append("%%" if char == "%" else char)
    return "".join(out)


class PgRow:
    """One result row, by column name (the first of that name, as ``sqlite3.Row``) or
    by position."""

    __slots__ = ("_index", "_values")

    def __init__(self, values: Sequence[Any], index: dict[str, int]) -> None:
        self._values = tuple(values)
        self._index = index

    def __getitem__(self, key: int | str) -> Any:
        if isinstance(key, str):
            return self._values[self._index[key]]
        return self._values[key]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def keys(self) -> list[str]:
        """The column names, in order."""
        return list(self._index)


def pg_row(cursor: psycopg.Cursor[Any]) -> RowMaker[PgRow]:
    """psycopg row factory making :class:`PgRow`."""
    index: dict[str, int] = {}
    for i, column in enumerate(cursor.description or ()):
        index.setdefault(column.name, i)
    return lambda values: PgRow(values, index)


class PgConnection:
    """A psycopg connection speaking the repositories' dialect (:class:`Connection`)."""

    def __init__(self, conn: psycopg.Connection[PgRow]) -> None:
        self.raw = conn

    def execute(self, sql: str, parameters: Sequence[Any] = (), /) -> Cursor:
        """Run one statement with ``?`` placeholders."""
        try:
            return self.raw.execute(to_pyformat(sql), tuple(parameters))
        except psycopg.IntegrityError as exc:
            raise IntegrityError(str(exc)) from exc

    def executemany(self, sql: str, parameters: Iterable[Sequence[Any]], /) -> Cursor:
        """Run one statement once per parameter row."""
        cursor = self.raw.cursor()
        try:
            cursor.executemany(to_pyformat(sql), [tuple(p) for p in parameters])
        except psycopg.IntegrityError as exc:
            raise IntegrityError(str(exc)) from exc
        return cursor


def connect(url: str) -> psycopg.Connection[PgRow]:
    """An autocommit connection (transactions are explicit) making :class:`PgRow`."""
    return psycopg.connect(url, autocommit=True, row_factory=pg_row, connect_timeout=10)


def current_version(conn: psycopg.Connection[Any]) -> int:
    """The version recorded in the database (0: never migrated)."""
    exists = conn.execute("SELECT to_regclass('sumpwatch_schema') IS NOT NULL").fetchone()
    if exists is None or not exists[0]:
        return 0
    row = conn.execute("SELECT version FROM sumpwatch_schema").fetchone()
    return 0 if row is None else int(row[0])


def _apply(conn: psycopg.Connection[Any], migration: migrations.Migration) -> bool:
    """Apply one step unless another process already did; True if this one did."""
    text = migrations.postgresql_text(migration)
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        conn.execute(_SCHEMA_TABLE)
        if current_version(conn) >= migration.version:
            return False
        if any(line.strip() and not line.lstrip().startswith("--") for line in text.splitlines()):
            # No parameters: psycopg sends the file as one simple query, so it may hold
            # several statements and dollar-quoted function bodies.
            conn.execute(text.encode())
        conn.execute(
            "INSERT INTO sumpwatch_schema (only_row, version) VALUES (TRUE, %s)"
            " ON CONFLICT (only_row) DO UPDATE SET version = excluded.version",
            (migration.version,),
        )
    return True


def upgrade(conn: psycopg.Connection[Any], target: int | None = None) -> migrations.UpgradeResult:
    """Apply every pending step up to ``target`` (default: the latest), each in its own
    transaction under the migration lock."""
    chain = migrations.available()
    before = current_version(conn)
    goal = migrations.check_target(before, target, len(chain))
    for migration in chain[before:goal]:
        if _apply(conn, migration):
            log.info("state: applied migration %04d_%s", migration.version, migration.name)
    return migrations.UpgradeResult(before, max(before, current_version(conn)))


class PostgresDatabase(ThreadedConnections[psycopg.Connection[PgRow]]):
    """State in PostgreSQL: a writer connection and per-thread reader connections."""

    dialect: Dialect = "postgresql"

    def __init__(self, url: str, *, readers: int = 4) -> None:
        super().__init__()
        self.url = url
        self._readers_max = readers

    @property
    def label(self) -> str:
        """The URL without its password."""
        return redact(self.url)

    async def open(self, *, migrate: bool = True) -> None:
        """Connect and bring the schema to this version's (``migrate=False``: leave it)."""
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pg-writer")
        self._reader_pool = ThreadPoolExecutor(
            max_workers=self._readers_max, thread_name_prefix="pg-reader"
        )
        self._write_conn = await self._call(self._writer, lambda: connect(self.url))
        if migrate:
            await self.migrate()

    def _writer_conn(self) -> psycopg.Connection[PgRow]:
        """The writer connection, reconnected if the server dropped it (a restart or
        a failover), so one outage does not need a gateway restart."""
        if self._write_conn is None or self._write_conn.closed:
            self._write_conn = connect(self.url)
        return self._write_conn

    def _reader_conn(self) -> psycopg.Connection[PgRow]:
        conn: psycopg.Connection[PgRow] | None = getattr(self._readers, "conn", None)
        if conn is None or conn.closed:
            conn = connect(self.url)
            self._readers.conn = conn
            with self._lock:
                self._reader_conns.append(conn)
        return conn

    async def write(self, fn: Callable[[PgConnection], T]) -> T:
        """Run ``fn(conn)`` in one transaction on the writer thread."""
        if self._writer is None:
            raise StoreUnavailable("database is not open")

        def run() -> T:
            conn = self._writer_conn()
            with conn.transaction():
                return fn(PgConnection(conn))

        return await self._call(self._writer, run)

    async def read(self, fn: Callable[[PgConnection], T]) -> T:
        """Run ``fn(conn)`` in a read-only transaction (one snapshot for all its queries)."""
        if self._reader_pool is None:
            raise StoreUnavailable("database is not open")

        def run() -> T:
            conn = self._reader_conn()
            with conn.transaction():
                conn.execute("SET TRANSACTION READ ONLY")
                return fn(PgConnection(conn))

        return await self._call(self._reader_pool, run)

    async def migrate(self, target: int | None = None) -> migrations.UpgradeResult:
        """Apply the pending migrations (idempotent; safe with other gateways at once)."""
        if self._writer is None:
            raise StoreUnavailable("database is not open")
        return await self._call(self._writer, lambda: upgrade(self._writer_conn(), target))

    async def schema_version(self) -> int:
        """The migration number the database is at (0: never migrated)."""
        if self._writer is None:
            raise StoreUnavailable("database is not open")
        return await self._call(self._writer, lambda: current_version(self._writer_conn()))

    async def _call(self, pool: ThreadPoolExecutor, fn: Callable[[], T]) -> T:
        try:
            return await asyncio.get_running_loop().run_in_executor(pool, fn)
        except psycopg.OperationalError as exc:
            # The server is down, restarting or unreachable: transient for the caller,
            # which keeps its batch and retries (as SQLite's "database is locked").
            raise StoreUnavailable(f"{self.label}: {exc}") from exc
        except psycopg.Error as exc:
            raise StoreError(f"{self.label}: {exc}") from exc
