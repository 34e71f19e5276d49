"""Winter reports: seasons, penalty estimates and the hourly water balance, as specifications.

The assemble tests write 1-hour rollups into a real SqliteStore on a temp file
(the report reads nothing else) and check what the report concludes from them.
"""

from __future__ import annotations

import math
import random
from collections.abc import AsyncIterator, Collection
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from gateway.contract import NodeKind
from gateway.domain import Citation, Confirmation, ConfirmationKind, Finding, Severity
from gateway.errors import ConfigError
from gateway.registry.models import SiteConfig, SiteRegistry
from gateway.reports import text
from gateway.reports.assemble import (
    _pipes_can_ice,
    assemble_site_report,
    build_site_report,
    read_site_inputs,
)
from gateway.reports.models import ComplianceStatus, Coverage, Gap
from gateway.reports.penalties import estimate_penalties, most_within
from gateway.reports.render_csv import site_csv
from gateway.reports.season import parse_season_label, season_of, season_period
from gateway.reports.service import FORMATS, render
from gateway.reports.sources import ReportSources
from gateway.rules.detectors.base import OutletSample, SiteContext, SiteState
from gateway.rules.pack import load_packs
from gateway.rules.physics import (
    cold_enough_for_ice,
    pipe_can_ice,
    unaccounted_litres,
    unaccounted_litres_each,
)
from gateway.rules.thresholds import ACCOUNTED_RATIO, MIN_CYCLE_VOLUME_L
from gateway.state.database import SqliteDatabase
from gateway.store.base import FieldStats, Rollup
from gateway.store.sqlite import SqliteStore
from gateway.units import UNIT_SYSTEMS, fmt

PACKS = load_packs()
CHICAGO = "America/Chicago"


# ------------------------------------------------------------------ seasons


def test_season_label_needs_two_consecutive_years() -> None:
    assert parse_season_label("2026-2027") == 2026
    for bad in ("2026-2028", "2026", "26-27", "2027-2026"):
        with pytest.raises(ConfigError):
            parse_season_label(bad)


def test_edgar_season_runs_nov_15_to_apr_15_in_local_time_with_its_citation() -> None:
    p = season_period("2026-2027", PACKS["edgar"], CHICAGO)
    assert (p.first_day, p.last_day) == (date(2026, 11, 15), date(2027, 4, 15))
    assert p.start == datetime(2026, 11, 15, 6, tzinfo=UTC)  # CST midnight
    assert p.end == datetime(2027, 4, 16, 5, tzinfo=UTC)  # CDT midnight after Apr 15
    assert not p.is_default
    assert p.citations[0].section == "(e)(1)b"
    assert p.n_days == 152


def test_pack_without_a_winter_season_uses_the_default_and_says_so() -> None:
    p = season_period("2026-2027", PACKS["local-law-6-2024"], CHICAGO)
    assert (p.first_day, p.last_day) == (date(2026, 11, 15), date(2027, 4, 15))
    assert p.is_default
    assert "default" in p.describe()
    assert p.citations == ()


def test_season_of_a_day() -> None:
    edgar = PACKS["edgar"]
    assert season_of(date(2027, 1, 5), edgar) == "2026-2027"
    assert season_of(date(2026, 12, 5), edgar) == "2026-2027"
    assert season_of(date(2026, 7, 1), edgar) is None


# ------------------------------------------------------------------ penalties


def _days(first: date, n: int, step: int = 1) -> list[date]:
    return [first + timedelta(days=i * step) for i in range(n)]


def test_edgar_surcharge_is_300_per_month_with_a_violation_day() -> None:
    est = estimate_penalties(
        PACKS["edgar"], [date(2026, 12, 20), date(2026, 12, 31), date(2027, 1, 2)], 1
    )
    surcharge = next(line for line in est.lines if line.penalty_id == "monthly_surcharge")
    assert surcharge.count == 2
    assert (est.min_usd, est.max_usd) == (600.0, 600.0)
    assert est.violation_months == ("Dec 2026", "Jan 2027")
    citation = next(line for line in est.lines if line.penalty_id == "citation")
    assert citation.min_usd is None and not citation.additive
    assert any(c.section == "(f)(4)a" for c in surcharge.citations)
    assert "not a legal determination" in est.disclaimer


