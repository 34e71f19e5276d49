"""PDF a village clerk can file: ReportLab platypus, letter size.

Every page carries the document title and period in the header and
"Page N of M" in the footer (a two-pass canvas counts the pages). Tables are
``LongTable`` with the header row repeated on each page they break across;
charts are the matplotlib PNGs of :mod:`gateway.reports.charts`.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from datetime import datetime
from typing import Any
from xml.sax.saxutils import escape

from reportlab.lib import colors
from reportlab.lib.enums import TA_RIGHT
from reportlab.lib.pagesizes import LETTER
from reportlab.lib.styles import ParagraphStyle, getSampleStyleSheet
from reportlab.lib.units import inch
from reportlab.pdfgen.canvas import Canvas
from reportlab.platypus import (
    CondPageBreak,
    Flowable,
    Image,
    KeepTogether,
    LongTable,
    Paragraph,
    SimpleDocTemplate,
    Spacer,
    TableStyle,
)

from gateway.domain import Citation
from gateway.reports import text
from gateway.reports.charts import site_charts, village_charts
from gateway.reports.models import (
    ComplianceStatus,
    SiteReport,
    VillageReport,
)
from gateway.units import UnitSystem

PAGE_W, PAGE_H = LETTER
MARGIN = 0.75 * inch
BODY_W = PAGE_W - 2 * MARGIN

_SS = getSampleStyleSheet()
TITLE = ParagraphStyle("title", parent=_SS["Title"], fontSize=17, leading=21, spaceAfter=4)
SUB = ParagraphStyle("sub", parent=_SS["Normal"], fontSize=10, textColor=colors.HexColor("#4a5568"))
H2 = ParagraphStyle("h2", parent=_SS["Heading2"], fontSize=12.5, spaceBefore=12, spaceAfter=4)
BODY = ParagraphStyle("body", parent=_SS["Normal"], fontSize=9.5, leading=12.5, spaceAfter=4)
SMALL = ParagraphStyle("small", parent=BODY, fontSize=7.5, leading=9.5, spaceAfter=0)
CELL = ParagraphStyle("cell", parent=BODY, fontSize=7.5, leading=9, spaceAfter=0)
CELL_R = ParagraphStyle("cellr", parent=CELL, alignment=TA_RIGHT)
HEAD = ParagraphStyle("head", parent=CELL, fontName="Helvetica-Bold")
HEAD_R = ParagraphStyle("headr", parent=HEAD, alignment=TA_RIGHT)
CITE = ParagraphStyle(
    "cite", parent=CELL, fontSize=6.5, leading=8, textColor=colors.HexColor("#4a5568")
)

_STATUS_COLOR = {
    ComplianceStatus.VIOLATION: "#c53030",
    ComplianceStatus.SUSPECTED: "#b7791f",
    ComplianceStatus.NOT_CHECKED: "#718096",
    ComplianceStatus.ATTENTION: "#dd6b20",
    ComplianceStatus.COMPLIANT: "#2f855a",
    ComplianceStatus.INSUFFICIENT_DATA: "#718096",
}


def _p(value: Any, style: ParagraphStyle = BODY) -> Paragraph:
    return Paragraph(escape(str(value)), style)


def _cites(citations: Sequence[Citation], quotes: bool = False) -> Paragraph:
    lines = []
    for c in citations:
        line = f"{escape(c.file)} \u00a7{escape(c.section)}"
        if quotes and c.quote:
            line += f': "{escape(c.quote)}"'
        lines.append(line)
    return Paragraph("<br/>".join(lines) or "-", CITE)


def _table(
    header: Sequence[str],
    rows: Sequence[Sequence[Any]],
    widths: Sequence[float],
    *,
    numeric: Sequence[int] = (),
    total: bool = False,
) -> LongTable:
    """A table that breaks across pages and repeats its header row on each."""
    scale = BODY_W / sum(widths)
    data: list[list[Any]] = [
        [_p(h, HEAD_R if i in numeric else HEAD) for i, h in enumerate(header)]
    ]
    for row in rows:
        cells = []
        for i, value in enumerate(row):
            if isinstance(value, Flowable):
                cells.append(value)
            else:
                cells.append(_p(value, CELL_R if i in numeric else CELL))
        data.append(cells)
    table = LongTable(data, colWidths=[w * scale for w in widths], repeatRows=1)
    style = [
        ("GRID", (0, 0), (-1, -1), 0.4, colors.HexColor("#a0aec0")),
        ("BACKGROUND", (0, 0), (-1, 0), colors.HexColor("#edf2f7")),
        ("VALIGN", (0, 0), (-1, -1), "TOP"),
        ("TOPPADDING", (0, 0), (-1, -1), 2),
        ("BOTTOMPADDING", (0, 0), (-1, -1), 2),
    ]
    if total and len(data) > 1:
        style.append(("BACKGROUND", (0, -1), (-1, -1), colors.HexColor("#f7fafc")))
    table.setStyle(TableStyle(style))
    return table


def _volumes(units: UnitSystem, *values: float) -> list[str]:
    return [text.volume(v, units) for v in values]


def _chart(png: bytes | None) -> list[Flowable]:
    if not png:
        return []
    img = Image(io.BytesIO(png))
    ratio = img.imageHeight / img.imageWidth
    img.drawWidth = BODY_W
    img.drawHeight = BODY_W * ratio
    return [img, Spacer(1, 4)]


def _facts(pairs: Sequence[tuple[str, str]]) -> LongTable:
    data = [[_p(k, HEAD), _p(v, CELL)] for k, v in pairs]
    table = LongTable(data, colWidths=[1.7 * inch, BODY_W - 1.7 * inch])
    table.setStyle(
        TableStyle(
            [
                ("VALIGN", (0, 0), (-1, -1), "TOP"),
                ("TOPPADDING", (0, 0), (-1, -1), 1),
                ("BOTTOMPADDING", (0, 0), (-1, -1), 1),
                ("LEFTPADDING", (0, 0), (-1, -1), 0),
            ]
        )
    )
    return table


def _section(title: str) -> list[Flowable]:
    # Keep a heading off the bottom of a page: start a new one if little room is left.
    return [CondPageBreak(1.2 * inch), Paragraph(escape(title), H2)]


def _numbered_canvas(header: str, generated: datetime, tz: str) -> type[Canvas]:
    class NumberedCanvas(Canvas):
        """Defers each page so the footer can say "Page N of M"."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._pages: list[dict[str, Any]] = []

        def showPage(self) -> None:  # ReportLab's camelCase API
            self._pages.append(dict(self.__dict__))
            self._startPage()

        def save(self) -> None:
            total = len(self._pages)
            for state in self._pages:
                self.__dict__.update(state)
                self._decorate(total)
                super().showPage()
            super().save()

        def _decorate(self, total: int) -> None:
            self.saveState()
            self.setFont("Helvetica", 8)
            self.setFillColor(colors.HexColor("#4a5568"))
            self.drawString(MARGIN, PAGE_H - 0.5 * inch, header)
            self.setStrokeColor(colors.HexColor("#a0aec0"))
            self.line(MARGIN, PAGE_H - 0.55 * inch, PAGE_W - MARGIN, PAGE_H - 0.55 * inch)
            self.line(MARGIN, 0.6 * inch, PAGE_W - MARGIN, 0.6 * inch)
            # The report's one time zone (the site's), like every time in its body.
            self.drawString(MARGIN, 0.45 * inch, f"Generated {text.zone_time(generated, tz)}")
            self.drawRightString(
                PAGE_W - MARGIN, 0.45 * inch, f"Page {self._pageNumber} of {total}"
            )
            self.restoreState()

    return NumberedCanvas


