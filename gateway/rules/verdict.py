"""One compliance verdict per site: audit + findings + confirmations + waivers, as of a date.

The dashboard, the console, the API and the reports all read this, so a site that
fails a requirement never looks "OK" on one page and "Not in compliance" on another.

Three rules of evidence (docs/rule-packs.md, "Verdicts"):

* **Level history, not last level.** A finding's days at ``violation`` come from its
  level history (``finding_events``): an icing finding that went warning ->
  violation -> watch counts only the violation part, per local day of the site.
* **Inferred is not observed.** Telemetry alone makes a *suspected* violation (a
  "spell": a stretch at violation level). A confirming record (an inspection result,
  a dated observation, :class:`~gateway.domain.Confirmation`) makes it *confirmed*;
  a refuting one drops it. Only confirmed spells are violations.
* **Unknown is not met.** "In compliance" means every applicable requirement was
  checked and met; an unrecorded fact leaves it "not checked".

Waivers count only where the pack's rule has a waiver clause (``waiver_cite``), by
instant (:meth:`~gateway.registry.models.Waiver.covers_at`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import date, datetime, timedelta
from enum import StrEnum
from itertools import pairwise
from typing import Literal, Protocol
from zoneinfo import ZoneInfo

from gateway.domain import Citation, Confirmation, ConfirmationKind, ConfirmationSource, Finding
from gateway.registry.models import SiteConfig
from gateway.rules.audit import AuditItem, audit_site
from gateway.rules.pack import FirstStep, RulePack

#: The level at which telemetry suspects a violation of an enforced rule.
VIOLATION_LEVEL = "violation"
#: A record made up to this long after a spell ended still speaks to it: ice stays on
#: a walk after the pump stops, an inspection is booked days after the notice.
CONFIRM_WITHIN = timedelta(days=3)
#: Findings about the monitoring itself, never about the property's discharge.
MONITORING_RULES = frozenset({"sensor_silent"})

Audience = Literal["staff", "homeowner"]
SpellStatus = Literal["suspected", "confirmed", "refuted", "waived"]
LevelHistory = Sequence[tuple[datetime, str]]


class VerdictStatus(StrEnum):
    """The one-word verdict of a site."""

    VIOLATION = "violation"  # a confirmed violation, or a requirement recorded and failed
    SUSPECTED = "suspected"  # telemetry suspects a violation nobody has confirmed yet
    NOT_CHECKED = "not_checked"  # no violation found, but some requirements not checked
    COMPLIANT = "compliant"  # every applicable requirement checked and met, nothing suspected
    NO_PACK = "no_pack"  # no rule pack for the jurisdiction: nothing is judged


@dataclass(frozen=True, slots=True)
class LevelSpan:
    """A stretch of time a finding spent at one level."""

    start: datetime
    end: datetime
    level: str


@dataclass(frozen=True, slots=True)
class Spell:
    """A stretch at violation level of one enforced rule, and what confirms it."""

    rule_id: str
    title: str
    start: datetime
    end: datetime
    status: SpellStatus
    days: tuple[date, ...]
    citations: tuple[Citation, ...]
    finding_id: str | None = None  # None: a confirmed observation without telemetry
    evidence: Mapping[str, object] = field(default_factory=dict)
    confirmations: tuple[Confirmation, ...] = ()

    @property
    def inspected(self) -> bool:
        """True when a village inspection (not only an observation) confirmed it."""
        return any(c.kind is ConfirmationKind.INSPECTION and c.confirms for c in self.confirmations)

    @property
    def confidence(self) -> str:
        """What the suspicion rests on, in words (for a suspected spell)."""
        if self.finding_id is None:
            return "observed"
        value = self.evidence.get("confidence")
        return f"telemetry only (confidence {value})" if value else "telemetry only"


@dataclass(frozen=True, slots=True)
class Verdict:
    """A site's compliance verdict as of an instant."""

    site_id: str
    as_of: datetime
    status: VerdictStatus
    pack_name: str
    audit: tuple[AuditItem, ...]
    spells: tuple[Spell, ...]
    next_step: FirstStep | None = None
    next_step_reason: str = ""
    #: The ordinance's title (the pack's display name), for citations in the sentence.
    ordinance: str = ""

    def _spells(self, status: SpellStatus) -> tuple[Spell, ...]:
        if not self.spells:  # most sites of a village: asked five times a console row
            return ()
        return tuple(s for s in self.spells if s.status == status)

    @property
    def confirmed(self) -> tuple[Spell, ...]:
        """Violations a record confirmed."""
        return self._spells("confirmed")

    @property
    def suspected(self) -> tuple[Spell, ...]:
        """Violations telemetry suspects, unconfirmed."""
        return self._spells("suspected")

    @property
    def waived(self) -> tuple[Spell, ...]:
        """Spells a waiver the text provides for covered."""
        return self._spells("waived")

    @property
    def failed(self) -> tuple[AuditItem, ...]:
        """Requirements recorded and failed."""
        return tuple(a for a in self.audit if a.status == "fail")

    @property
    def not_checked(self) -> tuple[AuditItem, ...]:
        """Requirements that could not be checked (facts not recorded)."""
        return tuple(a for a in self.audit if a.status == "unknown")

    @property
    def advisories(self) -> tuple[AuditItem, ...]:
        """Points the village may require or the owner should check."""
        return tuple(a for a in self.audit if a.status == "advisory")

    @property
    def confirmed_days(self) -> tuple[date, ...]:
        """Local days with a confirmed violation."""
        return _days_of(self.confirmed)

    @property
    def suspected_days(self) -> tuple[date, ...]:
        """Local days with a suspected (and no confirmed) violation."""
        confirmed = set(self.confirmed_days)
        return tuple(d for d in _days_of(self.suspected) if d not in confirmed)

    @property
    def label(self) -> str:
        """Short label: "Not in compliance", "Suspected violation", ..."""
        return LABELS[self.status]

    def sentence(self, audience: Audience = "staff") -> str:
        """The verdict in one or two sentences, worded for staff or for the homeowner."""
        return _sentence(self, audience)


