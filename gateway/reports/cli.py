"""``sumpwatch report winter ...``: the report commands (a typer sub-app).

Mounted by ``gateway/cli.py`` with :func:`mount`, which hands over the running
gateway's sources: the command reads the same store and state (SQLite, or InfluxDB;
state on SQLite or PostgreSQL) and needs no broker.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from gateway.errors import SumpWatchError
from gateway.reports.service import FORMATS, ReportFormat, build_winter_report, write_atomically
from gateway.reports.sources import ReportSources
from gateway.settings import Settings, load_settings
from gateway.units import UnitSystem, parse_unit_system

report_app = typer.Typer(help="Winter monitoring reports (PDF, HTML, CSV).", no_args_is_help=True)
console = Console(stderr=True)


@report_app.callback()
def report() -> None:
    """Winter monitoring reports (PDF, HTML, CSV)."""


#: Opens what the command reads. The composition root hands it over when it mounts
#: the command (:func:`mount`, from ``gateway/cli.py``): the running gateway's own
#: sources (state on SQLite or PostgreSQL, the sites as enforcement cases amend them,
#: frozen snapshots, the ledger), so a command-line report and the API's agree.
SourcesOpener = Callable[[Settings], AbstractAsyncContextManager[ReportSources]]
_opener: list[SourcesOpener] = []


def mount(opener: SourcesOpener) -> typer.Typer:
    """The report commands, reading through ``opener``."""
    _opener[:] = [opener]
    return report_app


def _open_sources(settings: Settings) -> AbstractAsyncContextManager[ReportSources]:
    if not _opener:
        raise SumpWatchError("the report commands were not mounted with their sources")
    return _opener[0](settings)


class NoData(SumpWatchError):
    """The settings point at no SumpWatch data (a report would be empty)."""


def require_data(settings: Settings) -> None:
    """Refuse to report from a state database that does not exist: opening it would
    create an empty one and write a 0 %-coverage report (issue 20.12)."""
    if not settings.sqlite_file.exists():
        raise NoData(
            f"no SumpWatch data at {settings.sqlite_file.resolve()}: pass --data-dir "
            "(the folder the gateway writes to, e.g. the demo's .demo-data) or --config, "
            "or set SUMPWATCH_DATA_DIR"
        )


async def write_winter_report(
    settings: Settings,
    season: str,
    fmt: ReportFormat,
    out: Path | None,
    *,
    site: str | None = None,
    jurisdiction: str | None = None,
    now: datetime | None = None,
    units: UnitSystem = "us",
) -> Path:
    """Build one report and write it to ``out`` (a file, or a folder for the default
    name; None: the settings' reports folder under the data folder). Returns the path."""
    require_data(settings)
    if out is None:
        out = settings.reports_folder
        await asyncio.to_thread(out.mkdir, parents=True, exist_ok=True)
    async with _open_sources(settings) as sources:
        rendered = await build_winter_report(
            sources, season, fmt, site=site, jurisdiction=jurisdiction, now=now, units=units
        )
    is_dir = await asyncio.to_thread(out.is_dir)
    path = out / rendered.filename if is_dir else out
    await asyncio.to_thread(path.parent.mkdir, parents=True, exist_ok=True)
    await asyncio.to_thread(write_atomically, path, rendered.content)
    return path.resolve()


@report_app.command("winter")
def winter(
    season: Annotated[str, typer.Option(help="Season, e.g. 2026-2027")],
    out: Annotated[
        Path | None,
        typer.Option(
            help="Output file, or a folder for the default name "
            "(default: the reports folder under the data folder, <data dir>/reports)"
        ),
    ] = None,
    site: Annotated[str | None, typer.Option(help="One property's report")] = None,
    jurisdiction: Annotated[
        str | None, typer.Option(help="Village report of one rule pack's sites")
    ] = None,
    fmt: Annotated[str, typer.Option("--format", help="pdf, html or csv")] = "pdf",
    units: Annotated[
        str, typer.Option(help="us (gallons, °F; the default) or metric (litres, m³, °C)")
    ] = "us",
    config: Annotated[
        Path | None, typer.Option("--config", "-c", help="Settings TOML file")
    ] = None,
    data_dir: Annotated[
        Path | None,
        typer.Option(help="The gateway's data folder (its SQLite file must be there)"),
    ] = None,
    sites: Annotated[Path | None, typer.Option(help="Site registry TOML")] = None,
) -> None:
    """Write the winter report of a property (--site) or a village (--jurisdiction, or all)."""
    if fmt not in FORMATS:
        console.print(f"[red]--format must be one of {', '.join(FORMATS)}[/]")
        raise typer.Exit(2)
    try:
        unit_system = parse_unit_system(units)
    except ValueError as exc:
        console.print(f"[red]--{exc}[/]")
        raise typer.Exit(2) from exc
    settings = load_settings(config, data_dir=data_dir, sites_file=sites)
    try:
        path = asyncio.run(
            write_winter_report(
                settings,
                season,
                fmt,
                out,
                site=site,
                jurisdiction=jurisdiction,
                units=unit_system,
            )
        )
    except SumpWatchError as exc:
        console.print(f"[red]error:[/] {exc}")
        raise typer.Exit(2) from exc
    console.print(f"wrote {path}")
