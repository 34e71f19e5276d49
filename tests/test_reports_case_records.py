"""Property reports and case records: the disclaimer, frozen evidence and the ledger.

Real SQLite for the findings, the rollups and the cases.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from markupsafe import escape

from gateway.domain import Audience, Finding, FindingChange, FindingEvent, Severity
from gateway.registry.models import SiteRegistry
from gateway.reports.assemble import assemble_site_report
from gateway.reports.render_html import site_html
from gateway.reports.sources import ReportSources
from gateway.rules.pack import load_packs
from gateway.rules.sequences import make_site
from gateway.state.database import SqliteDatabase
from gateway.state.findings import FindingRepository
from gateway.store.sqlite import SqliteStore

PACKS = load_packs()
SEASON = "2026-2027"
AFTER_SEASON = datetime(2027, 4, 30, 12, tzinfo=UTC)


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[SqliteDatabase]:
    database = SqliteDatabase(tmp_path / "r.db")
    await database.open()
    yield database
    await database.close()


async def _sources(db: SqliteDatabase, registry: SiteRegistry) -> ReportSources:
    store = SqliteStore(db)
    await store.open()
    findings = FindingRepository(db)
    await findings.open()
    return ReportSources(registry, PACKS, store, findings)


async def test_the_property_report_says_it_is_not_the_inspection_the_text_accepts_as_proof(
    db: SqliteDatabase,
) -> None:
    site = make_site("elm-9", "edgar", destination="grade")
    sources = await _sources(db, SiteRegistry([site]))
    report = await assemble_site_report(sources, site.id, SEASON, now=AFTER_SEASON)
    # Review O6: Edgar (f)(4)b "with verification by Village inspection", (f)(2)a certificate.
    first, proof = report.notes[:2]
    assert first.startswith("Not an inspection: this report establishes neither compliance")
    assert "village inspection ((f)(2)a)" in proof and "plumber's certificate" in proof
    assert str(escape(first)) in site_html(report) and str(escape(proof)) in site_html(report)


async def test_a_text_without_an_inspection_step_still_gets_the_plain_disclaimer(
    db: SqliteDatabase,
) -> None:
    site = make_site("s-1", "storm-ord-1991-43", destination="grade")
    sources = await _sources(db, SiteRegistry([site]))
    report = await assemble_site_report(sources, site.id, SEASON, now=AFTER_SEASON)
    assert report.notes[0].startswith("Not an inspection")
    assert not any(n.startswith("Proof under") for n in report.notes)


async def test_a_past_season_report_shows_the_frozen_evidence_while_the_finding_updates(
    db: SqliteDatabase,
) -> None:
    # Issue 15.5: the evidence as frozen at or before the period end, not as overwritten.
    site = make_site("elm-9", "edgar", destination="grade")
    findings = FindingRepository(db)
    await findings.open()
    opened_at = datetime(2027, 1, 10, 12, tzinfo=UTC)
    finding = Finding(
        id="f-9", rule_id="sanitary_discharge", site_id=site.id, severity=Severity.CRITICAL,
        title="t", opened_at=opened_at, updated_at=opened_at, level="violation",
        audience=(Audience.HOMEOWNER, Audience.PUBLIC_WORKS), evidence={"unaccounted_l": 40.0},
    )  # fmt: skip
    await findings.apply([FindingEvent(FindingChange.OPENED, finding)])
    sources = replace(await _sources(db, SiteRegistry([site])), snapshots=findings)

    async def evidence_shown() -> dict[str, object]:
        report = await assemble_site_report(sources, site.id, SEASON, now=AFTER_SEASON)
        [entry] = report.findings
        return dict(entry.evidence)

    then = await evidence_shown()
    # Still open after the season: the detector keeps rewriting its evidence.
    for hours, level in ((2400, "alarm"), (2500, "alarm")):
        later = replace(
            finding,
            updated_at=opened_at + timedelta(hours=hours),
            level=level,
            evidence={"unaccounted_l": float(hours)},
        )
        await findings.apply([FindingEvent(FindingChange.UPDATED, later)])
    assert then == {"unaccounted_l": 40.0}
    assert await evidence_shown() == then