def test_local_law_fines_per_day_first_then_later_offenses_and_misdemeanor_threshold() -> None:
    est = estimate_penalties(PACKS["local-law-6-2024"], _days(date(2027, 1, 10), 5), 1)
    by_id = {line.penalty_id: line for line in est.lines}
    assert (by_id["first_offense"].count, by_id["first_offense"].min_usd) == (1, 50.0)
    assert (by_id["later_offense"].count, by_id["later_offense"].max_usd) == (4, 1000.0)
    assert (est.min_usd, est.max_usd) == (50.0 + 4 * 100.0, 5 * 250.0)
    misdemeanor = by_id["misdemeanor"]
    assert misdemeanor.count == 5 and not misdemeanor.additive
    assert (misdemeanor.min_usd, misdemeanor.max_usd) == (2500.0, 5000.0)
    assert "reach the threshold of 3" in misdemeanor.basis


def test_misdemeanor_threshold_not_reached_below_three_violations_in_a_year() -> None:
    est = estimate_penalties(PACKS["local-law-6-2024"], [date(2026, 1, 1), date(2027, 1, 2)], 2)
    misdemeanor = next(line for line in est.lines if line.penalty_id == "misdemeanor")
    assert misdemeanor.count == 1
    assert misdemeanor.min_usd is None and "not reached" in misdemeanor.basis


def test_pack_without_amounts_or_penalties_estimates_nothing() -> None:
    sewer = estimate_penalties(PACKS["sewer-ord-247"], _days(date(2027, 1, 1), 3), 1)
    assert sewer.lines[0].count == 3 and sewer.lines[0].min_usd is None
    assert (sewer.min_usd, sewer.max_usd) == (0.0, 0.0)
    assert estimate_penalties(PACKS["storm-ord-1991-43"], _days(date(2027, 1, 1), 3), 1).lines == ()


def test_most_within_counts_the_busiest_window() -> None:
    days = [date(2026, 1, 1), date(2026, 6, 1), date(2026, 12, 30), date(2027, 1, 2)]
    assert most_within(days, 365) == 3
    assert most_within(days, 30) == 2
    assert most_within([], 365) == 0


# ------------------------------------------------------------------ hourly water balance

SEASON_START = datetime(2026, 11, 15, 6, tzinfo=UTC)
BAND_L = (40.0 - 18.0) * 3.141592653589793 * 23.0**2 / 1000  # default pit: 36.6 L per cycle


def _site(site_id: str = "h1", destination: str = "grade") -> SiteConfig:
    return SiteConfig.model_validate(
        {
            "id": site_id,
            "name": f"Home {site_id}",
            "jurisdiction": "edgar",
            "nodes": [
                {"id": "pit", "kind": "pit"},
                {"id": "outlet", "kind": "discharge"},
                {"id": "air", "kind": "air"},
            ],
            "installation": {"destination": destination, "outlet_to_walkway_ft": 40},
        }
    )


def _hour(site: str, node: str, kind: NodeKind, start: datetime, **totals: float) -> Rollup:
    stats = {}
    if kind is NodeKind.AIR:
        t = totals.pop("air_c", 5.0)
        stats["air_temp_c"] = FieldStats(60, t - 1, t + 1, t, t)
    if kind is NodeKind.DISCHARGE:
        low = totals.pop("pipe_min_c", 4.0)
        stats["pipe_temp_c"] = FieldStats(360, low, low + 2.0, low + 1.0, low + 1.0)
    return Rollup(
        site,
        node,
        kind,
        "1h",
        start,
        samples=360,
        stats=stats,
        pump_cycles=int(totals.get("cycles", 0)),
        pump_on_s=totals.get("on_s", 0.0),
        pumped_volume_l=totals.get("outlet_l", 0.0),
    )


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    db = SqliteDatabase(tmp_path / "r.db")
    await db.open()
    s = SqliteStore(db)
    await s.open()
    yield s
    await db.close()