LABELS = {
    VerdictStatus.VIOLATION: "Not in compliance",
    VerdictStatus.SUSPECTED: "Suspected violation (not confirmed)",
    VerdictStatus.NOT_CHECKED: "No violation found; not fully checked",
    VerdictStatus.COMPLIANT: "In compliance",
    VerdictStatus.NO_PACK: "No rule pack",
}


def _days_of(spells: Sequence[Spell]) -> tuple[date, ...]:
    return tuple(sorted({d for s in spells for d in s.days}))


def local_days(start: datetime, end: datetime, tz: ZoneInfo) -> tuple[date, ...]:
    """Local days that ``[start, end)`` overlaps."""
    if end <= start:
        return ()
    day = start.astimezone(tz).date()
    last = (end - timedelta(microseconds=1)).astimezone(tz).date()
    out = []
    while day <= last:
        out.append(day)
        day += timedelta(days=1)
    return tuple(out)


def level_spans(
    finding: Finding, history: LevelHistory | None, through: datetime
) -> list[LevelSpan]:
    """The finding's levels over ``[opened_at, cleared_at or through)``.

    Without a history (a source that keeps none) the last level stands for the
    whole finding, which is right only if it never changed.
    """
    end = min(finding.cleared_at or through, through)
    points = sorted(history or ())
    if not points:
        return [LevelSpan(finding.opened_at, end, finding.level)] if end > finding.opened_at else []
    spans: list[LevelSpan] = []
    for i, (at, level) in enumerate(points):
        a = finding.opened_at if i == 0 else max(at, finding.opened_at)
        b = min(points[i + 1][0] if i + 1 < len(points) else end, end)
        if b <= a:
            continue
        if spans and spans[-1].level == level and spans[-1].end == a:
            spans[-1] = LevelSpan(spans[-1].start, b, level)
        else:
            spans.append(LevelSpan(a, b, level))
    return spans


def _split(
    start: datetime, end: datetime, covers: Sequence[tuple[datetime, datetime]]
) -> list[tuple[datetime, datetime, bool]]:
    """``[start, end)`` cut into pieces covered (True) or not by the ``covers`` intervals."""
    cuts = sorted({start, end, *(t for c in covers for t in c if start < t < end)})
    pieces: list[tuple[datetime, datetime, bool]] = []
    for a, b in pairwise(cuts):
        covered = any(c0 <= a and b <= c1 for c0, c1 in covers)
        if pieces and pieces[-1][2] == covered:
            pieces[-1] = (pieces[-1][0], b, covered)
        else:
            pieces.append((a, b, covered))
    return pieces


