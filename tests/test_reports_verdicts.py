"""Season verdicts as specifications: days from the level history, suspected vs confirmed,
waivers by pack, unknown facts, the installation as it was, and the enforcement path.

Findings and their level history go through the real FindingRepository on a temp
SQLite file; rollups through the real SqliteStore. Confirmations come from a small
in-memory implementation of our own ConfirmationSource protocol (gateway.domain).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from gateway.contract import NodeKind
from gateway.domain import (
    Confirmation,
    ConfirmationKind,
    Finding,
    FindingChange,
    FindingEvent,
    Severity,
)
from gateway.registry.models import SiteConfig, SiteRegistry
from gateway.reports.assemble import assemble_site_report
from gateway.reports.models import ComplianceStatus, Recommendation, SiteReport
from gateway.reports.render_html import site_html
from gateway.reports.sources import ReportSources
from gateway.rules.pack import load_packs
from gateway.rules.verdict import VerdictStatus, site_verdict
from gateway.state.database import SqliteDatabase
from gateway.state.findings import FindingRepository
from gateway.store.sqlite import SqliteStore
from gateway.web.views import _destination
from tests.test_reports_units import BAND_L, _hour

PACKS = load_packs()
TZ = ZoneInfo("America/Chicago")
SEASON = "2026-2027"
SEASON_START = datetime(2026, 11, 15, 6, tzinfo=UTC)  # local midnight
AFTER_SEASON = datetime(2027, 4, 30, 12, tzinfo=UTC)
#: Every fact an Edgar grade discharge is checked for, recorded and met.
GOOD_GRADE: dict[str, Any] = {
    "destination": "grade", "pipe_rigid": True, "valving_or_quick_connect": False,
    "pipe_inside_diameter_in": 1.25, "outlet_to_foundation_ft": 4,
    "outlet_to_property_line_ft": 18, "outlet_height_above_grade_ft": 1.0,
    "flows_toward_property_line": False, "storm_sewer_available": False,
    "outlet_to_walkway_ft": 30, "outlet_to_right_of_way_ft": 40,
}  # fmt: skip


def local(day: date, hour: int) -> datetime:
    """A local wall-clock time in the site's zone."""
    return datetime(day.year, day.month, day.day, hour, tzinfo=TZ)


def site(site_id: str, jurisdiction: str = "edgar", **extra: Any) -> SiteConfig:
    data: dict[str, Any] = {
        "id": site_id,
        "name": site_id,
        "jurisdiction": jurisdiction,
        "timezone": "America/Chicago",
        "nodes": [
            {"id": "pit", "kind": "pit"},
            {"id": "outlet", "kind": "discharge"},
            {"id": "air", "kind": "air"},
        ],
        "installation": GOOD_GRADE,
    }
    data.update(extra)
    return SiteConfig.model_validate(data)


class Records:
    """Our own ConfirmationSource, in memory."""

    def __init__(self, records: Sequence[Confirmation] = ()) -> None:
        self.records = list(records)

    def confirmations(self, site_id: str, start: datetime, end: datetime) -> list[Confirmation]:
        return [c for c in self.records if c.site_id == site_id and start <= c.observed_at < end]


def record(
    site_id: str, rule: str, at: datetime, kind: ConfirmationKind, confirms: bool = True
) -> Confirmation:
    return Confirmation(f"{site_id}-{at:%m%d%H}", site_id, rule, kind, at, confirms, "inspector")


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[SqliteDatabase]:
    database = SqliteDatabase(tmp_path / "v.db")
    await database.open()
    yield database
    await database.close()


@pytest.fixture
async def repo(db: SqliteDatabase) -> FindingRepository:
    findings = FindingRepository(db)
    await findings.open()
    return findings


