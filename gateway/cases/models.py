"""Enforcement cases as frozen values (issue 16; docs/enforcement.md).

A case is one problem (a rule) at one site. It is an append-only list of dated
steps: what happened, when, who recorded it, how it was served and on whom, and
the documents attached. The state, the deadlines and the money owed are computed
from the steps and the pack (:mod:`gateway.cases.deadlines`,
:mod:`gateway.cases.ledger`), never stored, so a correction is a new step and the
history stays whole.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime
from enum import StrEnum
from typing import Any

from gateway.domain import Citation


class Origin(StrEnum):
    """What opened the case (16.1)."""

    FINDING = "finding"  # a detector finding (suspected until confirmed)
    AUDIT = "audit"  # an installation audit failure
    INSPECTION = "inspection"  # a village inspection result
    COMPLAINT = "complaint"  # a complaint by a neighbour or the public
    OBSERVATION = "observation"  # a sighting by public works (16.8)
    NEW_RESIDENCE = "new_residence"  # Edgar (f)(2)c, before the certificate of occupancy


class StepKind(StrEnum):
    """Every kind of step; which are offered depends on the pack (:data:`PACK_STEP`)."""

    OPENED = "opened"
    EPISODE = "episode"  # one more episode of the same problem (a finding)
    OBSERVATION = "observation"
    COMPLAINT = "complaint"
    NOTE = "note"
    NOTICE = "notice"
    ORDER = "order"
    INSPECTION_REQUESTED = "inspection_requested"
    INSPECTION_SCHEDULED = "inspection_scheduled"
    INSPECTION_RESULT = "inspection_result"
    OCCUPANCY_REQUESTED = "occupancy_requested"
    CORRECTION_PROOF = "correction_proof"
    WAIVER_APPLIED = "waiver_applied"
    WAIVER_DECIDED = "waiver_decided"
    CITATION = "citation"
    REFERRAL = "referral"
    CLOSED = "closed"


#: The pack step (``[enforcement.steps.<name>]``) a step kind needs; kinds absent
#: here are intake and bookkeeping that every jurisdiction has.
PACK_STEP: dict[StepKind, str] = {
    StepKind.NOTICE: "notice",
    StepKind.ORDER: "order",
    StepKind.INSPECTION_REQUESTED: "inspection",
    StepKind.INSPECTION_SCHEDULED: "inspection",
    StepKind.INSPECTION_RESULT: "inspection",
    StepKind.OCCUPANCY_REQUESTED: "occupancy_inspection",
    StepKind.CORRECTION_PROOF: "correction_proof",
    StepKind.WAIVER_APPLIED: "waiver",
    StepKind.WAIVER_DECIDED: "waiver",
    StepKind.CITATION: "citation",
    StepKind.REFERRAL: "misdemeanor_referral",
}

#: What a homeowner may do on their own case (16.7); everything else is staff only.
HOMEOWNER_STEPS = frozenset(
    {StepKind.INSPECTION_REQUESTED, StepKind.CORRECTION_PROOF, StepKind.WAIVER_APPLIED}
)


class Party(StrEnum):
    """Who a notice or order was served on (Edgar (f)(1): "owner ... or its occupant")."""

    OWNER = "owner"
    OCCUPANT = "occupant"


class Method(StrEnum):
    """How it was served."""

    IN_PERSON = "in_person"
    FIRST_CLASS_MAIL = "first_class_mail"


class Outcome(StrEnum):
    """An inspection's result; refusal and no-show are their own facts (Edgar (f)(4)a.2)."""

    PASS = "pass"
    FAIL = "fail"
    REFUSED = "refused"
    NO_SHOW = "no_show"


class Decision(StrEnum):
    """A waiver decision."""

    GRANTED = "granted"
    DENIED = "denied"


class CaseState(StrEnum):
    """Where a case stands, computed from its steps (16.1)."""

    SUSPECTED = "suspected"
    CONFIRMED = "confirmed"
    NOTICE_SERVED = "notice_served"
    CORRECTION_DUE = "correction_due"  # an order is out
    INSPECTION_REQUESTED = "inspection_requested"
    INSPECTION_SCHEDULED = "inspection_scheduled"
    INSPECTED_FAIL = "inspected_fail"
    INSPECTED_PASS = "inspected_pass"
    PROOF_SUBMITTED = "proof_submitted"
    WAIVER_REQUESTED = "waiver_requested"
    WAIVER_GRANTED = "waiver_granted"
    CITED = "cited"
    CLOSED = "closed"


@dataclass(frozen=True, slots=True)
class Service:
    """How a notice or order reached the person: on whom, by what, and when received."""

    party: Party
    method: Method
    received_on: date | None = None  # Edgar (f)(3)b counts from "receipt"


@dataclass(frozen=True, slots=True)
class ChecklistResult:
    """One item of an inspection checklist (drawn from the pack's requirements)."""

    requirement_id: str
    passed: bool | None  # None: not seen
    note: str = ""


