"""The state database's numbered migrations (PRAGMA user_version) on real SQLite files."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gateway.cli import app
from gateway.errors import StoreError
from gateway.state import migrations
from gateway.state.database import SqliteDatabase
from gateway.state.findings import FindingRepository
from gateway.store.rollups import rollup_columns
from gateway.store.sqlite import _COLUMNS as READING_COLUMNS

LEGACY_SCHEMA = Path(__file__).parent / "data" / "schema_4b01b62.sql"


def _legacy_database(path: Path) -> None:
    """A database as a gateway from before migrations left it, with one finding."""
    conn = sqlite3.connect(path)
    conn.executescript(LEGACY_SCHEMA.read_text())
    conn.execute(
        "INSERT INTO findings VALUES ('f1', 'sanitary_discharge', 'elm-12', 'critical',"
        " 'violation', 'Sump water into the sanitary sewer', '2026-12-01T06:00:00.000000Z',"
        " '2026-12-01T06:00:00.000000Z', NULL, '[\"homeowner\"]', '{}', '[]', 'fix it')"
    )
    conn.commit()
    conn.close()


def _user_version(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute("PRAGMA user_version").fetchone()[0])
    finally:
        conn.close()


def sqlite_schema(path: Path) -> dict[str, set[str]]:
    """Each table of a SQLite file with its column names."""
    conn = sqlite3.connect(path)
    try:
        tables = [
            r[0]
            for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            if not r[0].startswith("sqlite_")
        ]
        return {t: {r[1] for r in conn.execute(f"PRAGMA table_info({t})")} for t in tables}
    finally:
        conn.close()


def test_migrations_are_numbered_from_one_without_gaps() -> None:
    versions = [m.version for m in migrations.available()]
    assert versions == list(range(1, migrations.latest() + 1))


async def test_a_new_database_is_created_at_the_latest_version(tmp_path: Path) -> None:
    db = SqliteDatabase(tmp_path / "new.db")
    await db.open()
    assert await db.schema_version() == migrations.latest()
    await db.close()


async def test_opening_twice_applies_nothing_the_second_time(tmp_path: Path) -> None:
    db = SqliteDatabase(tmp_path / "s.db")
    await db.open()
    again = await db.migrate()
    assert again.applied == 0 and again.after == migrations.latest()
    await db.close()


async def test_an_unversioned_database_is_stamped_and_keeps_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "legacy.db"
    _legacy_database(path)
    assert _user_version(path) == 0
    db = SqliteDatabase(path)
    await db.open(migrate=False)
    result = await db.migrate()
    assert result.stamped_legacy and result.before == 0
    assert result.after == migrations.latest()
    finding = await FindingRepository(db).get("f1")
    assert finding is not None and finding.level == "violation"
    await db.close()
    assert _user_version(path) == migrations.latest()


async def test_an_upgraded_legacy_database_has_the_same_schema_as_a_new_one(
    tmp_path: Path,
) -> None:
    _legacy_database(tmp_path / "legacy.db")
    for name in ("legacy.db", "new.db"):
        db = SqliteDatabase(tmp_path / name)
        await db.open()
        await db.close()
    assert sqlite_schema(tmp_path / "legacy.db") == sqlite_schema(tmp_path / "new.db")


async def test_a_legacy_table_missing_a_column_is_refused_with_its_name(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE node_status (site_id TEXT, node_id TEXT, online INTEGER)")
    conn.close()
    db = SqliteDatabase(path)
    await db.open(migrate=False)
    with pytest.raises(StoreError, match="node_status lacks \\['changed_at'\\]"):
        await db.migrate()
    assert await db.schema_version() == 0  # the failed step left nothing behind
    await db.close()


async def test_a_database_from_a_newer_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "future.db"
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {migrations.latest() + 1}")
    conn.close()
    db = SqliteDatabase(path)
    with pytest.raises(StoreError, match="newer than this sumpwatch"):
        await db.open()
    await db.close()


async def test_the_schema_has_every_column_the_time_series_store_writes(tmp_path: Path) -> None:
    # Adding a contract field changes what the store writes; this fails until a
    # migration adds the column (migration 1 itself is frozen).
    db = SqliteDatabase(tmp_path / "s.db")
    await db.open()
    await db.close()
    schema = sqlite_schema(tmp_path / "s.db")
    assert set(READING_COLUMNS) <= schema["readings"]
    assert set(rollup_columns()) <= schema["rollup_1m"]
    assert set(rollup_columns()) <= schema["rollup_1h"]


def test_db_upgrade_command_reports_the_versions(tmp_path: Path) -> None:
    path = tmp_path / "legacy.db"
    _legacy_database(path)
    config = tmp_path / "settings.toml"
    config.write_text(f'data_dir = "{tmp_path}"\n[store]\nsqlite_path = "{path}"\n')
    runner = CliRunner()
    before = runner.invoke(app, ["db", "version", "--config", str(config)])
    assert before.exit_code == 0, before.output
    assert "schema version 0" in before.output
    result = runner.invoke(app, ["db", "upgrade", "--config", str(config)])
    assert result.exit_code == 0, result.output
    assert f"schema version 0 -> {migrations.latest()}" in result.output
    assert _user_version(path) == migrations.latest()


def test_migration_steps_are_split_into_complete_statements() -> None:
    statements = migrations.split_statements("-- a comment; with a semicolon\nSELECT 1;\nSELECT 2")
    assert statements == ["SELECT 1", "SELECT 2"]
