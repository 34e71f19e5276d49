"""Case service: opens cases, records steps the pack offers, computes views and the ledger.

Rules it enforces (docs/enforcement.md):

* one open case per site and rule: every later episode, observation or complaint
  about the same problem is a step of that case, so an intermittent hose gathers in
  one case and its deadlines run from the village's notice or order, not from each
  episode (review finding 2);
* a step is offered only if the site's pack provides it (``[enforcement.steps]``):
  no waiver where the text has no waiver clause, no order under L.L. 6-2024;
* homeowners may only request an inspection, send proof of correction and apply for
  a waiver on their own site's case; everything else is public works';
* every step records who, in what role, when it happened and when it was entered;
  steps are never changed (the audit trail is the case itself).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

from gateway.cases import ledger as ledger_mod
from gateway.cases.amend import installation_with
from gateway.cases.deadlines import (
    appointment,
    bucket,
    case_state,
    compute_deadlines,
    local_day,
)
from gateway.cases.models import (
    HOMEOWNER_STEPS,
    PACK_STEP,
    Case,
    CaseState,
    Deadline,
    Decision,
    Document,
    LedgerEntry,
    Origin,
    Step,
    StepKind,
)
from gateway.cases.repository import CaseRepository
from gateway.domain import Confirmation, FindingChange, FindingEvent
from gateway.errors import NotFound
from gateway.registry import SiteConfig, SiteRegistry
from gateway.rules.pack import RulePack
from gateway.rules.verdict import LedgerLine
from gateway.state.findings import FindingRepository

log = logging.getLogger(__name__)

#: Recorded times may lag (a letter mailed yesterday) but not lead the clock by more.
FUTURE_SKEW = timedelta(minutes=5)
#: The finding level at which a detector episode becomes (a suspected) case.
CASE_LEVEL = "violation"


class CaseError(Exception):
    """A step the case or its pack does not allow (answered 409)."""


class CaseForbidden(Exception):
    """The actor's role may not take this step (answered 403)."""


@dataclass(frozen=True, slots=True)
class Actor:
    """Who records a step: an account name and its role value."""

    name: str
    role: str  # "homeowner" | "public_works" | "admin" | "system"

    @property
    def is_homeowner(self) -> bool:
        """Homeowners may take only :data:`HOMEOWNER_STEPS`."""
        return self.role == "homeowner"


SYSTEM = Actor("sumpwatch", "system")


@dataclass(frozen=True, slots=True)
class CaseView:
    """A case with what is computed from it at one instant."""

    case: Case
    site: SiteConfig
    pack: RulePack
    state: CaseState
    deadlines: tuple[Deadline, ...]
    bucket: str
    offered: tuple[StepKind, ...]
    appointment: datetime | None = None


