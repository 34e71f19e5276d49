"""Detector evidence and installation records in words, in the viewer's units and zone.

Detectors write evidence as machine keys with the unit in the name (``outlet_volume_l``,
``above_since``, ``evidence_log10``): the JSON APIs keep those. People get a label,
the value converted to their units, and times in the site's zone. The unit suffix of
a key says what a number is, so a new detector's evidence is worded without a change
here; the labels below only make the common keys read better.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date, datetime
from typing import Any

from gateway.registry import SiteConfig
from gateway.registry.models import Installation
from gateway.units import UnitSystem, fmt

#: Key suffix -> quantity of gateway.units (longest suffixes are tried first).
_SUFFIX_QUANTITY: dict[str, str] = {
    "_cm": "level",
    "_l": "volume",
    "_lpm": "flow",
    "_kpa": "pressure",
    "_c": "temperature",
    "_ft": "distance",
}
#: Keys whose words read better than the key with its unit dropped.
LABELS: dict[str, str] = {
    "level_cm": "Pit level",
    "pit_level_cm": "Pit level",
    "peak_cm": "Highest level",
    "alarm_cm": "Alarm mark",
    "pump_off_cm": "Pump-off mark",
    "pit_depth_cm": "Pit depth",
    "above_since": "Above the alarm mark since",
    "running_since": "Pump running since",
    "running_for_s": "Pump running for",
    "starts_last_hour": "Pump starts in the last hour",
    "seep_l_per_cycle": "Water seeping back through the check valve per cycle",
    "pit_volume_l": "Water pumped out of the pit",
    "outlet_volume_l": "Water measured at the outlet",
    "pumped_unaccounted_l": "Pumped but never seen at the outlet",
    "cycles_unaccounted": "Pump cycles with no water at the outlet",
    "volume_l_window": "Water pumped in the window",
    "outlet_share": "Share of the pumped water seen at the outlet",
    "evidence_log10": "Weight of the evidence",
    "pipe_temp_c": "Outlet pipe temperature",
    "air_temp_c": "Outdoor temperature",
    "freezing_since": "Below freezing since",
    "blocked_since": "No flow since",
    "cycle_end": "Last pump cycle ended",
    "last_heard": "Last message received",
    "silent_for_s": "Silent for",
    "pump_current_a": "Pump current",
    "ordinance_note": "Note on the ordinance",
    "silence_factor": "Allowed silence (times the reporting interval)",
}
#: Node kinds in words (sensor alerts name the sensor).
NODE_KINDS = {"pit": "pit sensor", "discharge": "outlet sensor", "air": "outdoor sensor"}


def duration(seconds: float) -> str:
    """E.g. "45 s", "12 min", "2 h 5 min", "3 days 4 h"."""
    s = round(seconds)
    if s < 90:
        return f"{s} s"
    if s < 5400:
        return f"{s // 60} min"
    if s < 2 * 86400:
        h, m = divmod(s // 60, 60)
        return f"{h} h {m} min" if m else f"{h} h"
    d, h = divmod(s // 3600, 24)
    return f"{d} days {h} h" if h else f"{d} days"


def local_stamp(value: datetime, site: SiteConfig) -> str:
    """A time in the site's zone with its date: "Nov 30, 2:05 PM CST"."""
    local = value.astimezone(site.tz)
    clock = local.strftime("%I:%M %p").lstrip("0")
    return f"{local.strftime('%b')} {local.day}, {clock} {local.tzname() or ''}".rstrip()