def _build(story: list[Flowable], title: str, header: str, generated: datetime, tz: str) -> bytes:
    buf = io.BytesIO()
    doc = SimpleDocTemplate(
        buf,
        pagesize=LETTER,
        leftMargin=MARGIN,
        rightMargin=MARGIN,
        topMargin=0.8 * inch,
        bottomMargin=0.8 * inch,
        title=title,
        author="SumpWatch",
        subject=header,
    )
    doc.build(story, canvasmaker=_numbered_canvas(header, generated, tz))
    return buf.getvalue()


def _statement(status: ComplianceStatus, label: str, body: list[Flowable]) -> LongTable:
    color = colors.HexColor(_STATUS_COLOR[status])
    head = Paragraph(
        f'<font color="{_STATUS_COLOR[status]}"><b>{escape(label.upper())}</b></font>', BODY
    )
    table = LongTable([[head], *[[b] for b in body]], colWidths=[BODY_W])
    table.setStyle(
        TableStyle(
            [
                ("BOX", (0, 0), (-1, -1), 1.5, color),
                ("LEFTPADDING", (0, 0), (-1, -1), 8),
                ("RIGHTPADDING", (0, 0), (-1, -1), 8),
            ]
        )
    )
    return table


def _site_facts(r: SiteReport, units: UnitSystem) -> Flowable:
    tz = r.site.timezone
    season_cite = f" [{r.period.citations[0]}]" if r.period.citations else ""
    through = f"{text.local_time(r.through, tz)} ({tz})"
    return _facts(
        [
            ("Jurisdiction", r.site.pack_name),
            ("Season", r.period.describe() + season_cite),
            ("Data through", through + ("" if r.is_final else ", season in progress")),
            (
                "Discharge registered to",
                text.DESTINATION_LABEL.get(r.site.destination, r.site.destination),
            ),
            ("Units", text.UNITS_LABEL[units]),
        ]
    )


