"""Report charts with matplotlib (Agg backend, no display): PNG bytes.

The same PNGs go into the PDF and, base64-encoded, into the HTML, so both show
the same pictures. Values and axis labels are in the reader's unit system (the
report data stays in litres and °C; the conversion happens here). Figures are
made with the object API (no pyplot state), so charts can be drawn from several
threads.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from datetime import date
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.dates as mdates
from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from gateway.reports.models import DayStats, SiteReport, VillageReport, WeekStats
from gateway.reports.text import PLAIN_VOLUME_BELOW
from gateway.units import UnitSystem, convert, unit

WIDTH_IN = 7.0
HEIGHT_IN = 2.6
DPI = 150
GRADE = "#4c9a2a"
STORM = "#2b6cb0"
SANITARY = "#c53030"
PIT = "#555555"
ICE = "#90cdf4"


def _png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, bbox_inches="tight")
    return buf.getvalue()


def _style(ax: object) -> None:
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)  # type: ignore[attr-defined]
    ax.grid(axis="y", color="#dddddd", linewidth=0.6)  # type: ignore[attr-defined]
    ax.tick_params(labelsize=7)  # type: ignore[attr-defined]


def _date_axis(
    ax: object, days: Sequence[date], pad_days: float = 0.5, right_days: float | None = None
) -> None:
    """Dates on x, padded by half a bar so a one-day or one-week report still has a width."""
    span = (days[-1] - days[0]).days if days else 0
    locator: mdates.DateLocator
    if span <= 14:
        locator = mdates.DayLocator(interval=max(1, span // 7 or 1))
    else:
        locator = mdates.AutoDateLocator(minticks=3, maxticks=8)
    ax.xaxis.set_major_locator(locator)  # type: ignore[attr-defined]
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))  # type: ignore[attr-defined]
    if days:
        lo = mdates.date2num(days[0]) - pad_days
        hi = mdates.date2num(days[-1]) + (pad_days if right_days is None else right_days)
        ax.set_xlim(lo, hi)  # type: ignore[attr-defined]


def _nonnegative(ax: object) -> None:
    """Volumes and counts start at zero, and an all-zero chart keeps a 0-1 axis
    instead of matplotlib's -0.05..0.05 (a negative axis reads as an error)."""
    _, top = ax.get_ylim()  # type: ignore[attr-defined]
    ax.set_ylim(0, max(top, 1.0))  # type: ignore[attr-defined]


def _legend(ax: object, ncols: int) -> None:
    # Below the plot, so it never hides a bar.
    ax.legend(  # type: ignore[attr-defined]
        fontsize=6, ncols=ncols, loc="upper left", bbox_to_anchor=(0.0, -0.12), frameon=False
    )


def _bars(
    ax: Any,
    x: Sequence[float],
    heights: Sequence[float],
    bottom: Sequence[float],
    color: str,
    label: str,
) -> None:
    """Bars 0.9 day wide as one collection: a season is 150 days x 3 series, and as
    single patches (``ax.bar``) they were most of a property PDF's time (issue 17)."""
    half = 0.45
    boxes = [
        [(xi - half, b), (xi - half, b + h), (xi + half, b + h), (xi + half, b)]
        for xi, h, b in zip(x, heights, bottom, strict=True)
        if h
    ]
    ax.add_collection(
        PolyCollection(boxes, facecolors=color, edgecolors="none", linewidths=0, label=label)
    )


_VOLUME_AXIS = {"us": "gallons per day", "metric": "litres per day"}
_WEEK_AXIS = {"us": "thousand gallons per week", "metric": "m³ per week"}
_VOLUME_WEEK_AXIS = {"us": "gallons per week", "metric": "litres per week"}


def volume_by_day(
    days: Sequence[DayStats],
    units: UnitSystem = "us",
    title: str = "Where the water went, by day",
) -> bytes:
    """Stacked daily bars (grade / storm / sanitary suspected) and the pit volume."""

    def vol(litres: float) -> float:
        return convert("volume", litres, units)

    fig = Figure(figsize=(WIDTH_IN, HEIGHT_IN))
    ax = fig.add_subplot()
    x = [mdates.date2num(d.day) for d in days]
    grade = [vol(d.grade_l) for d in days]
    storm = [vol(d.storm_l) for d in days]
    sanitary = [vol(d.sanitary_l) for d in days]
    zero = [0.0] * len(x)
    _bars(ax, x, grade, zero, GRADE, "to grade")
    _bars(ax, x, storm, grade, STORM, "to storm sewer")
    base = [g + s for g, s in zip(grade, storm, strict=True)]
    _bars(ax, x, sanitary, base, SANITARY, "sanitary (suspected)")
    ax.autoscale_view()
    pit = [vol(d.pit_volume_l) for d in days]
    ax.plot(x, pit, color=PIT, linewidth=0.8, label="pumped from pit")
    ax.set_ylabel(_VOLUME_AXIS[units], fontsize=7)
    ax.set_title(title, fontsize=9, loc="left")
    _legend(ax, 4)
    _style(ax)
    _nonnegative(ax)
    _date_axis(ax, [d.day for d in days])
    return _png(fig)