def _sources(
    store: SqliteStore,
    *sites: SiteConfig,
    findings: list[Finding] | None = None,
    confirmations: list[Confirmation] | None = None,
) -> ReportSources:
    class Findings:
        async def list(self, **_: object) -> list[Finding]:
            return findings or []

        async def level_histories(self, ids: list[str]) -> dict[str, list[tuple[datetime, str]]]:
            # Each finding held its last level throughout (no events recorded here).
            return {f.id: [(f.opened_at, f.level)] for f in findings or [] if f.id in ids}

    class Records:
        def confirmations(self, site_id: str, start: datetime, end: datetime) -> list[Confirmation]:
            return [c for c in confirmations or [] if start <= c.observed_at < end]

    return ReportSources(SiteRegistry(list(sites)), PACKS, store, Findings(), None, Records())


async def _day_of_rollups(
    store: SqliteStore,
    site: str,
    plan: dict[int, tuple[int, float]],
    *,
    skip_outlet: Collection[int] = (),
    pipe_min_c: float = 4.0,
) -> None:
    """24 hours from the season start: ``plan[hour] = (cycles, outlet litres)``."""
    rollups = []
    for h in range(24):
        start = SEASON_START + timedelta(hours=h)
        cycles, outlet = plan.get(h, (0, 0.0))
        rollups.append(_hour(site, "pit", NodeKind.PIT, start, cycles=cycles, on_s=15 * cycles))
        if h not in skip_outlet:
            rollups.append(
                _hour(
                    site,
                    "outlet",
                    NodeKind.DISCHARGE,
                    start,
                    outlet_l=outlet,
                    pipe_min_c=pipe_min_c,
                )
            )
        rollups.append(_hour(site, "air", NodeKind.AIR, start, air_c=-4.0 if h < 6 else 3.0))
    await store.save_rollups(rollups)


NOW = SEASON_START + timedelta(days=1)


async def test_pumped_water_missing_at_the_outlet_is_counted_as_sanitary_suspected(
    store: SqliteStore,
) -> None:
    # Hours 10-14: two cycles each, nothing at the outlet. Other hours: outlet matches.
    plan = {h: (2, 0.0) if 10 <= h <= 14 else (2, 2 * BAND_L) for h in range(24)}
    await _day_of_rollups(store, "h1", plan)
    report = await assemble_site_report(_sources(store, _site()), "h1", "2026-2027", now=NOW)
    day = report.days[0]
    assert day.unaccounted_hours == 5
    assert day.sanitary_l == pytest.approx(5 * 2 * BAND_L)
    assert day.grade_l == pytest.approx(19 * 2 * BAND_L)
    assert report.compliance.status is ComplianceStatus.ATTENTION  # no finding, but water missing
    # The statement names the missing volume in the reader's units; the data keeps litres.
    assert report.compliance.volume_l == pytest.approx(day.sanitary_l)
    gallons = fmt("volume", day.sanitary_l, "us")
    assert f"{gallons} of pumped water not seen" in text.statement(report.compliance, "us")
    litres = fmt("volume", day.sanitary_l, "metric")
    assert f"{litres} of pumped water not seen" in text.statement(report.compliance, "metric")


async def test_a_cycle_split_across_an_hour_boundary_is_not_suspected(store: SqliteStore) -> None:
    # The pump starts at 10:59:50 (cycle counted at 10) and discharges mostly after 11:00.
    await _day_of_rollups(store, "h1", {10: (1, 2.0), 11: (0, BAND_L - 2.0)})
    report = await assemble_site_report(_sources(store, _site()), "h1", "2026-2027", now=NOW)
    assert report.days[0].sanitary_l == 0
    assert report.totals.outlet_volume_l == pytest.approx(BAND_L)


async def test_hours_without_outlet_readings_are_gaps_not_sanitary_discharge(
    store: SqliteStore,
) -> None:
    plan = {h: (2, 2 * BAND_L) for h in range(24)}
    await _day_of_rollups(store, "h1", plan, skip_outlet=range(8, 13))
    report = await assemble_site_report(_sources(store, _site()), "h1", "2026-2027", now=NOW)
    assert report.days[0].sanitary_l == 0
    gaps = report.coverage.gaps
    assert [(g.start, g.end, g.nodes) for g in gaps] == [
        (SEASON_START + timedelta(hours=8), SEASON_START + timedelta(hours=13), ("outlet",))
    ]
    assert report.coverage.covered_hours == 19
    assert report.coverage.by_node["pit"] == 1.0


