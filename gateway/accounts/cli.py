"""``sumpwatch user``: add accounts, list them, reset passwords, make API tokens.

Mounted by the main CLI with ``app.add_typer(user_app, name="user")``. Passwords
are read from a hidden prompt or from stdin (``--password-stdin``), never from a
command-line argument, which would land in shell history and ``ps`` output.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, TypeVar

import typer
from rich.console import Console
from rich.table import Table

from gateway.accounts.models import Role
from gateway.accounts.repository import AccountStore
from gateway.accounts.secret import resolve_secret_key
from gateway.errors import SumpWatchError
from gateway.registry import load_registry
from gateway.settings import Settings, load_settings
from gateway.state.factory import state_database

T = TypeVar("T")

user_app = typer.Typer(help="Accounts: homeowners, public works, admins; API tokens.")
out = Console()
err = Console(stderr=True)

ConfigOpt = Annotated[
    Path | None, typer.Option("--config", "-c", help="Settings TOML file (docs/configuration.md)")
]


def _run(config: Path | None, action: Callable[[AccountStore, Settings], Awaitable[T]]) -> T:
    settings = load_settings(config)

    async def go() -> T:
        db = state_database(settings.sqlite_file, settings.store.state_url)
        await db.open()
        try:
            store = AccountStore(db, resolve_secret_key(settings.api, settings.data_dir))
            await store.open()
            return await action(store, settings)
        finally:
            await db.close()

    try:
        return asyncio.run(go())
    except SumpWatchError as exc:
        err.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(1) from exc


def _password(from_stdin: bool) -> str:
    if from_stdin:
        return sys.stdin.readline().rstrip("\n")
    if not sys.stdin.isatty():
        # typer.prompt would read (or hang on) a pipe and echo nothing useful.
        err.print(
            "[red]error:[/red] no terminal to ask for the password; pipe it in with "
            "--password-stdin, e.g. printf '%s\\n' \"$PW\" | "
            "sumpwatch user add ... --password-stdin"
        )
        raise typer.Exit(2)
    value: str = typer.prompt("Password", hide_input=True, confirmation_prompt=True)
    return value


def _check_scope(settings: Settings, sites: list[str], jurisdictions: list[str]) -> None:
    registry = load_registry(settings.sites_file)
    unknown = [s for s in sites if s not in registry]
    known_j = {s.jurisdiction for s in registry}
    unknown += [j for j in jurisdictions if j not in known_j]
    if unknown:
        err.print(f"[red]error:[/red] not in the site registry: {', '.join(unknown)}")
        raise typer.Exit(1)


@user_app.command("add")
def add(
    username: str,
    role: Annotated[Role, typer.Option(help="homeowner, public_works or admin")],
    site: Annotated[list[str] | None, typer.Option(help="A homeowner's site id (repeat)")] = None,
    jurisdiction: Annotated[
        list[str] | None, typer.Option(help="A public-works jurisdiction (repeat)")
    ] = None,
    name: Annotated[str, typer.Option(help="Display name")] = "",
    password_stdin: Annotated[bool, typer.Option(help="Read the password from stdin")] = False,
    config: ConfigOpt = None,
) -> None:
    """Create an account."""
    sites, juris = site or [], jurisdiction or []
    _check_scope(load_settings(config), sites, juris)
    pw = _password(password_stdin)

    async def action(store: AccountStore, settings: Settings) -> None:
        user = await store.add_user(
            username, pw, role, site_ids=sites, jurisdictions=juris, display_name=name
        )
        out.print(f"created {user.role.value} {user.username!r}")

    _run(config, action)


@user_app.command("list")
def list_users(config: ConfigOpt = None) -> None:
    """List the accounts and their scope."""

    async def action(store: AccountStore, settings: Settings) -> None:
        table = Table("username", "role", "sites", "jurisdictions", "disabled")
        for u in await store.users():
            table.add_row(
                u.username,
                u.role.value,
                ", ".join(u.site_ids),
                ", ".join(u.jurisdictions),
                "yes" if u.disabled else "",
            )
        out.print(table)

    _run(config, action)


@user_app.command("passwd")
def passwd(
    username: str,
    password_stdin: Annotated[bool, typer.Option(help="Read the password from stdin")] = False,
    config: ConfigOpt = None,
) -> None:
    """Set a new password (ends the user's sessions)."""
    pw = _password(password_stdin)

    async def action(store: AccountStore, settings: Settings) -> None:
        await store.set_password(username, pw)
        out.print(f"password of {username!r} changed; their sessions ended")

    _run(config, action)


@user_app.command("token")
def token(
    username: str,
    name: Annotated[str, typer.Option(help="What the token is for")] = "integration",
    config: ConfigOpt = None,
) -> None:
    """Create an API token for an account and print it (shown once)."""

    async def action(store: AccountStore, settings: Settings) -> None:
        user = await store.get_user(username)
        if user is None:
            err.print(f"[red]error:[/red] no user {username!r}")
            raise typer.Exit(1)
        secret, meta = await store.create_token(user, name)
        err.print(f"token {meta.id} ({name}) for {username}; it is shown only now:")
        print(secret)  # stdout alone, so scripts can capture it

    _run(config, action)
