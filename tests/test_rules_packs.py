"""Rule packs: each number against the ordinance text it cites, and the loader."""

from __future__ import annotations

import re
import tomllib
from datetime import date, timedelta
from pathlib import Path

import pytest

from gateway.domain import Citation
from gateway.errors import ConfigError
from gateway.rules.pack import PACKS_DIR, RulePack, load_packs
from gateway.settings import REPO_DIR

ORDINANCES = REPO_DIR.parent / "shared" / "ordinances"
PACK_FILES = {
    "edgar": "000_86c7187f3bed6ca5.txt",
    "sewer-ord-247": "001_86660116dac6b430.txt",
    "local-law-6-2024": "002_95501357ede9ea8f.txt",
    "storm-ord-1991-43": "003_aa0dd9cc9c1ba57b.txt",
}


@pytest.fixture(scope="module")
def packs() -> dict[str, RulePack]:
    return load_packs()


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def _all_citations(pack: RulePack) -> list[Citation]:
    cites = [n.citation for n in pack.numbers.values()]
    cites += list(pack.season.citations)
    for p in pack.penalties:
        cites += list(p.citations)
        cites += [n.citation for n in (p.after_violations, p.within_days, p.jail_days) if n]
    for spec in pack.rules.values():
        cites += list(spec.citations) + list(spec.related)
        cites += [c for c in (spec.waiver_citation, spec.grace_citation) if c]
    for req in pack.requirements:
        cites += list(req.citations)
    return cites


def test_one_pack_per_ordinance_text(packs: dict[str, RulePack]) -> None:
    assert {p: packs[p].file for p in packs} == PACK_FILES


@pytest.mark.parametrize("pack_id", sorted(PACK_FILES))
def test_every_quote_is_verbatim_in_the_cited_text(
    packs: dict[str, RulePack], pack_id: str
) -> None:
    if not ORDINANCES.is_dir():
        pytest.fail(f"ordinance texts not found at {ORDINANCES}")
    texts = {f.name: _norm(f.read_text()) for f in ORDINANCES.glob("*.txt")}
    cites = _all_citations(packs[pack_id])
    assert cites
    for c in cites:
        assert c.file == PACK_FILES[pack_id], c
        for part in c.quote.split(" ... "):
            assert _norm(part) in texts[c.file], f"{c}: {part!r} is not in the text"


@pytest.mark.parametrize("pack_id", sorted(PACK_FILES))
def test_every_integer_number_appears_in_its_quote(
    packs: dict[str, RulePack], pack_id: str
) -> None:
    words = {1: "one", 2: "two", 3: "three", 6: "six", 10: "ten", 15: "fifteen", 30: "thirty"}
    for path, number in packs[pack_id].numbers.items():
        if number.is_default:
            continue  # the product's default, not a number of the text (checked below)
        if isinstance(number.value, int):
            quote = number.citation.quote.lower()
            digits = re.search(rf"\b{number.value}\b", quote)
            word = words.get(number.value, "?") in quote
            assert digits or word, path


def test_edgar_numbers(packs: dict[str, RulePack]) -> None:
    edgar = packs["edgar"]
    assert edgar.setbacks["foundation_wall_ft"].value == 2
    assert edgar.setbacks["property_line_ft"].value == 10
    assert edgar.setbacks["property_line_ft"].citation.section == "(c)(2)b"
    assert edgar.setbacks["pit_to_floor_drain_ft"].value == 10
    assert edgar.setbacks["check_valve_above_floor_ft"].value == 1
    assert edgar.pipe["min_inside_diameter_in"].value == 1
    assert edgar.deadlines["connection_order_days"].value == 30
    assert edgar.deadlines["connection_order_days"].citation.section == "(f)(1)"
    assert edgar.deadlines["inspection_scheduling_days"].value == 30
    assert edgar.deadlines["waiver_application_days"].value == 15
    assert edgar.deadlines["waiver_application_days"].citation.section == "(f)(3)b"


