"""Findings and the installation audit over HTTP.

``GET /findings`` (filters ``site``, ``rule``, ``open``, ``from``, ``to``, ``limit``),
``GET /sites/{site_id}/findings``, ``GET /findings/{finding_id}/snapshots`` (the frozen
evidence), ``GET /audit``, ``GET /sites/{site_id}/audit`` and
``GET /sites/{site_id}/not-evaluated`` (spans of late readings no detector judged).
The finding repository, registry and packs come from the gateway's Services.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from pydantic import BaseModel, Field

from gateway.api.deps import ScopeDep, UtcTime, register_resolver
from gateway.domain import Citation, Finding, NotEvaluated
from gateway.errors import NotFound
from gateway.registry.models import SiteConfig
from gateway.rules.audit import AuditItem, audit_site
from gateway.rules.catalog import RULE_IDS
from gateway.services import Services, current_verdict, get_services
from gateway.state.findings import FindingRepository
from gateway.state.snapshots import FindingSnapshot

router = APIRouter(tags=["findings"])


async def _site_of_finding(request: Request, finding_id: str) -> str:
    finding = await get_services(request).findings.get(finding_id)
    if finding is None:
        raise NotFound(f"no finding with id {finding_id!r}")
    return str(finding.site_id)


# Access control checks a {finding_id} path against the finding's site.
register_resolver("finding_id", _site_of_finding)


class FindingCitation(BaseModel):
    """A place in an ordinance text."""

    file: str
    section: str
    quote: str = ""
    text: str = Field(description='Short form, e.g. "000_86c7187f3bed6ca5.txt §(c)(2)b"')

    @classmethod
    def of(cls, c: Citation) -> FindingCitation:
        """From the domain type."""
        return cls(file=c.file, section=c.section, quote=c.quote, text=str(c))


class FindingPublic(BaseModel):
    """A finding: what a detector concluded about a site, with evidence and citations."""

    id: str
    rule_id: str
    site_id: str
    severity: str
    level: str = Field(description="icing_risk: watch / warning / violation; else a detail")
    title: str
    opened_at: datetime
    updated_at: datetime
    cleared_at: datetime | None
    open: bool
    audience: list[str]
    evidence: dict[str, Any]
    citations: list[FindingCitation]
    action: str

    @classmethod
    def of(cls, f: Finding) -> FindingPublic:
        """From the domain type."""
        return cls(
            id=f.id,
            rule_id=f.rule_id,
            site_id=f.site_id,
            severity=f.severity.value,
            level=f.level,
            title=f.title,
            opened_at=f.opened_at,
            updated_at=f.updated_at,
            cleared_at=f.cleared_at,
            open=f.is_open,
            audience=[a.value for a in f.audience],
            evidence=dict(f.evidence),
            citations=[FindingCitation.of(c) for c in f.citations],
            action=f.action,
        )


class AuditItemPublic(BaseModel):
    """One requirement a site fails (``fail``), may fail (``advisory``) or cannot be checked."""

    requirement_id: str
    status: str
    message: str
    action: str
    field: str
    actual: Any
    expected: Any
    citations: list[FindingCitation]

    @classmethod
    def of(cls, item: AuditItem) -> AuditItemPublic:
        """From the audit's type."""
        return cls(
            requirement_id=item.requirement_id,
            status=item.status,
            message=item.message,
            action=item.action,
            field=item.field,
            actual=item.actual,
            expected=item.expected,
            citations=[FindingCitation.of(c) for c in item.citations],
        )


class SiteAuditPublic(BaseModel):
    """A site's installation audit against its jurisdiction's rule pack."""

    site_id: str
    jurisdiction: str
    pack: str | None = Field(description="Rule pack name, None if the jurisdiction has none")
    compliant: bool = Field(
        description="Every applicable requirement checked and met (none failed or not recorded)"
    )
    failures: int
    advisories: int
    items: list[AuditItemPublic]


def _runtime(request: Request) -> Services:
    return get_services(request)


def _repo(request: Request) -> FindingRepository:
    return _runtime(request).findings


def _site(request: Request, site_id: str) -> SiteConfig:
    site = _runtime(request).registry.get(site_id)
    if site is None:
        raise HTTPException(status_code=404, detail=f"no site with id {site_id!r}")
    return site


def _check_rule(rule: str | None) -> None:
    if rule is not None and rule not in RULE_IDS:
        raise HTTPException(status_code=422, detail=f"unknown rule; one of {RULE_IDS}")


