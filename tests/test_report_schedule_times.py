"""Report cuts of an operator's choosing (issue 18: a report due mid-failover in the
cluster proof): due after their settle time, written once."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from gateway.reports.schedule import ReportTimes, due_reports, run_schedule_once
from gateway.reports.sources import ReportSources
from tests.test_reports_delivery import sources  # noqa: F401 (a fixture, used below)

CUT = datetime(2026, 12, 10, 12, 30, tzinfo=UTC)  # inside the 2026-2027 season
TIMES = ReportTimes(extra_cuts=(CUT,), settle=timedelta(seconds=5))


@pytest.fixture
def demo(sources: ReportSources) -> ReportSources:  # noqa: F811
    """The populated demo sources of the schedule tests."""
    return sources


def _extra(demo: ReportSources, out: Path, now: datetime) -> set[str]:
    due = due_reports(now, demo, out, formats=("csv",), times=TIMES)
    return {d.path.parent.name for d in due if d.cut == CUT}


def test_an_extra_cut_is_due_once_its_settle_time_has_passed(
    demo: ReportSources, tmp_path: Path
) -> None:
    assert _extra(demo, tmp_path, CUT + timedelta(seconds=4)) == set()
    assert _extra(demo, tmp_path, CUT + timedelta(seconds=5)) == {"through-2026-12-10T123000Z"}


async def test_an_extra_cut_report_is_written_once(demo: ReportSources, tmp_path: Path) -> None:
    out, now = tmp_path / "reports", CUT + timedelta(minutes=1)
    first = await run_schedule_once(demo, out, now=now, formats=("csv",), times=TIMES)
    again = await run_schedule_once(demo, out, now=now, formats=("csv",), times=TIMES)
    assert {p.parent.name for p in first} >= {"through-2026-12-10T123000Z"}
    assert again == []