class CaseService:
    """The cases feature over its repository, the registry and the packs."""

    def __init__(
        self,
        repo: CaseRepository,
        registry: SiteRegistry,
        packs: dict[str, RulePack],
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        findings: FindingRepository | None = None,
    ) -> None:
        self.repo = repo
        self.findings = findings  # the evidence packet reads the findings a case gathers
        self.registry = registry
        self.packs = packs
        self.clock = clock

    def _site(self, site_id: str) -> SiteConfig:
        site = self.registry.get(site_id)
        if site is None:
            raise NotFound(f"no site with id {site_id!r}")
        return site

    def pack_of(self, site: SiteConfig) -> RulePack:
        """The site's rule pack."""
        return self.packs[site.jurisdiction]

    # ------------------------------------------------------------ opening

    async def current_case(self, site_id: str, rule_id: str) -> Case | None:
        """The open case of this problem at this site, if any."""
        cases = await self.repo.list_cases(frozenset({site_id}))
        open_ = [c for c in cases if c.rule_id == rule_id and not c.is_closed]
        return open_[-1] if open_ else None

    async def open_case(
        self,
        site_id: str,
        rule_id: str,
        origin: Origin,
        actor: Actor,
        *,
        title: str = "",
        at: datetime | None = None,
        note: str = "",
        finding_id: str | None = None,
        confirms: bool | None = None,
        documents: tuple[Document, ...] = (),
    ) -> Case:
        """Open a case, or add the episode to the open case of the same problem."""
        site = self._site(site_id)
        if actor.is_homeowner:
            raise CaseForbidden("homeowners cannot open enforcement cases")
        when = self._when(at)
        kind = _intake_kind(origin)
        existing = await self.current_case(site_id, rule_id)
        if existing is not None:
            step = self._step(existing.id, kind, when, actor, note=note, finding_id=finding_id)
            step = replace(step, confirms=confirms, documents=documents)
            return await self.repo.append(existing, step)
        case_id = f"case-{uuid.uuid4().hex[:12]}"
        steps = [self._step(case_id, StepKind.OPENED, when, actor, note=note)]
        if kind is not StepKind.OPENED or finding_id is not None:
            first = self._step(case_id, kind, when, actor, note=note, finding_id=finding_id)
            steps.append(replace(first, confirms=confirms, documents=documents))
        case = Case(
            id=case_id,
            site_id=site.id,
            jurisdiction=site.jurisdiction,
            rule_id=rule_id,
            origin=origin,
            title=title or rule_id.replace("_", " "),
            opened_at=when,
            steps=tuple(steps),
        )
        await self.repo.create(case)
        return case

    async def on_events(self, events: list[FindingEvent]) -> None:
        """Pipeline sink: a finding of an enforced rule at violation level is an episode.

        Telemetry alone only suspects (review finding 6): the case opens as
        ``suspected`` and needs an observation or inspection to be confirmed.
        """
        for event in events:
            f = event.finding
            if event.change is FindingChange.CLEARED or f.level != CASE_LEVEL:
                continue
            site = self.registry.get(f.site_id)
            if site is None or not self.pack_of(site).rule(f.rule_id).enforced:
                continue
            if await self.repo.has_finding(f.id):
                continue
            await self.open_case(
                f.site_id,
                f.rule_id,
                Origin.FINDING,
                SYSTEM,
                title=f.title,
                at=min(f.updated_at, self.clock()),  # a device clock ahead must not lose it
                finding_id=f.id,
                note=f.title,
            )

    # ------------------------------------------------------------ steps

    def offered(self, case: Case, actor: Actor) -> tuple[StepKind, ...]:
        """The steps this actor may record on this case now (pack and role)."""
        if case.is_closed:
            return ()
        enforcement = self.pack_of(self._site(case.site_id)).enforcement
        kinds = [
            k
            for k in StepKind
            if k not in (StepKind.OPENED, StepKind.EPISODE)
            and (k not in PACK_STEP or enforcement.offers(PACK_STEP[k]))
        ]
        if actor.is_homeowner:
            kinds = [k for k in kinds if k in HOMEOWNER_STEPS]
        return tuple(kinds)

    async def record(self, case_id: str, step: Step, actor: Actor) -> Case:
        """Validate and append a step built by the caller (ids and actor are set here)."""
        case = await self.repo.get(case_id)
        if step.kind not in self.offered(case, actor):
            if actor.is_homeowner and step.kind not in HOMEOWNER_STEPS:
                raise CaseForbidden(f"a homeowner cannot record {step.kind.value}")
            pack = self.pack_of(self._site(case.site_id))
            why = "the case is closed" if case.is_closed else f"{pack.name} provides no such step"
            raise CaseError(f"{step.kind.value} is not offered: {why}")
        step = replace(
            step,
            id=f"step-{uuid.uuid4().hex[:12]}",
            case_id=case.id,
            at=self._when(step.at),
            recorded_at=self.clock(),
            actor=actor.name,
            actor_role=actor.role,
        )
        self._validate(case, step)
        return await self.repo.append(case, step)

    def new_step(self, kind: StepKind, at: datetime | None = None, **fields: object) -> Step:
        """A step to pass to :meth:`record` (``at`` defaults to now)."""
        now = self.clock()
        base = Step("", "", kind, at or now, now, "", "")
        return replace(base, **fields)  # type: ignore[arg-type]

    def _validate(self, case: Case, step: Step) -> None:
        """Refuse a step the pack does not allow or that lacks what its kind needs."""
        pack = self.pack_of(self._site(case.site_id))
        kind = step.kind
        if kind in (StepKind.NOTICE, StepKind.ORDER):
            _check_service(pack, step)
        elif kind is StepKind.INSPECTION_SCHEDULED and (
            step.inspection is None or step.inspection.scheduled_for is None
        ):
            raise CaseError("inspection_scheduled: give the appointment time")
        elif kind is StepKind.INSPECTION_RESULT:
            self._check_inspection_result(case, pack, step)
        elif kind is StepKind.WAIVER_APPLIED and (step.waiver is None or not step.waiver.grounds):
            raise CaseError("waiver_applied: describe the hardship (Edgar (f)(3)b)")
        elif kind is StepKind.WAIVER_DECIDED:
            _check_waiver_decision(case, step)
        elif kind is StepKind.CITATION and not step.offense_days:
            raise CaseError("citation: give the offense days (each day a separate offense)")
        elif kind is StepKind.OCCUPANCY_REQUESTED and step.due_on is None:
            raise CaseError("occupancy_requested: give the certificate-of-occupancy date")

    def _check_inspection_result(self, case: Case, pack: RulePack, step: Step) -> None:
        if step.inspection is None or step.inspection.outcome is None:
            raise CaseError("inspection_result: give the outcome")
        known = {r.id for r in pack.requirements}
        unknown = [i.requirement_id for i in step.inspection.items if i.requirement_id not in known]
        if unknown:
            raise CaseError(f"inspection_result: not in the pack's checklist: {unknown}")
        try:  # the facts become the site's installation record (16.3): check them now
            installation_with(self._site(case.site_id).installation, dict(step.inspection.facts))
        except ValueError as exc:  # pydantic's ValidationError is a ValueError
            raise CaseError(f"inspection_result: installation facts: {exc}") from exc

    def _when(self, at: datetime | None) -> datetime:
        now = self.clock()
        if at is None:
            return now
        if at.tzinfo is None:
            raise CaseError("a step time needs a time-zone offset")
        if at > now + FUTURE_SKEW:
            raise CaseError("a step cannot be recorded in the future")
        return at.astimezone(UTC)

    def _step(
        self,
        case_id: str,
        kind: StepKind,
        at: datetime,
        actor: Actor,
        *,
        note: str = "",
        finding_id: str | None = None,
    ) -> Step:
        return Step(
            id=f"step-{uuid.uuid4().hex[:12]}",
            case_id=case_id,
            kind=kind,
            at=at,
            recorded_at=self.clock(),
            actor=actor.name,
            actor_role=actor.role,
            note=note,
            finding_id=finding_id,
        )

    # ------------------------------------------------------------ views

    def view(self, case: Case, actor: Actor | None = None, now: datetime | None = None) -> CaseView:
        """State, deadlines, queue group and offered steps of a case at ``now``."""
        now = now or self.clock()
        site = self._site(case.site_id)
        pack = self.pack_of(site)
        deadlines = tuple(compute_deadlines(case, pack.enforcement, site.tz, now))
        state = case_state(case, now)
        return CaseView(
            case=case,
            site=site,
            pack=pack,
            state=state,
            deadlines=deadlines,
            bucket=bucket(state, list(deadlines), local_day(now, site.tz)),
            offered=self.offered(case, actor or SYSTEM),
            appointment=appointment(case),
        )

    async def views(
        self,
        site_ids: frozenset[str] | None,
        jurisdiction: str | None = None,
        actor: Actor | None = None,
        *,
        include_closed: bool = False,
    ) -> list[CaseView]:
        """Views of the cases of some sites (None: all), oldest first."""
        cases = await self.repo.list_cases(site_ids, jurisdiction)
        now = self.clock()
        return [self.view(c, actor, now) for c in cases if include_closed or not c.is_closed]

    # ------------------------------------------------------------ confirmations

    def confirmations(self, site_id: str, start: datetime, end: datetime) -> list[Confirmation]:
        """The :class:`ConfirmationSource` the verdicts read (observations, inspections, proofs)."""
        return self.repo.confirmations(site_id, start, end)

    # ------------------------------------------------------------ ledger

    async def post_ledger(self, site_id: str) -> list[LedgerEntry]:
        """Bring the site's ledger up to date (new lines only) and return it whole."""
        site = self._site(site_id)
        pack = self.pack_of(site)
        cases = await self.repo.list_cases(frozenset({site_id}))
        now = self.clock()
        computed = ledger_mod.charges(cases, pack.enforcement, site.tz, now)
        posted = await self.repo.ledger(frozenset({site_id}))
        await self.repo.post(ledger_mod.reconcile(computed, posted), now)
        return await self.repo.ledger(frozenset({site_id}))

    async def ledger_lines(self, site_id: str) -> list[LedgerLine] | None:
        """``LedgerSource`` for the reports: the site's posted ledger, brought up to
        date, or None when the site has no case (issue 16.5)."""
        if not await self.repo.list_cases(frozenset({site_id})):
            return None
        return [
            LedgerLine(
                line=e.seq,
                kind=e.kind.value,
                period=e.period,
                amount_cents=e.amount_cents,
                max_cents=e.max_cents,
                basis=e.basis,
                citation=e.citation,
                referral=e.referral,
                corrects=e.corrects,
            )
            for e in await self.post_ledger(site_id)
        ]

    async def ledger(self, site_ids: frozenset[str] | None) -> list[LedgerEntry]:
        """Post every visible site's ledger, then return the lines."""
        targets = site_ids if site_ids is not None else frozenset(s.id for s in self.registry)
        for site_id in sorted(targets):
            await self.post_ledger(site_id)
        return await self.repo.ledger(site_ids)


