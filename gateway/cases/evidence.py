"""Evidence packets (16.6) and notice letters (16.7) as PDF, with ReportLab as the reports do.

The evidence bundle is canonical JSON built only from stored data (the case and
its steps, the findings it gathers as stored with their level history, posted
ledger lines, the pack's citations with quotes) and computed *as of the last
recorded step*, never the wall clock. Its SHA-256 is the content hash printed on
every page of the packet; ReportLab runs in invariant mode (no creation date, fixed
document id), so the same stored data gives the same bytes.
"""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from xml.sax.saxutils import escape

from reportlab.lib import colors
from reportlab.lib.pagesizes import LETTER
from reportlab.lib.units import inch
from reportlab.pdfgen.canvas import Canvas
from reportlab.platypus import (
    Flowable,
    LongTable,
    PageBreak,
    Paragraph,
    SimpleDocTemplate,
    Spacer,
    TableStyle,
)

from gateway.cases.deadlines import compute_deadlines
from gateway.cases.models import Case, Deadline, LedgerEntry, Method, Step, StepKind
from gateway.cases.repository import step_body
from gateway.cases.service import CaseService, CaseView, due_on_label
from gateway.domain import Citation, Finding
from gateway.registry.models import SiteConfig
from gateway.reports.render_pdf import BODY, CELL, CITE, H2, HEAD, MARGIN, SMALL, SUB, TITLE
from gateway.reports.sources import snapshot_as_of
from gateway.rules.pack import RulePack
from gateway.state.snapshots import FindingSnapshot

PAGE_W, PAGE_H = LETTER
#: Rows of a finding's per-cycle table shown in the PDF (the JSON holds all of them).
MAX_ROWS = 60


@dataclass(frozen=True, slots=True)
class Bundle:
    """The evidence of one case: canonical JSON bytes and their SHA-256."""

    case_id: str
    data: dict[str, Any]
    json_bytes: bytes
    hash: str


def _cite(c: Citation) -> dict[str, str]:
    return {"file": c.file, "section": c.section, "quote": c.quote}


def _iso(value: datetime) -> str:
    return value.isoformat()


def _frozen_finding(
    f: Finding,
    snapshots: Sequence[FindingSnapshot],
    history: Sequence[Mapping[str, Any]],
    as_of: datetime,
) -> dict[str, Any]:
    """A gathered finding as frozen at ``as_of`` (issue 16.6, 15.5): the snapshot taken
    at or before it (evidence, readings window, sensor health, pack version, with its
    SHA-256) and the level history up to it, never the evidence overwritten since,
    so the packet of an open finding does not drift."""
    snap = snapshot_as_of(snapshots, as_of)
    frozen: Mapping[str, Any] = snap.data.get("finding", {}) if snap is not None else {}
    cleared = f.cleared_at if f.cleared_at is not None and f.cleared_at <= as_of else None
    return {
        "id": f.id,
        "title": frozen.get("title", f.title),
        "level": snap.level if snap is not None else "",
        "severity": snap.severity if snap is not None else "",
        "opened_at": _iso(f.opened_at),
        "cleared_at": None if cleared is None else _iso(cleared),
        "evidence": dict(frozen.get("evidence", {})),
        "snapshot": None
        if snap is None
        else {
            "seq": snap.seq,
            "at": _iso(snap.at),
            "change": snap.change,
            "sha256": snap.sha256,
            "intact": snap.intact,
            "pack": snap.data.get("pack", ""),
            "readings_window": snap.data.get("readings_window", {}),
            "sensor_health": snap.data.get("sensor_health", []),
            "note": snap.data.get("note", ""),
        },
        "history": [h for h in history if h["at"] <= as_of],
    }


async def _gathered_findings(
    service: CaseService, case: Case, as_of: datetime
) -> list[dict[str, Any]]:
    """The findings the case's episodes gathered, each frozen as of ``as_of``."""
    findings: list[dict[str, Any]] = []
    if service.findings is None:
        return findings
    for step in case.of_kind(StepKind.EPISODE):
        if step.finding_id is None:
            continue
        f = await service.findings.get(step.finding_id)
        if f is None:
            continue
        snapshots = await service.findings.snapshots(f.id)
        history = await service.findings.history(f.id)
        findings.append(_frozen_finding(f, snapshots, history, as_of))
    return findings