def _site_statement(r: SiteReport, units: UnitSystem) -> list[Flowable]:
    """The compliance statement box (when shown), with the recommended first step."""
    if not text.statement_shown(r.coverage.share, r.compliance.status):
        return []
    body: list[Flowable] = [_p(text.statement(r.compliance, units))]
    if r.recommendation.value != "none":
        first_step = text.RECOMMENDATION_LABEL[r.recommendation]
        why = f" ({r.next_step})" if r.next_step else ""
        body.append(_p(f"Recommended first step for the village: {first_step}{why}"))
    if r.compliance.citations:
        body.append(_cites(r.compliance.citations))
    return [_statement(r.compliance.status, text.STATUS_LABEL[r.compliance.status], body)]


def site_pdf(
    report: SiteReport, charts: dict[str, bytes] | None = None, units: UnitSystem = "us"
) -> bytes:
    """The property report as a PDF document, measurements in ``units``."""
    charts = site_charts(report, units) if charts is None else charts
    r, tz = report, report.site.timezone
    title = f"Winter monitoring report, season {r.period.label}"
    story: list[Flowable] = [
        Paragraph(escape(title), TITLE),
        _p(f"{text.name_and_address(r.site.name, r.site.address)} (site {r.site.site_id})", SUB),
    ]
    if text.no_data(r.coverage.share):
        # Nothing was measured: say so first, before any fact or note (issue 20.9).
        story.append(
            _statement(
                ComplianceStatus.INSUFFICIENT_DATA, "Not enough data", [_p(text.NO_DATA_TEXT)]
            )
        )
    story += [Spacer(1, 8), _site_facts(r, units), *(_p(note, SMALL) for note in r.notes)]
    story += [Spacer(1, 8), *_site_statement(r, units)]
    for section in (
        _coverage_section,
        _volume_section,
        _freezing_section,
        _findings_section,
        _audit_section,
        _alerts_section,
        _penalty_section,
    ):
        story += section(r, tz, units, charts)
    story += _suspected(r, tz)
    header = f"SumpWatch - {title} - {r.site.name} ({r.site.site_id})"
    return _build(story, f"{title}: {r.site.name}", header, r.generated_at, tz)


def _coverage_section(
    r: SiteReport, tz: str, units: UnitSystem, charts: dict[str, bytes]
) -> list[Flowable]:
    """1. Data coverage: share of hours with every sensor, and the gaps."""
    lt = text.local_time
    cov = r.coverage
    story: list[Flowable] = []
    story += _section("1. Data coverage")
    story.append(
        _p(
            f"{text.percent(cov.share)} of the season's {cov.period_hours} hours had readings "
            f"from every sensor ({cov.covered_hours} hours). By sensor: "
            + ", ".join(f"{n} {text.percent(s)}" for n, s in cov.by_node.items())
            + "."
        )
    )
    if cov.gaps:
        gaps, more, more_time = cov.listed_gaps()
        story.append(
            _table(
                ["Gap from", "to", "Length", "Sensors missing"],
                [
                    [lt(g.start, tz), lt(g.end, tz), text.duration(g.duration), ", ".join(g.nodes)]
                    for g in gaps
                ],
                [1.4, 1.4, 1.0, 2.2],
                numeric=[2],
            )
        )
        if more:
            story.append(
                _p(f"... and {more} shorter gaps, {text.duration(more_time)} in all.", SMALL)
            )
    else:
        story.append(_p("No gaps."))
    return story