def test_edgar_winter_season_is_cited_nov_15_to_apr_15(packs: dict[str, RulePack]) -> None:
    season = packs["edgar"].season
    assert (season.start, season.end, season.is_default) == ((11, 15), (4, 15), False)
    assert all(c.section == "(e)(1)b" for c in season.citations)
    assert season.contains(date(2026, 11, 15)) and season.contains(date(2027, 4, 15))
    assert season.contains(date(2027, 1, 10))
    assert not season.contains(date(2026, 11, 14)) and not season.contains(date(2027, 4, 16))


@pytest.mark.parametrize("pack_id", ["sewer-ord-247", "local-law-6-2024", "storm-ord-1991-43"])
def test_packs_without_a_season_say_so_and_use_the_marked_default(
    packs: dict[str, RulePack], pack_id: str
) -> None:
    season = packs[pack_id].season
    assert season.is_default and season.citations == ()
    assert (season.start, season.end) == ((11, 15), (4, 15))
    assert season.label() == "Nov 15 - Apr 15 (default)"


def test_edgar_penalty_is_300_dollars_a_month(packs: dict[str, RulePack]) -> None:
    (surcharge,) = [p for p in packs["edgar"].penalties if p.id == "monthly_surcharge"]
    assert surcharge.per == "month"
    assert surcharge.min_usd and surcharge.min_usd.value == 300
    assert surcharge.max_usd and surcharge.max_usd.value == 300
    assert surcharge.citations[0].section == "(f)(4)a"


def test_local_law_fines(packs: dict[str, RulePack]) -> None:
    by_id = {p.id: p for p in packs["local-law-6-2024"].penalties}
    first, later, misd = by_id["first_offense"], by_id["later_offense"], by_id["misdemeanor"]
    assert first.per == later.per == "day"
    assert (first.min_usd and first.min_usd.value, first.max_usd and first.max_usd.value) == (
        50,
        250,
    )
    assert (later.min_usd and later.min_usd.value, later.max_usd and later.max_usd.value) == (
        100,
        250,
    )
    assert misd.min_usd and misd.min_usd.value == 500
    assert misd.max_usd and misd.max_usd.value == 1000
    assert misd.after_violations and misd.after_violations.value == 3
    assert misd.within_days and misd.within_days.value == 365
    assert misd.jail_days and misd.jail_days.value == 30
    assert misd.citations[0].section == "penalties B"


def test_local_law_existing_discharge_date_and_setback(packs: dict[str, RulePack]) -> None:
    law = packs["local-law-6-2024"]
    existing = law.number("dates.existing_discharge_before")
    assert existing and existing.value == "2024-01-01"
    assert law.setbacks["property_line_or_row_ft"].value == 10
    assert law.setbacks["property_line_or_row_ft"].citation.section == "existing-discharge C(1)"


def test_sanitary_prohibition_only_where_the_text_says_it(packs: dict[str, RulePack]) -> None:
    edgar = packs["edgar"].rule("sanitary_discharge")
    assert edgar.enforced
    assert [c.section for c in edgar.citations] == ["(b)", "(c)(1)"]
    law = packs["local-law-6-2024"].rule("sanitary_discharge")
    assert law.enforced
    assert [c.section for c in law.citations] == ["E", "J", "existing-discharge A(3)"]
    for pack_id in ("sewer-ord-247", "storm-ord-1991-43"):
        spec = packs[pack_id].rule("sanitary_discharge")
        assert not spec.enforced and spec.citations == () and spec.note


def test_storm_ordinance_roof_drain_setback_is_not_applied_as_a_failure(
    packs: dict[str, RulePack],
) -> None:
    storm = packs["storm-ord-1991-43"]
    assert storm.setbacks["roof_drain_property_line_ft"].value == 3
    uses = [r for r in storm.requirements if r.expected == 3]
    assert uses and all(r.status == "advisory" for r in uses)


def _referenced_in_packs(raw: dict[str, object]) -> set[str]:
    """Number paths the pack itself points at (requirements, grandfathering, deadlines)."""
    out: set[str] = set()
    for req in raw.get("requirements", []):  # type: ignore[attr-defined]
        out |= {req[k] for k in ("number", "unless_existing_before") if k in req}
    for rule in raw.get("rules", {}).values():  # type: ignore[attr-defined]
        if "grace_period" in rule:
            out.add(rule["grace_period"])
        for step in rule.get("steps", {}).values():
            if "deadline" in step:
                out.add(step["deadline"])
    return out