async def store_history(
    repo: FindingRepository,
    site_id: str,
    rule: str,
    steps: Sequence[tuple[datetime, str]],
    cleared: datetime | None,
    finding_id: str,
) -> None:
    """A finding that moved through ``steps`` (at, level) and cleared at ``cleared``."""
    opened = steps[0][0]
    events = []
    for i, (at, level) in enumerate(steps):
        f = Finding(
            id=finding_id, rule_id=rule, site_id=site_id, severity=Severity.CRITICAL,
            title=f"{rule} at {site_id}", opened_at=opened, updated_at=at, level=level,
        )  # fmt: skip
        events.append(FindingEvent(FindingChange.OPENED if i == 0 else FindingChange.UPDATED, f))
    if cleared is not None:
        last = events[-1].finding
        f = Finding(
            id=finding_id, rule_id=rule, site_id=site_id, severity=last.severity,
            title=last.title, opened_at=opened, updated_at=cleared, cleared_at=cleared,
            level=last.level,
        )  # fmt: skip
        events.append(FindingEvent(FindingChange.CLEARED, f))
    await repo.apply(events)


async def report_for(
    db: SqliteDatabase,
    sites: Sequence[SiteConfig],
    site_id: str,
    records: Sequence[Confirmation] = (),
    now: datetime = AFTER_SEASON,
) -> SiteReport:
    store = SqliteStore(db)
    await store.open()
    repo = FindingRepository(db)
    await repo.open()
    sources = ReportSources(SiteRegistry(list(sites)), PACKS, store, repo, None, Records(records))
    return await assemble_site_report(sources, site_id, SEASON, now=now)


async def one_good_day(db: SqliteDatabase, site_id: str) -> None:
    """A full day of readings from every node, all the pumped water at the outlet."""
    store = SqliteStore(db)
    await store.open()
    rollups = []
    for h in range(24):
        start = SEASON_START + timedelta(hours=h)
        rollups += [
            _hour(site_id, "pit", NodeKind.PIT, start, cycles=1, on_s=15),
            _hour(site_id, "outlet", NodeKind.DISCHARGE, start, outlet_l=BAND_L),
            _hour(site_id, "air", NodeKind.AIR, start, air_c=5.0),
        ]
    await store.save_rollups(rollups)


# ------------------------------------------------------------ icing: thaw and refreeze

JAN5, JAN6, JAN9, JAN10 = date(2027, 1, 5), date(2027, 1, 6), date(2027, 1, 9), date(2027, 1, 10)
THAW_REFREEZE = [
    (local(JAN5, 10), "warning"),
    (local(JAN5, 14), "violation"),
    (local(JAN6, 2), "watch"),  # thaw
    (local(JAN9, 20), "violation"),  # refreeze
    (local(JAN10, 1), "watch"),
]


async def test_icing_that_thaws_and_refreezes_counts_its_violation_days_from_the_history(
    db: SqliteDatabase, repo: FindingRepository
) -> None:
    """At 4b01b62 the last level (watch) made this 0 violation days and 0 icing days."""
    await store_history(repo, "icy", "icing_risk", THAW_REFREEZE, local(date(2027, 1, 12), 9), "i")
    report = await report_for(db, [site("icy")], "icy")
    suspected = {d.day for d in report.days if d.suspected}
    assert suspected == {JAN5, JAN6, JAN9, JAN10}
    assert report.totals.icing_days == 4
    assert report.totals.violation_days == 0  # nothing confirmed the ice
    assert report.compliance.status is ComplianceStatus.SUSPECTED
    assert report.penalties.min_usd == 0.0
    assert report.penalties_if_confirmed is not None
    assert report.penalties_if_confirmed.min_usd == 300.0  # one month, Jan 2027


