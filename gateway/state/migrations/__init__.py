"""Numbered schema migrations of the state database, for SQLite and PostgreSQL.

A migration is a file in this folder named ``NNNN_what.sql`` (statements separated
by ``;``) or ``NNNN_what.py`` (a module with ``upgrade(conn: sqlite3.Connection)``,
for a change SQL alone cannot express, e.g. rewriting JSON). Numbers start at 1 and
have no gaps. The database records the last one applied (SQLite: ``PRAGMA
user_version``; PostgreSQL: the table ``sumpwatch_schema``); each migration runs in
its own transaction together with the bump of that number, so a crash leaves the
database at the previous version, never half way.

One chain serves both backends: step N has the same number and meaning on each.
Its PostgreSQL text is the twin file ``NNNN_what.postgresql.sql`` (PostgreSQL's
types, triggers and collations differ from SQLite's, so the twin is written out
rather than translated); a step that only touches the time-series tables, which
never live in PostgreSQL, has a twin with no statements. A step without a twin is
refused on PostgreSQL by name (:func:`postgresql_text`), never guessed.

A shipped migration is never edited: a schema change is the next number.

Version 0 with our tables present is a database from before migrations existed:
migration 1 is that schema with ``IF NOT EXISTS`` everywhere, so it completes such
a database and stamps it; :func:`upgrade` then checks that every column the code
expects is there, and refuses (clearly) a database it cannot vouch for.
"""

from __future__ import annotations

import importlib
import logging
import re
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources

from gateway.errors import StoreError

log = logging.getLogger(__name__)

_NAME = re.compile(r"^(\d{4})_(\w+)\.(sql|py)$")
_PG_SUFFIX = ".postgresql.sql"

Step = Callable[[sqlite3.Connection], None]


@dataclass(frozen=True, slots=True)
class Migration:
    """One numbered step: SQL text or a Python ``upgrade`` function."""

    version: int
    name: str
    sql: str = ""
    step: Step | None = None
    #: The PostgreSQL twin's text (None: the step has no PostgreSQL form).
    postgresql: str | None = None

    def apply(self, conn: sqlite3.Connection) -> None:
        """Run the step on ``conn`` (inside the caller's transaction)."""
        if self.step is not None:
            self.step(conn)
        for statement in split_statements(self.sql):
            conn.execute(statement)


@dataclass(frozen=True, slots=True)
class UpgradeResult:
    """What :func:`upgrade` did: the versions before and after, and whether an
    unversioned (pre-migrations) database was stamped."""

    before: int
    after: int
    stamped_legacy: bool = False

    @property
    def applied(self) -> int:
        """How many migrations ran."""
        return self.after - self.before


def split_statements(sql: str) -> list[str]:
    """Statements of a migration file, ``--`` comment lines dropped. A ``;`` inside a
    statement (a trigger body) does not split it: pieces are joined until SQLite
    says the statement is complete."""
    lines = [line for line in sql.splitlines() if not line.lstrip().startswith("--")]
    out: list[str] = []
    buffer = ""
    for piece in "\n".join(lines).split(";"):
        buffer += piece + ";"
        if sqlite3.complete_statement(buffer):
            if buffer.strip(" \n;"):
                out.append(buffer.strip()[:-1].strip())
            buffer = ""
    if buffer.strip(" \n;"):
        raise StoreError(f"migration statement is incomplete: {buffer.strip()[:60]!r}")
    return out


def _twin(version: int, stem: str) -> str | None:
    twin = resources.files(__package__).joinpath(f"{version:04d}_{stem}{_PG_SUFFIX}")
    return twin.read_text(encoding="utf-8") if twin.is_file() else None


def _load(filename: str, version: int, stem: str, kind: str) -> Migration:
    postgresql = _twin(version, stem)
    if kind == "sql":
        text = resources.files(__package__).joinpath(filename).read_text(encoding="utf-8")
        return Migration(version, stem, sql=text, postgresql=postgresql)
    module = importlib.import_module(f"{__package__}.{filename[:-3]}")
    step: Step = module.upgrade
    return Migration(version, stem, step=step, postgresql=postgresql)


