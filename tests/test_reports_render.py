"""Renderers: a long village table breaks across numbered pages with its header repeated.

The report data is built by hand (renderers only format); poppler's ``pdftotext``
reads the PDF back.
"""

from __future__ import annotations

import subprocess
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

from gateway.reports.models import (
    ComplianceStatus,
    Recommendation,
    SiteStatusRow,
    VillageReport,
    VillageTotals,
    WeekStats,
)
from gateway.reports.render_csv import village_csv
from gateway.reports.render_html import village_html
from gateway.reports.render_pdf import village_pdf

N = 300


def _village() -> VillageReport:
    rows = tuple(
        SiteStatusRow(
            site_id=f"s{i:03d}",
            name=f"{i} Main St",
            address=f"{i} Main St & <Oak>",
            jurisdiction="edgar",
            status=ComplianceStatus.VIOLATION if i % 30 == 0 else ComplianceStatus.COMPLIANT,
            recommendation=Recommendation.ORDER if i % 30 == 0 else Recommendation.NONE,
            reason="prohibited discharge to the sanitary sewer found" if i % 30 == 0 else "",
            coverage=0.99,
            outlet_volume_l=1000.0 * i,
            pit_volume_l=1000.0 * i,
            sanitary_l=500.0 if i % 30 == 0 else 0.0,
            icing_days=i % 3,
            violation_days=5 if i % 30 == 0 else 0,
            audit_failures=0,
            alerts=1,
            unacknowledged=0,
            estimate_min_usd=300.0 if i % 30 == 0 else 0.0,
            estimate_max_usd=300.0 if i % 30 == 0 else 0.0,
        )
        for i in range(N)
    )
    weeks = tuple(
        WeekStats(date(2026, 11, 16) + timedelta(weeks=w), 1e5, 9e4, 1e3, w % 4, w % 3, 10)
        for w in range(22)
    )
    return VillageReport(
        title="Winter monitoring report 2026-2027: Village of Edgar",
        scope="edgar",
        season_label="2026-2027",
        first_day=date(2026, 11, 15),
        last_day=date(2027, 4, 15),
        seasons=("edgar: Nov 15, 2026 - Apr 15, 2027",),
        through=datetime(2027, 4, 16, 5, tzinfo=UTC),
        generated_at=datetime(2027, 4, 20, tzinfo=UTC),
        rows=rows,
        totals=VillageTotals(N, 1e6, 9e5, 5e3, 300, 50, 10, 290),
        priority=tuple(r for r in rows if r.recommendation is Recommendation.ORDER),
        weeks=weeks,
    )


def test_long_village_table_breaks_across_numbered_pages_repeating_its_header(
    tmp_path: Path,
) -> None:
    path = tmp_path / "village.pdf"
    path.write_bytes(village_pdf(_village()))
    text = subprocess.run(
        ["pdftotext", "-layout", str(path), "-"], capture_output=True, text=True, check=True
    ).stdout
    pages = text.split("\f")[:-1]
    assert len(pages) >= 5
    for n, page in enumerate(pages, 1):
        assert f"Page {n} of {len(pages)}" in page
        assert "Village of Edgar" in page  # the running header
    # The every-site table runs over several pages, each starting with its header row.
    table_pages = [p for p in pages if any(f"s{i:03d}" in p for i in range(1, N, 30))]
    assert len(table_pages) >= 3
    assert all("Cover." in p and "Status" in p for p in table_pages)
    assert "s299" in text and "& <Oak>" in text  # every row, markup escaped


def test_village_html_escapes_and_csv_has_a_row_per_site(tmp_path: Path) -> None:
    report = _village()
    html = village_html(report, charts={})
    assert "&amp; &lt;Oak&gt;" in html and "<Oak>" not in html
    lines = village_csv(report).splitlines()
    assert len(lines) == 1 + N + 1
    assert lines[-1].startswith("TOTAL,All sites (300)")