GATEWAY_CODE = "\n".join(p.read_text() for p in (REPO_DIR / "gateway").rglob("*.py"))


def _unread_numbers(pack: RulePack) -> list[str]:
    """Number paths neither the pack (requirements, deadlines) nor any code reads."""
    assert pack.source is not None
    used = _referenced_in_packs(tomllib.loads(pack.source.read_text()))
    unread = []
    for path in pack.numbers:
        read = path in used or f'"{path}"' in GATEWAY_CODE
        if path.startswith("rules."):  # a detector parameter, read by its name
            read = read or f'"{path.rsplit(".", 1)[-1]}"' in GATEWAY_CODE
        if not read:
            unread.append(path)
    return unread


@pytest.mark.parametrize("pack_id", sorted(PACK_FILES))
def test_every_pack_number_is_read_by_the_pack_or_the_code(
    packs: dict[str, RulePack], pack_id: str
) -> None:
    """A key no code reads is a claim nothing checks: use it or remove it."""
    assert _unread_numbers(packs[pack_id]) == []


def test_an_unused_pack_key_fails_the_usage_check(tmp_path: Path) -> None:
    body = NEW_PACK + '[deadlines.nobody_reads_this_days]\nvalue = 5\nunit = "days"\n'
    body += 'cite = { file = "x.txt", section = "(4)", quote = "5 days" }\n'
    _write_pack(tmp_path / "extra", "lazy-town", body)
    pack = load_packs(tmp_path / "extra")["lazy-town"]
    assert _unread_numbers(pack) == ["deadlines.nobody_reads_this_days"]


def test_edgar_walkway_distance_is_marked_a_product_default(packs: dict[str, RulePack]) -> None:
    distance = packs["edgar"].rule("icing_risk").params["distance_ft"]
    assert distance.is_default and "default" in distance.note
    assert distance.citation.section == "(c)(2)c"  # the provision it serves, not its source
    assert not packs["local-law-6-2024"].rule("icing_risk").params["distance_ft"].is_default


def test_edgar_winter_citation_applies_only_in_season(packs: dict[str, RulePack]) -> None:
    edgar = packs["edgar"]
    winter = [c.section for c in edgar.citations_on("icing_risk", date(2027, 1, 10))]
    autumn = [c.section for c in edgar.citations_on("icing_risk", date(2026, 10, 20))]
    assert winter == ["(c)(2)c", "(e)(1)b"]
    assert autumn == ["(c)(2)c"]


def test_each_pack_names_its_own_enforcement_path(packs: dict[str, RulePack]) -> None:
    edgar = packs["edgar"].rule("sanitary_discharge")
    assert edgar.on_confirmed is not None and edgar.on_confirmed.step == "order"
    assert edgar.on_confirmed.requires == "inspection"  # (f)(2)a: the inspection confirms
    assert edgar.on_suspected is not None and edgar.on_suspected.deadline_days == 30
    law = packs["local-law-6-2024"]
    for rule in ("sanitary_discharge", "icing_risk"):
        step = law.rule(rule).on_confirmed
        assert step is not None and step.step == "citation", rule  # no order procedure
        assert step.citation is not None and step.citation.section == "penalties A"


def test_grace_period_comes_from_the_connection_order(packs: dict[str, RulePack]) -> None:
    assert packs["edgar"].grace_period("sanitary_discharge") == timedelta(days=30)
    assert packs["edgar"].grace_period("icing_risk") is None
    assert packs["local-law-6-2024"].grace_period("sanitary_discharge") is None
    assert packs["edgar"].grace_period("high_water") is None


def test_icing_distance_is_cited_in_edgar_and_local_law(packs: dict[str, RulePack]) -> None:
    assert packs["edgar"].rule("icing_risk").params["distance_ft"].value == 10
    law = packs["local-law-6-2024"].rule("icing_risk").params["distance_ft"]
    assert law.value == 10 and law.citation.section == "existing-discharge C(1)"
    assert "distance_ft" not in packs["sewer-ord-247"].rule("icing_risk").params