async def test_a_storm_lateral_home_sends_its_water_to_storm(store: SqliteStore) -> None:
    await _day_of_rollups(store, "h2", {h: (1, BAND_L) for h in range(24)})
    site = _site("h2", "storm_lateral")
    report = await assemble_site_report(_sources(store, site), "h2", "2026-2027", now=NOW)
    assert report.totals.storm_l == pytest.approx(24 * BAND_L)
    assert report.totals.grade_l == 0


async def test_freezing_hours_and_risk_hours_come_from_air_and_discharge(
    store: SqliteStore,
) -> None:
    # Air below 0 in hours 0-5; water reaches grade in hours 0-2 only.
    await _day_of_rollups(store, "h1", {h: (1, BAND_L) for h in range(3)})
    report = await assemble_site_report(_sources(store, _site()), "h1", "2026-2027", now=NOW)
    day = report.days[0]
    assert day.freezing_hours == 6
    assert day.freezing_risk_hours == 3
    assert day.air_min_c == pytest.approx(-5.0)
    assert report.freezing_days == (day,)


async def test_unaccounted_hours_are_what_the_shared_water_balance_says_of_their_sums(
    store: SqliteStore,
) -> None:
    # Two cycles an hour; hours 11 and 13 reach the outlet half a cycle, hour 12 nothing.
    b = BAND_L
    plan = {h: (2, 2 * b) for h in range(24)} | {11: (2, b / 2), 12: (2, 0.0), 13: (2, b / 2)}
    await _day_of_rollups(store, "h1", plan)
    report = await assemble_site_report(_sources(store, _site()), "h1", "2026-2027", now=NOW)
    # Each hour judged over it and its neighbours, as the physics is asked to.
    physics = [
        unaccounted_litres(2 * b, 2 * b, 6 * b, 4.5 * b),  # 10: 3/4 seen, accounted
        unaccounted_litres(2 * b, b / 2, 6 * b, 2.5 * b),  # 11
        unaccounted_litres(2 * b, 0.0, 6 * b, 1.0 * b),  # 12
        unaccounted_litres(2 * b, b / 2, 6 * b, 2.5 * b),  # 13
    ]
    assert physics[0] == 0.0 and all(v > 0 for v in physics[1:])
    assert report.days[0].sanitary_l == pytest.approx(sum(physics))
    assert report.days[0].unaccounted_hours == 3


async def test_a_pipe_the_frozen_line_detector_calls_icy_makes_risk_hours_in_the_report(
    store: SqliteStore,
) -> None:
    # Warm air after 06:00, but the pipe wall at 0.5 C: cold enough for the detectors.
    await _day_of_rollups(store, "h1", {h: (1, BAND_L) for h in range(8, 11)}, pipe_min_c=0.5)
    report = await assemble_site_report(_sources(store, _site()), "h1", "2026-2027", now=NOW)
    state = SiteState(SiteContext(_site(), PACKS["edgar"]), timedelta(hours=6))
    at = SEASON_START + timedelta(hours=9)
    state.outlet.add(OutletSample(at, 10.0, 3.0, 0.5), pump_on=True)
    assert cold_enough_for_ice(state, at)
    assert report.days[0].freezing_risk_hours == 3


def test_the_water_balance_over_a_column_judges_every_hour_as_the_scalar_test() -> None:
    # The report asks the physics of 3,600 hours at once; it must say what the detectors'
    # scalar test says of each, edge cases included (a cycle's volume exactly, the
    # accounted ratio exactly, no water, NaN).
    rng = random.Random(7)
    edge = [0.0, MIN_CYCLE_VOLUME_L, MIN_CYCLE_VOLUME_L - 1e-9, BAND_L, 2 * BAND_L, math.nan]
    rows = [tuple(rng.choice(edge) for _ in range(4)) for _ in range(400)]
    rows += [(BAND_L, 0.0, BAND_L, ACCOUNTED_RATIO * BAND_L)]  # the ratio exactly: accounted
    rows += [tuple(rng.uniform(0, 80) for _ in range(4)) for _ in range(2000)]
    pit, outlet, around_pit, around_outlet = (np.array(col) for col in zip(*rows, strict=True))
    each = unaccounted_litres_each(pit, outlet, around_pit, around_outlet).tolist()
    assert [repr(v) for v in each] == [repr(unaccounted_litres(*row)) for row in rows]