def _waiver_bounds(
    site: SiteConfig, pack: RulePack | None, rule_id: str
) -> list[tuple[datetime, datetime]]:
    if pack is None or pack.rule(rule_id).waiver_citation is None:
        return []  # no waiver clause in the text: a registry waiver changes nothing
    return [w.bounds(site.tz) for w in site.waivers if w.rule == rule_id]


def _citations(
    pack: RulePack | None, finding: Finding | None, rule_id: str, days: Sequence[date]
) -> tuple[Citation, ...]:
    if pack is None:
        return tuple(finding.citations) if finding is not None else ()
    out: list[Citation] = []
    for day in days:
        for c in pack.citations_on(rule_id, day):
            if c not in out:
                out.append(c)
    return tuple(out)


def _enforced(pack: RulePack | None, finding: Finding) -> bool:
    if finding.rule_id in MONITORING_RULES:
        return False
    if pack is None:
        return bool(finding.citations)
    return pack.rule(finding.rule_id).enforced


def spells_of(
    site: SiteConfig,
    pack: RulePack | None,
    findings: Sequence[Finding],
    histories: Mapping[str, LevelHistory],
    confirmations: Sequence[Confirmation],
    start: datetime,
    through: datetime,
) -> list[Spell]:
    """Every violation-level spell of an enforced rule in ``[start, through)``, judged."""
    tz = site.tz
    spells: list[Spell] = []
    for f in findings:
        if not _enforced(pack, f):
            continue
        waivers = _waiver_bounds(site, pack, f.rule_id)
        for span in level_spans(f, histories.get(f.id), through):
            a, b = max(span.start, start), min(span.end, through)
            if span.level != VIOLATION_LEVEL or b <= a:
                continue
            for p0, p1, waived in _split(a, b, waivers):
                days = local_days(p0, p1, tz)
                spells.append(
                    Spell(
                        rule_id=f.rule_id,
                        title=f.title,
                        start=p0,
                        end=p1,
                        status="waived" if waived else "suspected",
                        days=days,
                        citations=_citations(pack, f, f.rule_id, days),
                        finding_id=f.id,
                        evidence=dict(f.evidence),
                    )
                )
    return _confirm(site, pack, spells, confirmations, start, through)


def _confirm(
    site: SiteConfig,
    pack: RulePack | None,
    spells: list[Spell],
    confirmations: Sequence[Confirmation],
    start: datetime,
    through: datetime,
) -> list[Spell]:
    """Apply each record to the spell of its rule it speaks to; the latest record wins."""
    by_spell: dict[int, list[Confirmation]] = {}
    unmatched: list[Confirmation] = []
    for c in sorted(confirmations, key=lambda c: c.observed_at):
        if c.site_id != site.id or c.kind is ConfirmationKind.CORRECTION_PROOF:
            continue  # proof of a fix never confirms a violation
        hits = [
            i
            for i, s in enumerate(spells)
            if s.rule_id == c.rule_id
            and s.status != "waived"
            and s.start <= c.observed_at < s.end + CONFIRM_WITHIN
        ]
        for i in hits:
            by_spell.setdefault(i, []).append(c)
        if not hits and c.confirms:
            unmatched.append(c)
    out: list[Spell] = []
    for i, spell in enumerate(spells):
        records = by_spell.get(i, [])
        status: SpellStatus = "confirmed" if records and records[-1].confirms else "refuted"
        out.append(
            replace(spell, status=status, confirmations=tuple(records)) if records else spell
        )
    for c in unmatched:
        if not start <= c.observed_at < through:
            continue
        if any(w0 <= c.observed_at < w1 for w0, w1 in _waiver_bounds(site, pack, c.rule_id)):
            continue
        day = c.observed_at.astimezone(site.tz).date()
        out.append(
            Spell(
                rule_id=c.rule_id,
                title=f"Observed by {c.source}" + (f": {c.note}" if c.note else ""),
                start=c.observed_at,
                end=c.observed_at,
                status="confirmed",
                days=(day,),
                citations=_citations(pack, None, c.rule_id, (day,)),
                confirmations=(c,),
            )
        )
    return sorted(out, key=lambda s: (s.start, s.rule_id))


