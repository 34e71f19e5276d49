"""Wording and number formats shared by the HTML, PDF and CSV renderers.

Report data is in SI (litres, °C); the functions that show a measurement take
the reader's unit system and convert through :mod:`gateway.units`, the same
conversions the web pages use.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from gateway.reports.models import (
    AlertEntry,
    Compliance,
    ComplianceStatus,
    Recommendation,
    SiteStatusRow,
)
from gateway.units import UnitSystem, convert, fmt

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


#: Below this many gallons (or litres) a total reads best in plain units: "200 gal",
#: not "0.2 thousand gal" (issue 20.9).
PLAIN_VOLUME_BELOW = 10_000


def large_volume(value_l: float, units: UnitSystem) -> str:
    """A village total in natural units: ``927 gal`` / ``3,510 L`` when small,
    ``12.3 thousand gal`` / ``46.6 m³`` when large."""
    if abs(convert("volume", value_l, units)) < PLAIN_VOLUME_BELOW:
        return volume(value_l, units)
    return fmt("volume_large", value_l, units)


def requirement_name(requirement_id: str) -> str:
    """A requirement id as words ("No sanitary destination"), so a narrow column
    wraps between words instead of inside ``no_sanitary_destinatio|n``."""
    words = requirement_id.replace("_", " ").strip()
    return words[:1].upper() + words[1:]


def zone_time(when: datetime, tz: str) -> str:
    """A timestamp with its zone said once: ``2026-11-30 15:00 (America/Chicago)``."""
    return f"{local_time(when, tz)} ({tz})"


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


NO_DATA_TEXT = (
    "Not enough data: no sensor of this property reported during the period, so this "
    "report cannot say whether it complies. Check that the sensors are powered and "
    "connected; the sections below are empty for the same reason."
)


#: Statements that say "no violation found": with no data at all they say nothing,
#: so the "not enough data" box replaces them (a suspected violation still shows).
_SAYS_NO_VIOLATION = (
    ComplianceStatus.INSUFFICIENT_DATA,
    ComplianceStatus.NOT_CHECKED,
    ComplianceStatus.COMPLIANT,
)


def no_data(coverage_share: float) -> bool:
    """No sensor reported at all in the period (0 % coverage)."""
    return coverage_share <= 0


def statement_shown(coverage_share: float, status: ComplianceStatus) -> bool:
    """Whether the compliance statement box is shown after the "not enough data" one."""
    return not (no_data(coverage_share) and status in _SAYS_NO_VIOLATION)


def name_and_address(name: str, address: str) -> str:
    """The property once: its name, and its address only when that says more."""
    if not address or address.strip().lower() in name.strip().lower():
        return name
    return f"{name}, {address}"


def resolution(a: AlertEntry) -> str:
    """Who resolved an alert and why, and whether the condition was still there."""
    if a.resolved_by is None:
        return "-"
    if a.resolved_by == "system":
        return "condition cleared"
    note = f": {a.resolve_note}" if a.resolve_note else ""
    still = " (condition still detected)" if a.condition_persisted else ""
    return f"{a.resolved_by}{note}{still}"


#: The village table's status counts, in the order a board reads them: every site
#: lands in exactly one, including those without enough data to say.
_COUNTED = (
    (ComplianceStatus.VIOLATION, "Sites not in compliance"),
    (ComplianceStatus.SUSPECTED, "Sites with a suspected violation (not confirmed)"),
    (ComplianceStatus.ATTENTION, "Sites that need attention"),
    (ComplianceStatus.NOT_CHECKED, "Sites with no violation found, not fully checked"),
    (ComplianceStatus.COMPLIANT, "Sites in compliance"),
    (ComplianceStatus.INSUFFICIENT_DATA, "Sites without enough data to say"),
)


def status_counts(rows: Sequence[SiteStatusRow]) -> list[tuple[str, int]]:
    """(label, how many sites) for every status, in reading order."""
    return [(label, sum(1 for r in rows if r.status is status)) for status, label in _COUNTED]