def _case_json(case: Case, site: SiteConfig, pack: RulePack) -> dict[str, Any]:
    return {
        "id": case.id,
        "site_id": case.site_id,
        "address": site.address,
        "jurisdiction": case.jurisdiction,
        "pack": pack.name,
        "rule_id": case.rule_id,
        "origin": case.origin.value,
        "title": case.title,
        "opened_at": _iso(case.opened_at),
    }


def _step_json(s: Step) -> dict[str, Any]:
    return {
        "id": s.id,
        "kind": s.kind.value,
        "at": _iso(s.at),
        "recorded_at": _iso(s.recorded_at),
        "actor": s.actor,
        "actor_role": s.actor_role,
        "note": s.note,
        "finding_id": s.finding_id,
        **step_body(s),
    }


def _deadline_json(d: Deadline) -> dict[str, Any]:
    return {
        "id": d.id,
        "label": d.label,
        "due_on": None if d.due_on is None else d.due_on.isoformat(),
        "status": d.status.value,
        "note": d.note,
        "citations": [_cite(c) for c in d.citations],
    }


def _ledger_json(e: LedgerEntry) -> dict[str, Any]:
    return {
        "line": e.seq,
        "kind": e.kind.value,
        "period": e.period,
        "amount_cents": e.amount_cents,
        "max_cents": e.max_cents,
        "basis": e.basis,
        "citation": e.citation,
        "corrects": e.corrects,
        "referral": e.referral,
    }


def _citations_json(pack: RulePack, rule_id: str) -> dict[str, Any]:
    rule = pack.rule(rule_id)
    return {
        "rule": [_cite(c) for c in rule.citations],
        "related": [_cite(c) for c in rule.related],
        "steps": {name: _cite(s.citation) for name, s in pack.enforcement.steps.items()},
    }


async def bundle(service: CaseService, case_id: str) -> Bundle:
    """Collect the stored evidence of a case into canonical JSON."""
    case = await service.repo.get(case_id)
    site = service.registry.require(case.site_id)
    pack = service.pack_of(site)
    as_of = max(s.recorded_at for s in case.steps)
    deadlines = compute_deadlines(case, pack.enforcement, site.tz, as_of)
    ledger = [
        e for e in await service.repo.ledger(frozenset({case.site_id})) if e.case_id == case.id
    ]
    data: dict[str, Any] = {
        "format": "sumpwatch-evidence/1",
        "as_of": _iso(as_of),
        "case": _case_json(case, site, pack),
        "steps": [_step_json(s) for s in case.steps],
        "deadlines": [_deadline_json(d) for d in deadlines],
        "findings": await _gathered_findings(service, case, as_of),
        "ledger": [_ledger_json(e) for e in ledger],
        "citations": _citations_json(pack, case.rule_id),
        "note": (
            "Detector findings are inferences from sensor data (suspected) until an "
            "observation or inspection confirms them. Amounts are estimates from the "
            "text, not a legal determination."
        ),
    }
    raw = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=str)
    encoded = raw.encode()
    return Bundle(case.id, data, encoded, "sha256:" + hashlib.sha256(encoded).hexdigest())


# ---------------------------------------------------------------------- PDF helpers


def _p(text: Any, style: Any = BODY) -> Paragraph:
    return Paragraph(escape(str(text)), style)


def _table(rows: Sequence[Sequence[Any]], widths: Sequence[float]) -> LongTable:
    body = [[c if isinstance(c, Flowable) else _p(c, CELL) for c in row] for row in rows]
    if body:
        body[0] = [_p(c, HEAD) if isinstance(c, str) else c for c in rows[0]]
    table = LongTable(body, colWidths=list(widths), repeatRows=1)
    table.setStyle(
        TableStyle(
            [
                ("GRID", (0, 0), (-1, -1), 0.3, colors.HexColor("#cbd5e0")),
                ("BACKGROUND", (0, 0), (-1, 0), colors.HexColor("#edf2f7")),
                ("VALIGN", (0, 0), (-1, -1), "TOP"),
            ]
        )
    )
    return table


def _canvas(header: str, footer: str) -> type[Canvas]:
    class HashCanvas(Canvas):
        """Defers pages so each carries "Page N of M" and the content hash."""

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
                self.saveState()
                self.setFont("Helvetica", 7.5)
                self.setFillColor(colors.HexColor("#4a5568"))
                self.drawString(MARGIN, PAGE_H - 0.5 * inch, header)
                self.drawString(MARGIN, 0.45 * inch, footer)
                self.drawRightString(
                    PAGE_W - MARGIN, 0.45 * inch, f"Page {self._pageNumber} of {total}"
                )
                self.restoreState()
                super().showPage()
            super().save()

    return HashCanvas