def test_the_icy_pipe_test_over_a_column_is_the_detectors_scalar_test() -> None:
    temps = [-3.0, 0.0, -0.0, 0.5, 1.0, 1.0 + 1e-12, 2.0, math.nan, math.inf, -math.inf]
    assert _pipes_can_ice(np.array(temps)).tolist() == [pipe_can_ice(t) for t in temps]


async def test_a_days_volume_adds_its_hours_in_order_to_the_last_bit(store: SqliteStore) -> None:
    # Litres with many digits: added in another order (numpy's pairwise sum, a prefix
    # difference) the day's total would differ in its last bits, and so would the CSV.
    rng = random.Random(3)
    litres = [BAND_L * rng.uniform(0.9, 1.1) for _ in range(24)]
    assert sum(litres) != float(np.sum(litres))  # the order shows in these
    await _day_of_rollups(store, "h1", {h: (1, litres[h]) for h in range(24)})
    report = await assemble_site_report(_sources(store, _site()), "h1", "2026-2027", now=NOW)
    assert report.days[0].outlet_volume_l == sum(litres)
    assert report.totals.outlet_volume_l == sum(litres)


async def test_a_days_coldest_hour_among_equal_zeros_is_the_first_as_min_says(
    store: SqliteStore,
) -> None:
    # -0.0 and 0.0 are equal; a day's minimum keeps the first, as Python's min over the
    # hours did, so the report reads the same whichever comes first. (SQLite keeps no
    # -0.0 in a REAL column, InfluxDB does: the hours are given to the report here.)
    await _day_of_rollups(store, "h1", {h: (1, BAND_L) for h in range(24)}, pipe_min_c=5.0)
    inputs = await read_site_inputs(_sources(store, _site()), "h1", "2026-2027", now=NOW)
    reports = []
    for first, then in ((0.0, -0.0), (-0.0, 0.0)):
        hours = []
        for node in inputs.hours:
            series = dict(node.series)
            if node.kind is NodeKind.DISCHARGE:
                series["pipe_temp_c_min"] = pipe = series["pipe_temp_c_min"].copy()
                pipe[3], pipe[5] = first, then
            hours.append(replace(node, series=series))
        reports.append(build_site_report(replace(inputs, hours=hours)))
    assert [repr(r.days[0].pipe_min_c) for r in reports] == ["0.0", "-0.0"]


async def test_violation_level_telemetry_is_suspected_until_a_record_confirms_it(
    store: SqliteStore,
) -> None:
    await _day_of_rollups(store, "h1", {h: (1, BAND_L) for h in range(24)})
    cite = Citation("000_86c7187f3bed6ca5.txt", "(c)(2)c", "shall not create any icy condition")
    finding = Finding(
        id="f1",
        rule_id="icing_risk",
        site_id="h1",
        severity=Severity.CRITICAL,
        title="Sump discharge may ice a walkway or the street",
        opened_at=SEASON_START + timedelta(hours=2),
        updated_at=SEASON_START + timedelta(hours=4),
        cleared_at=SEASON_START + timedelta(hours=5),
        level="violation",
        evidence={"air_temp_c": -4.0},
        citations=(cite,),
    )
    suspected = await assemble_site_report(
        _sources(store, _site(), findings=[finding]), "h1", "2026-2027", now=NOW
    )
    assert suspected.compliance.status is ComplianceStatus.SUSPECTED
    assert (suspected.totals.violation_days, suspected.totals.suspected_days) == (0, 1)
    assert suspected.penalties.min_usd == 0.0
    assert suspected.penalties_if_confirmed is not None
    assert suspected.penalties_if_confirmed.min_usd == 300.0
    ice = Confirmation(
        "c1", "h1", "icing_risk", ConfirmationKind.OBSERVATION,
        SEASON_START + timedelta(hours=4), True, "public works", "ice on the walk",
    )  # fmt: skip
    sources = _sources(store, _site(), findings=[finding], confirmations=[ice])
    report = await assemble_site_report(sources, "h1", "2026-2027", now=NOW)
    assert report.compliance.status is ComplianceStatus.VIOLATION
    assert any(c.section == "(c)(2)c" for c in report.compliance.citations)
    assert report.totals.icing_days == report.totals.violation_days == 1
    assert report.penalties.min_usd == 300.0
    rows = site_csv(report).splitlines()
    assert rows[-1].endswith(",1,1,0")  # TOTAL: icing days, violation days, suspected days


