"""Issue 16.3 and 16.4: what a case records reaches every consumer of the site.

A case-granted waiver and an inspection's installation facts are merged into the
site the registry hands out (``SiteRegistry.amended``), so the detectors, the audit,
the verdict and the reports read them without merging on their own. Real SQLite.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest

from gateway.cases.ledger import total_cents
from gateway.cases.models import (
    ChecklistResult,
    Decision,
    Inspection,
    Origin,
    Outcome,
    StepKind,
    WaiverTerms,
)
from gateway.cases.repository import CaseRepository
from gateway.cases.service import Actor, CaseError, CaseService
from gateway.domain import FindingChange
from gateway.registry.models import InstallationRecord, SiteConfig, SiteRegistry
from gateway.reports.models import SiteReport
from gateway.rules.audit import AuditStatus, audit_site
from gateway.rules.engine import RulesEngine
from gateway.rules.pack import load_packs
from gateway.rules.sequences import Faults, MiniSump, feed, make_site, opened
from gateway.state.database import SqliteDatabase

CLERK = Actor("edgar-pw", "public_works")
OWNER = Actor("owner", "homeowner")
START = datetime(2026, 6, 1, 12, tzinfo=UTC)


@dataclass
class Clock:
    now: datetime

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[SqliteDatabase]:
    database = SqliteDatabase(tmp_path / "cases.sqlite")
    await database.open()
    yield database
    await database.close()


async def _cases(
    db: SqliteDatabase, site: SiteConfig, clock: Clock
) -> tuple[CaseService, SiteRegistry]:
    repo = CaseRepository(db)
    await repo.open()
    registry = SiteRegistry([site]).amended(repo)
    return CaseService(repo, registry, load_packs(), clock=clock), registry


async def _grant(service: CaseService, site_id: str, start: datetime, end: datetime) -> None:
    case = await service.open_case(site_id, "sanitary_discharge", Origin.COMPLAINT, CLERK)
    applied = service.new_step(StepKind.WAIVER_APPLIED, waiver=WaiverTerms(grounds="no lateral"))
    await service.record(case.id, applied, OWNER)
    terms = WaiverTerms(decision=Decision.GRANTED, decider="engineer", start=start, end=end)
    await service.record(case.id, service.new_step(StepKind.WAIVER_DECIDED, waiver=terms), CLERK)


def _status(site: SiteConfig, at: datetime) -> AuditStatus:
    pack = load_packs()[site.jurisdiction]
    [item] = [
        i for i in audit_site(site, pack, at=at) if i.requirement_id == "no_sanitary_destination"
    ]
    return item.status


async def test_a_case_granted_edgar_waiver_silences_the_sanitary_finding_and_audit_until_it_expires(
    db: SqliteDatabase,
) -> None:
    site = make_site("elm-9", "edgar", destination="sanitary")
    clock = Clock(START - timedelta(days=1))
    service, registry = await _cases(db, site, clock)
    end = START + timedelta(hours=3)
    await _grant(service, site.id, START - timedelta(hours=1), end)

    # The detectors read the registry's merged site: nothing during the waiver ...
    engine = RulesEngine(registry, load_packs())
    sim = MiniSump(site, START, faults=Faults(sanitary_share=1.0), noise=1.0)
    assert opened(feed(engine, sim.run(3 * 3600)), "sanitary_discharge") == []
    # ... and its expiry (Edgar (f)(3)b "for a limited time") brings the finding back.
    (finding,) = opened(feed(engine, sim.run(3 * 3600)), "sanitary_discharge")
    assert finding.opened_at >= end and finding.level == "violation"

    merged = registry.require(site.id)
    assert _status(merged, START + timedelta(hours=1)) == "waived"
    assert _status(merged, end + timedelta(minutes=1)) == "fail"
    assert _status(site, START + timedelta(hours=1)) == "fail"  # the file alone


async def test_a_waiver_granted_while_the_engine_runs_is_honoured_from_its_next_tick(
    db: SqliteDatabase,
) -> None:
    site = make_site("elm-9", "edgar", destination="sanitary")
    clock = Clock(START)
    service, registry = await _cases(db, site, clock)
    engine = RulesEngine(registry, load_packs())
    sim = MiniSump(site, START, faults=Faults(sanitary_share=1.0), noise=1.0)
    (finding,) = opened(feed(engine, sim.run(3 * 3600)), "sanitary_discharge")
    now = START + timedelta(hours=3)
    await _grant(service, site.id, now, now + timedelta(days=30))
    engine.tick(now)  # the gateway ticks every few seconds
    later = feed(engine, sim.run(3600))
    cleared = [e for e in later if e.change is FindingChange.CLEARED]
    assert [e.finding.id for e in cleared] == [finding.id]
    assert opened(later, "sanitary_discharge") == []


async def test_under_local_law_6_2024_the_pack_offers_no_waiver_to_grant(
    db: SqliteDatabase,
) -> None:
    site = make_site("main-1", "local-law-6-2024", destination="sanitary")
    service, registry = await _cases(db, site, Clock(START))
    case = await service.open_case(site.id, "sanitary_discharge", Origin.COMPLAINT, CLERK)
    assert StepKind.WAIVER_APPLIED not in service.offered(case, OWNER)
    with pytest.raises(CaseError, match="no such step"):
        applied = service.new_step(StepKind.WAIVER_APPLIED, waiver=WaiverTerms(grounds="cost"))
        await service.record(case.id, applied, OWNER)
    assert registry.require(site.id).waivers == ()
    assert _status(registry.require(site.id), START) == "fail"


async def test_a_passing_inspection_becomes_the_installation_record_from_its_day(
    db: SqliteDatabase,
) -> None:
    site = make_site("elm-9", "edgar", destination="sanitary")
    inspected_at = datetime(2027, 5, 20, 15, tzinfo=UTC)  # 10:00 in Wisconsin
    service, registry = await _cases(db, site, Clock(inspected_at))
    case = await service.open_case(site.id, "sanitary_discharge", Origin.COMPLAINT, CLERK)
    result = Inspection(
        outcome=Outcome.PASS,
        inspector="B. Inspector",
        items=(ChecklistResult("no_sanitary_destination", True, "to the storm lateral"),),
        facts=(("destination", "storm_lateral"), ("check_valve", True)),
    )
    step = service.new_step(StepKind.INSPECTION_RESULT, inspection=result)
    await service.record(case.id, step, CLERK)

    merged = registry.require(site.id)
    inspected = merged.installation_on(inspected_at.date())
    assert inspected.destination is not None and inspected.destination.value == "storm_lateral"
    assert inspected.check_valve is True
    assert merged.installation_on(inspected_at.date() - timedelta(days=1)) == site.installation
    after = [i.requirement_id for i in audit_site(merged, load_packs()["edgar"], at=inspected_at)]
    assert "no_sanitary_destination" not in after
    before = audit_site(merged, load_packs()["edgar"], at=inspected_at - timedelta(days=2))
    assert "no_sanitary_destination" in [i.requirement_id for i in before]


async def test_inspected_facts_that_are_not_installation_facts_are_refused(
    db: SqliteDatabase,
) -> None:
    site = make_site("elm-9", "edgar", destination="sanitary")
    service, _ = await _cases(db, site, Clock(START))
    case = await service.open_case(site.id, "sanitary_discharge", Origin.COMPLAINT, CLERK)
    bad = Inspection(outcome=Outcome.FAIL, facts=(("colour", "red"),))
    with pytest.raises(CaseError, match="installation facts"):
        await service.record(
            case.id, service.new_step(StepKind.INSPECTION_RESULT, inspection=bad), CLERK
        )


async def test_a_refused_inspection_records_no_installation_facts(db: SqliteDatabase) -> None:
    site = make_site("elm-9", "edgar", destination="sanitary")
    service, registry = await _cases(db, site, Clock(START))
    case = await service.open_case(site.id, "sanitary_discharge", Origin.COMPLAINT, CLERK)
    refused = Inspection(outcome=Outcome.REFUSED, facts=(("destination", "grade"),))
    await service.record(
        case.id, service.new_step(StepKind.INSPECTION_RESULT, inspection=refused), CLERK
    )
    assert registry.require(site.id) == site


async def test_the_merged_records_survive_a_restart(db: SqliteDatabase) -> None:
    site = make_site("elm-9", "edgar", destination="sanitary")
    clock = Clock(START)
    service, _ = await _cases(db, site, clock)
    await _grant(service, site.id, START, START + timedelta(days=5))
    _, reopened = await _cases(db, site, clock)  # a new repository reads the database
    [waiver] = reopened.require(site.id).waivers
    assert waiver.rule == "sanitary_discharge" and "decided by engineer" in waiver.reference


async def test_after_a_passing_inspection_the_audit_reads_it_and_a_past_season_report_stays(
    db: SqliteDatabase,
) -> None:
    from gateway.reports.assemble import assemble_site_report
    from gateway.reports.sources import ReportSources
    from gateway.store.sqlite import SqliteStore

    site = make_site("elm-9", "edgar", destination="sanitary")
    inspected_at = datetime(2027, 5, 20, 15, tzinfo=UTC)  # after the 2026-2027 season
    service, registry = await _cases(db, site, Clock(inspected_at))
    store = SqliteStore(db)
    await store.open()

    async def report(season: str, now: datetime) -> list[tuple[str, str]]:
        sources = ReportSources(registry, load_packs(), store, confirmations=service)
        built = await assemble_site_report(sources, site.id, season, now=now)
        return [(a.requirement_id, a.status) for a in built.audit]

    past_before = await report("2026-2027", inspected_at)
    case = await service.open_case(site.id, "sanitary_discharge", Origin.COMPLAINT, CLERK)
    passed = Inspection(outcome=Outcome.PASS, facts=(("destination", "storm_lateral"),))
    await service.record(
        case.id, service.new_step(StepKind.INSPECTION_RESULT, inspection=passed), CLERK
    )
    assert ("no_sanitary_destination", "fail") in past_before
    assert await report("2026-2027", inspected_at + timedelta(days=200)) == past_before
    next_season = await report("2027-2028", datetime(2027, 12, 1, tzinfo=UTC))
    assert "no_sanitary_destination" not in [r for r, _ in next_season]


async def _season_report(
    service: CaseService, registry: SiteRegistry, db: SqliteDatabase, site_id: str, now: datetime
) -> SiteReport:
    from gateway.reports.assemble import assemble_site_report
    from gateway.reports.sources import ReportSources
    from gateway.store.sqlite import SqliteStore

    store = SqliteStore(db)
    await store.open()
    sources = ReportSources(registry, load_packs(), store, confirmations=service, ledger=service)
    return await assemble_site_report(sources, site_id, "2026-2027", now=now)


async def test_ledger_totals_equal_the_reports_for_an_edgar_surcharge(db: SqliteDatabase) -> None:
    # Issue 16.5: "ledger totals equal the report's".
    site = make_site("elm-9", "edgar", destination="sanitary")
    now = datetime(2027, 3, 20, 15, tzinfo=UTC)
    service, registry = await _cases(db, site, Clock(now))
    case = await service.open_case(site.id, "sanitary_discharge", Origin.COMPLAINT, CLERK)
    failed = Inspection(outcome=Outcome.FAIL, inspector="B. Inspector")
    step = service.new_step(
        StepKind.INSPECTION_RESULT, datetime(2027, 1, 10, 16, tzinfo=UTC), inspection=failed
    )
    await service.record(case.id, step, CLERK)

    report = await _season_report(service, registry, db, site.id, now)
    posted = await service.repo.ledger(frozenset({site.id}))
    assert [e.period for e in posted] == ["2027-01", "2027-02", "2027-03"]
    assert round(report.penalties.min_usd * 100) == total_cents(posted) == 90000
    assert report.penalties.violation_months == ("Jan 2027", "Feb 2027", "Mar 2027")
    assert "not a legal determination" in report.penalties.disclaimer
    assert "ledger" in report.penalties.disclaimer


async def test_ledger_totals_equal_the_reports_for_local_law_fines(db: SqliteDatabase) -> None:
    site = make_site("main-1", "local-law-6-2024", destination="grade")
    now = datetime(2027, 2, 10, 15, tzinfo=UTC)
    service, registry = await _cases(db, site, Clock(now))
    case = await service.open_case(site.id, "icing_risk", Origin.OBSERVATION, CLERK)
    days = (date(2027, 1, 12), date(2027, 1, 13), date(2027, 2, 2))
    await service.record(case.id, service.new_step(StepKind.CITATION, offense_days=days), CLERK)
    report = await _season_report(service, registry, db, site.id, now)
    posted = await service.repo.ledger(frozenset({site.id}))
    assert round(report.penalties.min_usd * 100) == total_cents(posted) == 25000
    assert report.penalties.violation_days == 3
    assert any("referral" in line.basis for line in report.penalties.lines)


async def test_a_site_without_a_case_keeps_the_telemetry_estimate(db: SqliteDatabase) -> None:
    site = make_site("elm-9", "edgar", destination="grade")
    now = datetime(2027, 3, 20, 15, tzinfo=UTC)
    service, registry = await _cases(db, site, Clock(now))
    report = await _season_report(service, registry, db, site.id, now)
    assert "ledger" not in report.penalties.disclaimer


def test_an_inspection_inside_a_dated_record_ends_it_the_day_before() -> None:
    from gateway.cases.amend import InspectedFacts, with_inspection

    hose = {"destination": "grade", "pipe_rigid": False}
    site = make_site("h", "edgar", destination="grade", pipe_rigid=True)
    site = site.model_copy(
        update={
            "installation_history": (
                InstallationRecord.model_validate(
                    {**hose, "valid_from": date(2025, 5, 1), "valid_to": date(2027, 5, 10)}
                ),
            )
        }
    )
    inspected = with_inspection(site, InspectedFacts(date(2027, 3, 1), (("check_valve", True),)))
    [record] = inspected.installation_history
    assert (record.valid_from, record.valid_to) == (date(2025, 5, 1), date(2027, 2, 28))
    on_day = inspected.installation_on(date(2027, 3, 1))
    assert on_day.pipe_rigid is False and on_day.check_valve is True  # in force then + found
    assert inspected.installation_on(date(2027, 2, 28)).check_valve is None