def _intake_kind(origin: Origin) -> StepKind:
    return {
        Origin.FINDING: StepKind.EPISODE,
        Origin.OBSERVATION: StepKind.OBSERVATION,
        Origin.COMPLAINT: StepKind.COMPLAINT,
    }.get(origin, StepKind.OPENED)


def due_on_label(day: date | None, tz: ZoneInfo) -> str:
    """ "Tue Dec 30, 2026 (end of day, CST)" for letters and pages."""
    if day is None:
        return "-"
    end = datetime.combine(day, datetime.max.time(), tz)
    return f"{day:%a %b} {day.day}, {day.year} (end of day, {end.tzname()})"


def _check_service(pack: RulePack, step: Step) -> None:
    """A notice or order is served on whom and by the means the pack's text allows."""
    spec = pack.enforcement.steps[PACK_STEP[step.kind]]
    kind = step.kind.value
    if step.service is None:
        raise CaseError(f"{kind}: record on whom and how it was served")
    if spec.served_on and step.service.party.value not in spec.served_on:
        raise CaseError(f"{kind}: the text allows service on {spec.served_on}")
    if spec.methods and step.service.method.value not in spec.methods:
        raise CaseError(f"{kind}: the text allows service by {spec.methods}")


def _check_waiver_decision(case: Case, step: Step) -> None:
    w = step.waiver
    if w is None or w.decision is None or not w.decider:
        raise CaseError("waiver_decided: give the decision and who decided")
    if not case.of_kind(StepKind.WAIVER_APPLIED):
        raise CaseError("waiver_decided: there is no application to decide")
    if w.decision is Decision.GRANTED and (
        w.end is None or (w.start is not None and w.end <= w.start)
    ):
        raise CaseError("waiver_decided: a waiver is for a limited time; give its end")