def temperature_by_day(days: Sequence[DayStats], units: UnitSystem = "us") -> bytes:
    """Daily air minimum and maximum, the freezing line, and the icing days."""

    def deg(celsius: float | None) -> float:
        return float("nan") if celsius is None else convert("temperature", celsius, units)

    fig = Figure(figsize=(WIDTH_IN, HEIGHT_IN))
    ax = fig.add_subplot()
    x = [mdates.date2num(d.day) for d in days]
    lo = [deg(d.air_min_c) for d in days]
    hi = [deg(d.air_max_c) for d in days]
    ax.fill_between(x, lo, hi, color="#fbd38d", alpha=0.6, label="air min-max")
    ax.plot(x, lo, color="#dd6b20", linewidth=0.8)
    freezing = deg(0.0)
    ax.axhline(
        freezing,
        color=STORM,
        linewidth=0.8,
        linestyle="--",
        label=f"freezing ({freezing:g} {unit('temperature', units)})",
    )
    icing = [d.day for d in days if d.icing]
    for day in icing:
        center = mdates.date2num(day)
        ax.axvspan(center - 0.5, center + 0.5, color=ICE, alpha=0.3, zorder=0, linewidth=0)
    if icing:
        ax.plot([], [], color=ICE, linewidth=6, label="icing finding")
    ax.set_ylabel(unit("temperature", units), fontsize=7)
    ax.set_title("Air temperature and icing days", fontsize=9, loc="left")
    _legend(ax, 3)
    _style(ax)
    _date_axis(ax, [d.day for d in days])
    return _png(fig)


def village_volume_by_week(weeks: Sequence[WeekStats], units: UnitSystem = "us") -> bytes:
    """Weekly volume pumped and the part suspected to the sanitary sewer, in gal / L
    while the weeks are small and kgal / m³ once they are large (natural units)."""
    x = [mdates.date2num(w.week_start) for w in weeks]
    largest = max((convert("volume", w.outlet_volume_l + w.sanitary_l, units) for w in weeks),
                  default=0.0)  # fmt: skip
    quantity = "volume" if largest < PLAIN_VOLUME_BELOW else "volume_large"
    outlet = [convert(quantity, w.outlet_volume_l, units) for w in weeks]
    sanitary = [convert(quantity, w.sanitary_l, units) for w in weeks]
    fig = Figure(figsize=(WIDTH_IN, HEIGHT_IN))
    ax = fig.add_subplot()
    ax.bar(x, outlet, width=6.5, align="edge", color=GRADE, label="at outlets")
    ax.bar(
        x,
        sanitary,
        width=6.5,
        align="edge",
        bottom=outlet,
        color=SANITARY,
        label="sanitary (suspected)",
    )
    axis = _VOLUME_WEEK_AXIS[units] if quantity == "volume" else _WEEK_AXIS[units]
    ax.set_ylabel(axis, fontsize=7)
    ax.set_title("Volume pumped, by week", fontsize=9, loc="left")
    _legend(ax, 2)
    _style(ax)
    _nonnegative(ax)
    _date_axis(ax, [w.week_start for w in weeks], pad_days=0.5, right_days=7.5)
    return _png(fig)


def village_issues_by_week(weeks: Sequence[WeekStats]) -> bytes:
    """Weekly icing site-days and sites with a violation."""
    fig = Figure(figsize=(WIDTH_IN, HEIGHT_IN))
    ax = fig.add_subplot()
    x = [mdates.date2num(w.week_start) for w in weeks]
    ax.bar(
        x,
        [w.icing_site_days for w in weeks],
        width=6.5,
        align="edge",
        color=ICE,
        label="icing site-days",
    )
    ax.plot(
        [d + 3.5 for d in x],
        [w.sites_in_violation for w in weeks],
        color=SANITARY,
        marker="o",
        markersize=3,
        linewidth=1,
        label="sites with a violation",
    )
    ax.set_title("Icing and violations, by week", fontsize=9, loc="left")
    _legend(ax, 2)
    _style(ax)
    _nonnegative(ax)
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))  # counts: no 0.5 of a site
    _date_axis(ax, [w.week_start for w in weeks], pad_days=0.5, right_days=7.5)
    return _png(fig)


def site_charts(report: SiteReport, units: UnitSystem = "us") -> dict[str, bytes]:
    """The property report's charts by name, in ``units`` (none without any day)."""
    if not report.days:
        return {}
    return {
        "volume": volume_by_day(report.days, units),
        "temperature": temperature_by_day(report.days, units),
    }


def village_charts(report: VillageReport, units: UnitSystem = "us") -> dict[str, bytes]:
    """The village report's charts by name, in ``units`` (none without any week)."""
    if not report.weeks:
        return {}
    return {
        "volume": village_volume_by_week(report.weeks, units),
        "issues": village_issues_by_week(report.weeks),
    }
