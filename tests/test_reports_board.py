"""Issue 20.9: reports a village board would file, read back from the rendered PDF
(pdftotext, pdftoppm) and the CSV, over a real populated data folder."""

from __future__ import annotations

import asyncio
import csv
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from matplotlib.figure import Figure
from typer.testing import CliRunner

from gateway.reports import text
from gateway.reports.charts import _nonnegative
from gateway.reports.cli import report_app
from gateway.reports.models import AlertEntry
from tests.test_reports_delivery import SEASON, _populate

VILLAGE_NUMERIC = (
    "coverage_share", "pit_volume_gal", "outlet_volume_gal", "to_sanitary_suspected_gal",
    "icing_days", "violation_days", "audit_failures", "alerts", "unacknowledged_alerts",
    "estimate_min_usd", "estimate_max_usd", "suspected_days", "requirements_not_checked",
)  # fmt: skip


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """h1 (12 Elm St, data), h2 (3 Oak Ave, no data) and the Edgar village, rendered."""
    root = tmp_path_factory.mktemp("board")
    data = root / "data"
    sites = asyncio.run(_populate(data))
    out = root / "out"
    out.mkdir()
    for scope, fmt in (("--site=h1", "pdf"), ("--site=h2", "pdf"), ("--jurisdiction=edgar", "pdf"),
                       ("--jurisdiction=edgar", "csv")):  # fmt: skip
        result = CliRunner().invoke(
            report_app,
            ["winter", "--season", SEASON, scope, "--format", fmt, "--out", str(out),
             "--data-dir", str(data), "--sites", str(sites)],
        )  # fmt: skip
        assert result.exit_code == 0, result.output
    return out


def _text(pdf: Path) -> str:
    return subprocess.run(
        ["pdftotext", "-layout", str(pdf), "-"], capture_output=True, text=True, check=True
    ).stdout


def test_a_site_report_speaks_one_time_zone_the_sites(reports: Path) -> None:
    page = _text(reports / "winter-2026-2027-site-h1.pdf")
    assert "(America/Chicago)" in page
    assert "UTC" not in page


def test_the_title_names_the_property_once(reports: Path) -> None:
    page = _text(reports / "winter-2026-2027-site-h1.pdf")
    assert "12 Elm St (site h1)" in page
    assert "12 Elm St, 12 Elm St" not in page


def test_a_report_without_any_data_says_not_enough_data_first(reports: Path) -> None:
    page = _text(reports / "winter-2026-2027-site-h2.pdf")
    assert page.index("NOT ENOUGH DATA") < page.index("Jurisdiction")
    assert "No violation was found" not in page


def test_requirements_are_named_in_words_not_ids_split_mid_word(reports: Path) -> None:
    page = _text(reports / "winter-2026-2027-site-h2.pdf")
    # The first column ends where the header's "Status" starts (pdftotext's column
    # positions move with what else is on the page).
    lines = page.splitlines()
    width = next(ln for ln in lines if ln.lstrip().startswith("Requirement")).index("Status")
    first_column = [line[:width].strip() for line in lines if line.startswith(" ")]
    at = first_column.index("No sanitary")
    assert first_column[at + 1] == "destination"  # wrapped between words
    assert not any(cell.startswith("no_") for cell in first_column)


def test_the_village_report_has_a_cover_block_and_counts_every_site(reports: Path) -> None:
    page = _text(reports / "winter-2026-2027-edgar.pdf")
    for label in ("Prepared for", "Prepared by", "Date", "Signature"):
        assert label in page
    assert "Village of Edgar" in page.split("Prepared for")[1].splitlines()[0]
    assert "Sites without enough data to say" in page
    assert "Sites with a suspected violation (not confirmed)" in page
    assert "UTC" not in page


def test_small_village_totals_read_in_gallons_not_thousands(reports: Path) -> None:
    totals = _text(reports / "winter-2026-2027-edgar.pdf").split("1. Totals")[1].split("2. ")[0]
    assert "thousand gal" not in totals
    assert " gal" in totals


def test_the_village_pdf_renders_to_page_images(reports: Path, tmp_path: Path) -> None:
    subprocess.run(
        ["pdftoppm", "-r", "40", "-png", str(reports / "winter-2026-2027-edgar.pdf"),
         str(tmp_path / "p")],
        check=True,
    )  # fmt: skip
    assert sorted(p.name for p in tmp_path.glob("p-*.png"))[0] == "p-1.png"


def test_the_village_csv_keeps_numeric_columns_numeric_in_every_row(reports: Path) -> None:
    with (reports / "winter-2026-2027-edgar.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert rows[-1]["site_id"] == "TOTAL"
    for row in rows:
        for column in VILLAGE_NUMERIC:
            float(row[column])  # raises on "1 sites", "0 in violation" or blanks


def test_an_all_zero_chart_has_no_negative_axis() -> None:
    ax = Figure().add_subplot()
    ax.bar([1, 2, 3], [0, 0, 0])
    _nonnegative(ax)
    assert ax.get_ylim() == (0.0, 1.0)


def test_the_report_names_who_resolved_an_alert_and_why() -> None:
    t0 = datetime(2026, 12, 1, tzinfo=UTC)
    entry = AlertEntry(
        rule_id="sanitary_discharge", title="t", severity="warning", state="resolved",
        opened_at=t0, acknowledged_at=None, acknowledged_by=None,
        resolved_at=t0 + timedelta(hours=1), resolved_by="crew-7", resolve_note="hose removed",
        condition_persisted=True,
    )  # fmt: skip
    assert text.resolution(entry) == "crew-7: hose removed (condition still detected)"


def test_an_administrators_test_alert_is_not_counted_in_a_report() -> None:
    from alerts.lifecycle import test_alert
    from gateway.reports.assemble import _alerts

    decision = test_alert("h1", "edgar", datetime(2026, 12, 1, tzinfo=UTC), new_id="t", by="admin")
    assert decision.alert is not None
    entries, summary = _alerts([decision.alert])
    assert entries == [] and summary.count == 0
