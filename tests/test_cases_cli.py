"""Issue 16: ``sumpwatch case`` reads the gateway's SQLite file (list, ledger CSV, evidence)."""

from __future__ import annotations

import asyncio
import csv
import io
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from typer.testing import CliRunner

from gateway.cases.cli import open_service
from gateway.cases.models import Method, Origin, Party, Service, StepKind
from gateway.cases.service import Actor
from gateway.cli import app
from gateway.settings import load_settings

CLERK = Actor("edgar-pw", "public_works")


async def _seed(data_dir: Path) -> str:
    async with open_service(load_settings(None, data_dir=data_dir)) as service:
        case = await service.open_case("elm-16", "sanitary_discharge", Origin.COMPLAINT, CLERK)
        served = datetime.now(UTC) - timedelta(days=40)
        order = service.new_step(
            StepKind.ORDER, served, service=Service(Party.OWNER, Method.IN_PERSON)
        )
        await service.record(case.id, order, CLERK)
        return case.id


def test_case_commands_list_export_the_ledger_and_write_the_packet(tmp_path: Path) -> None:
    case_id = asyncio.run(_seed(tmp_path))
    runner = CliRunner()
    listed = runner.invoke(app, ["case", "list", "--data-dir", str(tmp_path)])
    assert listed.exit_code == 0, listed.output
    assert case_id in listed.output and "overdue" in listed.output

    exported = runner.invoke(app, ["case", "ledger", "--data-dir", str(tmp_path)])
    assert exported.exit_code == 0, exported.output
    rows = list(csv.DictReader(io.StringIO(exported.output)))
    assert rows and {r["kind"] for r in rows} == {"surcharge"}
    assert all(r["amount_usd"] == "300.00" and r["case_id"] == case_id for r in rows)

    out = tmp_path / "packet.pdf"
    written = runner.invoke(
        app, ["case", "evidence", case_id, "--out", str(out), "--data-dir", str(tmp_path)]
    )
    assert written.exit_code == 0, written.output
    assert out.read_bytes().startswith(b"%PDF")
    assert json.loads(out.with_suffix(".json").read_bytes())["case"]["id"] == case_id
    assert written.output.strip().startswith("sha256:")

    missing = runner.invoke(
        app, ["case", "evidence", "case-nope", "--out", str(out), "--data-dir", str(tmp_path)]
    )
    assert missing.exit_code == 2
