"""Wording and number formats shared by the HTML, PDF and CSV renderers."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from gateway.reports.models import ComplianceStatus, Recommendation

STATUS_LABEL = {
    ComplianceStatus.VIOLATION: "Not in compliance",
    ComplianceStatus.ATTENTION: "Needs attention",
    ComplianceStatus.COMPLIANT: "In compliance",
    ComplianceStatus.INSUFFICIENT_DATA: "Insufficient data",
}
RECOMMENDATION_LABEL = {
    Recommendation.ORDER: "Order",
    Recommendation.INSPECTION: "Inspection",
    Recommendation.NONE: "-",
}
DESTINATION_LABEL = {
    "grade": "grade (lawn)",
    "swale": "swale",
    "storm_lateral": "storm sewer lateral",
    "sanitary": "sanitary sewer",
}


def litres(value: float) -> str:
    """``12,345 L``."""
    return f"{value:,.0f} L"


def cubic_metres(value_l: float) -> str:
    """Litres shown as ``12.3 m³``."""
    return f"{value_l / 1000:,.1f} m³"


def usd(value: float | None) -> str:
    """``$1,200`` (or a dash)."""
    return "-" if value is None else f"${value:,.0f}"


def usd_range(lo: float | None, hi: float | None) -> str:
    """``$300`` or ``$50 - $250``."""
    if lo is None and hi is None:
        return "no amount in the text"
    if lo == hi or hi is None:
        return usd(lo)
    if lo is None:
        return usd(hi)
    return f"{usd(lo)} - {usd(hi)}"


def percent(share: float) -> str:
    """``97.5 %``."""
    return f"{share * 100:.1f} %"


def temp(value: float | None) -> str:
    """``-3.2 °C`` (or a dash)."""
    return "-" if value is None else f"{value:.1f} °C"


def local_time(when: datetime | None, tz: str) -> str:
    """A timestamp in the site's zone, ``2026-12-15 06:40``."""
    if when is None:
        return "-"
    return when.astimezone(ZoneInfo(tz)).strftime("%Y-%m-%d %H:%M")


def duration(value: timedelta | None) -> str:
    """``2 h 05 min``, ``3 d 4 h``, ``45 s``."""
    if value is None:
        return "-"
    s = int(value.total_seconds())
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min"
    if s < 86400:
        return f"{s // 3600} h {s % 3600 // 60:02d} min"
    return f"{s // 86400} d {s % 86400 // 3600} h"


def evidence_text(evidence: Mapping[str, Any], limit: int = 8) -> str:
    """A finding's evidence as ``key: value`` pairs, most useful first."""
    parts = []
    for key, value in list(evidence.items())[:limit]:
        if isinstance(value, list | tuple):
            value = "; ".join(str(v) for v in value)
        elif isinstance(value, float):
            value = f"{value:g}"
        parts.append(f"{key.replace('_', ' ')}: {value}")
    return "; ".join(parts)