OpenQ = Annotated[bool, Query(alias="open", description="Only findings not yet cleared")]
FromQ = Annotated[UtcTime | None, Query(alias="from", description="Open at or after (RFC 3339)")]
ToQ = Annotated[UtcTime | None, Query(alias="to", description="Opened at or before (RFC 3339)")]
RuleQ = Annotated[str | None, Query(description="Rule id, e.g. sanitary_discharge")]
LimitQ = Annotated[int, Query(ge=1, le=5000)]


@dataclass
class FindingFilters:
    """Query filters shared by the finding lists."""

    rule: RuleQ = None
    open_only: OpenQ = False
    since: FromQ = None
    until: ToQ = None
    limit: LimitQ = 500

    async def fetch(
        self, request: Request, site_id: str | None, site_ids: frozenset[str] | None = None
    ) -> list[FindingPublic]:
        """Run the query; unknown site 404, unknown rule 422."""
        _check_rule(self.rule)
        if site_id is not None:
            _site(request, site_id)
        found = await _repo(request).list(
            site_id=site_id,
            rule_id=self.rule,
            open_only=self.open_only,
            since=self.since,
            until=self.until,
            limit=self.limit,
            site_ids=site_ids,
        )
        return [FindingPublic.of(f) for f in found]


FiltersDep = Annotated[FindingFilters, Depends()]


@router.get("/findings", response_model=list[FindingPublic])
async def list_findings(
    request: Request,
    scope: ScopeDep,
    filters: FiltersDep,
    site: Annotated[str | None, Query(description="Site id")] = None,
) -> list[FindingPublic]:
    """Findings of every site the caller may see, newest first."""
    return await filters.fetch(request, site, scope.site_ids())


@router.get("/sites/{site_id}/findings", response_model=list[FindingPublic])
async def site_findings(request: Request, site_id: str, filters: FiltersDep) -> list[FindingPublic]:
    """One site's findings, newest first."""
    return await filters.fetch(request, site_id)


class NotEvaluatedPublic(BaseModel):
    """Readings of one node that arrived behind its newest: stored and charted, but
    no detector judged them (detectors run in device-time order and cannot rewind)."""

    site_id: str
    node_id: str
    start: datetime = Field(description="Device time of the earliest reading in the span")
    end: datetime = Field(description="Device time of the latest reading in the span")
    count: int = Field(description="Late readings in the span")

    @classmethod
    def of(cls, span: NotEvaluated) -> NotEvaluatedPublic:
        """From the domain type."""
        return cls(
            site_id=span.site_id,
            node_id=span.node_id,
            start=span.start,
            end=span.end,
            count=span.count,
        )


@router.get("/sites/{site_id}/not-evaluated", response_model=list[NotEvaluatedPublic])
async def site_not_evaluated(
    request: Request, site_id: str, since: FromQ = None, until: ToQ = None
) -> list[NotEvaluatedPublic]:
    """One site's spans of readings that were stored but not evaluated, oldest first."""
    _site(request, site_id)
    spans = await _repo(request).not_evaluated(site_id, since=since, until=until)
    return [NotEvaluatedPublic.of(s) for s in spans]


@router.get("/findings/{finding_id}", response_model=FindingPublic)
async def get_finding(request: Request, finding_id: str) -> FindingPublic:
    """One finding by id."""
    finding = await _repo(request).get(finding_id)
    if finding is None:
        raise HTTPException(status_code=404, detail=f"no finding with id {finding_id!r}")
    return FindingPublic.of(finding)


class FindingSnapshotPublic(BaseModel):
    """A frozen snapshot of a finding (at opening or a level change), never rewritten."""

    seq: int
    finding_id: str
    change: str = Field(description="opened, or updated (a level change)")
    at: datetime
    severity: str
    level: str
    sha256: str = Field(description="SHA-256 of `content`, the canonical JSON text")
    content: str = Field(description="Canonical JSON (sorted keys, compact): what was hashed")
    intact: bool = Field(description="`content` still hashes to `sha256`")
    snapshot: dict[str, Any] = Field(description="`content` parsed: finding, evidence, "
                                     "readings window, sensor health, pack version")  # fmt: skip

    @classmethod
    def of(cls, s: FindingSnapshot) -> FindingSnapshotPublic:
        """From the stored snapshot."""
        return cls(
            seq=s.seq, finding_id=s.finding_id, change=s.change, at=s.at, severity=s.severity,
            level=s.level, sha256=s.sha256, content=s.content, intact=s.intact,
            snapshot=dict(s.data),
        )  # fmt: skip