async def test_a_season_in_progress_is_cut_at_now_and_noted(store: SqliteStore) -> None:
    await _day_of_rollups(store, "h1", {h: (1, BAND_L) for h in range(24)})
    now = SEASON_START + timedelta(hours=12, minutes=30)
    report = await assemble_site_report(_sources(store, _site()), "h1", "2026-2027", now=now)
    assert report.through == SEASON_START + timedelta(hours=12)
    assert not report.is_final
    assert report.totals.pump_cycles == 12
    assert any("in progress" in n for n in report.notes)


async def test_a_season_not_yet_started_still_renders_in_every_format(store: SqliteStore) -> None:
    before = SEASON_START - timedelta(days=3)
    report = await assemble_site_report(_sources(store, _site()), "h1", "2026-2027", now=before)
    assert report.days == () and report.coverage.period_hours == 0
    assert report.compliance.status is ComplianceStatus.INSUFFICIENT_DATA
    for fmt_ in FORMATS:
        for units in UNIT_SYSTEMS:
            assert render(report, fmt_, units)


def test_render_refuses_an_unknown_unit_system() -> None:
    with pytest.raises(ConfigError, match="units"):
        render(None, "csv", "imperial")  # type: ignore[arg-type]


# ------------------------------------------------------------------ units


def test_evidence_values_are_converted_by_the_unit_in_their_name() -> None:
    evidence = {
        "air_temp_c": -12.8,
        "volume_l_window": 378.5411784,
        "distance_ft": 6,
        "flow_lpm": 37.85411784,
        "pressure_kpa": 68.94757293,
        "level_cm": 25.4,
        "in_season": True,
    }
    assert text.evidence_text(evidence, "us") == (
        "air temp: 9°F; volume window: 100 gal; distance: 6 ft; flow: 10.0 gpm; "
        "pressure: 10.0 psi; level: 10.0 in; in season: True"
    )
    assert text.evidence_text({"air_temp_c": -12.8, "distance_ft": 10}, "metric") == (
        "air temp: -12.8°C; distance: 3.0 m"
    )


def test_measurements_in_detector_wording_are_converted_but_citations_are_not() -> None:
    reasons = ["air -12.8 °C, at or below freezing", "757 L discharged in the last 2 h"]
    assert text.evidence_text({"reasons": reasons}, "us") == (
        "reasons: air 9°F, at or below freezing; 200 gal discharged in the last 2 h"
    )
    assert text.prose("fines under L.L. 6-2024", "us") == "fines under L.L. 6-2024"
    assert text.prose(reasons[0], "metric") == reasons[0]


def test_big_totals_read_in_thousands_of_gallons_or_cubic_metres() -> None:
    assert text.large_volume(37_854.11784, "us") == "10.0 thousand gal"
    assert text.large_volume(12_345.0, "metric") == "12.3 m³"
    assert text.temp(0.0, "us") == "32°F" and text.temp(None, "us") == "-"


def test_a_flaky_sensor_lists_its_longest_gaps_and_sums_the_rest() -> None:
    t0 = SEASON_START
    gaps = [
        Gap(t0 + timedelta(hours=2 * i), t0 + timedelta(hours=2 * i + 1), ("air",))
        for i in range(99)
    ]
    gaps.insert(50, Gap(t0 + timedelta(days=30), t0 + timedelta(days=31), ("outlet",)))
    coverage = Coverage(2000, 1800, {"air": 0.95}, tuple(sorted(gaps, key=lambda g: g.start)))
    shown, more, more_time = coverage.listed_gaps(limit=10)
    assert len(shown) == 10
    assert shown == tuple(sorted(shown, key=lambda g: g.start))
    assert any(g.nodes == ("outlet",) for g in shown)  # the day-long gap is kept
    assert (more, more_time) == (90, timedelta(hours=90))