#: Which first step outranks which when several spells call for one.
_STEP_RANK = {"order": 0, "citation": 1, "notice": 2, "inspection": 3}


def _step_for(pack: RulePack, s: Spell) -> tuple[FirstStep | None, str]:
    spec = pack.rule(s.rule_id)
    if s.status == "suspected":
        return spec.on_suspected, f"suspected: {s.title}"
    if s.status != "confirmed" or spec.on_confirmed is None:
        return None, ""
    if spec.on_confirmed.requires == "inspection" and not s.inspected:
        # The text ties this step to an inspection; an observation is not one.
        return spec.on_suspected, f"observed, not yet inspected: {s.title}"
    return spec.on_confirmed, f"confirmed: {s.title}"


def _next_step(
    pack: RulePack | None, verdict_spells: Sequence[Spell]
) -> tuple[FirstStep | None, str]:
    """The village's first step, as the pack's text provides it (the strongest one due)."""
    if pack is None:
        return None, ""
    due = [(step, why) for step, why in (_step_for(pack, s) for s in verdict_spells) if step]
    if not due:
        return None, ""
    return min(due, key=lambda d: _STEP_RANK.get(d[0].step, 9))


def _audit_over(
    site: SiteConfig, pack: RulePack, as_of: datetime, first: date | None
) -> tuple[AuditItem, ...]:
    """The audit as of ``as_of``, preceded by the failed or unchecked items of each
    earlier installation record in force since local day ``first``."""
    last = as_of.astimezone(site.tz).date()
    current = audit_site(site, pack, at=as_of)
    if first is None:
        return tuple(current)
    starts = [first, *site.installation_changes(first, last)]
    earlier: list[AuditItem] = []
    for start, next_start in pairwise(starts):
        until = next_start - timedelta(days=1)
        for item in audit_site(site, pack, at=as_of, installation=site.installation_on(start)):
            if item.status in ("fail", "unknown", "waived"):
                earlier.append(
                    replace(
                        item, message=f"Until {until:%Y-%m-%d} (earlier record): {item.message}"
                    )
                )
    return (*earlier, *current)


def site_verdict(
    site: SiteConfig,
    pack: RulePack | None,
    *,
    as_of: datetime,
    findings: Sequence[Finding] = (),
    histories: Mapping[str, LevelHistory] | None = None,
    confirmations: Sequence[Confirmation] = (),
    since: datetime | None = None,
    audit_from: date | None = None,
) -> Verdict:
    """The site's verdict at ``as_of`` over the findings of ``[since, as_of)``.

    The audit uses the installation record in force on ``as_of``'s local day and
    the waivers in force at ``as_of``; with ``audit_from`` (a season report), also
    every earlier record in force from that local day on, so a line fixed mid-season
    still shows what it failed while it was in place.
    """
    since = since or min((f.opened_at for f in findings), default=as_of)
    if pack is None:
        return Verdict(site.id, as_of, VerdictStatus.NO_PACK, site.jurisdiction, (), ())
    audit = _audit_over(site, pack, as_of, audit_from)
    spells = tuple(spells_of(site, pack, findings, histories or {}, confirmations, since, as_of))
    step, reason = _next_step(pack, spells)
    if any(s.status == "confirmed" for s in spells) or any(a.status == "fail" for a in audit):
        status = VerdictStatus.VIOLATION
    elif any(s.status == "suspected" for s in spells):
        status = VerdictStatus.SUSPECTED
    elif any(a.status == "unknown" for a in audit):
        status = VerdictStatus.NOT_CHECKED
    else:
        status = VerdictStatus.COMPLIANT
    return Verdict(
        site.id, as_of, status, pack.name.split(":")[0], audit, spells, step, reason, pack.title
    )


def confirmations_for(
    source: ConfirmationSource | None, site_id: str, start: datetime, end: datetime
) -> list[Confirmation]:
    """Records of one site (none without a source)."""
    if source is None:
        return []
    return source.confirmations(site_id, start, end)