@router.get("/findings/{finding_id}/snapshots", response_model=list[FindingSnapshotPublic])
async def finding_snapshots(request: Request, finding_id: str) -> list[FindingSnapshotPublic]:
    """The frozen evidence of one finding, oldest first (404 for an unknown finding)."""
    repo = _repo(request)
    if await repo.get(finding_id) is None:
        raise HTTPException(status_code=404, detail=f"no finding with id {finding_id!r}")
    return [FindingSnapshotPublic.of(s) for s in await repo.snapshots(finding_id)]


def _audit(request: Request, site: SiteConfig) -> SiteAuditPublic:
    pack = _runtime(request).packs.get(site.jurisdiction)
    items = [] if pack is None else audit_site(site, pack)
    return SiteAuditPublic(
        site_id=site.id,
        jurisdiction=site.jurisdiction,
        pack=None if pack is None else pack.name,
        # As the verdict: a requirement not checked (fact not recorded) is not "met".
        compliant=pack is not None and not any(i.status in ("fail", "unknown") for i in items),
        failures=sum(1 for i in items if i.status == "fail"),
        advisories=sum(1 for i in items if i.status == "advisory"),
        items=[AuditItemPublic.of(i) for i in items],
    )


@router.get("/audit", response_model=list[SiteAuditPublic])
async def audit_all(
    request: Request,
    scope: ScopeDep,
    jurisdiction: Annotated[str | None, Query(description="Rule pack id")] = None,
) -> list[SiteAuditPublic]:
    """The installation audit of every site the caller may see."""
    sites = scope.sites()
    if jurisdiction is not None:
        sites = [s for s in sites if s.jurisdiction == jurisdiction]
    return [_audit(request, s) for s in sites]


@router.get("/sites/{site_id}/audit", response_model=SiteAuditPublic)
async def audit_one(request: Request, site_id: str) -> SiteAuditPublic:
    """One site's installation audit: each failed requirement with its citation."""
    return _audit(request, _site(request, site_id))


class SpellPublic(BaseModel):
    """A stretch at violation level of an enforced rule: suspected (telemetry only),
    confirmed or refuted by a record, or covered by a waiver the text provides."""

    rule_id: str
    title: str
    status: str
    start: datetime
    end: datetime
    days: list[str]
    confidence: str
    citations: list[FindingCitation]


class VerdictPublic(BaseModel):
    """A site's one compliance verdict (the dashboard, console and reports read the same)."""

    site_id: str
    as_of: datetime
    status: str = Field(description="violation, suspected, not_checked, compliant or no_pack")
    label: str
    statement: str = Field(description="Worded for staff")
    requirements_failed: int
    requirements_not_checked: int
    confirmed_days: list[str]
    suspected_days: list[str]
    next_step: str | None = Field(description="The village's first step under the pack")
    spells: list[SpellPublic]
    audit: list[AuditItemPublic]


@router.get("/sites/{site_id}/verdict", response_model=VerdictPublic)
async def verdict_one(request: Request, site_id: str) -> VerdictPublic:
    """One site's compliance verdict now: audit, open findings, confirmations, waivers."""
    site = _site(request, site_id)
    v = await current_verdict(_runtime(request), site, datetime.now(UTC))
    step = v.next_step
    return VerdictPublic(
        site_id=site.id,
        as_of=v.as_of,
        status=v.status.value,
        label=v.label,
        statement=v.sentence("staff"),
        requirements_failed=len(v.failed),
        requirements_not_checked=len(v.not_checked),
        confirmed_days=[d.isoformat() for d in v.confirmed_days],
        suspected_days=[d.isoformat() for d in v.suspected_days],
        next_step=None if step is None else f"{step.step}: {step.summary}",
        spells=[
            SpellPublic(
                rule_id=s.rule_id,
                title=s.title,
                status=s.status,
                start=s.start,
                end=s.end,
                days=[d.isoformat() for d in s.days],
                confidence=s.confidence,
                citations=[FindingCitation.of(c) for c in s.citations],
            )
            for s in v.spells
        ],
        audit=[AuditItemPublic.of(i) for i in v.audit],
    )
