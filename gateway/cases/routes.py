"""Cases API and pages (16.7).

Access: the app-wide ``access_control`` resolves ``{case_id}`` to its site (registered
below), so a homeowner asking for another site's case gets 404, exactly as for a
case that does not exist. What each role may record is the service's rule
(:data:`gateway.cases.models.HOMEOWNER_STEPS`); lists take ``ScopeDep`` and filter.
Every step records the signed-in account and its role (the audit trail).
"""

from __future__ import annotations

import contextlib
import hashlib
import uuid
from collections.abc import Iterator
from datetime import UTC, date, datetime
from typing import Annotated, Any
from zoneinfo import ZoneInfo

from fastapi import APIRouter, Depends, File, Form, HTTPException, Query, Request, UploadFile
from fastapi.responses import JSONResponse, RedirectResponse, Response

from gateway.accounts.access import PrincipalDep, ScopeDep, StaffDep, register_resolver
from gateway.accounts.models import Principal, Scope
from gateway.cases import evidence
from gateway.cases.api_models import (
    CaseDetail,
    CaseIn,
    CaseOut,
    LedgerLineOut,
    NoticesIn,
    StepIn,
    StepOut,
)
from gateway.cases.deadlines import Bucket
from gateway.cases.ledger import to_csv
from gateway.cases.models import (
    ChecklistResult,
    Document,
    Inspection,
    Method,
    Origin,
    Outcome,
    Party,
    Service,
    StepKind,
    WaiverTerms,
)
from gateway.cases.service import Actor, CaseError, CaseForbidden, CaseService
from gateway.errors import NotFound
from gateway.web.templating import render

router = APIRouter(tags=["cases"])
pages = APIRouter(include_in_schema=False)

#: Uploads larger than this are refused (a phone photo or a scanned certificate fits).
MAX_UPLOAD = 10 * 1024 * 1024
#: Accepted uploads and how their bytes must start (the declared type is not trusted).
UPLOAD_TYPES = {"image/jpeg": b"\xff\xd8\xff", "image/png": b"\x89PNG", "application/pdf": b"%PDF"}


def get_cases(request: Request) -> CaseService:
    """The running case service (503 if this gateway has none)."""
    service: CaseService | None = getattr(request.app.state, "cases", None)
    if service is None:
        raise HTTPException(503, detail="cases are not enabled on this gateway")
    return service


CasesDep = Annotated[CaseService, Depends(get_cases)]


async def _site_of_case(request: Request, case_id: str) -> str:
    service = get_cases(request)
    case = await service.repo.get(case_id)  # NotFound if absent
    return case.site_id


register_resolver("case_id", _site_of_case)


def actor_of(principal: Principal) -> Actor:
    """The principal as the service's actor."""
    return Actor(principal.username, principal.role.value)


@contextlib.contextmanager
def case_errors() -> Iterator[None]:
    """Unknown -> 404, not offered -> 409, wrong role -> 403."""
    try:
        yield
    except NotFound as exc:
        raise HTTPException(404, detail=str(exc)) from exc
    except CaseError as exc:
        raise HTTPException(409, detail=str(exc)) from exc
    except CaseForbidden as exc:
        raise HTTPException(403, detail=str(exc)) from exc
    except ValueError as exc:  # e.g. a letter for a pack with no notice or order
        raise HTTPException(409, detail=str(exc)) from exc


# ---------------------------------------------------------------------- API


@router.get("/cases", response_model=list[CaseOut])
async def list_cases(
    cases: CasesDep,
    scope: ScopeDep,
    jurisdiction: Annotated[str | None, Query(description="Rule pack id")] = None,
    site: Annotated[str | None, Query(description="Site id")] = None,
    bucket: Annotated[str | None, Query(description="due_today, overdue, ...")] = None,
    closed: bool = False,
) -> list[CaseOut]:
    """Cases of the caller's sites, with state, deadlines and queue group."""
    visible = scope.site_ids()
    ids = frozenset({site}) if site is not None else visible
    views = await cases.views(ids, jurisdiction, actor_of(scope.principal), include_closed=closed)
    return [CaseOut.of(v) for v in views if bucket is None or v.bucket == bucket]


def _known_rule(cases: CaseService, site_id: str, rule_id: str) -> None:
    """A case is about a detector rule or an audit requirement of the site's pack."""
    pack = cases.pack_of(cases.registry.require(site_id))
    known = set(pack.rules) | {r.id for r in pack.requirements}
    if rule_id not in known:
        raise HTTPException(422, detail=f"{rule_id!r} is not a rule of {pack.name}")


