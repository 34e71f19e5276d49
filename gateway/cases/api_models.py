"""Pydantic shapes of the cases API (the edge; inside, gateway.cases.models)."""

from __future__ import annotations

from datetime import date, datetime

from pydantic import BaseModel, Field

from gateway.cases.models import (
    CaseState,
    ChecklistResult,
    Deadline,
    Decision,
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
from gateway.cases.service import CaseView


class CitationOut(BaseModel):
    """Where a deadline or step comes from."""

    file: str
    section: str
    quote: str = ""


class DeadlineOut(BaseModel):
    """A computed deadline."""

    id: str
    label: str
    party: str
    due_on: date | None
    due_at: datetime | None
    status: str
    binding: bool
    note: str
    citations: list[CitationOut]

    @classmethod
    def of(cls, d: Deadline) -> DeadlineOut:
        """From the domain value."""
        return cls(
            id=d.id,
            label=d.label,
            party=d.party,
            due_on=d.due_on,
            due_at=d.due_at,
            status=d.status.value,
            binding=d.binding,
            note=d.note,
            citations=[
                CitationOut(file=c.file, section=c.section, quote=c.quote) for c in d.citations
            ],
        )


class ServiceIn(BaseModel):
    """On whom and how a notice or order was served."""

    party: Party
    method: Method
    received_on: date | None = None


class ChecklistIn(BaseModel):
    """One checklist item of an inspection result."""

    requirement_id: str = Field(min_length=1, max_length=100)
    passed: bool | None
    note: str = Field("", max_length=2000)


class InspectionIn(BaseModel):
    """An appointment or a result."""

    scheduled_for: datetime | None = None
    outcome: Outcome | None = None
    inspector: str = Field("", max_length=200)
    items: list[ChecklistIn] = Field(default_factory=list, max_length=100)
    #: Installation facts found (field of the registry's Installation -> value); a
    #: result's facts become the site's installation record from that day (16.3).
    facts: dict[str, str | float | bool | None] = Field(default_factory=dict, max_length=40)


class WaiverIn(BaseModel):
    """An application (grounds) or a decision."""

    grounds: str = Field("", max_length=4000)
    decision: Decision | None = None
    decider: str = Field("", max_length=200)
    conditions: str = Field("", max_length=4000)
    start: datetime | None = None
    end: datetime | None = None


class StepIn(BaseModel):
    """A step to record (which fields apply depends on ``kind``)."""

    kind: StepKind
    at: datetime | None = Field(None, description="When it happened (default now); with offset")
    note: str = Field("", max_length=4000)
    service: ServiceIn | None = None
    inspection: InspectionIn | None = None
    waiver: WaiverIn | None = None
    confirms: bool | None = None
    offense_days: list[date] = Field(default_factory=list, max_length=366)
    due_on: date | None = None

    def payload(self) -> dict[str, object]:
        """The domain fields of the step."""
        out: dict[str, object] = {
            "note": self.note,
            "confirms": self.confirms,
            "offense_days": tuple(sorted(set(self.offense_days))),
            "due_on": self.due_on,
        }
        if self.service is not None:
            out["service"] = Service(**self.service.model_dump())
        if self.inspection is not None:
            i = self.inspection
            out["inspection"] = Inspection(
                scheduled_for=i.scheduled_for,
                outcome=i.outcome,
                inspector=i.inspector,
                items=tuple(ChecklistResult(**c.model_dump()) for c in i.items),
                facts=tuple(sorted(i.facts.items())),
            )
        if self.waiver is not None:
            out["waiver"] = WaiverTerms(**self.waiver.model_dump())
        return out


class CaseIn(BaseModel):
    """Open a case (or add to the open case of the same problem at the site)."""

    site_id: str = Field(min_length=1, max_length=100)
    rule_id: str = Field(min_length=1, max_length=100)
    origin: Origin
    title: str = Field("", max_length=300)
    note: str = Field("", max_length=4000)
    at: datetime | None = None
    confirms: bool | None = Field(None, description="Observations: confirms the problem")


class StepOut(BaseModel):
    """A recorded step (the audit trail: who, in what role, when)."""

    id: str
    kind: StepKind
    at: datetime
    recorded_at: datetime
    actor: str
    actor_role: str
    note: str
    finding_id: str | None
    service: ServiceIn | None
    inspection: InspectionIn | None
    waiver: WaiverIn | None
    confirms: bool | None
    offense_days: list[date]
    due_on: date | None
    documents: list[dict[str, str | int]]

    @classmethod
    def of(cls, s: Step) -> StepOut:
        """From the domain value."""
        i = s.inspection
        return cls(
            id=s.id,
            kind=s.kind,
            at=s.at,
            recorded_at=s.recorded_at,
            actor=s.actor,
            actor_role=s.actor_role,
            note=s.note,
            finding_id=s.finding_id,
            service=None if s.service is None else ServiceIn(**_fields(s.service)),
            inspection=None
            if i is None
            else InspectionIn(
                scheduled_for=i.scheduled_for,
                outcome=i.outcome,
                inspector=i.inspector,
                items=[ChecklistIn(**_fields(c)) for c in i.items],
                facts=dict(i.facts),
            ),
            waiver=None if s.waiver is None else WaiverIn(**_fields(s.waiver)),
            confirms=s.confirms,
            offense_days=list(s.offense_days),
            due_on=s.due_on,
            documents=[
                {"id": d.id, "name": d.name, "content_type": d.content_type, "sha256": d.sha256}
                for d in s.documents
            ],
        )


def _fields(value: object) -> dict[str, object]:
    return {name: getattr(value, name) for name in value.__slots__}  # type: ignore[attr-defined]


class CaseOut(BaseModel):
    """A case with its computed state and deadlines."""

    id: str
    site_id: str
    address: str
    jurisdiction: str
    rule_id: str
    origin: Origin
    title: str
    opened_at: datetime
    state: CaseState
    bucket: str
    episodes: int
    deadlines: list[DeadlineOut]
    offered: list[StepKind]

    @classmethod
    def of(cls, v: CaseView) -> CaseOut:
        """From a view."""
        c = v.case
        return cls(
            id=c.id,
            site_id=c.site_id,
            address=v.site.address,
            jurisdiction=c.jurisdiction,
            rule_id=c.rule_id,
            origin=c.origin,
            title=c.title,
            opened_at=c.opened_at,
            state=v.state,
            bucket=v.bucket,
            episodes=c.episodes,
            deadlines=[DeadlineOut.of(d) for d in v.deadlines],
            offered=list(v.offered),
        )


class CaseDetail(CaseOut):
    """A case with every step."""

    steps: list[StepOut]


class LedgerLineOut(BaseModel):
    """A posted ledger line (estimates: never a legal determination)."""

    seq: int
    site_id: str
    case_id: str
    kind: str
    period: str
    amount_usd: float | None
    max_usd: float | None
    basis: str
    citation: str
    posted_at: datetime
    corrects: int | None
    referral: bool

    @classmethod
    def of(cls, e: LedgerEntry) -> LedgerLineOut:
        """From the domain value."""
        return cls(
            seq=e.seq,
            site_id=e.site_id,
            case_id=e.case_id,
            kind=e.kind.value,
            period=e.period,
            amount_usd=None if e.amount_cents is None else e.amount_cents / 100,
            max_usd=None if e.max_cents is None else e.max_cents / 100,
            basis=e.basis,
            citation=e.citation,
            posted_at=e.posted_at,
            corrects=e.corrects,
            referral=e.referral,
        )


class NoticesIn(BaseModel):
    """Bulk notice letters."""

    case_ids: list[str] = Field(min_length=1, max_length=500)