def _build(story: list[Flowable], title: str, header: str, footer: str) -> bytes:
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
        invariant=1,  # no creation date or random id: same data, same bytes
    )
    doc.build(story, canvasmaker=_canvas(header, footer))
    return buf.getvalue()


def _cites(citations: Sequence[dict[str, str]]) -> list[Flowable]:
    return [_p(f'{c["file"]} \u00a7{c["section"]}: "{c["quote"]}"', CITE) for c in citations] or [
        _p("-", CITE)
    ]


def _finding_flowables(f: dict[str, Any], width: float) -> list[Flowable]:
    out: list[Flowable] = [
        _p(f"{f['title']} ({f['level'] or f['severity']}), opened {f['opened_at']}", BODY)
    ]
    snap = f.get("snapshot")
    if snap is None:
        out.append(_p("No frozen snapshot was taken at or before this packet's date.", SMALL))
    else:
        health = ", ".join(
            f"{h.get('node_id')} {'online' if h.get('online') else 'offline'}"
            for h in snap["sensor_health"]
        )
        readings = len(snap["readings_window"].get("readings", []))
        out.append(
            _p(
                f"Frozen snapshot {snap['seq']} ({snap['change']}, {snap['at']}), "
                f"sha256 {snap['sha256']}; pack {snap['pack'] or '-'}; {readings} readings "
                f"in its window; sensor health: {health or 'not recorded'}",
                SMALL,
            )
        )
    scalars = [(k, v) for k, v in sorted(f["evidence"].items()) if not isinstance(v, list | dict)]
    if scalars:
        out.append(_table([("Evidence", "Value"), *scalars], [width * 0.35, width * 0.65]))
    for key, value in sorted(f["evidence"].items()):
        if isinstance(value, list) and value and isinstance(value[0], dict):
            cols = sorted({k for row in value for k in row})[:8]
            rows = [[str(row.get(c, "")) for c in cols] for row in value[:MAX_ROWS]]
            out.append(_p(f"{key} ({len(value)} rows; all in the JSON bundle)", SMALL))
            out.append(_table([cols, *rows], [width / len(cols)] * len(cols)))
    if f["history"]:
        hist = [(h.get("at", ""), h.get("change", ""), h.get("level", "")) for h in f["history"]]
        out.append(
            _table([("At", "Change", "Level"), *hist], [width * 0.5, width * 0.25, width * 0.25])
        )
    return out


_PAYLOADS = ("service", "inspection", "waiver", "offense_days", "documents", "confirms", "due_on")


def _details(step: dict[str, Any]) -> str:
    payload = {k: step[k] for k in _PAYLOADS if k in step}
    parts = [step["note"], json.dumps(payload, sort_keys=True) if payload else ""]
    return "; ".join(p for p in parts if p)


def _timeline(d: dict[str, Any], w: float) -> list[Flowable]:
    rows = [
        (s["at"], s["kind"], f"{s['actor']} ({s['actor_role']})", _details(s)) for s in d["steps"]
    ]
    widths = [w * 0.22, w * 0.16, w * 0.17, w * 0.45]
    return [_p("Timeline", H2), _table([("When", "Step", "Who", "Details"), *rows], widths)]


def _deadlines(d: dict[str, Any], w: float) -> list[Flowable]:
    out: list[Flowable] = [_p("Deadlines", H2)]
    if not d["deadlines"]:
        text = "No deadline has started (the pack sets none, or no notice or order is out)."
        return [*out, _p(text, BODY)]
    rows = [
        (
            x["label"],
            x["due_on"] or "-",
            f"{x['status']} {x['note']}".strip(),
            _cites(x["citations"])[0],
        )
        for x in d["deadlines"]
    ]
    header = ("Deadline", "Due (last day)", "Status", "Citation")
    return [*out, _table([header, *rows], [w * 0.35, w * 0.15, w * 0.2, w * 0.3])]


def _findings(d: dict[str, Any], w: float) -> list[Flowable]:
    out: list[Flowable] = [_p("Findings (frozen snapshots as of the last step, level history)", H2)]
    if not d["findings"]:
        out.append(_p("No detector finding is attached to this case.", BODY))
    for f in d["findings"]:
        out += _finding_flowables(f, w)
    return out