@router.post("/cases", response_model=CaseOut, status_code=201)
async def open_case(body: CaseIn, cases: CasesDep, scope: ScopeDep, staff: StaffDep) -> CaseOut:
    """Open a case from an audit failure, inspection, complaint or observation (16.1, 16.8)."""
    if not scope.allows(body.site_id):
        raise HTTPException(404, detail=f"no site with id {body.site_id!r}")
    _known_rule(cases, body.site_id, body.rule_id)
    with case_errors():
        case = await cases.open_case(
            body.site_id,
            body.rule_id,
            body.origin,
            actor_of(staff),
            title=body.title,
            at=body.at,
            note=body.note,
            confirms=body.confirms,
        )
    return CaseOut.of(cases.view(case, actor_of(staff)))


@router.get("/cases/{case_id}", response_model=CaseDetail)
async def get_case(case_id: str, cases: CasesDep, principal: PrincipalDep) -> CaseDetail:
    """One case with its timeline."""
    with case_errors():
        case = await cases.repo.get(case_id)
    view = cases.view(case, actor_of(principal))
    return CaseDetail(**CaseOut.of(view).model_dump(), steps=[StepOut.of(s) for s in case.steps])


@router.post("/cases/{case_id}/steps", response_model=CaseDetail, status_code=201)
async def add_step(
    case_id: str, body: StepIn, cases: CasesDep, principal: PrincipalDep
) -> CaseDetail:
    """Record a step the pack offers and the caller's role allows (409 / 403 otherwise)."""
    with case_errors():
        step = cases.new_step(body.kind, body.at, **body.payload())
        case = await cases.record(case_id, step, actor_of(principal))
    view = cases.view(case, actor_of(principal))
    return CaseDetail(**CaseOut.of(view).model_dump(), steps=[StepOut.of(s) for s in case.steps])


async def _document(upload: UploadFile) -> tuple[Document, bytes]:
    data = await upload.read(MAX_UPLOAD + 1)
    if len(data) > MAX_UPLOAD:
        raise HTTPException(413, detail="the file is larger than 10 MB")
    magic = UPLOAD_TYPES.get(upload.content_type or "")
    if magic is None or not data.startswith(magic):
        raise HTTPException(415, detail="send a JPEG or PNG photo or a PDF certificate")
    doc = Document(
        id=f"doc-{uuid.uuid4().hex[:12]}",
        name=(upload.filename or "upload")[:200],
        content_type=upload.content_type or "",
        sha256=hashlib.sha256(data).hexdigest(),
        size=len(data),
    )
    return doc, data


async def _upload(
    cases: CaseService, case_id: str, principal: Principal, upload: UploadFile, note: str
) -> None:
    doc, data = await _document(upload)
    with case_errors():
        case = await cases.repo.get(case_id)
        step = cases.new_step(StepKind.CORRECTION_PROOF, note=note, documents=(doc,))
        if StepKind.CORRECTION_PROOF not in cases.offered(case, actor_of(principal)):
            raise CaseError(f"{cases.pack_of(cases.view(case).site).name} takes no proof")
        await cases.repo.add_document(case_id, doc, data)
        await cases.record(case_id, step, actor_of(principal))


@router.post("/cases/{case_id}/proof", status_code=201)
async def upload_proof(
    case_id: str,
    cases: CasesDep,
    principal: PrincipalDep,
    file: Annotated[UploadFile, File(description="Photo or plumber's certificate")],
    note: Annotated[str, Form(max_length=2000)] = "",
) -> dict[str, str]:
    """Upload proof of correction (a photo or a licensed plumber's certificate)."""
    await _upload(cases, case_id, principal, file, note)
    return {"status": "recorded"}


#: What an observation can be (16.8); texts: Edgar (c)(2)c, L.L. 6-2024 G, H, I.
OBSERVED = ("icing", "water_on_street", "standing_water", "algae", "erosion", "nuisance")


@router.post("/observations", response_model=CaseOut, status_code=201)
async def record_observation(
    cases: CasesDep,
    scope: ScopeDep,
    staff: StaffDep,
    site_id: Annotated[str, Form(max_length=100)],
    what: Annotated[str, Form(description=", ".join(OBSERVED))],
    place: Annotated[str, Form(max_length=300)],
    rule_id: Annotated[str, Form(max_length=100)] = "icing_risk",
    at: Annotated[datetime | None, Form(description="When seen, with offset")] = None,
    note: Annotated[str, Form(max_length=2000)] = "",
    photo: Annotated[UploadFile | None, File()] = None,
) -> CaseOut:
    """Public works records what it saw; it confirms the open case or opens one (16.8)."""
    if not scope.allows(site_id):
        raise HTTPException(404, detail=f"no site with id {site_id!r}")
    _known_rule(cases, site_id, rule_id)
    if what not in OBSERVED:
        raise HTTPException(422, detail=f"what must be one of {', '.join(OBSERVED)}")
    doc = await _document(photo) if photo is not None else None
    text = f"{what.replace('_', ' ')} at {place}" + (f": {note}" if note else "")
    with case_errors():
        case = await cases.open_case(
            site_id,
            rule_id,
            Origin.OBSERVATION,
            actor_of(staff),
            at=at,
            note=text,
            confirms=True,
            documents=() if doc is None else (doc[0],),
        )
        if doc is not None:
            await cases.repo.add_document(case.id, *doc)
    return CaseOut.of(cases.view(case, actor_of(staff)))


