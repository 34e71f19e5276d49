"""CSV for spreadsheets: one table, one header row, a TOTAL row at the end.

Per property: one row per local day. Village: one row per site. Numbers are
plain (no thousands separators or units; the unit is in the column name:
``pit_volume_gal`` / ``air_min_f`` in US customary units, ``pit_volume_l`` /
``air_min_c`` in metric) and the TOTAL row is the sum of the unrounded values,
converted and rounded once.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Sequence
from typing import Any

from gateway.reports.models import DayStats, SiteReport, VillageReport
from gateway.units import UnitSystem, convert

#: Column-name suffixes of converted measurements, by unit system.
_SUFFIX: dict[UnitSystem, dict[str, str]] = {
    "us": {"volume": "gal", "temperature": "f"},
    "metric": {"volume": "l", "temperature": "c"},
}
#: CSV values keep one decimal in either system (machine-friendly, no thousands separators).
DIGITS = 1


def _columns(names: Sequence[str], units: UnitSystem) -> tuple[str, ...]:
    """Fill each ``{volume}`` / ``{temperature}`` suffix with the unit system's."""
    return tuple(name.format(**_SUFFIX[units]) for name in names)


def site_columns(units: UnitSystem) -> tuple[str, ...]:
    """The property CSV's header: ``pit_volume_gal`` ... or ``pit_volume_l`` ..."""
    return _columns(_SITE_COLUMNS, units)


def village_columns(units: UnitSystem) -> tuple[str, ...]:
    """The village CSV's header in ``units``."""
    return _columns(_VILLAGE_COLUMNS, units)


_SITE_COLUMNS = (
    "site_id",
    "date",
    "hours",
    "covered_hours",
    "pump_cycles",
    "pump_on_h",
    "backup_pump_cycles",
    "pit_volume_{volume}",
    "outlet_volume_{volume}",
    "to_grade_{volume}",
    "to_storm_{volume}",
    "to_sanitary_suspected_{volume}",
    "unaccounted_hours",
    "air_min_{temperature}",
    "air_max_{temperature}",
    "pipe_min_{temperature}",
    "freezing_hours",
    "freezing_risk_hours",
    "icing_day",
    "violation_day",
    "suspected_day",
)
_VILLAGE_COLUMNS = (
    "site_id",
    "name",
    "address",
    "jurisdiction",
    "status",
    "recommendation",
    "reason",
    "coverage_share",
    "pit_volume_{volume}",
    "outlet_volume_{volume}",
    "to_sanitary_suspected_{volume}",
    "icing_days",
    "violation_days",
    "audit_failures",
    "alerts",
    "unacknowledged_alerts",
    "estimate_min_usd",
    "estimate_max_usd",
    "suspected_days",
    "requirements_not_checked",
)


def _r(value: float | None, digits: int = DIGITS) -> Any:
    return "" if value is None else round(value, digits)


def csv_value(quantity: str, value: float | None, units: UnitSystem) -> Any:
    """A stored (SI) value as the CSV writes it: converted, rounded once to ``DIGITS``."""
    return "" if value is None else round(convert(quantity, value, units), DIGITS)


def _write(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows(rows)
    return buf.getvalue()


def _day_row(sid: str, d: DayStats, units: UnitSystem) -> list[Any]:
    def vol(litres: float) -> Any:
        return csv_value("volume", litres, units)

    def deg(celsius: float | None) -> Any:
        return csv_value("temperature", celsius, units)

    return [
        sid,
        d.day.isoformat(),
        d.hours,
        d.covered_hours,
        d.pump_cycles,
        _r(d.pump_on_s / 3600, 3),
        d.backup_pump_cycles,
        vol(d.pit_volume_l),
        vol(d.outlet_volume_l),
        vol(d.grade_l),
        vol(d.storm_l),
        vol(d.sanitary_l),
        d.unaccounted_hours,
        deg(d.air_min_c),
        deg(d.air_max_c),
        deg(d.pipe_min_c),
        d.freezing_hours,
        d.freezing_risk_hours,
        int(d.icing),
        int(d.violation),
        int(d.suspected),
    ]


def _total_row(report: SiteReport, units: UnitSystem) -> list[Any]:
    def vol(litres: float) -> Any:
        return csv_value("volume", litres, units)

    def deg(values: list[float], pick: Callable[[list[float]], float]) -> Any:
        return csv_value("temperature", pick(values), units) if values else ""

    t, days = report.totals, report.days
    return [
        report.site.site_id,
        "TOTAL",
        sum(d.hours for d in days),
        report.coverage.covered_hours,
        t.pump_cycles,
        _r(t.pump_on_h, 3),
        sum(d.backup_pump_cycles for d in days),
        vol(t.pit_volume_l),
        vol(t.outlet_volume_l),
        vol(t.grade_l),
        vol(t.storm_l),
        vol(t.sanitary_l),
        sum(d.unaccounted_hours for d in days),
        deg([d.air_min_c for d in days if d.air_min_c is not None], min),
        deg([d.air_max_c for d in days if d.air_max_c is not None], max),
        deg([d.pipe_min_c for d in days if d.pipe_min_c is not None], min),
        t.freezing_hours,
        t.freezing_risk_hours,
        t.icing_days,
        t.violation_days,
        t.suspected_days,
    ]


def site_csv(report: SiteReport, units: UnitSystem = "us") -> str:
    """Daily rows of one property plus a TOTAL row, measurements in ``units``."""
    sid = report.site.site_id
    rows = [_day_row(sid, d, units) for d in report.days]
    rows.append(_total_row(report, units))
    return _write(site_columns(units), rows)


def village_csv(report: VillageReport, units: UnitSystem = "us") -> str:
    """One row per site plus a TOTAL row, volumes in ``units``."""

    def vol(litres: float) -> Any:
        return csv_value("volume", litres, units)

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
            vol(r.pit_volume_l),
            vol(r.outlet_volume_l),
            vol(r.sanitary_l),
            r.icing_days,
            r.violation_days,
            r.audit_failures,
            r.alerts,
            r.unacknowledged,
            _r(r.estimate_min_usd, 0),
            _r(r.estimate_max_usd, 0),
            r.suspected_days,
            r.not_checked,
        ]
        for r in report.rows
    ]
    t = report.totals
    # The TOTAL row keeps every column's type: text columns stay text (or empty), and
    # numeric ones hold numbers only, so a spreadsheet can sum or filter them.
    mean_coverage = sum(r.coverage for r in report.rows) / len(report.rows) if report.rows else 0
    rows.append(
        [
            "TOTAL",
            f"All sites ({t.sites})",
            "",
            report.scope,
            "",
            "",
            "",
            _r(mean_coverage, 4),
            vol(t.pit_volume_l),
            vol(t.outlet_volume_l),
            vol(t.sanitary_l),
            t.icing_days,
            t.violation_days,
            sum(r.audit_failures for r in report.rows),
            sum(r.alerts for r in report.rows),
            sum(r.unacknowledged for r in report.rows),
            _r(sum(r.estimate_min_usd for r in report.rows), 0),
            _r(sum(r.estimate_max_usd for r in report.rows), 0),
            sum(r.suspected_days for r in report.rows),
            sum(r.not_checked for r in report.rows),
        ]
    )
    return _write(village_columns(units), rows)