def _ledger(d: dict[str, Any], w: float) -> list[Flowable]:
    out: list[Flowable] = [_p("Ledger lines of this case (estimates)", H2)]
    if not d["ledger"]:
        return [*out, _p("None posted.", BODY)]
    rows = [
        (
            e["line"],
            e["period"],
            "no amount in the text"
            if e["amount_cents"] is None
            else f"${e['amount_cents'] / 100:,.2f}",
            e["basis"] + (" · referral" if e["referral"] else ""),
            e["citation"],
        )
        for e in d["ledger"]
    ]
    header = ("Line", "Period", "Amount", "Basis", "Citation")
    widths = [w * 0.08, w * 0.14, w * 0.16, w * 0.24, w * 0.38]
    return [*out, _table([header, *rows], widths)]


def _citations(d: dict[str, Any]) -> list[Flowable]:
    cited = d["citations"]
    return [
        _p("Citations", H2),
        *_cites(cited["rule"] + cited["related"]),
        *_cites(list(cited["steps"].values())),
    ]


def packet_pdf(b: Bundle) -> bytes:
    """The evidence packet: timeline, findings, deadlines, ledger, citations; hash per page."""
    d = b.data
    c = d["case"]
    w = PAGE_W - 2 * MARGIN
    story: list[Flowable] = [
        _p(f"Evidence packet: {c['title']}", TITLE),
        _p(f"{c['address']} · case {c['id']} · {c['pack']} · as of {d['as_of']}", SUB),
        Spacer(1, 6),
        _p(d["note"], SMALL),
        _p(f"Content hash of the JSON bundle: {b.hash}", SMALL),
        *_timeline(d, w),
        *_deadlines(d, w),
        *_findings(d, w),
        *_ledger(d, w),
        *_citations(d),
    ]
    return _build(
        story,
        f"Evidence {c['id']}",
        f"SumpWatch evidence packet · {c['id']} · {c['address']}",
        f"Content hash {b.hash}",
    )


# ---------------------------------------------------------------------- letters


def _letter_step(case: Case) -> Step | None:
    return case.last(StepKind.ORDER, StepKind.NOTICE)


def _letter(v: CaseView, dated: datetime) -> list[Flowable]:
    case, site, e = v.case, v.site, v.pack.enforcement
    served = _letter_step(case)
    kind = "order" if served is not None and served.kind is StepKind.ORDER else "notice"
    if kind not in e.steps:
        raise ValueError(f"{v.pack.name} provides no notice or order for case {case.id}")
    step_spec = e.steps[kind]
    rule = v.pack.rule(case.rule_id)
    story: list[Flowable] = [
        _p(v.pack.name.split(":")[0], SUB),
        _p(step_spec.label, TITLE),
        _p(f"Dated {dated.astimezone(site.tz):%B %d, %Y} · case {case.id}", SUB),
        Spacer(1, 10),
        _p("To the owner or occupant of", BODY),
        _p(site.address or site.name, BODY),
        Spacer(1, 8),
        _p(f"Problem: {case.title}.", BODY),
    ]
    if served is None:
        story.append(_p("Draft: this letter has not been served yet.", SMALL))
    elif served.service is not None:
        how = "in person" if served.service.method is Method.IN_PERSON else "by first-class mail"
        story.append(
            _p(
                f"Served on the {served.service.party.value} {how} on "
                f"{served.at.astimezone(site.tz):%B %d, %Y}.",
                BODY,
            )
        )
    story.append(_p("What you must do, and by when", H2))
    deadlines = [d for d in v.deadlines if d.anchor_step_id == (served.id if served else "")]
    if deadlines:
        for d in deadlines:
            story.append(_p(f"{d.label}: by {due_on_label(d.due_on, site.tz)}.", BODY))
            story += [_p(f'{c.file} \u00a7{c.section}: "{c.quote}"', CITE) for c in d.citations]
    else:
        story.append(_p("The deadlines start when this letter is served.", BODY))
    story.append(_p("Why", H2))
    story += [
        _p(f'{c.file} \u00a7{c.section}: "{c.quote}"', CITE)
        for c in (*rule.citations, step_spec.citation)
    ]
    if "waiver" in e.steps:
        waiver = e.steps["waiver"].citation
        story.append(
            _p(
                f"You may apply in writing for a waiver or time extension ({waiver})",
                BODY,
            )
        )
    story.append(PageBreak())
    return story


def letters_pdf(views: Sequence[CaseView], dated: datetime) -> bytes:
    """Notice or order letters, one per case, in one PDF (bulk generation)."""
    story: list[Flowable] = []
    for v in views:
        story += _letter(v, dated)
    return _build(story, "Notices", "SumpWatch notices", f"Generated {dated:%Y-%m-%d}")
