"""Getting reports out: the API download, the CLI command and the monthly/final schedule.

Each test uses a real SQLite store, findings repository and (for the API) the
app-wide access-control dependency; the schedule runs on an injected clock.
"""

from __future__ import annotations

import asyncio
import csv
import io
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
import tomli_w
from fastapi import Depends, FastAPI
from typer.testing import CliRunner, Result

from gateway.accounts.access import access_control
from gateway.cli import app as cli_app  # the mounted command, as `sumpwatch report`
from gateway.contract import NodeKind
from gateway.domain import Citation, Finding, FindingChange, FindingEvent, Severity
from gateway.problems import install_error_handlers
from gateway.registry.models import load_registry
from gateway.reports.routes import router
from gateway.reports.schedule import due_reports, run_report_schedule, run_schedule_once
from gateway.reports.sources import ReportSources, SqliteAlerts
from gateway.rules.pack import load_packs
from gateway.services import Services
from gateway.settings import ApiSettings, Settings
from gateway.state.database import SqliteDatabase
from gateway.state.deadletters import StateRepository
from gateway.state.findings import FindingRepository
from gateway.state.postgres import PostgresDatabase
from gateway.store.base import Rollup
from gateway.store.sqlite import SqliteStore
from gateway.units import convert

SEASON = "2026-2027"
OUTLET_L = 48 * 5.0  # h1's outlet: 48 hourly rollups of 5 L
START = datetime(2026, 11, 15, 6, tzinfo=UTC)  # Edgar season start, local midnight
SITES = [
    {
        "id": "h1",
        "name": "12 Elm St",
        "address": "12 Elm St",
        "jurisdiction": "edgar",
        "nodes": [{"id": "pit", "kind": "pit"}, {"id": "outlet", "kind": "discharge"}],
        "installation": {"destination": "grade"},
    },
    {
        "id": "h2",
        "name": "3 Oak Ave",
        "jurisdiction": "local-law-6-2024",
        "nodes": [{"id": "pit", "kind": "pit"}, {"id": "outlet", "kind": "discharge"}],
    },
]


def _write_sites(data_dir: Path) -> Path:
    data_dir.mkdir(parents=True, exist_ok=True)
    sites_file = data_dir / "sites.toml"
    sites_file.write_text(tomli_w.dumps({"site": SITES}))
    return sites_file


async def _populate(data_dir: Path, state_url: str | None = None) -> Path:
    """A store with two days of h1 rollups and one sanitary violation finding (in the
    state database at ``state_url`` when given, else in the SQLite file)."""
    sites_file = await asyncio.to_thread(_write_sites, data_dir)
    db = SqliteDatabase(data_dir / "sumpwatch.db")
    await db.open()
    store = SqliteStore(db)
    await store.open()
    rollups = []
    for h in range(48):
        t = START + timedelta(hours=h)
        rollups.append(Rollup("h1", "pit", NodeKind.PIT, "1h", t, samples=360, pump_cycles=2))
        rollups.append(
            Rollup("h1", "outlet", NodeKind.DISCHARGE, "1h", t, samples=360, pumped_volume_l=5.0)
        )
    await store.save_rollups(rollups)
    state = db if state_url is None else PostgresDatabase(state_url)
    if state is not db:
        await state.open()
    repo = FindingRepository(state)
    await repo.open()
    finding = Finding(
        id="f-hose",
        rule_id="sanitary_discharge",
        site_id="h1",
        severity=Severity.CRITICAL,
        title="Sump water is going into the sanitary sewer",
        opened_at=START + timedelta(hours=3),
        updated_at=START + timedelta(hours=3),
        level="violation",
        evidence={"outlet_share": 0.07},
        citations=(Citation("000_86c7187f3bed6ca5.txt", "(b)", "No ... sump pump shall"),),
    )
    await repo.apply([FindingEvent(FindingChange.OPENED, finding)])
    if state is not db:
        await state.close()
    await db.close()
    return sites_file


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    sites_file = await _populate(tmp_path)
    db = SqliteDatabase(tmp_path / "sumpwatch.db")
    await db.open()
    store = SqliteStore(db)
    await store.open()
    app = FastAPI(dependencies=[Depends(access_control)])
    app.include_router(router)
    install_error_handlers(app)
    app.state.api = ApiSettings()  # auth off: every request is an administrator
    app.state.services = Services(
        data_dir=tmp_path,
        registry=load_registry(sites_file),
        packs=load_packs(),
        store=store,
        db=db,
        findings=FindingRepository(db),
        alerts=None,  # reports read the alert tables of the shared database
        state=StateRepository(db),
    )
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as c:
        yield c
    await db.close()


async def test_api_returns_the_site_csv_as_an_attachment_in_gallons_by_default(
    client: httpx.AsyncClient,
) -> None:
    r = await client.get(f"/reports/winter?season={SEASON}&site=h1&format=csv")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/csv")
    assert r.headers["content-disposition"] == 'attachment; filename="winter-2026-2027-site-h1.csv"'
    rows = list(csv.DictReader(io.StringIO(r.text)))
    assert rows[-1]["date"] == "TOTAL"
    assert "outlet_volume_l" not in rows[-1]
    assert float(rows[-1]["outlet_volume_gal"]) == round(convert("volume", OUTLET_L, "us"), 1)
    # A telemetry finding alone is a suspected violation, not a confirmed one.
    assert rows[-1]["violation_day"] == "0" and rows[-1]["suspected_day"] != "0"


