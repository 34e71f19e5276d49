"""Report cuts of an operator's choosing (issue 18: a report due mid-failover in the
cluster proof): due after their settle time, written once."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from gateway.registry import load_registry
from gateway.reports.schedule import ReportTimes, due_reports, run_schedule_once
from gateway.reports.sources import ReportSources, SqliteAlerts
from gateway.rules.pack import load_packs
from gateway.state.database import SqliteDatabase
from gateway.state.findings import FindingRepository
from gateway.store.sqlite import SqliteStore
from tests.test_reports_delivery import _populate

CUT = datetime(2026, 12, 10, 12, 30, tzinfo=UTC)  # inside the 2026-2027 season
TIMES = ReportTimes(extra_cuts=(CUT,), settle=timedelta(seconds=5))


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


def _extra(sources: ReportSources, out: Path, now: datetime) -> set[str]:
    due = due_reports(now, sources, out, formats=("csv",), times=TIMES)
    return {d.path.parent.name for d in due if d.cut == CUT}


def test_an_extra_cut_is_due_once_its_settle_time_has_passed(
    sources: ReportSources, tmp_path: Path
) -> None:
    assert _extra(sources, tmp_path, CUT + timedelta(seconds=4)) == set()
    assert _extra(sources, tmp_path, CUT + timedelta(seconds=5)) == {"through-2026-12-10T123000Z"}


async def test_an_extra_cut_report_is_written_once(sources: ReportSources, tmp_path: Path) -> None:
    out, now = tmp_path / "reports", CUT + timedelta(minutes=1)
    first = await run_schedule_once(sources, out, now=now, formats=("csv",), times=TIMES)
    again = await run_schedule_once(sources, out, now=now, formats=("csv",), times=TIMES)
    assert {p.parent.name for p in first} >= {"through-2026-12-10T123000Z"}
    assert again == []
