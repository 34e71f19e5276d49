"""Winter reports over a season simulated by firmware_sim and run through the real pipeline.

The homes: ``hose`` (registered to grade, truly pumping into the laundry tub:
a sanitary violation), ``icy`` (outlet to grade 6 ft from the public walk in a
cold spell: an icing episode) and ``good`` (outlet 30 ft from the walk: compliant).
Their messages go through the real Validator, SqliteStore (rollups included),
RulesEngine, FindingRepository and AlertManager on a temporary SQLite file, no mocks.

Speed: physics at 10 s steps over five months would take minutes, so the
season is shortened, not faked: the test loads the Edgar pack with its season
cut to Dec 14-15 (everything else, penalties and citations included, is the
real pack) and simulates that whole season.
"""

from __future__ import annotations

import asyncio
import csv
import io
import re
import subprocess
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from alerts.config import AlertsConfig
from alerts.manager import AlertManager
from alerts.models import AlertQuery
from firmware_sim.offline import build_simulation, sites_toml
from firmware_sim.scenario import ScenarioModel
from gateway.domain import FindingEvent, RawMessage, Reading, StatusChange
from gateway.registry.models import load_registry
from gateway.reports import text
from gateway.reports.assemble import assemble_site_report, assemble_village_report
from gateway.reports.models import ComplianceStatus, Recommendation
from gateway.reports.render_csv import site_csv, village_csv
from gateway.reports.service import build_winter_report
from gateway.reports.sources import ReportSources, SqliteAlerts
from gateway.rules.engine import RulesEngine
from gateway.rules.pack import PACKS_DIR, load_packs
from gateway.state.database import SqliteDatabase
from gateway.state.findings import FindingRepository
from gateway.store.sqlite import SqliteStore
from gateway.units import UnitSystem, convert
from gateway.validate import Validator

SEASON = "2026-2027"
START = datetime(2026, 12, 14, 6, 0, tzinfo=UTC)  # local midnight in America/Chicago
HOURS = 48
NOW = START + timedelta(days=30)  # the report is made after the season
ACK_AFTER = timedelta(minutes=40)

SCENARIO = {
    "name": "report_season",
    "description": "A short winter: a hose to the laundry tub, an icy walk, a good home.",
    "start": START.isoformat(),
    "duration_h": HOURS,
    "weather": {"offset_c": -3.0, "anomaly_sigma_c": 1.5},
    "home": [
        {
            "id": "hose",
            "jurisdiction": "edgar",
            "line": {"destination": "sanitary", "outlet_to_walkway_ft": 25},
            "registered": {"destination": "grade"},
            "inflow": {"baseflow_lpm": 1.0},
        },
        {
            "id": "icy",
            "jurisdiction": "edgar",
            "line": {"destination": "grade", "outlet_to_walkway_ft": 6},
            "inflow": {"baseflow_lpm": 1.2},
        },
        {
            "id": "good",
            "jurisdiction": "edgar",
            "line": {"destination": "grade", "outlet_to_walkway_ft": 30},
            # Every fact Edgar checks, recorded: only then can a report say "in compliance".
            "registered": {
                "pipe_rigid": True,
                "valving_or_quick_connect": False,
                "outlet_to_foundation_ft": 4,
                "outlet_to_property_line_ft": 18,
                "outlet_height_above_grade_ft": 1.0,
                "flows_toward_property_line": False,
                "storm_sewer_available": False,
                "outlet_to_right_of_way_ft": 40,
            },
            "inflow": {"baseflow_lpm": 1.0},
        },
    ],
}


@dataclass
class Season:
    db_path: Path
    sites_path: Path
    packs_dir: Path


