"""``sumpwatch db``: show and upgrade the state database's schema version.

The state database is the SQLite file or, with ``state_url``, PostgreSQL. The
gateway upgrades the schema itself at start; ``db upgrade`` does it ahead of a
deploy (e.g. from a release job, after a backup) and says what it did.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from gateway.errors import SumpWatchError
from gateway.settings import Settings, load_settings
from gateway.state import migrations
from gateway.state.database import Database
from gateway.state.factory import state_database

db_app = typer.Typer(help="The state database: schema version and upgrades.")
out = Console(soft_wrap=True)  # paths are long; never wrap them
err = Console(stderr=True)

ConfigOpt = Annotated[
    Path | None, typer.Option("--config", "-c", help="Settings TOML file (docs/configuration.md)")
]


def _state_database(settings: Settings) -> Database:
    return state_database(settings.sqlite_file, settings.store.state_url)


async def _upgrade(db: Database, target: int | None) -> migrations.UpgradeResult:
    await db.open(migrate=False)
    try:
        return await db.migrate(target)
    finally:
        await db.close()


async def _version(db: Database) -> int:
    await db.open(migrate=False)
    try:
        return await db.schema_version()
    finally:
        await db.close()


@db_app.command("upgrade")
def upgrade(
    config: ConfigOpt = None,
    to: Annotated[int | None, typer.Option(help="Stop at this version (default: latest)")] = None,
) -> None:
    """Apply the pending schema migrations to the configured state database."""
    db = _state_database(load_settings(config))
    try:
        result = asyncio.run(_upgrade(db, to))
    except SumpWatchError as exc:
        err.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(1) from exc
    if result.stamped_legacy:
        out.print("unversioned database from before migrations: completed and stamped")
    out.print(f"{db.label}: schema version {result.before} -> {result.after}")


@db_app.command("version")
def version(config: ConfigOpt = None) -> None:
    """Print the schema version of the configured state database and the latest known."""
    db = _state_database(load_settings(config))
    try:
        current = asyncio.run(_version(db))
    except SumpWatchError as exc:
        err.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(1) from exc
    out.print(f"{db.label}: schema version {current} (this sumpwatch: {migrations.latest()})")