@router.get("/cases/{case_id}/documents/{doc_id}")
async def get_document(
    case_id: str, doc_id: str, cases: CasesDep, principal: PrincipalDep
) -> Response:
    """A document attached to the case."""
    with case_errors():
        doc, data = await cases.repo.document(case_id, doc_id)
    return Response(
        data,
        media_type=doc.content_type,
        # Uploaded by a person: downloaded, never rendered in the app's origin.
        headers={
            "Content-Disposition": f'attachment; filename="{doc.id}"',
            "X-Content-Type-Options": "nosniff",
        },
    )


@router.get("/cases/{case_id}/evidence.json")
async def evidence_json(case_id: str, cases: CasesDep, staff: StaffDep) -> Response:
    """The evidence bundle (JSON), its content hash in the ``X-Content-Hash`` header."""
    with case_errors():
        bundle = await evidence.bundle(cases, case_id)
    return Response(
        bundle.json_bytes, media_type="application/json", headers={"X-Content-Hash": bundle.hash}
    )


@router.get("/cases/{case_id}/evidence.pdf")
async def evidence_pdf(case_id: str, cases: CasesDep, staff: StaffDep) -> Response:
    """The evidence packet: the bundle as a PDF with its hash on every page (16.6)."""
    with case_errors():
        bundle = await evidence.bundle(cases, case_id)
    return Response(
        evidence.packet_pdf(bundle),
        media_type="application/pdf",
        headers={"X-Content-Hash": bundle.hash},
    )


async def _letters(cases: CaseService, scope: Scope, case_ids: list[str]) -> Response:
    letters = []
    with case_errors():
        for case_id in case_ids:
            case = await cases.repo.get(case_id)
            if not scope.allows(case.site_id):
                raise NotFound(f"no case with id {case_id!r}")
            letters.append(cases.view(case))
        pdf = evidence.letters_pdf(letters, cases.clock())
    return Response(pdf, media_type="application/pdf")


@router.post("/cases/notices.pdf")
async def notices_pdf(
    body: NoticesIn, cases: CasesDep, scope: ScopeDep, staff: StaffDep
) -> Response:
    """Notice and order letters of many cases, one PDF (bulk generation, 16.7)."""
    return await _letters(cases, scope, body.case_ids)


@router.get("/ledger", response_model=list[LedgerLineOut])
async def ledger(
    cases: CasesDep, scope: ScopeDep, site: Annotated[str | None, Query()] = None
) -> list[LedgerLineOut]:
    """Posted ledger lines of the caller's sites (brought up to date first)."""
    ids = frozenset({site}) if site is not None else scope.site_ids()
    with case_errors():  # an unknown site (admins skip the scope check): 404
        return [LedgerLineOut.of(e) for e in await cases.ledger(ids)]


@router.get("/ledger.csv")
async def ledger_csv(
    cases: CasesDep, scope: ScopeDep, staff: StaffDep, site: Annotated[str | None, Query()] = None
) -> Response:
    """The ledger for the utility billing system (CSV; estimates, see docs/enforcement.md)."""
    ids = frozenset({site}) if site is not None else scope.site_ids()
    with case_errors():
        lines = await cases.ledger(ids)
    return Response(
        to_csv(lines),
        media_type="text/csv",
        headers={"Content-Disposition": 'attachment; filename="sumpwatch-ledger.csv"'},
    )


# ---------------------------------------------------------------------- pages

BUCKETS = (
    (Bucket.OVERDUE, "Overdue"),
    (Bucket.DUE_TODAY, "Due today"),
    (Bucket.WAITING_ON_OWNER, "Waiting on the owner"),
    (Bucket.WAITING_ON_INSPECTION, "Waiting on an inspection or decision"),
    (Bucket.OTHER, "Other open cases"),
)


@pages.get("/cases/queue/{jurisdiction}")
async def queue_page(
    request: Request, jurisdiction: str, cases: CasesDep, staff: StaffDep
) -> Response:
    """Public works' case queue of one jurisdiction."""
    views = await cases.views(None, jurisdiction, actor_of(staff))
    groups = [(key, label, [v for v in views if v.bucket == key]) for key, label in BUCKETS]
    pack = cases.packs.get(jurisdiction)
    return render(
        request,
        "cases_queue.html",
        staff,
        jurisdiction=jurisdiction,
        jurisdiction_name=pack.name if pack else jurisdiction,
        groups=groups,
        today=datetime.now(UTC).date(),
    )


