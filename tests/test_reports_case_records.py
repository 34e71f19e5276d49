"""Property reports and case records: the disclaimer, frozen evidence and the ledger.

Real SQLite for the findings, the rollups and the cases.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from markupsafe import escape

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
    note = report.notes[0]
    assert note.startswith("This report is not an inspection")
    assert "village inspection ((f)(2)a)" in note and "plumber's certificate" in note
    assert str(escape(note)) in site_html(report)


async def test_a_text_without_an_inspection_step_still_gets_the_plain_disclaimer(
    db: SqliteDatabase,
) -> None:
    site = make_site("s-1", "storm-ord-1991-43", destination="grade")
    sources = await _sources(db, SiteRegistry([site]))
    report = await assemble_site_report(sources, site.id, SEASON, now=AFTER_SEASON)
    assert report.notes[0].startswith("This report is not an inspection")
    assert "accepts as proof" not in report.notes[0]