def _volume_section(
    r: SiteReport, tz: str, units: UnitSystem, charts: dict[str, bytes]
) -> list[Flowable]:
    """2. Pump cycles, volume pumped and where the water went."""
    cov = r.coverage
    story: list[Flowable] = []
    story += _section("2. Pump cycles, volume pumped and where the water went")
    story += _chart(charts.get("volume"))
    t = r.totals
    day_rows: list[list[Any]] = [
        [
            d.day.isoformat(),
            d.pump_cycles,
            f"{d.pump_on_s / 60:.1f} min",
            *_volumes(units, d.pit_volume_l, d.outlet_volume_l, d.grade_l, d.storm_l, d.sanitary_l),
            text.percent(d.coverage),
        ]
        for d in r.days
    ]
    day_rows.append(
        [
            "Season",
            t.pump_cycles,
            f"{t.pump_on_h:.1f} h",
            *_volumes(units, t.pit_volume_l, t.outlet_volume_l, t.grade_l, t.storm_l, t.sanitary_l),
            text.percent(cov.share),
        ]
    )
    story.append(
        _table(
            [
                "Day",
                "Cycles",
                "Run time",
                "From pit",
                "At outlet",
                "To grade",
                "To storm",
                "Sanitary (susp.)",
                "Coverage",
            ],
            day_rows,
            [1.0, 0.7, 0.8, 1.0, 1.0, 1.0, 0.9, 1.0, 0.8],
            numeric=range(1, 9),
            total=True,
        )
    )
    return story


def _freezing_section(
    r: SiteReport, tz: str, units: UnitSystem, charts: dict[str, bytes]
) -> list[Flowable]:
    """3. Freezing risk: the days that could ice a walk."""
    t = r.totals
    story: list[Flowable] = []
    story += _section("3. Freezing risk")
    story.append(
        _p(
            f"{t.freezing_hours} hours with the air at or below freezing ({text.freezing(units)}); "
            f"{t.freezing_risk_hours} freezing-risk hours (water discharged to the surface in "
            "freezing air, or through an outlet pipe at freezing) on "
            f"{t.freezing_risk_days} days; {t.icing_days} days with "
            "an icing finding."
        )
    )
    story += _chart(charts.get("temperature"))
    if r.freezing_days:
        story.append(
            _table(
                ["Day", "Risk hours", "Freezing hours", "Air min", "Air max", "Pipe min", "Icing"],
                [
                    [
                        d.day.isoformat(),
                        d.freezing_risk_hours,
                        d.freezing_hours,
                        text.temp(d.air_min_c, units),
                        text.temp(d.air_max_c, units),
                        text.temp(d.pipe_min_c, units),
                        "yes" if d.icing else "",
                    ]
                    for d in r.freezing_days
                ],
                [1.1, 0.9, 1.0, 0.9, 0.9, 0.9, 0.7],
                numeric=[1, 2, 3, 4, 5],
            )
        )
    return story


def _findings_section(
    r: SiteReport, tz: str, units: UnitSystem, charts: dict[str, bytes]
) -> list[Flowable]:
    """4. Findings with evidence and citations."""
    lt = text.local_time
    story: list[Flowable] = []
    story += _section("4. Findings with evidence and citations")
    if not r.findings_available:
        story.append(_p("Findings were not available to this report."))
    elif not r.findings:
        story.append(_p("No findings in the period."))
    else:
        story.append(
            _table(
                ["Finding", "Level", "Opened", "Cleared", "Days", "Evidence", "Citations"],
                [
                    [
                        Paragraph(
                            f"{escape(f.title)}<br/><font size=6>{escape(f.rule_id)}</font>", CELL
                        ),
                        f.level or f.severity,
                        lt(f.opened_at, tz),
                        lt(f.cleared_at, tz) if f.cleared_at else "open",
                        f.days,
                        text.evidence_text(f.evidence, units),
                        _cites(f.citations) if f.citations else "not a cited violation",
                    ]
                    for f in r.findings
                ],
                [1.4, 0.7, 0.9, 0.9, 0.5, 2.1, 1.3],
                numeric=[4],
            )
        )
    return story


def _audit_section(
    r: SiteReport, tz: str, units: UnitSystem, charts: dict[str, bytes]
) -> list[Flowable]:
    """5. Installation audit."""
    story: list[Flowable] = []
    story += _section("5. Installation audit")
    if not r.audit:
        story.append(
            _p(
                "The registered installation meets every requirement of the rule pack that "
                "could be checked."
            )
        )
    else:
        story.append(
            _table(
                ["Requirement", "Status", "Finding", "What to do", "Citations"],
                [
                    [
                        text.requirement_name(a.requirement_id),
                        a.status,
                        a.message,
                        a.action,
                        _cites(a.citations),
                    ]
                    for a in r.audit
                ],
                [1.2, 0.6, 2.0, 1.8, 1.3],
            )
        )
    return story