def _write_pack(folder: Path, pack_id: str, body: str) -> None:
    folder.mkdir(exist_ok=True)
    (folder / f"{pack_id}.toml").write_text(
        f'id = "{pack_id}"\nname = "Test"\nfile = "x.txt"\n' + body
    )


NEW_PACK = """
[season]
defined = true
start = { value = "12-01", cite = { file = "x.txt", section = "(1)" } }
end = { value = "03-01", cite = { file = "x.txt", section = "(1)" } }

[setbacks.property_line_ft]
value = 15
unit = "ft"
cite = { file = "x.txt", section = "(2)", quote = "15 feet" }

[rules.sanitary_discharge]
enforced = true
cites = [{ file = "x.txt", section = "(3)" }]

[[requirements]]
id = "setback"
field = "outlet_to_property_line_ft"
check = "min"
number = "setbacks.property_line_ft"
message = "{actual} < {expected}"
"""


def test_a_new_pack_is_a_new_file(tmp_path: Path) -> None:
    _write_pack(tmp_path / "extra", "new-town", NEW_PACK)
    packs = load_packs(tmp_path / "extra")
    assert set(packs) == set(PACK_FILES) | {"new-town"}
    town = packs["new-town"]
    assert town.setbacks["property_line_ft"].value == 15
    assert town.season.label() == "Dec 1 - Mar 1"
    assert town.rule("sanitary_discharge").enforced


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (
            NEW_PACK.replace('cite = { file = "x.txt", section = "(2)", quote = "15 feet" }', ""),
            "cite",
        ),
        (NEW_PACK.replace('"outlet_to_property_line_ft"', '"no_such_field"'), "no_such_field"),
        (NEW_PACK.replace('number = "setbacks.property_line_ft"', 'number = "setbacks.x"'), "x"),
        (NEW_PACK.replace('cites = [{ file = "x.txt", section = "(3)" }]', ""), "citation"),
        (NEW_PACK.replace('"12-01"', '"13-01"'), "MM-DD"),
    ],
)
def test_an_invalid_pack_is_refused_with_a_reason(tmp_path: Path, body: str, error: str) -> None:
    _write_pack(tmp_path / "extra", "bad-town", body)
    with pytest.raises(ConfigError, match=error):
        load_packs(tmp_path / "extra")


def test_pack_id_must_match_its_file_name(tmp_path: Path) -> None:
    folder = tmp_path / "extra"
    _write_pack(folder, "one", NEW_PACK)
    (folder / "one.toml").rename(folder / "two.toml")
    with pytest.raises(ConfigError, match="file name"):
        load_packs(folder)


def test_packaged_folder_holds_only_the_four_packs() -> None:
    assert sorted(p.stem for p in PACKS_DIR.glob("*.toml")) == sorted(PACK_FILES)


def test_frozen_line_advice_in_edgar_does_not_break_its_own_setbacks(
    packs: dict[str, RulePack],
) -> None:
    """The catalog's "remove the outdoor extension" can breach Edgar (c)(2)b in winter."""
    from gateway.rules.catalog import action_for

    edgar = action_for("frozen_line", packs["edgar"])
    assert "remove the outdoor extension" not in edgar and "relief outlet" not in edgar
    assert "(c)(2)b" in edgar
    assert "remove the outdoor extension" in action_for("frozen_line", packs["storm-ord-1991-43"])


# ---- each quote lies within the section it names (review §2) ----

