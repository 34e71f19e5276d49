"""Issue 16.6-16.7: evidence packet and notice letters render (pdftoppm) and carry their hash."""

from __future__ import annotations

import hashlib
import json
import subprocess
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from gateway.cases import evidence
from gateway.cases.models import Method, Origin, Party, Service, StepKind
from gateway.cases.repository import CaseRepository
from gateway.cases.service import Actor, CaseService
from gateway.domain import Audience, Finding, FindingChange, FindingEvent, Severity
from gateway.registry import load_registry
from gateway.rules.pack import load_packs
from gateway.settings import REPO_DIR
from gateway.state.database import SqliteDatabase
from gateway.state.findings import FindingRepository

SITES = REPO_DIR / "deploy" / "sites.example.toml"
CLERK = Actor("edgar-pw", "public_works")
NOW = datetime(2027, 1, 4, 15, tzinfo=UTC)


@pytest.fixture
async def service(tmp_path: Path) -> AsyncIterator[CaseService]:
    db = SqliteDatabase(tmp_path / "cases.sqlite")
    await db.open()
    findings = FindingRepository(db)
    await findings.open()
    repo = CaseRepository(db)
    await repo.open()
    yield CaseService(
        repo, load_registry(SITES), load_packs(), clock=lambda: NOW, findings=findings
    )
    await db.close()


async def _edgar_case(service: CaseService) -> str:
    finding = Finding(
        id="f-1",
        rule_id="sanitary_discharge",
        site_id="elm-16",
        severity=Severity.CRITICAL,
        title="Sump water is going into the sanitary sewer",
        opened_at=NOW - timedelta(days=3),
        updated_at=NOW - timedelta(days=3),
        level="violation",
        audience=(Audience.HOMEOWNER, Audience.PUBLIC_WORKS),
        evidence={
            "cycles": [
                {"start": f"2027-01-01T0{i}:00Z", "pit_l": 40.0 + i, "outlet_l": 0.0}
                for i in range(5)
            ],
            "unaccounted_l": 212.5,
        },
    )
    event = FindingEvent(FindingChange.OPENED, finding)
    assert service.findings is not None
    await service.findings.apply([event])
    await service.on_events([event])
    [case] = await service.repo.list_cases(frozenset({"elm-16"}))
    order = service.new_step(
        StepKind.ORDER, NOW - timedelta(days=1), service=Service(Party.OWNER, Method.IN_PERSON)
    )
    await service.record(case.id, order, CLERK)
    await service.post_ledger("elm-16")
    return case.id


def _pages_text(pdf: Path) -> list[str]:
    info = subprocess.run(["pdfinfo", str(pdf)], capture_output=True, text=True, check=True)
    pages = int(next(ln.split()[-1] for ln in info.stdout.splitlines() if ln.startswith("Pages:")))
    return [
        subprocess.run(
            ["pdftotext", "-f", str(n), "-l", str(n), "-layout", str(pdf), "-"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for n in range(1, pages + 1)
    ]


def _renders(pdf: Path, out: Path) -> int:
    subprocess.run(["pdftoppm", "-png", "-r", "50", str(pdf), str(out)], check=True, timeout=60)
    return len(list(out.parent.glob(f"{out.name}*.png")))


async def test_the_evidence_packet_renders_with_its_hash_on_every_page(
    service: CaseService, tmp_path: Path
) -> None:
    case_id = await _edgar_case(service)
    bundle = await evidence.bundle(service, case_id)
    assert bundle.hash == "sha256:" + hashlib.sha256(bundle.json_bytes).hexdigest()
    data = json.loads(bundle.json_bytes)
    assert [s["kind"] for s in data["steps"]] == ["opened", "episode", "order"]
    assert data["findings"][0]["evidence"]["unaccounted_l"] == 212.5
    assert data["ledger"][0]["amount_cents"] == 30000
    assert data["citations"]["rule"][0]["section"] == "(b)"

    pdf = tmp_path / "packet.pdf"
    pdf.write_bytes(evidence.packet_pdf(bundle))
    assert _renders(pdf, tmp_path / "packet") >= 1
    pages = _pages_text(pdf)
    digest = bundle.hash.removeprefix("sha256:")
    assert all(digest in " ".join(page.split()) for page in pages)
    assert "(f)(1)" in " ".join(pages)


async def test_the_evidence_packet_is_reproducible_byte_for_byte(service: CaseService) -> None:
    case_id = await _edgar_case(service)
    first = evidence.packet_pdf(await evidence.bundle(service, case_id))
    second = evidence.packet_pdf(await evidence.bundle(service, case_id))
    assert first == second
    # Recording a step changes the content, hence the hash.
    before = await evidence.bundle(service, case_id)
    await service.record(case_id, service.new_step(StepKind.NOTE, note="called owner"), CLERK)
    assert (await evidence.bundle(service, case_id)).hash != before.hash


async def test_bulk_notice_letters_render_with_address_deadline_and_citation(
    service: CaseService, tmp_path: Path
) -> None:
    case_id = await _edgar_case(service)
    other = await service.open_case("oak-5", "sanitary_discharge", Origin.COMPLAINT, CLERK)
    views = [service.view(await service.repo.get(case_id)), service.view(other)]
    pdf = tmp_path / "letters.pdf"
    pdf.write_bytes(evidence.letters_pdf(views, NOW))
    assert _renders(pdf, tmp_path / "letters") == 2
    first, second = (" ".join(p.split()) for p in _pages_text(pdf))
    assert "16 Elm St" in first and "Connection order" in first
    assert "Tue Feb 2, 2027" in first and "(f)(1)" in first
    assert "5 Oak Ave" in second and "Draft" in second


async def test_no_letter_where_the_pack_has_no_notice_or_order(service: CaseService) -> None:
    case = await service.open_case("main-101", "icing_risk", Origin.OBSERVATION, CLERK)
    with pytest.raises(ValueError, match="no notice or order"):
        evidence.letters_pdf([service.view(case)], NOW)


async def test_the_packet_shows_the_frozen_snapshot_while_the_open_finding_keeps_updating(
    service: CaseService, tmp_path: Path
) -> None:
    # Issue 16.6 / 15.5: the packet is as of its last step, from the frozen snapshot.
    case_id = await _edgar_case(service)
    before = await evidence.bundle(service, case_id)
    assert service.findings is not None
    stored = await service.findings.get("f-1")
    assert stored is not None
    later = replace(
        stored,
        updated_at=NOW + timedelta(hours=5),
        level="alarm",
        evidence={"unaccounted_l": 999.0},
    )
    await service.findings.apply([FindingEvent(FindingChange.UPDATED, later)])
    after = await evidence.bundle(service, case_id)
    assert after.hash == before.hash
    [finding] = json.loads(after.json_bytes)["findings"]
    assert finding["evidence"]["unaccounted_l"] == 212.5
    assert finding["level"] == "violation"
    assert finding["snapshot"]["change"] == "opened" and finding["snapshot"]["intact"]
    assert [h["level"] for h in finding["history"]] == ["violation"]
    pdf = tmp_path / "packet.pdf"
    pdf.write_bytes(evidence.packet_pdf(after))
    assert finding["snapshot"]["sha256"][:20] in " ".join(" ".join(_pages_text(pdf)).split())