def _alerts_section(
    r: SiteReport, tz: str, units: UnitSystem, charts: dict[str, bytes]
) -> list[Flowable]:
    """6. Alerts and acknowledgement."""
    lt = text.local_time
    story: list[Flowable] = []
    story += _section("6. Alerts and acknowledgement")
    s = r.alert_summary
    if not r.alerts_available:
        story.append(_p("Alerts were not available to this report."))
    elif not r.alerts:
        story.append(_p("No alerts were raised in the period."))
    else:
        story.append(
            _p(
                f"{s.count} alerts, {s.acknowledged} acknowledged; median time to acknowledge "
                f"{text.duration(s.median_time_to_ack)}, longest "
                f"{text.duration(s.longest_time_to_ack)}."
            )
        )
        story.append(
            _table(
                [
                    "Alert",
                    "Severity",
                    "Raised",
                    "Acknowledged",
                    "By",
                    "Time to ack",
                    "State",
                    "Resolved by (note)",
                ],
                [
                    [
                        a.title,
                        a.severity,
                        lt(a.opened_at, tz),
                        lt(a.acknowledged_at, tz),
                        a.acknowledged_by or "-",
                        text.duration(a.time_to_ack),
                        a.state,
                        text.resolution(a),
                    ]
                    for a in r.alerts
                ],
                [1.3, 0.6, 0.9, 0.9, 0.6, 0.6, 0.7, 1.2],
                numeric=[5],
            )
        )
    return story


def _penalty_section(
    r: SiteReport, tz: str, units: UnitSystem, charts: dict[str, bytes]
) -> list[Flowable]:
    """7. Penalty estimate (an estimate, never a legal determination)."""
    pen = r.penalties
    story: list[Flowable] = []
    story += _section("7. Penalty estimate")
    story.append(Paragraph(f"<b>{escape(pen.disclaimer)}</b>", BODY))
    if not pen.lines:
        story.append(_p("The rule pack defines no penalties."))
    else:
        months = f" in {', '.join(pen.violation_months)}" if pen.violation_months else ""
        story.append(
            _p(
                f"{pen.violation_days} confirmed violation day(s){months}. Estimated total for "
                f"confirmed violations: {text.usd_range(pen.min_usd, pen.max_usd)}."
            )
        )
        story.append(
            KeepTogether(
                _table(
                    ["Provision", "Applied to", "Count", "Amount", "Citations"],
                    [
                        [
                            p.summary,
                            p.basis,
                            p.count,
                            text.usd_range(p.min_usd, p.max_usd)
                            + (" (not in total)" if not p.additive and p.min_usd else ""),
                            _cites(p.citations),
                        ]
                        for p in pen.lines
                    ],
                    [1.9, 2.0, 0.5, 0.9, 1.5],
                    numeric=[2, 3],
                )
            )
        )
    return story


def _suspected(r: SiteReport, tz: str) -> list[Flowable]:
    """Suspected episodes, apart from the confirmed estimate (telemetry only)."""
    if not r.suspected:
        return []
    what_if = r.penalties_if_confirmed
    lead = (
        "Suspected episodes (telemetry only, not counted above). A violation needs a "
        "confirming record: an inspection result or a dated observation with its source."
    )
    if what_if is not None:
        lead += (
            f" If every suspected episode were confirmed, the estimate would be "
            f"{text.usd_range(what_if.min_usd, what_if.max_usd)} "
            f"({what_if.violation_days} day(s))."
        )
    rows: list[list[Any]] = [
        [s.title, text.local_time(s.start, tz), text.local_time(s.end, tz), s.days,
         s.confidence, _cites(s.citations)]
        for s in r.suspected
    ]  # fmt: skip
    return [
        _p(lead),
        _table(
            ["Suspected", "From", "To", "Days", "Evidence", "Citations"],
            rows,
            [1.7, 1.0, 1.0, 0.5, 1.3, 1.3],
            numeric=[3],
        ),
    ]


def _village_head(r: VillageReport, units: UnitSystem) -> list[Flowable]:
    t = r.totals
    return [
        Paragraph(escape(r.title), TITLE),
        _p(
            f"Village-wide winter monitoring report, {r.first_day.isoformat()} to "
            f"{r.last_day.isoformat()}",
            SUB,
        ),
        Spacer(1, 8),
        _facts(
            [
                ("Scope", f"{r.scope} ({t.sites} sites)"),
                ("Season", "; ".join(r.seasons) or "-"),
                ("Data through", text.zone_time(r.through, r.timezone)),
                ("Units", text.UNITS_LABEL[units]),
            ]
        ),
        Spacer(1, 8),
        _cover(r),
        *(_p(note, SMALL) for note in r.notes),
    ]


