"""The state database on both backends: one migration chain, the same schema, and
what PostgreSQL adds for several gateways (a real throwaway cluster, tests/pg_fixture.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import psycopg
import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from gateway.cli import app
from gateway.errors import StoreError, StoreUnavailable
from gateway.settings import Settings
from gateway.state import migrations
from gateway.state.database import Database, SqliteDatabase
from gateway.state.factory import state_database
from gateway.state.postgres import PostgresDatabase, redact, to_pyformat
from tests.pg_fixture import StateDbFactory
from tests.test_state_migrations import sqlite_schema

#: Tables of the time-series store: created by the SQLite chain, never in PostgreSQL.
STORE_TABLES = {
    "readings",
    "rollup_1m",
    "rollup_1h",
    "rollup_dirty",
    "rollup_1d",
    "rollup_1d_dirty",
}


def _pg_schema(url: str) -> dict[str, set[str]]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT table_name, column_name FROM information_schema.columns"
            " WHERE table_schema = 'public' AND table_name != 'sumpwatch_schema'"
        ).fetchall()
    schema: dict[str, set[str]] = {}
    for table, column in rows:
        schema.setdefault(table, set()).add(column)
    return schema


def test_every_migration_has_a_postgresql_twin() -> None:
    missing = [f"{m.version:04d}_{m.name}" for m in migrations.available() if m.postgresql is None]
    assert missing == []


async def test_a_new_database_is_created_at_the_latest_version(
    empty_state_db_factory: StateDbFactory,
) -> None:
    db = empty_state_db_factory()
    await db.open()
    assert await db.schema_version() == migrations.latest()
    await db.close()


async def test_migrating_again_applies_nothing(state_db: Database) -> None:
    again = await state_db.migrate()
    assert again.applied == 0 and again.after == migrations.latest()


async def test_an_upgrade_can_stop_at_a_version_and_continue_later(
    empty_state_db_factory: StateDbFactory,
) -> None:
    db = empty_state_db_factory()
    await db.open(migrate=False)
    assert (await db.migrate(3)).after == 3
    assert await db.schema_version() == 3
    rest = await db.migrate()
    assert (rest.before, rest.after) == (3, migrations.latest())
    await db.close()


async def test_a_version_this_code_does_not_have_is_refused(state_db: Database) -> None:
    with pytest.raises(StoreError, match="no migration"):
        await state_db.migrate(migrations.latest() + 1)


async def test_postgresql_holds_every_state_table_and_column_sqlite_has(
    tmp_path: Path, pg_url: str
) -> None:
    for db in (SqliteDatabase(tmp_path / "s.db"), PostgresDatabase(pg_url)):
        await db.open()
        await db.close()
    on_sqlite, pg_schema = sqlite_schema(tmp_path / "s.db"), _pg_schema(pg_url)
    state_tables = {t: cols for t, cols in on_sqlite.items() if t not in STORE_TABLES}
    assert pg_schema == state_tables


async def test_two_gateways_migrating_at_once_apply_each_step_once(pg_url: str) -> None:
    first, second = PostgresDatabase(pg_url), PostgresDatabase(pg_url)
    await asyncio.gather(first.open(), second.open())
    assert await first.schema_version() == await second.schema_version() == migrations.latest()
    await asyncio.gather(first.close(), second.close())


async def test_a_postgresql_database_newer_than_the_code_is_refused(pg_url: str) -> None:
    db = PostgresDatabase(pg_url)
    await db.open()
    await db.write(lambda conn: conn.execute("UPDATE sumpwatch_schema SET version = version + 1"))
    with pytest.raises(StoreError, match="newer than this sumpwatch"):
        await db.migrate()
    await db.close()


async def test_usernames_match_in_any_case_on_postgresql_as_on_sqlite(state_db: Database) -> None:
    await state_db.write(
        lambda conn: conn.execute(
            "INSERT INTO users (username, role, password_hash, created_at)"
            " VALUES ('Ann', 'admin', 'x', 0)"
        )
    )
    rows = await state_db.read(
        lambda conn: conn.execute("SELECT username FROM users WHERE username = 'aNN'").fetchall()
    )
    assert [r["username"] for r in rows] == ["Ann"]


async def test_timestamps_order_as_bytes_whatever_the_databases_locale(state_db: Database) -> None:
    # SQLite's BINARY collation; PostgreSQL's columns say COLLATE "C". The test
    # databases default to ICU's en-US order, which ignores punctuation and case
    # first (it puts "a_a" before "a-Z" before "A.b").
    await state_db.write(
        lambda conn: conn.executemany(
            "INSERT INTO not_evaluated (id, site_id, node_id, start_ts, end_ts, count)"
            " VALUES (?, 's', 'n', ?, ?, 1)",
            [("b", "a-Z", "a-Z"), ("a", "a_a", "a_a"), ("c", "A.b", "A.b")],
        )
    )
    rows = await state_db.read(
        lambda conn: conn.execute("SELECT id FROM not_evaluated ORDER BY start_ts").fetchall()
    )
    assert [r[0] for r in rows] == ["c", "b", "a"]


def test_db_commands_report_and_upgrade_a_postgresql_database(tmp_path: Path, pg_url: str) -> None:
    config = tmp_path / "settings.toml"
    config.write_text(f'data_dir = "{tmp_path}"\n[store]\nstate_url = "{pg_url}"\n')
    runner = CliRunner()
    before = runner.invoke(app, ["db", "version", "--config", str(config)])
    assert before.exit_code == 0, before.output
    assert "schema version 0" in before.output
    result = runner.invoke(app, ["db", "upgrade", "--config", str(config)])
    assert result.exit_code == 0, result.output
    assert f"schema version 0 -> {migrations.latest()}" in result.output
    assert not (tmp_path / "sumpwatch.db").exists()  # the state went to PostgreSQL only


def test_the_state_url_selects_postgresql_and_its_absence_sqlite(tmp_path: Path) -> None:
    url = "postgresql://sw:secret@db.example:5432/sumpwatch"
    assert isinstance(state_database(tmp_path / "s.db", url), PostgresDatabase)
    assert isinstance(state_database(tmp_path / "s.db"), SqliteDatabase)


def test_a_state_url_that_is_not_postgresql_is_refused() -> None:
    with pytest.raises(ValidationError, match="postgresql://"):
        Settings(_env_file=None, store={"state_url": "mysql://db/sumpwatch"})  # type: ignore[call-arg]


def test_the_database_label_never_shows_the_password() -> None:
    label = redact("postgresql://sw:secret@db.example:5432/sumpwatch")
    assert label == "postgresql://sw:***@db.example:5432/sumpwatch"


def test_placeholders_become_psycopgs_and_literals_stay_as_written() -> None:
    sql = "SELECT '?', \"a?\" FROM t WHERE x = ? AND y LIKE '5%' AND z = ?"
    assert to_pyformat(sql) == "SELECT '?', \"a?\" FROM t WHERE x = %s AND y LIKE '5%%' AND z = %s"


async def test_a_dropped_session_fails_one_write_as_unavailable_then_reconnects(
    pg_url: str,
) -> None:
    db = PostgresDatabase(pg_url)
    await db.open()
    with psycopg.connect(pg_url, autocommit=True) as admin:
        # What a server restart or a failover does to every open session.
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid != pg_backend_pid()"
        )
    insert = "INSERT INTO node_status VALUES ('elm-12', 'pit', 1, 0)"
    with pytest.raises(StoreUnavailable):
        await db.write(lambda conn: conn.execute(insert))
    await db.write(lambda conn: conn.execute(insert))  # reconnected
    assert (
        await db.read(lambda conn: conn.execute("SELECT COUNT(*) FROM node_status").fetchone()[0])
        == 1
    )
    await db.close()
