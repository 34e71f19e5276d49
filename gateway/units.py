"""Display units: US customary by default (in, gal, gpm, psi, ft, °F), metric on request.

Readings, rollups and report data are kept in the contract's metric units (cm,
L, L/min, kPa, °C; installation distances in ft, as the ordinances give them).
Everything a person reads, the web pages and the winter reports alike, is
converted here at the last step, so one function decides how a number reads.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, get_args

UnitSystem = Literal["us", "metric"]
UNIT_SYSTEMS: tuple[UnitSystem, ...] = get_args(UnitSystem)

LITRES_PER_GALLON = 3.785411784  # US liquid gallon, exact by definition


@dataclass(frozen=True, slots=True)
class Quantity:
    """A kind of value: its stored unit and how it reads in each system."""

    stored_unit: str
    us_unit: str
    metric_unit: str
    to_us: Callable[[float], float]
    to_metric: Callable[[float], float]
    us_digits: int
    metric_digits: int


def _same(x: float) -> float:
    return x


QUANTITIES: dict[str, Quantity] = {
    # Pit water level: stored in cm; homeowners think of a pit in inches.
    "level": Quantity("cm", "in", "cm", lambda cm: cm / 2.54, _same, 1, 0),
    "flow": Quantity("L/min", "gpm", "L/min", lambda lpm: lpm / LITRES_PER_GALLON, _same, 1, 1),
    "pressure": Quantity("kPa", "psi", "kPa", lambda kpa: kpa / 6.894757293, _same, 1, 0),
    "temperature": Quantity("°C", "°F", "°C", lambda c: c * 9 / 5 + 32, _same, 0, 1),
    "volume": Quantity("L", "gal", "L", lambda litres: litres / LITRES_PER_GALLON, _same, 0, 0),
    # Season and village totals: a public-works department bills water per
    # thousand gallons; the metric counterpart is the cubic metre.
    "volume_large": Quantity(
        "L",
        "thousand gal",
        "m³",
        lambda litres: litres / LITRES_PER_GALLON / 1000,
        lambda litres: litres / 1000,
        1,
        1,
    ),
    # Installation distances are recorded in feet, as the ordinances give them.
    "distance": Quantity("ft", "ft", "m", _same, lambda ft: ft * 0.3048, 0, 1),
}


def parse_unit_system(value: str) -> UnitSystem:
    """``"us"`` or ``"metric"``; raises ``ValueError`` for anything else."""
    for system in UNIT_SYSTEMS:
        if value == system:
            return system
    raise ValueError(f"units must be one of {', '.join(UNIT_SYSTEMS)}, not {value!r}")


def convert(quantity: str, value: float, units: UnitSystem) -> float:
    """A stored value in the display system."""
    q = QUANTITIES[quantity]
    return q.to_us(value) if units == "us" else q.to_metric(value)


def unit(quantity: str, units: UnitSystem) -> str:
    """The display unit's symbol."""
    q = QUANTITIES[quantity]
    return q.us_unit if units == "us" else q.metric_unit


def digits(quantity: str, units: UnitSystem) -> int:
    """How many decimals a person is shown in this system."""
    q = QUANTITIES[quantity]
    return q.us_digits if units == "us" else q.metric_digits


def rounded(quantity: str, value: float | None, units: UnitSystem) -> float | None:
    """The converted value rounded for display (charts), or None."""
    if value is None:
        return None
    return round(convert(quantity, value, units), digits(quantity, units) + 1)


def fmt(quantity: str, value: float | None, units: UnitSystem) -> str:
    """E.g. ``"15.7 in"``; an em dash for a missing value."""
    if value is None:
        return "—"
    places = digits(quantity, units)
    shown = round(convert(quantity, value, units), places)
    number = f"{shown + 0.0:,.{places}f}"  # + 0.0 turns -0.0 into 0.0
    sep = "" if unit(quantity, units).startswith("°") else " "
    return f"{number}{sep}{unit(quantity, units)}"
