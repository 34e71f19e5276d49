"""``sumpwatch audit`` audits the sites as enforcement cases amended them (issue 16.4):
the installation facts an inspection recorded in the deployment's state database,
read through the same case repository the gateway's stages read. Real SQLite."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from typer.testing import CliRunner

from gateway.cases.models import ChecklistResult, Inspection, Origin, Outcome, StepKind
from gateway.cases.repository import CaseRepository
from gateway.cases.service import Actor, CaseService
from gateway.cli import app
from gateway.registry import load_registry
from gateway.rules.pack import load_packs
from gateway.state.database import SqliteDatabase
from tests.conftest import DEMO_SITES

CLERK = Actor("edgar-pw", "public_works")


async def _inspect_rigid_line(sqlite_file: Path, site_id: str) -> None:
    """An inspection that found the discharge line rigid, recorded in a case."""
    db = SqliteDatabase(sqlite_file)
    await db.open()
    try:
        repo = CaseRepository(db)
        await repo.open()
        registry = load_registry(DEMO_SITES).amended(repo)
        service = CaseService(repo, registry, load_packs())
        case = await service.open_case(site_id, "sanitary_discharge", Origin.COMPLAINT, CLERK)
        result = Inspection(
            outcome=Outcome.FAIL,
            inspector="B. Inspector",
            items=(ChecklistResult("rigid_line", True, "replaced with PVC"),),
            facts=(("pipe_rigid", True),),
        )
        step = service.new_step(StepKind.INSPECTION_RESULT, inspection=result)
        await service.record(case.id, step, CLERK)
    finally:
        await db.close()


def _failing(data_dir: Path) -> set[str]:
    args = ["audit", "--sites", str(DEMO_SITES), "--site", "oak-7", "--json"]
    out = CliRunner().invoke(app, [*args, "--data-dir", str(data_dir)])
    assert out.exit_code == 1, out.output
    items = [json.loads(line) for line in out.stdout.splitlines()]
    return {i["requirement_id"] for i in items if i["status"] == "fail"}


def test_the_audit_reads_installation_facts_an_inspection_recorded_in_a_case(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    # The registry file says oak-7's line is not rigid; no case yet: the file alone.
    assert "rigid_line" in _failing(data_dir)
    asyncio.run(_inspect_rigid_line(data_dir / "sumpwatch.db", "oak-7"))
    assert _failing(data_dir) == {"pipe_min_diameter", "property_line_setback"}