async def test_api_gives_litres_and_celsius_with_units_metric(client: httpx.AsyncClient) -> None:
    r = await client.get(f"/reports/winter?season={SEASON}&site=h1&format=csv&units=metric")
    assert r.status_code == 200
    header = r.text.splitlines()[0].split(",")
    assert "outlet_volume_l" in header and "air_min_c" in header
    assert not any(c.endswith("_gal") or c.endswith("_f") for c in header)
    assert float(list(csv.DictReader(io.StringIO(r.text)))[-1]["outlet_volume_l"]) == OUTLET_L


async def test_api_refuses_an_unknown_unit_system(client: httpx.AsyncClient) -> None:
    r = await client.get(f"/reports/winter?season={SEASON}&site=h1&format=csv&units=imperial")
    assert r.status_code == 422


async def test_api_returns_a_pdf_and_a_village_html_page(client: httpx.AsyncClient) -> None:
    pdf = await client.get(f"/reports/winter?season={SEASON}&site=h1&format=pdf")
    assert pdf.status_code == 200 and pdf.content.startswith(b"%PDF-")
    html = await client.get(f"/reports/winter?season={SEASON}&jurisdiction=edgar&format=html")
    assert html.status_code == 200
    assert html.headers["content-disposition"].startswith("inline")
    # Telemetry alone: Edgar's first step is the inspection of (f)(2)a, not an order.
    assert "12 Elm St" in html.text and "Inspection" in html.text


async def test_api_refuses_unknown_sites_bad_seasons_and_double_scopes(
    client: httpx.AsyncClient,
) -> None:
    assert (await client.get(f"/reports/winter?season={SEASON}&site=nope")).status_code == 404
    assert (await client.get("/reports/winter?season=2026&site=h1")).status_code == 422
    both = await client.get(f"/reports/winter?season={SEASON}&site=h1&jurisdiction=edgar")
    assert both.status_code == 400
    fmt = await client.get(f"/reports/winter?season={SEASON}&site=h1&format=docx")
    assert fmt.status_code == 422


def _report_cli(tmp_path: Path, *args: str) -> Result:
    """``sumpwatch report winter --season SEASON <args>`` over a populated data dir."""
    sites_file = asyncio.run(_populate(tmp_path / "data"))
    deployment = ["--data-dir", str(tmp_path / "data"), "--sites", str(sites_file)]
    return CliRunner().invoke(cli_app, ["report", "winter", "--season", SEASON, *args, *deployment])


def test_cli_reads_the_findings_of_a_state_kept_in_postgresql(tmp_path: Path, pg_url: str) -> None:
    # The command reads what the running gateway's reports read (issue 18): with a
    # state_url, the findings are in PostgreSQL, not in the data dir's SQLite file.
    sites_file = asyncio.run(_populate(tmp_path / "data", state_url=pg_url))
    out = tmp_path / "h1.csv"
    result = CliRunner().invoke(
        cli_app,
        ["report", "winter", "--season", SEASON, "--site", "h1", "--format", "csv",
         "--out", str(out), "--data-dir", str(tmp_path / "data"), "--sites", str(sites_file)],
        env={"SUMPWATCH_STORE__STATE_URL": pg_url},
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    total = list(csv.DictReader(out.open()))[-1]
    assert total["suspected_day"] != "0"


def test_cli_writes_the_report_named_by_its_scope_into_a_folder(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    result = _report_cli(tmp_path, "--jurisdiction", "edgar", "--format", "csv", "--out", str(out))
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader((out / "winter-2026-2027-edgar.csv").open()))
    assert [r["site_id"] for r in rows] == ["h1", "TOTAL"]
    assert rows[0]["status"] == "suspected" and rows[0]["recommendation"] == "inspection"


def test_cli_writes_metric_reports_with_units_metric(tmp_path: Path) -> None:
    out = tmp_path / "h1.csv"
    result = _report_cli(
        tmp_path, "--site", "h1", "--format", "csv", "--units", "metric", "--out", str(out)
    )
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(out.open()))
    assert float(rows[-1]["outlet_volume_l"]) == OUTLET_L


def test_cli_refuses_an_unknown_unit_system_and_writes_nothing(tmp_path: Path) -> None:
    result = _report_cli(
        tmp_path, "--site", "h1", "--units", "imperial", "--out", str(tmp_path / "x.pdf")
    )
    assert result.exit_code == 2
    assert not (tmp_path / "x.pdf").exists()


def test_cli_reports_an_unknown_site_as_an_error(tmp_path: Path) -> None:
    result = _report_cli(tmp_path, "--site", "nope", "--out", str(tmp_path / "x.pdf"))
    assert result.exit_code == 2
    assert not (tmp_path / "x.pdf").exists()


# ------------------------------------------------------------------ schedule