@dataclass(frozen=True, slots=True)
class Inspection:
    """An inspection request, appointment or result."""

    scheduled_for: datetime | None = None
    outcome: Outcome | None = None
    inspector: str = ""
    items: tuple[ChecklistResult, ...] = ()
    #: Installation facts the inspector recorded (``Installation`` field -> value), e.g.
    #: ``(("destination", "storm_lateral"),)``: they become the site's installation
    #: record from the inspection's local day (issue 16.3).
    facts: tuple[tuple[str, Any], ...] = ()


@dataclass(frozen=True, slots=True)
class WaiverTerms:
    """A waiver application (grounds) or decision (decider, conditions, period)."""

    grounds: str = ""
    decision: Decision | None = None
    decider: str = ""
    conditions: str = ""
    start: datetime | None = None
    end: datetime | None = None


@dataclass(frozen=True, slots=True)
class Document:
    """A file attached to a step (a photo, a plumber's certificate, a letter)."""

    id: str
    name: str
    content_type: str
    sha256: str
    size: int


@dataclass(frozen=True, slots=True)
class Step:
    """One dated event of a case. ``at`` is when it happened, ``recorded_at`` when entered."""

    id: str
    case_id: str
    kind: StepKind
    at: datetime
    recorded_at: datetime
    actor: str
    actor_role: str
    note: str = ""
    service: Service | None = None
    inspection: Inspection | None = None
    waiver: WaiverTerms | None = None
    finding_id: str | None = None
    confirms: bool | None = None  # observations: True confirms the problem, False refutes
    offense_days: tuple[date, ...] = ()  # citations: each day a separate offense
    due_on: date | None = None  # occupancy: the planned certificate-of-occupancy date
    documents: tuple[Document, ...] = ()


@dataclass(frozen=True, slots=True)
class Case:
    """One problem at one site, with every step so far in the order they happened
    (by ``at``; steps with the same time in the order they were recorded)."""

    id: str
    site_id: str
    jurisdiction: str
    rule_id: str
    origin: Origin
    title: str
    opened_at: datetime
    steps: tuple[Step, ...] = ()

    def of_kind(self, *kinds: StepKind) -> list[Step]:
        """Steps of these kinds, oldest first."""
        return [s for s in self.steps if s.kind in kinds]

    def last(self, *kinds: StepKind) -> Step | None:
        """The latest step of these kinds."""
        found = self.of_kind(*kinds)
        return found[-1] if found else None

    @property
    def episodes(self) -> int:
        """How many detector episodes the case gathers."""
        return len(self.of_kind(StepKind.EPISODE))

    @property
    def is_closed(self) -> bool:
        """True once a closing step is recorded."""
        return bool(self.of_kind(StepKind.CLOSED))


class DeadlineStatus(StrEnum):
    """Where a deadline stands at a given instant."""

    OPEN = "open"
    MET = "met"
    MET_LATE = "met_late"
    OVERDUE = "overdue"
    SUSPENDED = "suspended"  # a waiver or extension request is pending
    LAPSED = "lapsed"  # a window (not an obligation) that passed unused


@dataclass(frozen=True, slots=True)
class Deadline:
    """A computed deadline: due at the end of local day ``due_on`` (``due_at`` is that instant)."""

    id: str
    label: str
    party: str
    due_on: date | None
    due_at: datetime | None
    status: DeadlineStatus
    binding: bool
    citations: tuple[Citation, ...]
    anchor_step_id: str
    note: str = ""


class EntryKind(StrEnum):
    """What a ledger line is."""

    SURCHARGE = "surcharge"  # Edgar (f)(4): $300 per month
    FINE = "fine"  # per offense and day (L.L. 6-2024, Ord. 247)
    REVERSAL = "reversal"  # a correction: cancels an earlier line


@dataclass(frozen=True, slots=True)
class Charge:
    """What the ledger should hold for one key (computed, before posting)."""

    key: str  # e.g. "surcharge:elm-16:2027-02" (one surcharge per site and month)
    site_id: str
    case_id: str
    kind: EntryKind
    period: str  # "2027-02" or a day "2027-02-03"
    amount_cents: int | None  # None: the text gives no amount (Ord. 247 § 51.99)
    max_cents: int | None
    basis: str  # "ongoing", "lookback", "first offense", "later offense"
    citations: tuple[Citation, ...]
    referral: bool = False  # L.L. 6-2024 penalties B: three or more within a year


@dataclass(frozen=True, slots=True)
class LedgerEntry:
    """A posted, immutable ledger line; corrections are new lines that name this one."""

    seq: int
    key: str
    site_id: str
    case_id: str
    kind: EntryKind
    period: str
    amount_cents: int | None
    max_cents: int | None
    basis: str
    citation: str
    posted_at: datetime
    corrects: int | None = None
    referral: bool = False
    note: str = ""