async def test_an_ice_observation_confirms_only_the_spell_it_saw(
    db: SqliteDatabase, repo: FindingRepository
) -> None:
    await store_history(repo, "icy", "icing_risk", THAW_REFREEZE, local(date(2027, 1, 12), 9), "i")
    seen = record("icy", "icing_risk", local(JAN6, 8), ConfirmationKind.OBSERVATION)
    report = await report_for(db, [site("icy")], "icy", [seen])
    assert {d.day for d in report.days if d.violation} == {JAN5, JAN6}
    assert {d.day for d in report.days if d.suspected} == {JAN9, JAN10}
    assert report.compliance.status is ComplianceStatus.VIOLATION
    assert report.penalties.min_usd == 300.0
    assert report.penalties.violation_months == ("Jan 2027",)
    # Edgar's text for a violation other than a prohibited connection: a citation ((f)(4)c).
    assert report.recommendation is Recommendation.CITATION


async def test_a_finding_cleared_at_violation_counts_only_the_days_it_was_there(
    db: SqliteDatabase, repo: FindingRepository
) -> None:
    dec1, dec3, dec4 = date(2026, 12, 1), date(2026, 12, 3), date(2026, 12, 4)
    steps = [(local(dec1, 9), "warning"), (local(dec3, 9), "violation")]
    await store_history(repo, "icy", "icing_risk", steps, local(dec4, 9), "i2")
    report = await report_for(db, [site("icy")], "icy")
    assert {d.day for d in report.days if d.suspected} == {dec3, dec4}


# ------------------------------------------------------------ an intermittent hose

EPISODES = [
    (date(2026, 12, 1), date(2026, 12, 2)),
    (date(2026, 12, 20), date(2026, 12, 21)),
    (date(2027, 1, 15), date(2027, 1, 16)),
]


async def hose(db: SqliteDatabase, site_id: str) -> None:
    repo = FindingRepository(db)
    await repo.open()  # the report opens its own repository on the same file
    for n, (first, last) in enumerate(EPISODES):
        steps = [(local(first, 8), "violation")]
        await store_history(repo, site_id, "sanitary_discharge", steps, local(last, 12), f"h{n}")


async def test_an_intermittent_hose_without_an_inspection_is_suspected_and_costs_nothing_yet(
    db: SqliteDatabase,
) -> None:
    await hose(db, "hose")
    report = await report_for(db, [site("hose")], "hose")
    assert report.totals.suspected_days == 6 and report.totals.violation_days == 0
    assert report.compliance.status is ComplianceStatus.SUSPECTED
    assert report.compliance.statement.startswith("Suspected violation")
    assert len(report.suspected) == 3
    assert (report.penalties.min_usd, report.penalties.max_usd) == (0.0, 0.0)
    assert report.penalties_if_confirmed is not None
    assert report.penalties_if_confirmed.min_usd == 600.0  # Dec and Jan
    # Edgar (f)(2)a: the owner schedules an inspection within 30 days of notice.
    assert report.recommendation is Recommendation.INSPECTION
    assert "30 days" in report.next_step and "(f)(2)a" in report.next_step
    page = site_html(report)
    assert "Suspected episodes (telemetry only, not counted above)" in page
    assert "If every suspected episode were confirmed, the estimate would be $600" in page
    assert "Suspected violation (not confirmed)" in page


async def test_an_inspection_that_finds_the_hose_confirms_its_episode_and_allows_an_order(
    db: SqliteDatabase,
) -> None:
    await hose(db, "hose")
    found = record("hose", "sanitary_discharge", local(date(2027, 1, 16), 10),
                   ConfirmationKind.INSPECTION)  # fmt: skip
    report = await report_for(db, [site("hose")], "hose", [found])
    assert report.totals.violation_days == 2 and report.totals.suspected_days == 4
    assert report.compliance.status is ComplianceStatus.VIOLATION
    assert report.recommendation is Recommendation.ORDER
    assert "(f)(1)" in report.next_step
    assert report.penalties.min_usd == 300.0


async def test_an_observation_is_not_the_inspection_edgar_needs_before_an_order(
    db: SqliteDatabase,
) -> None:
    await hose(db, "hose")
    seen = record("hose", "sanitary_discharge", local(date(2027, 1, 16), 10),
                  ConfirmationKind.OBSERVATION)  # fmt: skip
    report = await report_for(db, [site("hose")], "hose", [seen])
    assert report.compliance.status is ComplianceStatus.VIOLATION
    assert report.recommendation is Recommendation.INSPECTION