def _short_season_packs(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    text = (PACKS_DIR / "edgar.toml").read_text()
    text = text.replace('value = "11-15"', 'value = "12-14"').replace(
        'value = "04-15"', 'value = "12-15"'
    )
    (folder / "edgar.toml").write_text(text)
    return folder


async def _simulate(root: Path) -> Season:
    packs_dir = _short_season_packs(root / "packs")
    packs = load_packs(packs_dir)
    sim = build_simulation(ScenarioModel.model_validate(SCENARIO), seed=11)
    sites_path = root / "sites.toml"
    sites_path.write_text(sites_toml(sim))
    registry = load_registry(sites_path)
    db = SqliteDatabase(root / "season.db")
    await db.open()
    store = SqliteStore(db)
    await store.open()
    clock = [START]
    validator = Validator(clock=lambda: clock[0])
    engine = RulesEngine(registry, packs)
    alerts = AlertManager(db=db, registry=registry, config=AlertsConfig(), clock=lambda: clock[0])
    await alerts.open()
    findings = FindingRepository(db)
    await findings.open()
    batch: list[Reading] = []
    events: list[FindingEvent] = []
    next_tick = START
    for m in sim.messages():
        clock[0] = START + timedelta(seconds=m.t_s)
        item = validator.validate(RawMessage(m.topic, m.payload, clock[0]))
        if isinstance(item, Reading):
            batch.append(item)
            events += engine.on_reading(item)
        elif isinstance(item, StatusChange):
            events += engine.on_status(item)
        if clock[0] >= next_tick:
            events += engine.tick(clock[0])
            next_tick = clock[0] + timedelta(minutes=1)
        if len(batch) >= 5000:
            await store.write(batch)
            batch = []
        if events:  # the runtime's finding sinks, in its order
            await findings.apply(events)
            await alerts.on_events(events)
            events = []
    await store.write(batch)
    await store.refresh_rollups(until=START + timedelta(hours=HOURS + 1))
    # Someone acknowledges the first alert of each home 40 minutes after it was raised.
    for site in ("hose", "icy"):
        found = await alerts.list_alerts(AlertQuery(site_id=site, limit=1000))
        if found:
            first = min(found, key=lambda a: a.opened_at)
            clock[0] = first.opened_at + ACK_AFTER
            if first.state.value == "open":
                await alerts.acknowledge(first.id, by="clerk")
    await alerts.close()
    await store.close()
    await db.close()
    return Season(root / "season.db", sites_path, packs_dir)


@pytest.fixture(scope="module")
def season(tmp_path_factory: pytest.TempPathFactory) -> Season:
    """The simulated season, built once for the module (about 20 s)."""
    return asyncio.run(_simulate(tmp_path_factory.mktemp("season")))


@pytest.fixture
async def sources(season: Season) -> AsyncIterator[ReportSources]:
    db = SqliteDatabase(season.db_path)
    await db.open()
    store = SqliteStore(db)
    await store.open()
    yield ReportSources(
        registry=load_registry(season.sites_path),
        packs=load_packs(season.packs_dir),
        store=store,
        findings=FindingRepository(db),
        alerts=SqliteAlerts(db),
    )
    await db.close()


async def test_sanitary_home_is_suspected_with_an_inspection_first_and_no_surcharge_yet(
    sources: ReportSources,
) -> None:
    """Telemetry alone: a water balance that does not close can also be a leak."""
    report = await assemble_site_report(sources, "hose", SEASON, now=NOW)
    assert report.compliance.status is ComplianceStatus.SUSPECTED
    assert report.recommendation is Recommendation.INSPECTION
    assert "(f)(2)a" in report.next_step
    assert report.totals.violation_days == 0 and report.totals.suspected_days >= 1
    sanitary = [f for f in report.findings if f.rule_id == "sanitary_discharge"]
    assert sanitary and all(f.is_violation for f in sanitary)
    assert any(c.section == "(b)" for f in sanitary for c in f.citations)
    # Most of what the pump lifted never reached the outlet.
    assert report.totals.sanitary_l > 0.5 * report.totals.pit_volume_l
    assert report.totals.grade_l < 0.2 * report.totals.pit_volume_l
    assert (report.penalties.min_usd, report.penalties.max_usd) == (0.0, 0.0)
    if_confirmed = report.penalties_if_confirmed
    assert if_confirmed is not None
    surcharge = next(p for p in if_confirmed.lines if p.penalty_id == "monthly_surcharge")
    assert surcharge.count == 1  # December 2026 only
    assert (if_confirmed.min_usd, if_confirmed.max_usd) == (300.0, 300.0)
    assert if_confirmed.violation_months == ("Dec 2026",)


async def test_icy_home_shows_icing_days_freezing_hours_and_the_walkway_citation(
    sources: ReportSources,
) -> None:
    report = await assemble_site_report(sources, "icy", SEASON, now=NOW)
    icing = [f for f in report.findings if f.rule_id == "icing_risk"]
    assert icing
    assert report.totals.icing_days >= 1
    assert report.totals.freezing_risk_hours > 0
    assert all(d.air_min_c is not None for d in report.freezing_days)
    assert any(d.air_min_c is not None and d.air_min_c <= 0 for d in report.freezing_days)
    assert report.totals.sanitary_l < 0.05 * report.totals.pit_volume_l
    # An hour below freezing with water on the walk: the detector's violation level, but
    # (c)(2)c needs an actual icy condition: suspected until someone sees the ice.
    assert any(f.is_violation for f in icing)
    assert report.compliance.status is ComplianceStatus.SUSPECTED
    assert any(c.section == "(c)(2)c" for f in icing for c in f.citations)
    assert report.recommendation is Recommendation.INSPECTION


async def test_good_home_is_stated_compliant_with_full_coverage(sources: ReportSources) -> None:
    report = await assemble_site_report(sources, "good", SEASON, now=NOW)
    assert report.coverage.share > 0.95
    assert report.compliance.status is ComplianceStatus.COMPLIANT
    assert report.compliance.statement.startswith("In compliance")
    assert report.recommendation is Recommendation.NONE
    assert not any(f.is_violation for f in report.findings)
    assert report.penalties.min_usd == report.penalties.max_usd == 0
    assert report.totals.grade_l == pytest.approx(report.totals.outlet_volume_l)
    assert report.totals.sanitary_l < 0.05 * report.totals.pit_volume_l


async def test_alert_acknowledgement_times_come_from_the_alert_store(
    sources: ReportSources,
) -> None:
    report = await assemble_site_report(sources, "hose", SEASON, now=NOW)
    assert report.alert_summary.count >= 1
    acked = [a for a in report.alerts if a.acknowledged_at is not None]
    assert acked and acked[0].time_to_ack == ACK_AFTER
    assert acked[0].acknowledged_by == "clerk"


def _in(units: UnitSystem, litres: float) -> float:
    """The store's litres as the CSV writes them: the shared conversion, one decimal."""
    return round(convert("volume", litres, units), 1)


@pytest.mark.parametrize(("units", "vol"), [("us", "gal"), ("metric", "l")])
async def test_site_csv_totals_equal_the_store_rollups(
    sources: ReportSources, units: UnitSystem, vol: str
) -> None:
    site = sources.registry.require("icy")
    report = await assemble_site_report(sources, "icy", SEASON, now=NOW)
    rollups = await sources.store.rollups("icy", "1h", report.period.start, report.period.end)
    cycles = sum(r.pump_cycles for r in rollups)
    outlet = sum(r.pumped_volume_l for r in rollups)
    band_l = (site.pit.pump_on_cm - site.pit.pump_off_cm) * site.pit.area_cm2 / 1000
    rows = list(csv.DictReader(io.StringIO(site_csv(report, units))))
    total = rows[-1]
    assert total["date"] == "TOTAL"
    assert len(rows) == 1 + report.period.n_days
    assert int(total["pump_cycles"]) == cycles > 0
    assert float(total[f"outlet_volume_{vol}"]) == _in(units, outlet)
    assert float(total[f"pit_volume_{vol}"]) == _in(units, cycles * band_l)
    assert float(total[f"to_grade_{vol}"]) == _in(units, outlet)
    assert sum(int(r["pump_cycles"]) for r in rows[:-1]) == cycles


async def test_site_csv_gives_air_temperatures_in_fahrenheit_by_default(
    sources: ReportSources,
) -> None:
    report = await assemble_site_report(sources, "icy", SEASON, now=NOW)
    coldest = min(d.air_min_c for d in report.days if d.air_min_c is not None)
    total = list(csv.DictReader(io.StringIO(site_csv(report))))[-1]
    assert "air_min_c" not in total
    assert float(total["air_min_f"]) == round(coldest * 9 / 5 + 32, 1)


async def test_village_csv_totals_equal_the_store_and_order_the_hose_home_first(
    sources: ReportSources,
) -> None:
    report = await assemble_village_report(sources, SEASON, jurisdiction="edgar", now=NOW)
    assert [r.site_id for r in report.rows] == ["good", "hose", "icy"]
    assert report.priority[0].site_id == "hose"
    assert report.priority[0].recommendation is Recommendation.INSPECTION
    assert "good" not in [r.site_id for r in report.priority]
    outlet = 0.0
    for site in ("good", "hose", "icy"):
        start = datetime(2026, 12, 14, 6, tzinfo=UTC)
        for r in await sources.store.rollups(site, "1h", start, start + timedelta(hours=HOURS)):
            outlet += r.pumped_volume_l
    rows = list(csv.DictReader(io.StringIO(village_csv(report))))
    assert rows[-1]["site_id"] == "TOTAL"
    assert float(rows[-1]["outlet_volume_gal"]) == _in("us", outlet)
    metric = list(csv.DictReader(io.StringIO(village_csv(report, "metric"))))
    assert float(metric[-1]["outlet_volume_l"]) == _in("metric", outlet)
    assert report.totals.icing_days >= 1
    assert report.weeks and sum(w.outlet_volume_l for w in report.weeks) == pytest.approx(outlet)


def _pdf_pages(pdf: bytes, folder: Path, name: str) -> list[Path]:
    """Render every page to PNG with poppler's pdftoppm (fails if the PDF does not open)."""
    path = folder / f"{name}.pdf"
    path.write_bytes(pdf)
    subprocess.run(
        ["pdftoppm", "-png", "-r", "60", str(path), str(folder / name)],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return sorted(folder.glob(f"{name}-*.png"))


def _pdf_page_count(path: Path) -> int:
    info = subprocess.run(
        ["pdfinfo", str(path)], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    match = re.search(r"^Pages:\s+(\d+)$", info, re.MULTILINE)
    assert match is not None
    return int(match.group(1))


async def test_site_pdf_opens_and_renders_every_page(
    sources: ReportSources, tmp_path: Path
) -> None:
    out = await build_winter_report(sources, SEASON, "pdf", site="hose", now=NOW)
    assert out.content.startswith(b"%PDF-") and out.media_type == "application/pdf"
    pages = await asyncio.to_thread(_pdf_pages, out.content, tmp_path, "hose")
    assert len(pages) >= 2
    assert all(p.stat().st_size > 1000 for p in pages)
    assert await asyncio.to_thread(_pdf_page_count, tmp_path / "hose.pdf") == len(pages)


async def test_village_pdf_and_html_render(sources: ReportSources, tmp_path: Path) -> None:
    pdf = await build_winter_report(sources, SEASON, "pdf", jurisdiction="edgar", now=NOW)
    assert await asyncio.to_thread(_pdf_pages, pdf.content, tmp_path, "village")
    html = await build_winter_report(sources, SEASON, "html", jurisdiction="edgar", now=NOW)
    page = html.content.decode()
    assert page.startswith("<!doctype html>")
    assert "hose" in page and "data:image/png;base64," in page
    assert html.filename == "winter-2026-2027-edgar.html"


def _pdf_text(pdf: bytes, folder: Path, name: str) -> str:
    path = folder / f"{name}.pdf"
    path.write_bytes(pdf)
    return subprocess.run(
        ["pdftotext", "-layout", str(path), "-"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout


async def test_site_pdf_is_in_gallons_and_fahrenheit_by_default_and_metric_on_request(
    sources: ReportSources, tmp_path: Path
) -> None:
    report = await assemble_site_report(sources, "icy", SEASON, now=NOW)
    us = await build_winter_report(sources, SEASON, "pdf", site="icy", now=NOW)
    metric = await build_winter_report(sources, SEASON, "pdf", site="icy", now=NOW, units="metric")
    us_text = await asyncio.to_thread(_pdf_text, us.content, tmp_path, "us")
    metric_text = await asyncio.to_thread(_pdf_text, metric.content, tmp_path, "metric")
    season_gal = f"{convert('volume', report.totals.outlet_volume_l, 'us'):,.0f} gal"
    season_l = f"{report.totals.outlet_volume_l:,.0f} L"
    assert season_gal in us_text and "°F" in us_text
    assert season_l not in us_text and "°C" not in us_text
    assert season_l in metric_text and "°C" in metric_text
    assert " gal" not in metric_text and "°F" not in metric_text


async def test_village_totals_are_in_natural_units_gallons_or_litres_when_small(
    sources: ReportSources, tmp_path: Path
) -> None:
    report = await assemble_village_report(sources, SEASON, jurisdiction="edgar", now=NOW)
    gal = convert("volume", report.totals.outlet_volume_l, "us")
    assert gal < 10_000  # a small village total: "1,900 gal", not "1.9 thousand gal"
    us = await build_winter_report(sources, SEASON, "pdf", jurisdiction="edgar", now=NOW)
    us_text = _pdf_text(us.content, tmp_path, "us")
    assert f"{gal:,.0f} gal" in us_text and "thousand gal" not in us_text.split("Units")[0]
    metric = await build_winter_report(
        sources, SEASON, "pdf", jurisdiction="edgar", now=NOW, units="metric"
    )
    assert f"{report.totals.outlet_volume_l:,.0f} L" in _pdf_text(metric.content, tmp_path, "m")


def test_large_totals_read_in_thousands_of_gallons_or_cubic_metres() -> None:
    assert text.large_volume(3_785_411.784, "us") == "1,000.0 thousand gal"
    assert text.large_volume(757.0, "us") == "200 gal"
    assert text.large_volume(46_600.0, "metric") == "46.6 m³"