def postgresql_text(migration: Migration) -> str:
    """The step's PostgreSQL SQL; StoreError when it has no twin (a packaging bug:
    the schema on PostgreSQL would silently differ from SQLite's)."""
    if migration.postgresql is None:
        raise StoreError(
            f"migration {migration.version:04d}_{migration.name} has no PostgreSQL form: "
            f"add {migration.version:04d}_{migration.name}{_PG_SUFFIX} (empty when the step "
            "only touches the time-series tables)"
        )
    return migration.postgresql


def available() -> tuple[Migration, ...]:
    """Every migration shipped with this version, in order (gaps are a packaging bug)."""
    found: list[Migration] = []
    for entry in resources.files(__package__).iterdir():
        match = _NAME.match(entry.name)
        if match is not None:
            found.append(_load(entry.name, int(match.group(1)), match.group(2), match.group(3)))
    found.sort(key=lambda m: m.version)
    versions = [m.version for m in found]
    if versions != list(range(1, len(found) + 1)):
        raise StoreError(f"migrations must be numbered 1..N without gaps, found {versions}")
    return tuple(found)


def latest() -> int:
    """The schema version this code expects."""
    return len(available())


def current_version(conn: sqlite3.Connection) -> int:
    """The version recorded in the database (0: never migrated)."""
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def _tables(conn: sqlite3.Connection) -> set[str]:
    rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
    return {r[0] for r in rows if not r[0].startswith("sqlite_")}


def _columns(conn: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}


def _check_legacy_columns(conn: sqlite3.Connection, first: Migration) -> None:
    """After stamping a pre-migrations database: every column of migration 1 exists.

    ``CREATE TABLE IF NOT EXISTS`` skips a table that exists in an older shape, so
    a column missing here would otherwise fail later in a query, far from the cause.
    """
    reference = sqlite3.connect(":memory:")
    try:
        first.apply(reference)
        for table in _tables(reference):
            missing = _columns(reference, table) - _columns(conn, table)
            if missing:
                raise StoreError(
                    f"unversioned database: table {table} lacks {sorted(missing)}; "
                    "it predates the schema migration 1 describes and cannot be upgraded"
                )
    finally:
        reference.close()


def check_target(before: int, target: int | None, known: int) -> int:
    """The version to reach from ``before``; StoreError for a database newer than this
    code or a request to go down (both backends refuse the same way)."""
    goal = known if target is None else target
    if before > known:
        raise StoreError(
            f"database schema version {before} is newer than this sumpwatch knows "
            f"({known}): upgrade sumpwatch, or restore a backup"
        )
    if goal < before:
        raise StoreError(f"cannot downgrade the database from version {before} to {goal}")
    if goal > known:
        raise StoreError(f"no migration {goal}: this sumpwatch knows up to {known}")
    return goal


def upgrade(conn: sqlite3.Connection, target: int | None = None) -> UpgradeResult:
    """Apply every pending migration up to ``target`` (default: the latest), each in
    its own transaction. ``conn`` must be in autocommit mode (``isolation_level=None``)."""
    migrations = available()
    before = current_version(conn)
    goal = check_target(before, target, len(migrations))
    legacy = before == 0 and bool(_tables(conn))
    if legacy:
        log.warning("state: unversioned database from before migrations: stamping version 1")
    for migration in migrations[before:goal]:
        conn.execute("BEGIN IMMEDIATE")
        try:
            migration.apply(conn)
            if legacy and migration.version == 1:
                _check_legacy_columns(conn, migration)
            # user_version is part of the transaction: it commits (or not) with the step.
            conn.execute(f"PRAGMA user_version = {migration.version:d}")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        log.info("state: applied migration %04d_%s", migration.version, migration.name)
    return UpgradeResult(before, max(before, goal), stamped_legacy=legacy)