async def test_a_refuting_inspection_drops_the_suspicion(db: SqliteDatabase) -> None:
    await hose(db, "hose")
    clean = record("hose", "sanitary_discharge", local(date(2027, 1, 16), 10),
                   ConfirmationKind.INSPECTION, confirms=False)  # fmt: skip
    report = await report_for(db, [site("hose")], "hose", [clean])
    assert report.totals.suspected_days == 4  # the two earlier episodes stay suspected
    assert not any(d.suspected for d in report.days if d.day >= date(2027, 1, 15))


async def test_local_law_names_a_citation_never_an_order_and_fines_confirmed_days(
    db: SqliteDatabase,
) -> None:
    await hose(db, "law")
    found = record("law", "sanitary_discharge", local(date(2027, 1, 16), 10),
                   ConfirmationKind.INSPECTION)  # fmt: skip
    report = await report_for(db, [site("law", "local-law-6-2024")], "law", [found])
    assert report.recommendation is Recommendation.CITATION
    assert "penalties A" in report.next_step
    # Two confirmed days: a first offense ($50-250) and one later offense ($100-250).
    assert (report.penalties.min_usd, report.penalties.max_usd) == (150.0, 500.0)


# ------------------------------------------------------------ waivers


def waived_site(jurisdiction: str) -> SiteConfig:
    waiver = {"rule": "sanitary_discharge", "start": "2026-11-01", "end": "2027-06-30",
              "reference": "PW-2026-14"}  # fmt: skip
    return site("w", jurisdiction, installation={**GOOD_GRADE, "destination": "sanitary"},
                waivers=[waiver])  # fmt: skip


async def waived_episode(repo: FindingRepository) -> None:
    """A sanitary finding at violation Dec 10 - Dec 12, while the waiver is in force."""
    steps = [(local(date(2026, 12, 10), 8), "violation")]
    await store_history(repo, "w", "sanitary_discharge", steps, local(date(2026, 12, 12), 8), "w1")


async def test_an_edgar_site_with_an_approved_waiver_is_not_reported_out_of_compliance(
    db: SqliteDatabase, repo: FindingRepository
) -> None:
    await waived_episode(repo)
    report = await report_for(db, [waived_site("edgar")], "w")
    assert report.compliance.status is not ComplianceStatus.VIOLATION
    assert report.totals.violation_days == report.totals.suspected_days == 0
    assert report.penalties.max_usd == 0.0 and report.penalties_if_confirmed is None
    assert [a.status for a in report.audit if a.requirement_id == "no_sanitary_destination"] == [
        "waived"
    ]
    assert report.recommendation is Recommendation.NONE


async def test_the_same_waiver_counts_for_nothing_under_local_law_6_2024(
    db: SqliteDatabase, repo: FindingRepository
) -> None:
    await waived_episode(repo)
    report = await report_for(db, [waived_site("local-law-6-2024")], "w")
    assert report.compliance.status is ComplianceStatus.VIOLATION
    assert report.totals.suspected_days == 3


# ------------------------------------------------------------ facts: unknown, dated


async def test_a_home_with_every_fact_recorded_and_met_is_stated_in_compliance(
    db: SqliteDatabase,
) -> None:
    await one_good_day(db, "good")
    report = await report_for(db, [site("good")], "good", now=SEASON_START + timedelta(days=1))
    assert report.compliance.status is ComplianceStatus.COMPLIANT
    assert "every applicable requirement was checked and met" in report.compliance.statement
    assert report.totals.violation_days == report.totals.suspected_days == 0
    assert report.penalties.max_usd == 0.0 and report.penalties_if_confirmed is None
    assert report.recommendation is Recommendation.NONE