def _village_totals(r: VillageReport, units: UnitSystem) -> list[Flowable]:
    t = r.totals
    return [
        *_section("1. Totals"),
        _table(
            ["Measure", "Value"],
            [
                ["Volume pumped (at outlets)", text.large_volume(t.outlet_volume_l, units)],
                ["Volume pumped from pits", text.large_volume(t.pit_volume_l, units)],
                ["Suspected to the sanitary sewer", text.large_volume(t.sanitary_l, units)],
                ["Icing days (site-days)", t.icing_days],
                ["Violation days (site-days)", t.violation_days],
                *([label, n] for label, n in text.status_counts(r.rows)),
            ],
            [4.0, 2.0],
            numeric=[1],
        ),
    ]


def _village_priority(r: VillageReport, units: UnitSystem) -> list[Flowable]:
    story = _section("2. Sites that need an order or an inspection first")
    if not r.priority:
        return [*story, _p("None.")]
    rows = [
        [
            i,
            row.site_id,
            row.address or row.name,
            text.RECOMMENDATION_LABEL[row.recommendation],
            row.reason,
            text.volume(row.sanitary_l, units),
            row.violation_days,
        ]
        for i, row in enumerate(r.priority, 1)
    ]
    head = ["#", "Site", "Address", "First step", "Why", "Sanitary (susp.)", "Viol. days"]
    widths = [0.3, 1.1, 1.5, 0.8, 2.0, 0.9, 0.6]
    return [*story, _table(head, rows, widths, numeric=[0, 5, 6])]


_EVERY_SITE_HEAD = [
    "Site",
    "Status",
    "Cover.",
    "At outlet",
    "Sanitary (susp.)",
    "Icing days",
    "Viol. days",
    "Audit fails",
    "Alerts (unack.)",
    "Estimate",
]


def _every_site(r: VillageReport, units: UnitSystem) -> list[Flowable]:
    rows = [
        [
            Paragraph(
                f"{escape(row.site_id)}<br/><font size=6>{escape(row.address or row.name)}</font>",
                CELL,
            ),
            text.STATUS_LABEL[row.status],
            text.percent(row.coverage),
            text.volume(row.outlet_volume_l, units),
            text.volume(row.sanitary_l, units),
            row.icing_days,
            row.violation_days,
            row.audit_failures,
            f"{row.alerts} ({row.unacknowledged})",
            text.usd_range(row.estimate_min_usd, row.estimate_max_usd)
            if row.estimate_max_usd
            else "-",
        ]
        for row in r.rows
    ]
    widths = [1.2, 0.9, 0.65, 0.8, 0.8, 0.5, 0.5, 0.5, 0.75, 0.8]
    return [
        *_section("4. Every site"),
        _table(_EVERY_SITE_HEAD, rows, widths, numeric=range(2, 10)),
        _p(
            "Penalty estimates are not legal determinations; see each property's report for the "
            "provisions and their citations.",
            SMALL,
        ),
    ]


def village_pdf(
    report: VillageReport, charts: dict[str, bytes] | None = None, units: UnitSystem = "us"
) -> bytes:
    """The village report as a PDF document, volumes in ``units``."""
    charts = village_charts(report, units) if charts is None else charts
    r = report
    story = _village_head(r, units) + _village_totals(r, units) + _village_priority(r, units)
    # The heading travels with its first chart: never alone at the foot of a page.
    story.append(KeepTogether([*_section("3. Weekly charts"), *_chart(charts.get("volume"))]))
    story += _chart(charts.get("issues"))
    story += _every_site(r, units)
    header = f"SumpWatch - {r.title}"
    return _build(story, r.title, header, r.generated_at, r.timezone)


def _cover(r: VillageReport) -> LongTable:
    """The block a clerk fills in before filing: for whom, by whom, when, signed."""
    blank = "_" * 40
    return _facts(
        [
            ("Prepared for", r.village or r.scope),
            ("Prepared by", f"SumpWatch, from the monitoring data; reviewed by {blank}"),
            ("Date", f"{text.local_time(r.generated_at, r.timezone)[:10]}"),
            ("Signature", blank),
        ]
    )
