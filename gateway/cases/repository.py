"""Cases, steps, documents and ledger lines in the state database (tables: migration 4).

Also the :class:`~gateway.domain.ConfirmationSource` the verdicts read: observations,
inspection results and proofs of correction, kept in memory (loaded at open and
updated on every write) because that protocol is synchronous and is asked inside
report assembly.
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, date, datetime
from typing import Any
from zoneinfo import ZoneInfo

from gateway.cases.amend import InspectedFacts, amend_site
from gateway.cases.models import (
    Case,
    Charge,
    ChecklistResult,
    Decision,
    Document,
    EntryKind,
    Inspection,
    LedgerEntry,
    Method,
    Origin,
    Outcome,
    Party,
    Service,
    Step,
    StepKind,
    WaiverTerms,
)
from gateway.domain import Confirmation, ConfirmationKind
from gateway.errors import NotFound
from gateway.registry.models import SiteConfig, Waiver
from gateway.state.database import Connection, Database, Row

_FMT = "%Y-%m-%dT%H:%M:%S.%fZ"


def _ts(value: datetime) -> str:
    """Fixed-width UTC text, so SQL string order is time order."""
    return value.astimezone(UTC).strftime(_FMT)


def _parse(text: str) -> datetime:
    return datetime.strptime(text, _FMT).replace(tzinfo=UTC)


def _opt_ts(value: datetime | None) -> str | None:
    return None if value is None else _ts(value)


def _opt_parse(text: str | None) -> datetime | None:
    return None if text is None else _parse(text)


def _opt_day(text: str | None) -> date | None:
    return None if text is None else date.fromisoformat(text)


def step_body(step: Step) -> dict[str, Any]:
    """The step's typed payloads as JSON-ready data (also the evidence bundle's form)."""
    body: dict[str, Any] = {}
    if step.service is not None:
        s = step.service
        body["service"] = {
            "party": s.party.value,
            "method": s.method.value,
            "received_on": None if s.received_on is None else s.received_on.isoformat(),
        }
    if step.inspection is not None:
        i = step.inspection
        body["inspection"] = {
            "scheduled_for": _opt_ts(i.scheduled_for),
            "outcome": None if i.outcome is None else i.outcome.value,
            "inspector": i.inspector,
            "items": [[c.requirement_id, c.passed, c.note] for c in i.items],
        }
        if i.facts:  # only when recorded, so older steps keep their stored form
            body["inspection"]["facts"] = dict(i.facts)
    if step.waiver is not None:
        w = step.waiver
        body["waiver"] = {
            "grounds": w.grounds,
            "decision": None if w.decision is None else w.decision.value,
            "decider": w.decider,
            "conditions": w.conditions,
            "start": _opt_ts(w.start),
            "end": _opt_ts(w.end),
        }
    if step.confirms is not None:
        body["confirms"] = step.confirms
    if step.offense_days:
        body["offense_days"] = [d.isoformat() for d in step.offense_days]
    if step.due_on is not None:
        body["due_on"] = step.due_on.isoformat()
    if step.documents:
        body["documents"] = [
            [d.id, d.name, d.content_type, d.sha256, d.size] for d in step.documents
        ]
    return body


def _step(row: Row) -> Step:
    body = json.loads(row["body"])
    service = inspection = waiver = None
    if "service" in body:
        s = body["service"]
        service = Service(Party(s["party"]), Method(s["method"]), _opt_day(s["received_on"]))
    if "inspection" in body:
        i = body["inspection"]
        inspection = Inspection(
            scheduled_for=_opt_parse(i["scheduled_for"]),
            outcome=None if i["outcome"] is None else Outcome(i["outcome"]),
            inspector=i["inspector"],
            items=tuple(ChecklistResult(*item) for item in i["items"]),
            facts=tuple(sorted(i.get("facts", {}).items())),
        )
    if "waiver" in body:
        w = body["waiver"]
        waiver = WaiverTerms(
            grounds=w["grounds"],
            decision=None if w["decision"] is None else Decision(w["decision"]),
            decider=w["decider"],
            conditions=w["conditions"],
            start=_opt_parse(w["start"]),
            end=_opt_parse(w["end"]),
        )
    return Step(
        id=row["id"],
        case_id=row["case_id"],
        kind=StepKind(row["kind"]),
        at=_parse(row["at"]),
        recorded_at=_parse(row["recorded_at"]),
        actor=row["actor"],
        actor_role=row["actor_role"],
        note=row["note"],
        service=service,
        inspection=inspection,
        waiver=waiver,
        finding_id=row["finding_id"],
        confirms=body.get("confirms"),
        offense_days=tuple(date.fromisoformat(d) for d in body.get("offense_days", [])),
        due_on=_opt_day(body.get("due_on")),
        documents=tuple(Document(*d) for d in body.get("documents", [])),
    )


def _entry(row: Row) -> LedgerEntry:
    return LedgerEntry(
        seq=row["seq"],
        key=row["key"],
        site_id=row["site_id"],
        case_id=row["case_id"],
        kind=EntryKind(row["kind"]),
        period=row["period"],
        amount_cents=row["amount_cents"],
        max_cents=row["max_cents"],
        basis=row["basis"],
        citation=row["citation"],
        posted_at=_parse(row["posted_at"]),
        corrects=row["corrects"],
        referral=bool(row["referral"]),
        note=row["note"],
    )


def confirmation_of(step: Step, case: Case) -> Confirmation | None:
    """The Confirmation a step stands for, if any (16.3, 16.8).

    A passing inspection and a proof of correction refute the problem from then on
    (``confirms`` False); a failed inspection or a confirming observation confirms it.
    Refusal and no-show confirm nothing: they are their own breach (Edgar (f)(4)a.2).
    """
    if step.kind is StepKind.OBSERVATION and step.confirms is not None:
        kind, confirms = ConfirmationKind.OBSERVATION, step.confirms
    elif step.kind is StepKind.INSPECTION_RESULT and step.inspection is not None:
        outcome = step.inspection.outcome
        if outcome not in (Outcome.PASS, Outcome.FAIL):
            return None
        kind, confirms = ConfirmationKind.INSPECTION, outcome is Outcome.FAIL
    elif step.kind is StepKind.CORRECTION_PROOF:
        kind, confirms = ConfirmationKind.CORRECTION_PROOF, False
    else:
        return None
    source = step.inspection.inspector if step.inspection and step.inspection.inspector else ""
    return Confirmation(
        id=step.id,
        site_id=case.site_id,
        rule_id=case.rule_id,
        kind=kind,
        observed_at=step.at,
        confirms=confirms,
        source=source or step.actor,
        note=step.note,
        case_id=case.id,
    )


def waiver_of(step: Step, case: Case) -> Waiver | None:
    """A granted waiver decision as a registry :class:`Waiver` (exact instants)."""
    w = step.waiver
    if step.kind is not StepKind.WAIVER_DECIDED or w is None or w.end is None:
        return None
    if w.decision is not Decision.GRANTED:
        return None
    reference = f"case {case.id}, decided by {w.decider}" + (
        f"; conditions: {w.conditions}" if w.conditions else ""
    )
    return Waiver(rule=case.rule_id, start=w.start or step.at, end=w.end, reference=reference)


def inspected_facts(step: Step, tz: ZoneInfo) -> InspectedFacts | None:
    """The installation facts a passed or failed inspection recorded, from its local day.

    A refusal or no-show inspected nothing (Edgar (f)(4)a.2), so it records no facts.
    """
    i = step.inspection
    if step.kind is not StepKind.INSPECTION_RESULT or i is None or not i.facts:
        return None
    if i.outcome not in (Outcome.PASS, Outcome.FAIL):
        return None
    return InspectedFacts(day=step.at.astimezone(tz).date(), facts=i.facts)


class CaseRepository:
    """Stores cases append-only and answers the queries of the service and the API."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._confirmations: dict[str, list[Confirmation]] = {}
        self._waivers: dict[str, list[Waiver]] = {}
        #: Inspection results with facts, per site (dated in the site's time zone when
        #: the site is read: the repository does not know the registry).
        self._inspections: dict[str, list[Step]] = {}
        #: The latest order of each case that has one, with its site and rule, and the
        #: closed cases (the alert manager's clock reads them: 15.7, 16.2).
        self._orders: dict[str, tuple[str, str, datetime]] = {}
        self._closed: set[str] = set()

    async def open(self) -> None:
        """Load the confirmations and waivers (the tables are migration 4)."""
        for case in await self.list_cases():
            for step in case.steps:
                self._remember(step, case)

    def _remember(self, step: Step, case: Case) -> None:
        found = confirmation_of(step, case)
        if found is not None:
            rows = self._confirmations.setdefault(case.site_id, [])
            rows.append(found)
            rows.sort(key=lambda c: c.observed_at)
        granted = waiver_of(step, case)
        if granted is not None:
            self._waivers.setdefault(case.site_id, []).append(granted)
        if step.kind is StepKind.ORDER:
            known = self._orders.get(case.id)
            if known is None or step.at > known[2]:
                self._orders[case.id] = (case.site_id, case.rule_id, step.at)
        if step.kind is StepKind.CLOSED:
            self._closed.add(case.id)
        if step.kind is StepKind.INSPECTION_RESULT and step.inspection and step.inspection.facts:
            self._inspections.setdefault(case.site_id, []).append(step)

    def order_date(self, site_id: str, rule_id: str) -> datetime | None:
        """When the open case of this violation was last ordered (Edgar (f)(1): its 30
        days run from the order), or None without an open, ordered case."""
        dates = [
            at
            for case_id, (site, rule, at) in self._orders.items()
            if site == site_id and rule == rule_id and case_id not in self._closed
        ]
        return max(dates, default=None)

    def amend(self, site: SiteConfig) -> SiteConfig:
        """``SiteAmendments``: the site with its case-granted waivers and inspected
        installation facts merged in (the registry reads every site through this)."""
        waivers = self._waivers.get(site.id, [])
        steps = self._inspections.get(site.id, [])
        if not waivers and not steps:
            return site
        inspected = [f for step in steps if (f := inspected_facts(step, site.tz)) is not None]
        return amend_site(site, waivers, inspected)

    def waivers(self, site_id: str) -> list[Waiver]:
        """Waivers granted through cases, in the registry's shape (merge with
        ``SiteConfig.waivers``); only packs with a waiver clause ever offer the step."""
        return list(self._waivers.get(site_id, []))

    # ------------------------------------------------------------ ConfirmationSource

    def confirmations(self, site_id: str, start: datetime, end: datetime) -> list[Confirmation]:
        """Records for one site with ``start <= observed_at < end``, oldest first."""
        return [c for c in self._confirmations.get(site_id, []) if start <= c.observed_at < end]

    # ------------------------------------------------------------ cases and steps

    async def create(self, case: Case) -> None:
        """Insert a new case and its first steps."""

        def run(conn: Connection) -> None:
            conn.execute(
                "INSERT INTO cases (id, site_id, jurisdiction, rule_id, origin, title, opened_at)"
                " VALUES (?,?,?,?,?,?,?)",
                (
                    case.id,
                    case.site_id,
                    case.jurisdiction,
                    case.rule_id,
                    case.origin.value,
                    case.title,
                    _ts(case.opened_at),
                ),
            )
            for step in case.steps:
                _insert_step(conn, step)

        await self.db.write(run)
        for step in case.steps:
            self._remember(step, case)

    async def append(self, case: Case, step: Step) -> Case:
        """Add one step (never changes an old one); returns the case with it."""
        await self.db.write(lambda conn: _insert_step(conn, step))
        self._remember(step, case)
        # Steps are kept in the order they happened (a letter mailed yesterday and
        # entered today goes before today's steps); ties keep the recording order.
        return replace(case, steps=tuple(sorted((*case.steps, step), key=lambda s: s.at)))

    async def get(self, case_id: str) -> Case:
        """One case with its steps; NotFound if absent."""
        found = await self._select("WHERE c.id = ?", (case_id,))
        if not found:
            raise NotFound(f"no case with id {case_id!r}")
        return found[0]

    async def list_cases(
        self,
        site_ids: frozenset[str] | None = None,
        jurisdiction: str | None = None,
    ) -> list[Case]:
        """Cases, oldest first, of some sites (None: all) and/or one jurisdiction."""
        clauses: list[str] = []
        args: list[Any] = []
        if site_ids is not None:
            if not site_ids:
                return []
            clauses.append(f"c.site_id IN ({','.join('?' * len(site_ids))})")
            args += sorted(site_ids)
        if jurisdiction is not None:
            clauses.append("c.jurisdiction = ?")
            args.append(jurisdiction)
        where = ("WHERE " + " AND ".join(clauses)) if clauses else ""
        return await self._select(where, tuple(args))

    async def _select(self, where: str, args: tuple[Any, ...]) -> list[Case]:
        def run(conn: Connection) -> list[Case]:
            rows = conn.execute(f"SELECT * FROM cases c {where} ORDER BY opened_at, id", args)
            cases = []
            for row in rows.fetchall():
                steps = conn.execute(
                    "SELECT * FROM case_steps WHERE case_id = ? ORDER BY at, seq", (row["id"],)
                ).fetchall()
                cases.append(
                    Case(
                        id=row["id"],
                        site_id=row["site_id"],
                        jurisdiction=row["jurisdiction"],
                        rule_id=row["rule_id"],
                        origin=Origin(row["origin"]),
                        title=row["title"],
                        opened_at=_parse(row["opened_at"]),
                        steps=tuple(_step(s) for s in steps),
                    )
                )
            return cases

        return await self.db.read(run)

    async def has_finding(self, finding_id: str) -> bool:
        """True if some case already holds this finding as an episode."""

        def run(conn: Connection) -> bool:
            row = conn.execute(
                "SELECT 1 FROM case_steps WHERE finding_id = ? LIMIT 1", (finding_id,)
            ).fetchone()
            return row is not None

        return await self.db.read(run)

    # ------------------------------------------------------------ documents

    async def add_document(self, case_id: str, doc: Document, data: bytes) -> None:
        """Store an uploaded file's bytes."""
        await self.db.write(
            lambda conn: conn.execute(
                "INSERT INTO case_documents VALUES (?,?,?,?,?,?,?,?)",
                (
                    doc.id,
                    case_id,
                    doc.name,
                    doc.content_type,
                    doc.sha256,
                    doc.size,
                    data,
                    _ts(datetime.now(UTC)),
                ),
            )
        )

    async def document(self, case_id: str, doc_id: str) -> tuple[Document, bytes]:
        """A stored file of a case; NotFound otherwise."""

        def run(conn: Connection) -> Row | None:
            row: Row | None = conn.execute(
                "SELECT * FROM case_documents WHERE id = ? AND case_id = ?", (doc_id, case_id)
            ).fetchone()
            return row

        row = await self.db.read(run)
        if row is None:
            raise NotFound(f"no document {doc_id!r} on case {case_id!r}")
        doc = Document(row["id"], row["name"], row["content_type"], row["sha256"], row["size"])
        return doc, bytes(row["data"])

    # ------------------------------------------------------------ ledger

    async def ledger(self, site_ids: frozenset[str] | None = None) -> list[LedgerEntry]:
        """Posted lines in posting order (of some sites, or all)."""

        def run(conn: Connection) -> list[LedgerEntry]:
            if site_ids is None:
                rows = conn.execute("SELECT * FROM case_ledger ORDER BY seq")
            else:
                marks = ",".join("?" * len(site_ids))
                rows = conn.execute(
                    f"SELECT * FROM case_ledger WHERE site_id IN ({marks}) ORDER BY seq",
                    tuple(sorted(site_ids)),
                )
            return [_entry(r) for r in rows.fetchall()]

        if site_ids is not None and not site_ids:
            return []
        return await self.db.read(run)

    async def post(self, lines: list[tuple[Charge, int | None]], at: datetime) -> int:
        """Append ledger lines (charges and reversals); returns how many."""

        def run(conn: Connection) -> int:
            for charge, corrects in lines:
                conn.execute(
                    "INSERT INTO case_ledger (key, site_id, case_id, kind, period, amount_cents,"
                    " max_cents, basis, citation, posted_at, corrects, referral)"
                    " VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                    (
                        charge.key,
                        charge.site_id,
                        charge.case_id,
                        charge.kind.value,
                        charge.period,
                        charge.amount_cents,
                        charge.max_cents,
                        charge.basis,
                        "; ".join(f"{c.file} §{c.section}" for c in charge.citations),
                        _ts(at),
                        corrects,
                        int(charge.referral),
                    ),
                )
            return len(lines)

        if not lines:
            return 0
        return await self.db.write(run)


def _insert_step(conn: Connection, step: Step) -> None:
    conn.execute(
        "INSERT INTO case_steps (id, case_id, kind, at, recorded_at, actor, actor_role, note,"
        " finding_id, body) VALUES (?,?,?,?,?,?,?,?,?,?)",
        (
            step.id,
            step.case_id,
            step.kind.value,
            _ts(step.at),
            _ts(step.recorded_at),
            step.actor,
            step.actor_role,
            step.note,
            step.finding_id,
            json.dumps(step_body(step), sort_keys=True),
        ),
    )
