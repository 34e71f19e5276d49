"""``sumpwatch db``: show and upgrade the state database's schema version.

The gateway upgrades the schema itself at start; ``db upgrade`` does it ahead of a
deploy (e.g. from a release job, after a backup) and says what it did.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from gateway.errors import SumpWatchError
from gateway.settings import load_settings
from gateway.state import migrations
from gateway.state.database import SqliteDatabase

db_app = typer.Typer(help="The state database: schema version and upgrades.")
out = Console(soft_wrap=True)  # paths are long; never wrap them
err = Console(stderr=True)

ConfigOpt = Annotated[
    Path | None, typer.Option("--config", "-c", help="Settings TOML file (docs/configuration.md)")
]


async def _upgrade(path: Path, target: int | None) -> migrations.UpgradeResult:
    db = SqliteDatabase(path)
    await db.open(migrate=False)
    try:
        return await db.migrate(target)
    finally:
        await db.close()


async def _version(path: Path) -> int:
    db = SqliteDatabase(path)
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
    """Apply the pending schema migrations to the configured SQLite file."""
    path = load_settings(config).sqlite_file
    try:
        result = asyncio.run(_upgrade(path, to))
    except SumpWatchError as exc:
        err.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(1) from exc
    if result.stamped_legacy:
        out.print("unversioned database from before migrations: completed and stamped")
    out.print(f"{path}: schema version {result.before} -> {result.after}")


@db_app.command("version")
def version(config: ConfigOpt = None) -> None:
    """Print the schema version of the configured SQLite file and the latest known."""
    path = load_settings(config).sqlite_file
    try:
        current = asyncio.run(_version(path))
    except SumpWatchError as exc:
        err.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(1) from exc
    out.print(f"{path}: schema version {current} (this sumpwatch: {migrations.latest()})")
