"""``sumpwatch audit | replay``: factories of typer command functions.

The composition root mounts them with what they need from above the rules
(``app.command("audit")(audit_command(amend))``, ``replay_command(validate)``).
``score`` needs the simulator, so it lives with it (``firmware_sim/cli.py``).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from gateway.errors import SumpWatchError
from gateway.examples import EXAMPLE_SITES
from gateway.registry.models import SiteRegistry, load_registry
from gateway.rules.audit import AuditItem, audit_sites
from gateway.rules.pack import RulePack, load_packs
from gateway.rules.replay import Classify, replay_file
from gateway.rules.serialize import citation_json, event_json, finding_json

#: The demo registry, shipped as package data (an installed wheel has no deploy/).
DEFAULT_SITES = EXAMPLE_SITES

SitesOpt = Annotated[Path, typer.Option("--sites", help="Site registry TOML")]
PacksOpt = Annotated[
    Path | None, typer.Option("--packs", help="Extra folder of rule packs (*.toml)")
]
ConfigOpt = Annotated[
    Path | None, typer.Option("--config", "-c", help="Settings TOML file (the cases' state)")
]
DataOpt = Annotated[Path | None, typer.Option(help="Folder of the SQLite store")]


def _fail(exc: SumpWatchError) -> typer.Exit:
    Console(stderr=True).print(f"[red]error:[/red] {exc}")
    return typer.Exit(2)


#: Reads the sites as enforcement cases amend them (case-granted waivers, inspected
#: installation facts) from the deployment's state (``--config``, ``--data-dir``). The
#: composition root hands it in: the cases live above the rules.
Amend = Callable[[SiteRegistry, Path | None, Path | None], SiteRegistry]


def _audit_json(items: list[AuditItem]) -> None:
    for i in items:
        line = {
            "site_id": i.site_id,
            "jurisdiction": i.jurisdiction,
            "requirement_id": i.requirement_id,
            "status": i.status,
            "message": i.message,
            "action": i.action,
            "field": i.field,
            "actual": i.actual,
            "expected": i.expected,
            "citations": [citation_json(c) for c in i.citations],
        }
        sys.stdout.write(json.dumps(line, default=str) + "\n")


def _audit_table(items: list[AuditItem], packs: dict[str, RulePack], sites: int) -> None:
    # People read ordinance titles; file names stay in --json (issue 20.3).
    titles = {pack.file: pack.title for pack in packs.values()}
    table = Table(title=f"Installation audit ({sites} sites)")
    for col in ("site", "status", "requirement", "finding", "citation"):
        table.add_column(col, overflow="fold")
    for i in items:
        style = {"fail": "red", "advisory": "yellow", "waived": "cyan"}.get(i.status, "dim")
        shown = "not recorded" if i.status == "unknown" else i.status
        table.add_row(
            i.site_id,
            f"[{style}]{shown}[/{style}]",
            i.requirement_id,
            i.message,
            "; ".join(c.cited(titles.get(c.file)) for c in i.citations),
        )
    Console().print(table)
    failing = {i.site_id for i in items if i.status == "fail"}
    Console().print(f"{len(failing)} of {sites} sites fail at least one requirement.")


def audit_command(amend: Amend) -> Callable[..., None]:
    """``sumpwatch audit`` over the sites as ``amend`` reads them."""

    def audit(
        sites: SitesOpt = DEFAULT_SITES,
        packs: PacksOpt = None,
        site: Annotated[str | None, typer.Option(help="Only this site")] = None,
        as_json: Annotated[bool, typer.Option("--json", help="JSON lines, one per item")] = False,
        advisories: Annotated[bool, typer.Option(help="Also list advisory items")] = True,
        config: ConfigOpt = None,
        data_dir: DataOpt = None,
    ) -> None:
        """Check every site's installation, as the file records it and enforcement cases
        amended it since (waivers granted, facts inspected), against its rule pack; list
        each failed requirement with its citation. Exit status 1 when any fails."""
        try:
            registry = amend(load_registry(sites), config, data_dir)
            loaded = load_packs(packs)
            targets = [registry.require(site)] if site else list(registry)
        except SumpWatchError as exc:
            raise _fail(exc) from exc
        items = [i for i in audit_sites(targets, loaded) if advisories or i.status != "advisory"]
        if as_json:
            _audit_json(items)
        else:
            _audit_table(items, loaded, len(targets))
        if any(i.status == "fail" for i in items):
            raise typer.Exit(1)

    return audit


def replay_command(validate: Classify) -> Callable[..., None]:
    """``sumpwatch replay`` with the validate stage's shape check ``validate``."""

    def replay(
        telemetry: Annotated[
            Path, typer.Argument(help="JSONL file written by the simulator (--out)")
        ],
        sites: SitesOpt = DEFAULT_SITES,
        packs: PacksOpt = None,
        silence_factor: Annotated[
            float, typer.Option(help="Silent after this many sample intervals")
        ] = 6.0,
        events: Annotated[
            bool, typer.Option("--events", help="Print every opened/updated/cleared event")
        ] = False,
    ) -> None:
        """Run the live detectors over a recorded telemetry file on data time and print the
        findings as JSON lines (format: docs/detectors.md). A summary goes to stderr."""
        try:
            registry = load_registry(sites)
            result = replay_file(
                telemetry,
                registry,
                load_packs(packs),
                validate=validate,
                silence_factor=silence_factor,
            )
        except SumpWatchError as exc:
            raise _fail(exc) from exc
        except OSError as exc:
            raise _fail(SumpWatchError(f"cannot read {telemetry}: {exc}")) from exc
        out = sys.stdout
        if events:
            for e in result.events:
                out.write(json.dumps(event_json(e), default=str) + "\n")
        else:
            for f in result.findings:
                out.write(json.dumps(finding_json(f), default=str) + "\n")
        rejected = sum(result.rejected.values())
        Console(stderr=True).print(
            f"{result.messages} lines, {result.accepted} accepted, {rejected} refused "
            f"{dict(result.rejected)}, {result.invalid_lines} unreadable; "
            f"{len(result.findings)} findings"
        )

    return replay