#: How each text labels its sections, level by level, as (regex, id part) pairs: Edgar
#: and Ord. 1991-43 "(c)" "(2)" "b." "1." -> "(c)(2)b.1"; Ord. 247 "(D)" "(4)" "(a)";
#: L.L. 6-2024 "A." "(2)" in three runs of letters (the law, existing discharges,
#: penalties), named "A", "existing-discharge A(2)", "penalties B" by the packs.
_LEVELS: dict[str, tuple[tuple[str, str], ...]] = {
    "village": (
        (r"\(([a-z])\)", "({})"),
        (r"\((\d+)\)", "({})"),
        (r"([a-zA-Z])\.", "{}"),
        (r"(\d+)\.", ".{}"),
    ),
    "ord247": ((r"\(([A-Z])\)", "({})"), (r"\((\d+)\)", "({})"), (r"\(([a-z])\)", "({})")),
    "local-law": ((r"([A-Z])\.", "{}"), (r"\((\d+)\)", "({})")),
}
_SCHEME = {
    "000_86c7187f3bed6ca5.txt": "village",
    "001_86660116dac6b430.txt": "ord247",
    "002_95501357ede9ea8f.txt": "local-law",
    "003_aa0dd9cc9c1ba57b.txt": "village",
}
_LOCAL_LAW_RUNS = ("", "existing-discharge ", "penalties ")


def _leading_label(line: str, levels: tuple[tuple[str, str], ...]) -> tuple[int, str, str] | None:
    """(level, id part, rest of the line) of a label opening ``line``, if any."""
    for depth, (pattern, part) in enumerate(levels):
        m = re.match(pattern + r"(?:\s+|$)", line)
        if m:
            return depth, part.format(m.group(1)), line[m.end() :]
    return None


def _sections(file: str, text: str) -> dict[str, str]:
    """Each section id of an ordinance text -> its words, subsections included."""
    levels = _LEVELS[_SCHEME[file]]
    path: list[str] = []
    run = -1
    out: dict[str, list[str]] = {}
    for raw in text.splitlines():
        line = raw.strip()
        while (found := _leading_label(line, levels)) is not None:
            depth, part, line = found
            if file.startswith("002") and depth == 0 and part == "A":
                run += 1  # a new run of lettered paragraphs
            path = [*path[:depth], part]
        prefix = _LOCAL_LAW_RUNS[max(run, 0)] if file.startswith("002") else ""
        for k in range(1, len(path) + 1):
            out.setdefault(prefix + "".join(path[:k]), []).append(line)
    return {key: _norm(" ".join(lines)) for key, lines in out.items()}


def _with_steps(pack: RulePack) -> list[Citation]:
    cites = _all_citations(pack)
    for step in pack.enforcement.steps.values():
        cites += [
            c for c in (step.citation, step.refusal_citation, step.reinspection_citation) if c
        ]
    return cites


def test_the_section_reader_finds_known_sections() -> None:
    edgar = _sections("000_86c7187f3bed6ca5.txt", (ORDINANCES / PACK_FILES["edgar"]).read_text())
    assert edgar["(c)(2)e.1"].startswith("The discharge pipe shall exit the building")
    assert "icy condition" in edgar["(c)(2)c"] and "icy condition" not in edgar["(c)(2)b"]
    law = _sections(
        "002_95501357ede9ea8f.txt", (ORDINANCES / PACK_FILES["local-law-6-2024"]).read_text()
    )
    assert law["penalties B"].startswith("Misdemeanor.")
    assert law["existing-discharge A(3)"].startswith("In no instance")


@pytest.mark.parametrize("pack_id", sorted(PACK_FILES))
def test_every_quote_lies_within_the_section_it_names(
    packs: dict[str, RulePack], pack_id: str
) -> None:
    file = PACK_FILES[pack_id]
    sections = _sections(file, (ORDINANCES / file).read_text())
    for c in _with_steps(packs[pack_id]):
        assert c.section in sections, f"{c}: no section {c.section!r} in {file}"
        for part in c.quote.split(" ... "):
            assert _norm(part) in sections[c.section], f"{c}: {part!r} is not in {c.section}"


def test_a_quote_cited_to_the_wrong_section_is_caught() -> None:
    # The whole-file check above passes this; the section check must not.
    file = PACK_FILES["edgar"]
    text = (ORDINANCES / file).read_text()
    icy = "Discharge water shall not create any icy condition on any pedestrian walkways"
    assert _norm(icy) in _norm(text)
    assert _norm(icy) not in _sections(file, text)["(c)(2)b"]
    assert _norm(icy) in _sections(file, text)["(c)(2)c"]
