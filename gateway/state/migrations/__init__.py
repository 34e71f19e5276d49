"""Numbered schema migrations for the SQLite state database.

A migration is a file in this folder named ``NNNN_what.sql`` (statements separated
by ``;``) or ``NNNN_what.py`` (a module with ``upgrade(conn: sqlite3.Connection)``,
for a change SQL alone cannot express, e.g. rewriting JSON). Numbers start at 1 and
have no gaps. The database records the last one applied in ``PRAGMA user_version``;
each migration runs in its own transaction together with the bump of that number,
so a crash leaves the database at the previous version, never half way.

A shipped migration is never edited: a schema change is the next number. Plain
numbered files were chosen over Alembic so the same steps can later be written out
as Alembic revisions (or run by a small PostgreSQL runner) one to one.

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

Step = Callable[[sqlite3.Connection], None]


@dataclass(frozen=True, slots=True)
class Migration:
    """One numbered step: SQL text or a Python ``upgrade`` function."""

    version: int
    name: str
    sql: str = ""
    step: Step | None = None

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


def _load(filename: str, version: int, stem: str, kind: str) -> Migration:
    if kind == "sql":
        text = resources.files(__package__).joinpath(filename).read_text(encoding="utf-8")
        return Migration(version, stem, sql=text)
    module = importlib.import_module(f"{__package__}.{filename[:-3]}")
    step: Step = module.upgrade
    return Migration(version, stem, step=step)


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


def upgrade(conn: sqlite3.Connection, target: int | None = None) -> UpgradeResult:
    """Apply every pending migration up to ``target`` (default: the latest), each in
    its own transaction. ``conn`` must be in autocommit mode (``isolation_level=None``)."""
    migrations = available()
    goal = len(migrations) if target is None else target
    before = current_version(conn)
    if before > len(migrations):
        raise StoreError(
            f"database schema version {before} is newer than this sumpwatch knows "
            f"({len(migrations)}): upgrade sumpwatch, or restore a backup"
        )
    if goal < before:
        raise StoreError(f"cannot downgrade the database from version {before} to {goal}")
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