@pages.post("/ui/cases/notices.pdf")
async def notices_form(
    cases: CasesDep,
    scope: ScopeDep,
    staff: StaffDep,
    case_ids: Annotated[list[str], Form(max_length=500)],
) -> Response:
    """The queue's bulk-letter form (the rows ticked)."""
    return await _letters(cases, scope, case_ids)


@pages.get("/case/{case_id}")
async def case_page(
    request: Request, case_id: str, cases: CasesDep, principal: PrincipalDep
) -> Response:
    """A case: timeline, deadlines, what to do, and the actions the caller may take."""
    with case_errors():
        case = await cases.repo.get(case_id)
    view = cases.view(case, actor_of(principal))
    return render(
        request,
        "case.html",
        principal,
        v=view,
        steps=sorted(case.steps, key=lambda s: s.at, reverse=True),  # newest first
        enforcement=view.pack.enforcement,
        checklist=view.pack.requirements,
        parties=list(Party),
        methods=list(Method),
        outcomes=list(Outcome),
    )


def _opt_day(text: str) -> date | None:
    return date.fromisoformat(text) if text else None


def _opt_time(text: str, tz: ZoneInfo) -> datetime | None:
    """A form's date-time; without an offset it is the site's local time."""
    if not text:
        return None
    value = datetime.fromisoformat(text)
    return value if value.tzinfo else value.replace(tzinfo=tz)


@pages.post("/ui/cases/{case_id}/step")
async def step_form(
    request: Request,
    case_id: str,
    cases: CasesDep,
    principal: PrincipalDep,
    kind: Annotated[StepKind, Form()],
    note: Annotated[str, Form(max_length=4000)] = "",
    party: Annotated[str, Form()] = "",
    method: Annotated[str, Form()] = "",
    received_on: Annotated[str, Form()] = "",
    grounds: Annotated[str, Form(max_length=4000)] = "",
    scheduled_for: Annotated[str, Form()] = "",
    outcome: Annotated[str, Form()] = "",
    inspector: Annotated[str, Form(max_length=200)] = "",
    offense_day: Annotated[str, Form()] = "",
) -> Response:
    """The case page's action forms (same rules as the API)."""
    fields: dict[str, Any] = {"note": note}
    form = await request.form()  # checklist items: item_<requirement id> = pass|fail|""
    items = tuple(
        ChecklistResult(str(key).removeprefix("item_"), value == "pass")
        for key, value in form.multi_items()
        if str(key).startswith("item_") and value in ("pass", "fail")
    )
    with case_errors():
        tz = cases.view(await cases.repo.get(case_id)).site.tz
    try:
        if party and method:
            fields["service"] = Service(Party(party), Method(method), _opt_day(received_on))
        if grounds:
            fields["waiver"] = WaiverTerms(grounds=grounds)
        if scheduled_for or outcome:
            fields["inspection"] = Inspection(
                scheduled_for=_opt_time(scheduled_for, tz),
                outcome=Outcome(outcome) if outcome else None,
                inspector=inspector,
                items=items,
            )
        if offense_day:
            fields["offense_days"] = (date.fromisoformat(offense_day),)
    except ValueError as exc:
        raise HTTPException(422, detail=f"a field is not valid: {exc}") from exc
    with case_errors():
        await cases.record(case_id, cases.new_step(kind, **fields), actor_of(principal))
    return _back(request, case_id)


@pages.post("/ui/cases/{case_id}/proof")
async def proof_form(
    request: Request,
    case_id: str,
    cases: CasesDep,
    principal: PrincipalDep,
    file: Annotated[UploadFile, File()],
    note: Annotated[str, Form(max_length=2000)] = "",
) -> Response:
    """Upload proof of correction from the case page."""
    await _upload(cases, case_id, principal, file, note)
    return _back(request, case_id)


def _back(request: Request, case_id: str) -> Response:
    if "application/json" in request.headers.get("accept", ""):
        return JSONResponse({"case_id": case_id, "status": "recorded"})
    return RedirectResponse(f"/case/{case_id}", status_code=303)


@pages.get("/site/{site_id}/cases")
async def site_cases(
    request: Request, site_id: str, cases: CasesDep, principal: PrincipalDep
) -> Response:
    """A homeowner's way in: their site's open case, or the list if several."""
    views = await cases.views(frozenset({site_id}), None, actor_of(principal))
    if len(views) == 1:
        return RedirectResponse(f"/case/{views[0].case.id}", status_code=303)
    return render(request, "cases_site.html", principal, site_id=site_id, views=views)
