"""The ``sumpwatch`` command line (typer)."""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
import uvicorn
from rich.console import Console

from gateway.accounts.cli import user_app
from gateway.cases.cli import amended_sites, case_app
from gateway.examples import EXAMPLE_SITES, EXAMPLE_USERS
from gateway.provision import provision, provision_gateway, provision_homeassistant
from gateway.reports import cli as report_cli
from gateway.reports.sources import ReportSources
from gateway.rules import cli as rules_cli
from gateway.settings import (
    ApiSettings,
    HomeAssistantSettings,
    MqttSettings,
    Settings,
    load_settings,
)
from gateway.state.cli import db_app
from gateway.validate import shape_only

if TYPE_CHECKING:  # the broker module is imported by the demo only
    from gateway.broker import BrokerProcess

app = typer.Typer(
    name="sumpwatch",
    help="SumpWatch: sump-pump monitoring gateway, simulator, rules, alerts and reports.",
    no_args_is_help=True,
    add_completion=False,
    # Plain click help (not rich panels): it wraps at words at any terminal width and
    # never cuts off a "[default: ...]" (issue 20.12). Sub-apps inherit it.
    rich_markup_mode=None,
    # Use up to 100 columns on a wide terminal (click stops at 80 by default and then
    # cuts the command list's descriptions short); narrower terminals wrap.
    context_settings={"max_content_width": 100},
)
console = Console(stderr=True)

ConfigOpt = Annotated[
    Path | None,
    typer.Option("--config", "-c", help="Settings TOML file (see docs/configuration.md)"),
]


def _logging(verbose: bool) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)-7s %(name)s: %(message)s",
    )


def serve(settings: Settings, *, log_level: str = "info", ingest: bool = True) -> None:
    """Run the gateway and its API in this process until SIGINT/SIGTERM (``ingest``
    False: the API and pages only)."""
    from gateway.app import create_app, server_config

    # Everything the process writes (database, -wal/-shm, spool, reports) is for
    # its own user only: mode 600 files, 700 folders.
    os.umask(0o077)
    uvicorn.Server(server_config(create_app(settings, ingest=ingest), settings, log_level)).run()


@app.command()
def gateway(
    config: ConfigOpt = None,
    mqtt_host: Annotated[str | None, typer.Option(help="Broker host")] = None,
    mqtt_port: Annotated[int | None, typer.Option(help="Broker port")] = None,
    sites: Annotated[Path | None, typer.Option(help="Site registry TOML")] = None,
    data_dir: Annotated[Path | None, typer.Option(help="Folder for the SQLite store")] = None,
    api_port: Annotated[int | None, typer.Option(help="HTTP port of the API")] = None,
    trusted_proxy: Annotated[
        list[str] | None,
        typer.Option(
            help="A reverse proxy (IP or network) whose X-Forwarded-For/-Proto to believe "
            "(repeat; default none)"
        ),
    ] = None,
    no_api: Annotated[
        bool,
        typer.Option(
            "--no-api",
            help="Ingestion only: no HTTP (web servers elsewhere share its PostgreSQL state)",
        ),
    ] = False,
    standby: Annotated[
        bool,
        typer.Option(
            "--standby",
            help="With --no-api and a PostgreSQL state: hold no shard until one's lease "
            "runs out, then take it over",
        ),
    ] = False,
    verbose: bool = False,
) -> None:
    """Run the ingestion gateway with its HTTP API (one process), or without it."""
    from gateway.accounts.secret import resolve_secret_key
    from gateway.errors import ConfigError

    _logging(verbose)
    settings = load_settings(
        config,
        mqtt={"host": mqtt_host, "port": mqtt_port},
        sites_file=sites,
        data_dir=data_dir,
        api={"port": api_port, "trusted_proxies": trusted_proxy or None},
    )
    if no_api or standby:
        _ingest_only(settings, standby=standby)
        return
    if settings.api.auth_enabled:
        try:
            resolve_secret_key(settings.api, settings.data_dir)
        except ConfigError as exc:
            console.print(f"[red]error:[/red] {exc}")
            raise typer.Exit(2) from exc
    serve(settings)


