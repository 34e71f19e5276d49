"""Installation audit: each failed requirement with the citation it breaks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gateway.registry.models import load_registry
from gateway.rules.audit import AuditItem, audit_site, audit_sites
from gateway.rules.pack import RulePack, load_packs
from gateway.rules.sequences import make_site
from gateway.settings import REPO_DIR


@pytest.fixture(scope="module")
def packs() -> dict[str, RulePack]:
    return load_packs()


def _audit(packs: dict[str, RulePack], jurisdiction: str, **inst: Any) -> dict[str, AuditItem]:
    site = make_site(jurisdiction=jurisdiction, **inst)
    return {i.requirement_id: i for i in audit_site(site, packs[jurisdiction])}


def test_three_quarter_inch_hose_six_feet_from_the_line_fails_three_requirements(
    packs: dict[str, RulePack],
) -> None:
    items = _audit(
        packs,
        "edgar",
        destination="grade",
        pipe_inside_diameter_in=0.75,
        pipe_rigid=False,
        outlet_to_foundation_ft=3,
        outlet_to_property_line_ft=6,
    )
    fails = {k for k, i in items.items() if i.status == "fail"}
    assert fails == {"rigid_line", "pipe_min_diameter", "property_line_setback"}
    assert items["pipe_min_diameter"].message == (
        "The discharge line is 0.75 in inside diameter; the minimum is 1 in."
    )
    assert str(items["property_line_setback"].citations[0]) == "000_86c7187f3bed6ca5.txt §(c)(2)b"
    assert items["property_line_setback"].actual == 6
    assert items["property_line_setback"].expected == 10


def test_storm_connection_without_check_valve_fails_in_edgar_and_ord_1991_43(
    packs: dict[str, RulePack],
) -> None:
    inst = {"destination": "storm_lateral", "storm_sewer_available": True, "check_valve": False,
            "air_gap": True, "union_coupling": True}  # fmt: skip
    edgar = _audit(packs, "edgar", **inst)
    assert edgar["storm_check_valve"].status == "fail"
    assert edgar["storm_check_valve"].citations[0].section == "(c)(2)b"
    assert "storm_check_valve_height" not in edgar  # no valve: its height is moot
    storm = _audit(packs, "storm-ord-1991-43", **inst)
    assert storm["storm_check_valve"].status == "fail"
    assert storm["storm_check_valve"].citations[0].section == "(b)(5)"


def test_storm_connection_needs_air_gap_and_union_in_edgar(packs: dict[str, RulePack]) -> None:
    items = _audit(packs, "edgar", destination="storm_lateral", storm_sewer_available=True,
                   check_valve_height_ft=1.5)  # fmt: skip
    assert {"storm_air_gap", "storm_union", "storm_check_valve_height"} <= set(items)
    assert items["storm_check_valve_height"].message.startswith(
        "The check valve sits 1.5 ft above the floor"
    )


def test_available_storm_sewer_makes_the_connection_mandatory_in_edgar(
    packs: dict[str, RulePack],
) -> None:
    items = _audit(packs, "edgar", destination="grade", storm_sewer_available=True,
                   outlet_to_foundation_ft=3, outlet_to_property_line_ft=20)  # fmt: skip
    assert items["storm_connection_mandatory"].status == "fail"
    assert items["storm_connection_mandatory"].citations[0].section == "(e)(1)a"


def test_a_compliant_grade_discharge_fails_nothing(packs: dict[str, RulePack]) -> None:
    items = _audit(packs, "edgar", destination="grade", outlet_to_foundation_ft=4,
                   outlet_to_property_line_ft=18, outlet_to_walkway_ft=30,
                   outlet_to_right_of_way_ft=40, pit_to_floor_drain_ft=15)  # fmt: skip
    assert items == {}


def test_sanitary_destination_fails_where_forbidden_and_is_advice_elsewhere(
    packs: dict[str, RulePack],
) -> None:
    assert _audit(packs, "edgar", destination="sanitary")["no_sanitary_destination"].status == (
        "fail"
    )
    law = _audit(packs, "local-law-6-2024", destination="sanitary")
    assert law["no_sanitary_destination"].citations[0].section == "E"
    ord247 = _audit(packs, "sewer-ord-247", destination="sanitary")
    assert [i.status for i in ord247.values()] == ["advisory"]
    storm = _audit(packs, "storm-ord-1991-43", destination="sanitary")
    assert storm["sanitary_destination"].status == "advisory"


def test_local_law_requires_swale_or_storm_sewer_for_new_discharges(
    packs: dict[str, RulePack],
) -> None:
    items = _audit(packs, "local-law-6-2024", destination="grade", outlet_to_property_line_ft=20,
                   outlet_to_right_of_way_ft=30, outlet_to_walkway_ft=30)  # fmt: skip
    assert items["swale_or_storm_sewer"].status == "fail"
    assert items["swale_or_storm_sewer"].citations[0].section == "B"


def test_discharge_existing_before_2024_is_grandfathered_under_local_law(
    packs: dict[str, RulePack],
) -> None:
    items = _audit(packs, "local-law-6-2024", destination="grade", outlet_to_property_line_ft=12,
                   outlet_to_right_of_way_ft=0, outlet_to_walkway_ft=5,
                   discharge_existing_since="2019-05-01")  # fmt: skip
    assert "swale_or_storm_sewer" not in items
    assert "no_point_discharge_on_row" not in items
    assert items["row_10ft_may_be_required"].status == "advisory"
    newer = _audit(packs, "local-law-6-2024", destination="grade", outlet_to_property_line_ft=12,
                   outlet_to_right_of_way_ft=0, outlet_to_walkway_ft=5,
                   discharge_existing_since="2024-03-01")  # fmt: skip
    assert newer["no_point_discharge_on_row"].status == "fail"
    assert newer["no_point_discharge_on_row"].citations[0].section == "A"


def test_unrecorded_value_is_reported_as_unknown(packs: dict[str, RulePack]) -> None:
    items = _audit(packs, "edgar", destination="grade")
    assert items["foundation_setback"].status == "unknown"
    assert "not recorded" in items["foundation_setback"].message


def test_demo_registry_audit_flags_oak_7(packs: dict[str, RulePack]) -> None:
    registry = load_registry(REPO_DIR / "deploy" / "sites.example.toml")
    items = audit_sites(registry, packs)
    failing = {i.site_id for i in items if i.status == "fail"}
    assert "oak-7" in failing
    assert "elm-12" not in failing


def test_site_in_unknown_jurisdiction_is_one_unknown_item(packs: dict[str, RulePack]) -> None:
    (item,) = audit_sites([make_site(jurisdiction="atlantis")], packs)
    assert (item.status, item.requirement_id) == ("unknown", "rule_pack")


def test_audit_of_a_pack_added_as_a_file(tmp_path: Path) -> None:
    extra = tmp_path / "packs"
    extra.mkdir()
    (extra / "new-town.toml").write_text(
        'id = "new-town"\nname = "T"\nfile = "x.txt"\n[season]\ndefined = false\n'
        '[pipe.min_id_in]\nvalue = 1.5\nunit = "in"\n'
        'cite = { file = "x.txt", section = "(9)", quote = "1.5 in" }\n'
        '[[requirements]]\nid = "pipe"\nfield = "pipe_inside_diameter_in"\ncheck = "min"\n'
        'number = "pipe.min_id_in"\nmessage = "{actual} in < {expected} in"\n'
    )
    packs = load_packs(extra)
    (item,) = audit_site(make_site(jurisdiction="new-town"), packs["new-town"])
    assert item.message == "1.25 in < 1.5 in"
    assert str(item.citations[0]) == "x.txt §(9)"
