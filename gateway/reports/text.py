"""Wording and number formats shared by the HTML, PDF and CSV renderers.

Report data is in SI (litres, °C); the functions that show a measurement take
the reader's unit system and convert through :mod:`gateway.units`, the same
conversions the web pages use.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from gateway.reports.models import Compliance, ComplianceStatus, Recommendation
from gateway.units import UnitSystem, fmt

STATUS_LABEL = {
    ComplianceStatus.VIOLATION: "Not in compliance",
    ComplianceStatus.SUSPECTED: "Suspected violation (not confirmed)",
    ComplianceStatus.ATTENTION: "Needs attention",
    ComplianceStatus.NOT_CHECKED: "No violation found; not fully checked",
    ComplianceStatus.COMPLIANT: "In compliance",
    ComplianceStatus.INSUFFICIENT_DATA: "Insufficient data",
}
RECOMMENDATION_LABEL = {
    Recommendation.ORDER: "Order",
    Recommendation.CITATION: "Citation",
    Recommendation.NOTICE: "Notice to correct",
    Recommendation.INSPECTION: "Inspection",
    Recommendation.NONE: "-",
}
UNITS_LABEL: dict[UnitSystem, str] = {
    "us": "US customary (gallons, thousand gallons, °F, ft)",
    "metric": "metric (litres, m³, °C, m)",
}
DESTINATION_LABEL = {
    "grade": "grade (lawn)",
    "swale": "swale",
    "storm_lateral": "storm sewer lateral",
    "sanitary": "sanitary sewer",
    "not_recorded": "not recorded",
}


def volume(value_l: float, units: UnitSystem) -> str:
    """A property's volume: ``1,234 gal`` or ``4,671 L``."""
    return fmt("volume", value_l, units)


def large_volume(value_l: float, units: UnitSystem) -> str:
    """A village total: ``12.3 thousand gal`` or ``46.6 m³``."""
    return fmt("volume_large", value_l, units)


def temp(value_c: float | None, units: UnitSystem) -> str:
    """``26°F`` or ``-3.2°C`` (or a dash)."""
    return "-" if value_c is None else fmt("temperature", value_c, units)


def freezing(units: UnitSystem) -> str:
    """The freezing point as the reader states it: ``32°F`` or ``0.0°C``."""
    return temp(0.0, units)


def statement(compliance: Compliance, units: UnitSystem) -> str:
    """The compliance statement with any volume it names in the reader's units."""
    return compliance.worded(lambda litres: volume(litres, units))


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


#: Detectors name evidence values by their stored unit (``air_temp_c``,
#: ``pit_volume_l``, ``volume_l_window``, ``distance_ft``...): that part of the
#: name says how to convert the value, and is dropped from the label.
_EVIDENCE_UNITS = {
    "lpm": "flow",
    "kpa": "pressure",
    "cm": "level",
    "ft": "distance",
    "c": "temperature",
    "l": "volume",
}
#: A measurement written into a detector's prose ("air -12.8 °C, at or below
#: freezing", "483 L discharged..."): a number, its stored unit, then no more of a word.
_PROSE_MEASURE = re.compile(r"(-?\d[\d,]*(?:\.\d+)?) ?(°C|L/min|L|kPa|cm)(?![\w.])")
_PROSE_UNITS = {
    "°C": "temperature",
    "L/min": "flow",
    "L": "volume",
    "kPa": "pressure",
    "cm": "level",
}


def prose(value: str, units: UnitSystem) -> str:
    """Detector wording with the measurements it quotes in the reader's units."""
    if units == "metric":
        return value  # detectors write metric already

    def sub(match: re.Match[str]) -> str:
        number = float(match.group(1).replace(",", ""))
        return fmt(_PROSE_UNITS[match.group(2)], number, units)

    return _PROSE_MEASURE.sub(sub, value)


def _evidence_item(key: str, value: Any, units: UnitSystem) -> str:
    words = key.split("_")
    if isinstance(value, int | float) and not isinstance(value, bool):
        for i, word in enumerate(words[1:], 1):
            if word in _EVIDENCE_UNITS:
                name = " ".join(words[:i] + words[i + 1 :])
                return f"{name}: {fmt(_EVIDENCE_UNITS[word], float(value), units)}"
    if isinstance(value, list | tuple):
        value = "; ".join(prose(str(v), units) for v in value)
    elif isinstance(value, float):
        value = f"{value:g}"
    elif isinstance(value, str):
        value = prose(value, units)
    return f"{' '.join(words)}: {value}"


def evidence_text(evidence: Mapping[str, Any], units: UnitSystem, limit: int = 8) -> str:
    """A finding's evidence as ``key: value`` pairs, measurements in the reader's units."""
    return "; ".join(
        _evidence_item(key, value, units) for key, value in list(evidence.items())[:limit]
    )