@app.command()
def api(
    config: ConfigOpt = None,
    api_port: Annotated[int | None, typer.Option(help="HTTP port")] = None,
    trusted_proxy: Annotated[
        list[str] | None,
        typer.Option(help="A reverse proxy (IP or network) whose X-Forwarded-* to believe"),
    ] = None,
    verbose: bool = False,
) -> None:
    """Serve the API and pages without ingesting, over the state the gateways keep in
    PostgreSQL (state_url) and their time-series store; run any number of them."""
    from gateway.accounts.secret import resolve_secret_key
    from gateway.errors import ConfigError

    _logging(verbose)
    settings = load_settings(
        config, api={"port": api_port, "trusted_proxies": trusted_proxy or None}
    )
    if settings.api.auth_enabled:
        try:
            resolve_secret_key(settings.api, settings.data_dir)
        except ConfigError as exc:
            console.print(f"[red]error:[/red] {exc}")
            raise typer.Exit(2) from exc
    serve(settings, ingest=False)


def _ingest_only(settings: Settings, *, standby: bool) -> None:
    """``gateway --no-api``: no sessions to sign, so no secret key is needed."""
    import asyncio

    from gateway.errors import ConfigError
    from gateway.runtime import run_until_signalled

    os.umask(0o077)  # as serve(): the files it writes are its user's only
    try:
        asyncio.run(run_until_signalled(settings, standby=standby))
    except ConfigError as exc:
        console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from exc


def _port_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _clear_stale(data_dir: Path) -> None:
    """Exit cleanly on signals, and stop what a killed demo on this data dir left running."""
    from gateway.demo_lifecycle import exit_on_signals, stop_stale_children

    exit_on_signals()
    data_dir.mkdir(parents=True, exist_ok=True)
    stale = stop_stale_children(data_dir)
    if stale:
        console.print(f"stopped {len(stale)} process(es) a killed demo left running: {stale}")


def _start_simulator(
    broker: BrokerProcess, sites: Path, homes: int, scenario: str, backfill: str, data_dir: Path
) -> subprocess.Popen[bytes]:
    """The demo's homes: ``sumpwatch simulate`` in its own process, on the demo broker."""
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gateway.cli",
            "simulate",
            "--sites",
            str(sites),
            "--homes",
            str(homes),
            "--host",
            broker.host,
            "--port",
            str(broker.port),
            "--scenario",
            scenario,
            *(["--backfill", backfill] if backfill not in ("", "0") else []),
            *_resume_after(data_dir),
        ],
        stdin=subprocess.DEVNULL,
    )


def _announce(broker: BrokerProcess, api_port: int, users: Path) -> None:
    """Where the demo is and how to sign in."""
    from gateway.accounts.seed import describe_seed, load_seed

    console.print(f"[bold green]SumpWatch demo[/]: http://127.0.0.1:{api_port}/  (Ctrl-C to stop)")
    console.print(
        f"Home Assistant: add the MQTT integration with broker {broker.host} port {broker.port};"
        " every home appears as a device (discovery prefix 'homeassistant', docs/home-assistant.md)"
    )
    console.print("Sign in as (demo accounts, from deploy/users.example.toml):")
    for line in describe_seed(load_seed(users)):
        console.print(f"  {line}")


def _stop_demo(sim: subprocess.Popen[bytes], broker: BrokerProcess, data_dir: Path) -> None:
    """Stop the simulator (or an injected one), then the broker."""
    from gateway.demo_lifecycle import forget_children, signals_ignored
    from gateway.web.inject import stop_injected

    with signals_ignored():
        sim.terminate()
        try:
            sim.wait(10)
        except subprocess.TimeoutExpired:
            sim.kill()
        # An admin's "inject scenario" replaces the simulator (docs/ui.md).
        stop_injected(data_dir, sim.pid)
        broker.stop()
        forget_children(data_dir)
        console.print("demo stopped")


