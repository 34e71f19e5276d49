"""``sumpwatch case ...``: list cases, export the ledger, write an evidence packet.

Reads the gateway's SQLite file directly (no broker, no HTTP), like ``sumpwatch report``.
Mount with ``app.add_typer(case_app, name="case")`` in ``gateway/cli.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Coroutine
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from gateway.cases import evidence
from gateway.cases.ledger import to_csv
from gateway.cases.repository import CaseRepository
from gateway.cases.service import CaseService
from gateway.errors import SumpWatchError
from gateway.registry.models import SiteRegistry, load_registry
from gateway.rules.pack import load_packs
from gateway.settings import Settings, load_settings
from gateway.state.factory import state_database
from gateway.state.findings import FindingRepository

case_app = typer.Typer(help="Enforcement cases (docs/enforcement.md).", no_args_is_help=True)
errors = Console(stderr=True)

ConfigOpt = Annotated[Path | None, typer.Option("--config", "-c", help="Settings TOML file")]
DataOpt = Annotated[Path | None, typer.Option(help="Folder of the SQLite store")]


@contextlib.asynccontextmanager
async def open_service(settings: Settings) -> AsyncIterator[CaseService]:
    """The case service over the gateway's state database, for the duration of the block."""
    db = state_database(settings.sqlite_file, settings.store.state_url)
    await db.open()
    try:
        findings = FindingRepository(db)
        await findings.open()
        repo = CaseRepository(db)
        await repo.open()
        registry = load_registry(settings.sites_file)
        yield CaseService(repo, registry, load_packs(settings.rule_packs_dir), findings=findings)
    finally:
        await db.close()


def amended_sites(
    registry: SiteRegistry, config: Path | None, data_dir: Path | None
) -> SiteRegistry:
    """``registry``'s sites as the deployment's cases amend them: the case repository
    over its state database, the source the gateway's stages read (gateway/runtime.py).
    A deployment without a state database yet has no case to amend anything."""
    settings = load_settings(config, data_dir=data_dir)
    if settings.store.state_url is None and not settings.sqlite_file.exists():
        return registry

    async def load() -> SiteRegistry:
        db = state_database(settings.sqlite_file, settings.store.state_url)
        await db.open()
        try:
            repo = CaseRepository(db)
            await repo.open()  # the waivers and inspections, held in memory
        finally:
            await db.close()
        return registry.amended(repo)

    try:
        return asyncio.run(load())
    except SumpWatchError as exc:
        errors.print(f"[red]error:[/] {exc}")
        raise typer.Exit(2) from exc


def _run(work: Coroutine[None, None, None]) -> None:
    try:
        asyncio.run(work)
    except SumpWatchError as exc:
        errors.print(f"[red]error:[/] {exc}")
        raise typer.Exit(2) from exc


@case_app.command("list")
def list_cases(
    jurisdiction: Annotated[str | None, typer.Option(help="Rule pack id")] = None,
    config: ConfigOpt = None,
    data_dir: DataOpt = None,
) -> None:
    """Open cases with their state, queue group and running deadlines."""
    settings = load_settings(config, data_dir=data_dir)

    async def work() -> None:
        async with open_service(settings) as service:
            for v in await service.views(None, jurisdiction):
                due = ", ".join(f"{d.id} {d.due_on} {d.status.value}" for d in v.deadlines)
                typer.echo(
                    f"{v.case.id}\t{v.case.site_id}\t{v.case.rule_id}\t{v.state.value}"
                    f"\t{v.bucket}\t{due or '-'}"
                )

    _run(work())


@case_app.command("ledger")
def ledger(
    out: Annotated[Path | None, typer.Option(help="CSV file (default: standard output)")] = None,
    site: Annotated[str | None, typer.Option(help="One site")] = None,
    config: ConfigOpt = None,
    data_dir: DataOpt = None,
) -> None:
    """Bring the ledger up to date and export it as CSV for the utility billing system."""
    settings = load_settings(config, data_dir=data_dir)

    async def work() -> None:
        async with open_service(settings) as service:
            text = to_csv(await service.ledger(None if site is None else frozenset({site})))
        if out is None:
            typer.echo(text, nl=False)  # plain: a console would wrap long rows
        else:
            await asyncio.to_thread(out.write_text, text)
            errors.print(f"wrote {out}")

    _run(work())


@case_app.command("evidence")
def evidence_packet(
    case_id: Annotated[str, typer.Argument(help="Case id")],
    out: Annotated[Path, typer.Option(help="PDF file; the JSON bundle is written beside it")],
    config: ConfigOpt = None,
    data_dir: DataOpt = None,
) -> None:
    """Write a case's evidence packet (PDF) and bundle (JSON); print the content hash."""
    settings = load_settings(config, data_dir=data_dir)

    async def work() -> None:
        async with open_service(settings) as service:
            bundle = await evidence.bundle(service, case_id)
        await asyncio.to_thread(out.write_bytes, evidence.packet_pdf(bundle))
        await asyncio.to_thread(out.with_suffix(".json").write_bytes, bundle.json_bytes)
        typer.echo(bundle.hash)

    _run(work())
