"""CSV for spreadsheets: one table, one header row, a TOTAL row at the end.

Per property: one row per local day. Village: one row per site. Numbers are
plain (no thousands separators or units; the unit is in the column name) and
the TOTAL row is the sum of the unrounded values, rounded once.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from typing import Any

from gateway.reports.models import SiteReport, VillageReport

SITE_COLUMNS = (
    "site_id",
    "date",
    "hours",
    "covered_hours",
    "pump_cycles",
    "pump_on_h",
    "backup_pump_cycles",
    "pit_volume_l",
    "outlet_volume_l",
    "to_grade_l",
    "to_storm_l",
    "to_sanitary_suspected_l",
    "unaccounted_hours",
    "air_min_c",
    "air_max_c",
    "pipe_min_c",
    "freezing_hours",
    "freezing_risk_hours",
    "icing_day",
    "violation_day",
)
VILLAGE_COLUMNS = (
    "site_id",
    "name",
    "address",
    "jurisdiction",
    "status",
    "recommendation",
    "reason",
    "coverage_share",
    "pit_volume_l",
    "outlet_volume_l",
    "to_sanitary_suspected_l",
    "icing_days",
    "violation_days",
    "audit_failures",
    "alerts",
    "unacknowledged_alerts",
    "estimate_min_usd",
    "estimate_max_usd",
)


def _r(value: float | None, digits: int = 1) -> Any:
    return "" if value is None else round(value, digits)


def _write(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows(rows)
    return buf.getvalue()


def site_csv(report: SiteReport) -> str:
    """Daily rows of one property plus a TOTAL row."""
    sid = report.site.site_id
    rows: list[list[Any]] = []
    for d in report.days:
        rows.append(
            [
                sid,
                d.day.isoformat(),
                d.hours,
                d.covered_hours,
                d.pump_cycles,
                _r(d.pump_on_s / 3600, 3),
                d.backup_pump_cycles,
                _r(d.pit_volume_l),
                _r(d.outlet_volume_l),
                _r(d.grade_l),
                _r(d.storm_l),
                _r(d.sanitary_l),
                d.unaccounted_hours,
                _r(d.air_min_c),
                _r(d.air_max_c),
                _r(d.pipe_min_c),
                d.freezing_hours,
                d.freezing_risk_hours,
                int(d.icing),
                int(d.violation),
            ]
        )
    t = report.totals
    days = report.days
    airs_min = [d.air_min_c for d in days if d.air_min_c is not None]
    airs_max = [d.air_max_c for d in days if d.air_max_c is not None]
    pipes = [d.pipe_min_c for d in days if d.pipe_min_c is not None]
    rows.append(
        [
            sid,
            "TOTAL",
            sum(d.hours for d in days),
            report.coverage.covered_hours,
            t.pump_cycles,
            _r(t.pump_on_h, 3),
            sum(d.backup_pump_cycles for d in days),
            _r(t.pit_volume_l),
            _r(t.outlet_volume_l),
            _r(t.grade_l),
            _r(t.storm_l),
            _r(t.sanitary_l),
            sum(d.unaccounted_hours for d in days),
            _r(min(airs_min)) if airs_min else "",
            _r(max(airs_max)) if airs_max else "",
            _r(min(pipes)) if pipes else "",
            t.freezing_hours,
            t.freezing_risk_hours,
            t.icing_days,
            t.violation_days,
        ]
    )
    return _write(SITE_COLUMNS, rows)


def village_csv(report: VillageReport) -> str:
    """One row per site plus a TOTAL row."""
    rows: list[list[Any]] = [
        [
            r.site_id,
            r.name,
            r.address,
            r.jurisdiction,
            r.status.value,
            r.recommendation.value,
            r.reason,
            _r(r.coverage, 4),
            _r(r.pit_volume_l),
            _r(r.outlet_volume_l),
            _r(r.sanitary_l),
            r.icing_days,
            r.violation_days,
            r.audit_failures,
            r.alerts,
            r.unacknowledged,
            _r(r.estimate_min_usd, 0),
            _r(r.estimate_max_usd, 0),
        ]
        for r in report.rows
    ]
    t = report.totals
    rows.append(
        [
            "TOTAL",
            f"{t.sites} sites",
            "",
            report.scope,
            f"{t.sites_in_violation} in violation",
            str(sum(1 for r in report.rows if r.recommendation.value != "none")),
            "",
            "",
            _r(t.pit_volume_l),
            _r(t.outlet_volume_l),
            _r(t.sanitary_l),
            t.icing_days,
            t.violation_days,
            sum(r.audit_failures for r in report.rows),
            sum(r.alerts for r in report.rows),
            sum(r.unacknowledged for r in report.rows),
            _r(sum(r.estimate_min_usd for r in report.rows), 0),
            _r(sum(r.estimate_max_usd for r in report.rows), 0),
        ]
    )
    return _write(VILLAGE_COLUMNS, rows)
