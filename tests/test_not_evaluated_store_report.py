"""Issue 20.10: not-evaluated spans are kept in SQLite (migration 6), grown in place,
and listed in the site report (real SQLite file, the report's own HTML renderer)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from gateway.domain import NotEvaluated
from gateway.registry.models import SiteRegistry
from gateway.reports.assemble import assemble_site_report
from gateway.reports.render_html import site_html
from gateway.reports.sources import ReportSources
from gateway.rules.pack import load_packs
from gateway.rules.sequences import make_site
from gateway.state.database import Database, SqliteDatabase
from gateway.state.findings import FindingRepository
from gateway.store.sqlite import SqliteStore

SITE = make_site("late-1")
START = datetime(2026, 11, 20, 15, tzinfo=UTC)


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[SqliteDatabase]:
    database = SqliteDatabase(tmp_path / "state.db")
    await database.open()
    yield database
    await database.close()


def _span(span_id: str, start: datetime, minutes: int, count: int) -> NotEvaluated:
    return NotEvaluated(span_id, SITE.id, "pit", start, start + timedelta(minutes=minutes), count)


async def test_a_growing_span_is_one_record_with_its_full_extent(state_db: Database) -> None:
    repo = FindingRepository(state_db)  # on SQLite and on PostgreSQL
    await repo.open()
    await repo.record_not_evaluated(_span("a", START, 2, 12))
    await repo.record_not_evaluated(_span("a", START, 5, 30))
    await repo.record_not_evaluated(_span("a", START, 4, 24))  # an older write landing late
    assert await repo.not_evaluated(SITE.id) == [_span("a", START, 5, 30)]


async def test_spans_are_listed_by_site_and_window(state_db: Database) -> None:
    repo = FindingRepository(state_db)  # on SQLite and on PostgreSQL
    await repo.open()
    await repo.record_not_evaluated(_span("a", START, 5, 30))
    later = START + timedelta(days=2)
    await repo.record_not_evaluated(_span("b", later, 1, 6))
    window = await repo.not_evaluated(SITE.id, since=later - timedelta(hours=1))
    assert [s.id for s in window] == ["b"]
    assert await repo.not_evaluated("elsewhere") == []


async def test_the_site_report_lists_spans_not_evaluated(db: SqliteDatabase) -> None:
    repo = FindingRepository(db)
    await repo.open()
    store = SqliteStore(db)
    await store.open()
    sources = ReportSources(
        registry=SiteRegistry([SITE]),
        packs=load_packs(),
        store=store,
        findings=repo,
        not_evaluated=repo,
    )
    now = datetime(2026, 11, 30, 12, tzinfo=UTC)
    empty = site_html(await assemble_site_report(sources, SITE.id, "2026-2027", now=now))
    assert "Not evaluated from" not in empty
    await repo.record_not_evaluated(_span("a", START, 5, 31))
    report = await assemble_site_report(sources, SITE.id, "2026-2027", now=now)
    assert [s.count for s in report.not_evaluated] == [31]
    html = site_html(report)
    assert "Not evaluated from" in html and "no check for problems was run" in html
    assert '<td>pit</td><td class="num">31</td>' in html