def _as_time(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value
    if isinstance(value, str) and len(value) >= 19 and value[4] == "-" and value[10] == "T":
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
        return parsed if parsed.tzinfo is not None else None
    return None


def _quantity(key: str) -> str | None:
    for suffix in sorted(_SUFFIX_QUANTITY, key=len, reverse=True):
        if key.endswith(suffix) or f"{suffix}_" in key:
            return _SUFFIX_QUANTITY[suffix]
    return None


def label(key: str) -> str:
    """A key in words: the known label, else the key without its unit suffix."""
    if key in LABELS:
        return LABELS[key]
    words = key
    for suffix in ("_cm", "_lpm", "_kpa", "_ft", "_l", "_c", "_s", "_a"):
        if words.endswith(suffix):
            words = words[: -len(suffix)]
            break
    words = words.replace("_", " ").strip()
    return words[:1].upper() + words[1:]


def value_text(key: str, value: Any, site: SiteConfig, units: UnitSystem) -> str:
    """A value in words: converted units, local times, yes/no, durations."""
    if value is None:
        return "not recorded"
    if isinstance(value, bool):
        return "yes" if value else "no"
    when = _as_time(value)
    if when is not None:
        return local_stamp(when, site)
    if key == "evidence_log10" and isinstance(value, int | float):
        return f"about 1 in {10 ** float(value):,.0f} that this is chance"
    if key == "outlet_share" and isinstance(value, int | float):
        return f"{float(value) * 100:.0f} %"
    if isinstance(value, list | tuple):
        return ", ".join(value_text(key, v, site, units) for v in value) or "none"
    if isinstance(value, Mapping):
        return "; ".join(f"{label(k)}: {value_text(k, v, site, units)}" for k, v in value.items())
    if isinstance(value, int | float):
        quantity = _quantity(key)
        if quantity is not None:
            return fmt(quantity, float(value), units)
        if key.endswith("_s"):
            return duration(float(value))
        if key.endswith("_a"):
            return f"{float(value):.1f} A"
        return f"{value:.4g}" if isinstance(value, float) else str(value)
    return str(value).replace("_", " ")


def _node_sentence(node: Mapping[str, Any], site: SiteConfig) -> tuple[str, str]:
    kind = NODE_KINDS.get(str(node.get("kind", "")), "sensor")
    what = f"The {kind} ({node.get('node_id', '?')})"
    status = "is offline" if node.get("status") == "offline" else "stopped reporting"
    parts = [status]
    if isinstance(node.get("silent_for_s"), int | float):
        parts.append(f"silent for {duration(float(node['silent_for_s']))}")
    heard = _as_time(node.get("last_heard"))
    parts.append(f"last message {local_stamp(heard, site)}" if heard else "never heard")
    return what, ", ".join(parts)


def evidence(data: Mapping[str, Any], site: SiteConfig, units: UnitSystem) -> list[tuple[str, str]]:
    """Evidence as (label, words) pairs, in the viewer's units and the site's zone."""
    out: list[tuple[str, str]] = []
    for key, value in data.items():
        if key == "nodes" and isinstance(value, list | tuple):
            out += [_node_sentence(n, site) for n in value if isinstance(n, Mapping)]
            continue
        out.append((label(key), value_text(key, value, site, units)))
    return out


def silent_sensors(data: Mapping[str, Any]) -> str:
    """The sensors a sensor-silent finding names, e.g. "the pit sensor (pit)"."""
    nodes = data.get("nodes")
    if not isinstance(nodes, list | tuple):
        return ""
    named = [
        f"the {NODE_KINDS.get(str(n.get('kind', '')), 'sensor')} ({n.get('node_id', '?')})"
        for n in nodes
        if isinstance(n, Mapping)
    ]
    return " and ".join(named)


#: Installation facts in words: field -> (label, quantity or kind).
_FACTS: dict[str, tuple[str, str]] = {
    "pipe_inside_diameter_in": ("Pipe inside diameter", "inches"),
    "pipe_rigid": ("Rigid discharge pipe", "bool"),
    "valving_or_quick_connect": ("Valve or quick-connect on the line", "bool"),
    "check_valve": ("Check valve", "bool"),
    "check_valve_height_ft": ("Check valve height above the floor", "distance"),
    "air_gap": ("Air gap", "bool"),
    "union_coupling": ("Union coupling", "bool"),
    "outlet_height_above_grade_ft": ("Outlet height above grade", "distance"),
    "outlet_to_foundation_ft": ("Outlet to the foundation wall", "distance"),
    "outlet_to_property_line_ft": ("Outlet to the property line", "distance"),
    "outlet_to_walkway_ft": ("Outlet to the nearest walkway", "distance"),
    "outlet_to_right_of_way_ft": ("Outlet to the street (right-of-way)", "distance"),
    "flows_toward_property_line": ("Water flows toward the property line", "bool"),
    "absorbent_surface": ("Outlet onto an absorbent surface", "bool"),
    "storm_sewer_available": ("Storm sewer available", "bool"),
    "pit_to_floor_drain_ft": ("Pit to the floor drain", "distance"),
    "discharge_existing_since": ("Discharge in place since", "date"),
    "line_length_m": ("Discharge line length", "metres"),
    "line_rise_m": ("Discharge line rise", "metres"),
}
FEET_PER_METRE = 1 / 0.3048


def installation_facts(inst: Installation, units: UnitSystem) -> list[tuple[str, str]]:
    """The installation record as (label, words): one unit system, "not recorded" for None."""
    out: list[tuple[str, str]] = []
    for name, (text, kind) in _FACTS.items():
        value = getattr(inst, name, None)
        if value is None:
            out.append((text, "not recorded"))
        elif kind == "bool":
            out.append((text, "yes" if value else "no"))
        elif kind == "date" and isinstance(value, date):
            out.append((text, f"{value.strftime('%b')} {value.day}, {value.year}"))
        elif kind == "inches":
            shown = f"{value:g} in" if units == "us" else f"{value * 25.4:.0f} mm"
            out.append((text, shown))
        elif kind == "metres":
            out.append((text, fmt("distance", float(value) * FEET_PER_METRE, units)))
        else:
            out.append((text, fmt("distance", float(value), units)))
    return out
