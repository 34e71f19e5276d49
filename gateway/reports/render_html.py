"""HTML for the web: Jinja2 templates (autoescaped) with the charts inlined as PNG.

The page is self-contained (CSS and images inside), so it can be downloaded,
mailed or archived as one file and still look the same.
"""

from __future__ import annotations

import base64
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape

from gateway.reports import text
from gateway.reports.charts import site_charts, village_charts
from gateway.reports.models import SiteReport, VillageReport
from gateway.units import UnitSystem

TEMPLATES = Path(__file__).resolve().parent / "templates"


def _env() -> Environment:
    env = Environment(
        loader=FileSystemLoader(TEMPLATES),
        autoescape=select_autoescape(["html", "j2"]),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        # Measurement filters take the unit system: ``{{ d.grade_l | volume(units) }}``.
        volume=text.volume,
        large_volume=text.large_volume,
        temp=text.temp,
        evidence=text.evidence_text,
        usd=text.usd,
        percent=text.percent,
        duration=text.duration,
    )
    env.globals.update(
        usd_range=text.usd_range,
        local_time=text.local_time,
        status_label=text.STATUS_LABEL,
        recommendation_label=text.RECOMMENDATION_LABEL,
        destination_label=text.DESTINATION_LABEL,
        units_label=text.UNITS_LABEL,
        freezing=text.freezing,
        statement=text.statement,
        zone_time=text.zone_time,
        requirement_name=text.requirement_name,
        name_and_address=text.name_and_address,
        status_counts=text.status_counts,
        resolution=text.resolution,
        no_data_text=text.NO_DATA_TEXT,
        no_data=text.no_data,
        statement_shown=text.statement_shown,
    )
    return env


_ENV = _env()


def _data_uris(charts: dict[str, bytes]) -> dict[str, str]:
    return {
        name: "data:image/png;base64," + base64.b64encode(png).decode("ascii")
        for name, png in charts.items()
    }


def _css() -> str:
    return (TEMPLATES / "report.css").read_text(encoding="utf-8")


def site_html(
    report: SiteReport, charts: dict[str, bytes] | None = None, units: UnitSystem = "us"
) -> str:
    """The property report as one HTML page, measurements in ``units``."""
    charts = site_charts(report, units) if charts is None else charts
    template = _ENV.get_template("site.html.j2")
    return template.render(
        r=report, charts=_data_uris(charts), css=_css(), units=units, tz=report.site.timezone
    )


def village_html(
    report: VillageReport, charts: dict[str, bytes] | None = None, units: UnitSystem = "us"
) -> str:
    """The village report as one HTML page, volumes in ``units``."""
    charts = village_charts(report, units) if charts is None else charts
    template = _ENV.get_template("village.html.j2")
    return template.render(
        r=report, charts=_data_uris(charts), css=_css(), units=units, tz=report.timezone
    )