class NoConfirmations:
    """The confirmation source while nothing in this deployment records confirmations.

    Honest, not a stub: no inspection or observation store is wired yet, so there
    are none, and every telemetry finding stays "suspected".
    """

    def confirmations(self, site_id: str, start: datetime, end: datetime) -> list[Confirmation]:
        """No records."""
        return []


@dataclass(frozen=True, slots=True)
class LedgerLine:
    """A posted line of a site's enforcement ledger, as the reports read it (issue 16.5).

    ``period`` is a month (``YYYY-MM``, Edgar (f)(4) surcharges) or a day
    (``YYYY-MM-DD``, per-offense fines); a ``reversal`` cancels line ``corrects`` with
    the opposite amounts. Amounts are estimates from the text, in cents.
    """

    line: int
    kind: str  # surcharge | fine | reversal
    period: str
    amount_cents: int | None
    max_cents: int | None
    basis: str
    citation: str
    referral: bool = False
    corrects: int | None = None


class LedgerSource(Protocol):
    """Where a site's posted ledger lines are (the case service, ``gateway.cases``)."""

    async def ledger_lines(self, site_id: str) -> list[LedgerLine] | None:
        """The site's posted lines, brought up to date first; None: the site has no
        enforcement case, so no ledger speaks for it."""
        ...


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def titles(spells: Sequence[Spell]) -> str:
    """The distinct titles of some spells, sorted."""
    return "; ".join(sorted({s.title for s in spells}))


def _parts(v: Verdict, staff: bool) -> tuple[list[str], int]:
    """What the sentence lists, and how many requirements could not be checked; each of
    the verdict's lists read once (the console words 1,000 verdicts at a time)."""
    confirmed, suspected = v.confirmed, v.suspected
    failed = not_checked = 0
    waived = bool(v.waived)
    for a in v.audit:
        failed += a.status == "fail"
        not_checked += a.status == "unknown"
        waived = waived or a.status == "waived"
    parts: list[str] = []
    if confirmed:
        parts.append(
            f"{_plural(len(v.confirmed_days), 'day')} of confirmed violation ({titles(confirmed)})"
        )
    if failed:
        subject = "the registered installation" if staff else "your installation"
        parts.append(f"{subject} fails {_plural(failed, 'requirement')}")
    if suspected:
        parts.append(
            f"{_plural(len(v.suspected_days), 'day')} of suspected, unconfirmed violation "
            f"({titles(suspected)}; telemetry only)"
        )
    if waived:
        parts.append("a waiver under the ordinance covers part of it")
    if not_checked:
        parts.append(f"{_plural(not_checked, 'requirement')} not checked (not recorded)")
    return parts, not_checked


def _sentence(v: Verdict, audience: Audience) -> str:
    staff = audience == "staff"
    if v.status is VerdictStatus.NO_PACK:
        return f"No rule pack for jurisdiction {v.pack_name!r}: nothing is judged."
    parts, not_checked = _parts(v, staff)
    body = "; ".join(parts)
    if v.status is VerdictStatus.VIOLATION:
        text = f"Not in compliance with {v.pack_name}: {body}."
    elif v.status is VerdictStatus.SUSPECTED:
        lead = "Suspected violation" if staff else "Our readings suggest a possible violation"
        text = f"{lead} of {v.pack_name}, not confirmed by an inspection or observation: {body}."
    elif v.status is VerdictStatus.NOT_CHECKED:
        text = (
            f"No violation found; {_plural(not_checked, 'requirement')} of "
            f"{v.pack_name} not checked because the facts are not recorded."
        )
    else:
        text = (
            f"In compliance with {v.pack_name}: every applicable requirement was checked "
            "and met, and the monitoring found no violation."
        )
        if body:
            text += f" ({body}.)"
    if staff and v.next_step is not None:
        step = v.next_step
        deadline = f" ({step.deadline_days} days)" if step.deadline_days else ""
        cite = f" [{step.citation.cited(v.ordinance or None)}]" if step.citation else ""
        text += f" First step: {step.step}{deadline}: {step.summary}{cite}."
    return text