@app.command()
def demo(
    homes: Annotated[int, typer.Option(help="Simulated homes (from the demo registry)")] = 12,
    port: Annotated[int, typer.Option(help="HTTP port (a free one is picked if taken)")] = 8000,
    data_dir: Annotated[Path, typer.Option(help="Where the demo keeps its data")] = Path(
        "data/demo"
    ),
    sites: Annotated[Path, typer.Option(help="Site registry")] = EXAMPLE_SITES,
    users: Annotated[Path, typer.Option(help="Demo accounts to create")] = EXAMPLE_USERS,
    embedded_broker: Annotated[
        bool, typer.Option(help="Use the embedded amqtt broker even if Mosquitto is installed")
    ] = False,
    verbose: bool = False,
    scenario: Annotated[
        str, typer.Option(help="Simulator scenario the homes follow (see simulate --list)")
    ] = "demo_story",
    backfill: Annotated[
        str, typer.Option(help="History published at start, up to now (0 for none)")
    ] = "6h",
) -> None:
    """Broker + simulated homes + gateway + dashboard, in one command. Ctrl-C stops all."""
    from gateway.broker import free_port, start_broker
    from gateway.demo_lifecycle import record_children

    _logging(verbose)
    os.umask(0o077)  # the demo's data dir, broker files and database: this user's only
    _clear_stale(data_dir)
    broker = start_broker(data_dir / "broker", prefer="amqtt" if embedded_broker else "mosquitto")
    console.print(f"[bold]broker[/]: {broker.kind} on {broker.host}:{broker.port}")
    sim = _start_simulator(broker, sites, homes, scenario, backfill, data_dir)
    record_children(data_dir, {"broker": broker.process.pid, "simulator": sim.pid})
    api_port = port if _port_free(port) else free_port()
    settings = _demo_settings(broker, data_dir, sites, users, api_port)
    _announce(broker, api_port, users)
    try:
        # The simulator stops after the gateway: stopped first, its nodes' last wills
        # would reach a gateway still shutting down and open an "offline" finding for
        # every home at each stop. The gateway's drain is bounded instead.
        serve(settings, log_level="warning")
    except (KeyboardInterrupt, SystemExit):
        pass  # uvicorn re-raises the signal it handled; the stop below is the clean exit
    finally:
        _stop_demo(sim, broker, data_dir)


def _demo_settings(
    broker: BrokerProcess, data_dir: Path, sites: Path, users: Path, api_port: int
) -> Settings:
    """The demo gateway's settings: its broker, accounts and HTTP port."""
    from gateway.accounts.secret import ensure_key_file

    return Settings(
        data_dir=data_dir,
        sites_file=sites,
        # mqtt.client_id unset: generated once and kept in the data dir, so a rerun
        # resumes the session the broker kept (and queued for) while it was down.
        mqtt=MqttSettings(
            host=broker.host,
            port=broker.port,
            protocol="5" if broker.protocol == "5" else "3.1.1",
        ),
        api=ApiSettings(
            port=api_port,
            auth_enabled=True,
            users_file=users,
            # Kept in the data dir (mode 600): sessions and `sumpwatch user token` tokens
            # made for this data dir keep working across restarts.
            secret_key=ensure_key_file(data_dir),
            public_url=f"http://127.0.0.1:{api_port}",
        ),
        ha=HomeAssistantSettings(discovery=True),
    )


def _resume_after(data_dir: Path) -> list[str]:
    """``--since`` the newest stored reading: a rerun on a data dir replays the
    story's schedule but does not write a second history over the one it holds."""
    import contextlib
    import sqlite3
    from datetime import UTC, datetime

    db = data_dir / "sumpwatch.db"
    if not db.exists():
        return []
    try:
        with contextlib.closing(sqlite3.connect(db)) as conn:
            newest = conn.execute("SELECT MAX(ts) FROM readings").fetchone()[0]
    except sqlite3.Error:
        return []
    if newest is None:
        return []
    return ["--since", datetime.fromtimestamp(float(newest), UTC).isoformat()]


@app.command()
def schema(
    # The current folder, not the source tree: an installed wheel has no docs/
    # (in a checkout: --out docs/telemetry.schema.json).
    out: Annotated[Path, typer.Option(help="Where to write it")] = Path("telemetry.schema.json"),
) -> None:
    """Write the telemetry payload JSON Schema (generated from the pydantic models)."""
    from gateway.contract import json_schema

    out.write_text(json.dumps(json_schema(), indent=2, sort_keys=True) + "\n")
    console.print(f"wrote {out}")


def _report_sources(settings: Settings) -> AbstractAsyncContextManager[ReportSources]:
    """The running gateway's report sources, for ``sumpwatch report`` (imported when
    a report is written: the runtime is heavy for the other commands)."""
    from gateway.runtime import report_sources

    return report_sources(settings)


# Commands that live with their feature's package.
app.command("audit")(rules_cli.audit_command(amended_sites))
app.command("replay")(rules_cli.replay_command(shape_only().validate))
app.add_typer(report_cli.mount(_report_sources), name="report")
app.add_typer(user_app, name="user")
app.add_typer(case_app, name="case")
app.command("provision")(provision)
app.add_typer(db_app, name="db")
app.command("provision-gateway")(provision_gateway)
app.command("provision-homeassistant")(provision_homeassistant)


def _mount_simulator() -> None:
    """The simulator's commands (simulate, plot-scenario, score), only when it is installed:
    the product never needs firmware_sim to run (issue 13)."""
    try:
        from firmware_sim.cli import mount
    except ImportError:
        return
    mount(app)


_mount_simulator()


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":
    main()