@pytest.fixture
async def sources(tmp_path: Path) -> AsyncIterator[ReportSources]:
    sites_file = await _populate(tmp_path / "data")
    db = SqliteDatabase(tmp_path / "data" / "sumpwatch.db")
    await db.open()
    store = SqliteStore(db)
    await store.open()
    yield ReportSources(
        load_registry(sites_file), load_packs(), store, FindingRepository(db), SqliteAlerts(db)
    )
    await db.close()


def _local(y: int, m: int, d: int, hour: int) -> datetime:
    # America/Chicago in winter is UTC-6.
    return datetime(y, m, d, hour + 6, tzinfo=UTC)


def test_nothing_is_due_before_the_first_month_boundary_has_settled(
    sources: ReportSources, tmp_path: Path
) -> None:
    assert due_reports(_local(2026, 11, 30, 12), sources, tmp_path, formats=("csv",)) == []
    assert due_reports(_local(2026, 12, 1, 0), sources, tmp_path, formats=("csv",)) == []
    due = due_reports(_local(2026, 12, 1, 2), sources, tmp_path, formats=("csv",))
    names = sorted(str(d.path.relative_to(tmp_path)) for d in due)
    assert names == [
        "winter-2026-2027/edgar/through-2026-12-01/winter-2026-2027-edgar.csv",
        "winter-2026-2027/edgar/through-2026-12-01/winter-2026-2027-site-h1.csv",
        "winter-2026-2027/local-law-6-2024/through-2026-12-01/"
        "winter-2026-2027-local-law-6-2024.csv",
        "winter-2026-2027/local-law-6-2024/through-2026-12-01/winter-2026-2027-site-h2.csv",
    ]
    assert {d.cut for d in due} == {_local(2026, 12, 1, 0)}


def test_after_the_season_the_final_report_is_due_and_old_seasons_are_not_caught_up(
    sources: ReportSources, tmp_path: Path
) -> None:
    due = due_reports(datetime(2027, 4, 16, 8, tzinfo=UTC), sources, tmp_path, formats=("csv",))
    edgar = {d.path.parent.name for d in due if d.jurisdiction == "edgar"}
    assert edgar == {"through-2027-03-01", "through-2027-04-01", "final"}  # 60-day catch-up
    final = [d for d in due if d.kind == "final" and d.jurisdiction == "edgar"]
    assert {d.cut for d in final} == {datetime(2027, 4, 16, 5, tzinfo=UTC)}
    later = due_reports(datetime(2027, 11, 1, tzinfo=UTC), sources, tmp_path, formats=("csv",))
    assert later == []


async def test_scheduled_reports_are_written_once_and_cut_at_the_month_boundary(
    sources: ReportSources, tmp_path: Path
) -> None:
    out = tmp_path / "reports"
    now = _local(2026, 12, 1, 3)
    written = await run_schedule_once(sources, out, now=now, formats=("csv", "html"))
    assert len(written) == 8  # village + each site, in both formats
    site_file = out / "winter-2026-2027/edgar/through-2026-12-01/winter-2026-2027-site-h1.csv"
    rows = list(csv.DictReader(site_file.open()))
    assert rows[-2]["date"] == "2026-11-30"  # data through the cut, not "now"
    # Filed for the clerk in the default, US customary units.
    assert float(rows[-1]["outlet_volume_gal"]) == round(convert("volume", OUTLET_L, "us"), 1)
    assert await run_schedule_once(sources, out, now=now, formats=("csv", "html")) == []
    assert (site_file.with_suffix(".html")).read_text().startswith("<!doctype html>")


async def test_the_schedule_task_checks_again_after_each_interval(
    sources: ReportSources, tmp_path: Path
) -> None:
    out = tmp_path / "reports"
    clock = [_local(2026, 11, 30, 12)]
    sleeps: list[float] = []

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        if len(sleeps) == 3:
            raise asyncio.CancelledError
        clock[0] += timedelta(hours=8)

    with pytest.raises(asyncio.CancelledError):
        await run_report_schedule(
            sources, out, clock=lambda: clock[0], sleep=sleep, interval_s=1800, formats=("csv",)
        )
    assert sleeps == [1800, 1800, 1800]
    # 12:00 Nov 30 nothing; 20:00 nothing; 04:00 Dec 1 the four monthly files.
    assert len(list(out.rglob("*.csv"))) == 4


@pytest.mark.integration
def test_the_router_works_on_the_real_gateway_runtime(gateway_settings: Settings) -> None:
    from fastapi.testclient import TestClient

    from gateway.app import create_app

    app = create_app(gateway_settings)
    app.include_router(router)  # what the lead's wiring does
    season = f"{datetime.now(UTC).year - 1}-{datetime.now(UTC).year}"
    with TestClient(app) as client:
        site = client.get(f"/reports/winter?season={season}&site=elm-12&format=csv")
        assert site.status_code == 200, site.text
        assert site.text.splitlines()[0].startswith("site_id,date,hours")
        village = client.get(f"/reports/winter?season={season}&jurisdiction=edgar&format=pdf")
        assert village.status_code == 200
        assert village.content.startswith(b"%PDF-")
