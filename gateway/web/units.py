"""The web's unit choice: US customary by default (in, gal, gpm, psi, ft, °F), metric on request.

Readings are stored in the contract's metric units; every number a page shows
goes through :func:`convert` / :func:`fmt` (from :mod:`gateway.units`, shared
with the winter reports), so the server sends the browser values already in the
person's units (charts included) and the JavaScript never converts anything.
"""

from __future__ import annotations

# The conversions live in gateway.units (the winter reports use them too); the
# names are re-exported here for the pages that import them from this module.
from gateway.pages import UNITS_COOKIE, units_of
from gateway.units import QUANTITIES, Quantity, UnitSystem, convert, fmt, rounded, unit

__all__ = [
    "QUANTITIES",
    "UNITS_COOKIE",
    "Quantity",
    "UnitSystem",
    "convert",
    "fmt",
    "rounded",
    "unit",
    "units_of",
]