async def test_a_home_with_unrecorded_facts_is_no_violation_found_but_not_checked(
    db: SqliteDatabase,
) -> None:
    await one_good_day(db, "bare")
    bare = site("bare", installation={"destination": "grade", "outlet_to_walkway_ft": 30,
                                      "outlet_to_right_of_way_ft": 40})  # fmt: skip
    report = await report_for(db, [bare], "bare", now=SEASON_START + timedelta(days=1))
    assert report.compliance.status is ComplianceStatus.NOT_CHECKED
    assert report.compliance.statement.startswith("No violation found; 8 requirements not checked")
    assert "whether the discharge line is rigid pipe" in report.compliance.statement
    assert report.penalties.max_usd == 0.0
    assert report.recommendation is Recommendation.NONE


async def test_a_past_season_report_does_not_change_after_the_owner_fixes_the_line(
    db: SqliteDatabase,
) -> None:
    hose_line = {**GOOD_GRADE, "pipe_rigid": False}
    before_fix = site("h", installation=hose_line)
    after_fix = site(
        "h",
        installation=GOOD_GRADE,
        installation_history=[{**hose_line, "valid_from": "2025-05-01", "valid_to": "2027-05-10"}],
    )
    then = await report_for(db, [before_fix], "h")
    now = await report_for(db, [after_fix], "h", now=datetime(2027, 6, 1, tzinfo=UTC))
    assert (
        [(a.requirement_id, a.status) for a in now.audit]
        == [(a.requirement_id, a.status) for a in then.audit]
        == [("rigid_line", "fail")]
    )
    assert now.compliance.status is then.compliance.status is ComplianceStatus.VIOLATION
    assert now.audited_on == date(2027, 4, 15)


# ------------------------------------------------------------ the dashboard reads the verdict


def test_the_dashboard_claims_no_legality_ord_247_does_not_give() -> None:
    sanitary = site("s", "sewer-ord-247", installation={**GOOD_GRADE, "destination": "sanitary"})
    pack = PACKS["sewer-ord-247"]
    verdict = site_verdict(sanitary, pack, as_of=datetime(2027, 1, 10, tzinfo=UTC))
    lawful, note, _cites = _destination(sanitary, verdict, pack)
    assert lawful is None
    assert "Allowed" not in note and "permit" in note


def test_a_site_failing_three_requirements_has_one_verdict_not_in_compliance() -> None:
    bad = site("bad", installation={**GOOD_GRADE, "pipe_rigid": False,
                                    "pipe_inside_diameter_in": 0.75,
                                    "outlet_to_property_line_ft": 6})  # fmt: skip
    verdict = site_verdict(bad, PACKS["edgar"], as_of=datetime(2026, 11, 30, 18, tzinfo=UTC))
    assert verdict.status is VerdictStatus.VIOLATION
    assert len(verdict.failed) == 3
    staff = verdict.sentence("staff")
    homeowner = verdict.sentence("homeowner")
    assert staff.startswith("Not in compliance") and "registered installation fails 3" in staff
    assert "your installation fails 3" in homeowner


async def test_a_line_fixed_mid_season_still_shows_what_it_failed_while_in_place(
    db: SqliteDatabase,
) -> None:
    fixed_in_january = site(
        "h",
        installation=GOOD_GRADE,
        installation_history=[
            {
                **GOOD_GRADE,
                "pipe_rigid": False,
                "valid_from": "2025-05-01",
                "valid_to": "2027-01-10",
            }
        ],
    )
    report = await report_for(db, [fixed_in_january], "h")
    (item,) = [a for a in report.audit if a.status == "fail"]
    assert item.requirement_id == "rigid_line"
    assert item.message.startswith(
        "Until 2027-01-10 (earlier record): The discharge line is flexible"
    )
    assert report.compliance.status is ComplianceStatus.VIOLATION
    assert any("changed on 2027-01-11" in n for n in report.notes)
