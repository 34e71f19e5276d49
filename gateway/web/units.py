"""Display units: US customary by default (in, gal, gpm, psi, ft, °F), metric on request.

Readings are stored in the contract's metric units; every number a page shows
goes through :func:`convert` / :func:`fmt` here, so the server sends the browser
values already in the person's units (charts included) and the JavaScript never
converts anything.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from fastapi import Request

UnitSystem = Literal["us", "metric"]
UNITS_COOKIE = "sumpwatch_units"


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
    "flow": Quantity("L/min", "gpm", "L/min", lambda lpm: lpm / 3.785411784, _same, 1, 1),
    "pressure": Quantity("kPa", "psi", "kPa", lambda kpa: kpa / 6.894757293, _same, 1, 0),
    "temperature": Quantity("°C", "°F", "°C", lambda c: c * 9 / 5 + 32, _same, 0, 1),
    "volume": Quantity("L", "gal", "L", lambda litres: litres / 3.785411784, _same, 0, 0),
    # Installation distances are recorded in feet, as the ordinances give them.
    "distance": Quantity("ft", "ft", "m", _same, lambda ft: ft * 0.3048, 0, 1),
}


def units_of(request: Request) -> UnitSystem:
    """The person's choice: ``?units=`` first, then the cookie, else US customary."""
    value = request.query_params.get("units") or request.cookies.get(UNITS_COOKIE)
    return "metric" if value == "metric" else "us"


def convert(quantity: str, value: float, units: UnitSystem) -> float:
    """A stored value in the display system."""
    q = QUANTITIES[quantity]
    return q.to_us(value) if units == "us" else q.to_metric(value)


def unit(quantity: str, units: UnitSystem) -> str:
    """The display unit's symbol."""
    q = QUANTITIES[quantity]
    return q.us_unit if units == "us" else q.metric_unit


def rounded(quantity: str, value: float | None, units: UnitSystem) -> float | None:
    """The converted value rounded for display (charts), or None."""
    if value is None:
        return None
    q = QUANTITIES[quantity]
    digits = q.us_digits if units == "us" else q.metric_digits
    return round(convert(quantity, value, units), digits + 1)


def fmt(quantity: str, value: float | None, units: UnitSystem) -> str:
    """E.g. ``"15.7 in"``; an em dash for a missing value."""
    if value is None:
        return "—"
    q = QUANTITIES[quantity]
    digits = q.us_digits if units == "us" else q.metric_digits
    shown = round(convert(quantity, value, units), digits)
    number = f"{shown + 0.0:,.{digits}f}"  # + 0.0 turns -0.0 into 0.0
    sep = "" if unit(quantity, units).startswith("°") else " "
    return f"{number}{sep}{unit(quantity, units)}"
