"""Issue 16.2: each pack's [enforcement] section is cited data, verbatim, and checked on load."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gateway.domain import Citation
from gateway.errors import ConfigError
from gateway.rules.pack import RulePack, load_pack, load_packs
from tests.test_rules_packs import ORDINANCES, PACK_FILES


@pytest.fixture(scope="module")
def packs() -> dict[str, RulePack]:
    return load_packs()


def _enforcement_citations(pack: RulePack) -> list[Citation]:
    e = pack.enforcement
    cites: list[Citation] = []
    for step in e.steps.values():
        cites += [
            c for c in (step.citation, step.refusal_citation, step.reinspection_citation) if c
        ]
    for d in e.deadlines:
        cites += [c for c in (d.citation, d.suspension_citation) if c]
    if e.ledger is not None:
        cites += [
            c
            for c in (
                e.ledger.stop_citation,
                e.ledger.lookback_citation,
                e.ledger.each_day_citation,
            )
            if c
        ]
    return cites


@pytest.mark.parametrize("pack_id", sorted(PACK_FILES))
def test_every_enforcement_quote_is_verbatim_in_its_text(
    packs: dict[str, RulePack], pack_id: str
) -> None:
    texts = {f.name: re.sub(r"\s+", " ", f.read_text()) for f in ORDINANCES.glob("*.txt")}
    for c in _enforcement_citations(packs[pack_id]):
        assert c.file == PACK_FILES[pack_id]
        assert re.sub(r"\s+", " ", c.quote) in texts[c.file], c


def test_edgar_deadlines_name_the_cited_day_counts(packs: dict[str, RulePack]) -> None:
    days = {
        d.id: (d.days.value if d.days else None, d.after, d.start)
        for d in packs["edgar"].enforcement.deadlines
    }
    assert days == {
        "schedule_inspection": (30, "notice", "served"),
        "correct": (30, "order", "served"),
        "apply_for_waiver": (15, "order", "received"),
        "inspect_before_occupancy": (None, "occupancy_requested", "due_on"),
    }


def test_the_ledger_names_the_packs_penalties(packs: dict[str, RulePack]) -> None:
    edgar = packs["edgar"].enforcement.ledger
    assert edgar is not None and edgar.penalty is not None
    assert (edgar.kind, edgar.penalty.id) == ("monthly_surcharge", "monthly_surcharge")
    ll6 = packs["local-law-6-2024"].enforcement.ledger
    assert ll6 is not None and ll6.referral_penalty is not None
    assert ll6.referral_penalty.after_violations is not None
    assert ll6.referral_penalty.after_violations.value == 3
    assert packs["storm-ord-1991-43"].enforcement.ledger is None


def test_a_deadline_must_name_a_number_in_days(tmp_path: Path) -> None:
    source = (Path(__file__).parents[1] / "gateway/rules/packs/edgar.toml").read_text()
    broken = source.replace(
        'days = "deadlines.connection_order_days"', 'days = "setbacks.property_line_ft"'
    )
    path = tmp_path / "edgar.toml"
    path.write_text(broken)
    with pytest.raises(ConfigError, match="must name a number in days"):
        load_pack(path)


def test_an_unknown_step_name_is_refused(tmp_path: Path) -> None:
    source = (Path(__file__).parents[1] / "gateway/rules/packs/edgar.toml").read_text()
    path = tmp_path / "edgar.toml"
    path.write_text(source.replace("[enforcement.steps.citation]", "[enforcement.steps.appeal]"))
    with pytest.raises(ConfigError, match="appeal"):
        load_pack(path)
