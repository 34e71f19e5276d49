"""Issue 20 items 3, 6 and 8 without a browser: citations by the ordinance's name,
evidence and installation records in words, the pit's rise rate and time to the rim."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from gateway.contract import NodeKind
from gateway.domain import Citation, Reading
from gateway.registry.models import DischargeDestination, Installation, load_registry
from gateway.rules.pack import load_packs
from gateway.settings import REPO_DIR
from gateway.web import wording
from gateway.web.views import citation_view, is_overflowing, rise_rate, trend_text

SITES = load_registry(REPO_DIR / "deploy" / "sites.example.toml")
ELM = SITES.require("elm-16")
NOW = datetime(2026, 11, 30, 21, 0, tzinfo=UTC)


def test_a_citation_names_the_ordinance_and_section_not_its_file() -> None:
    pack = load_packs()["edgar"]
    view = citation_view(Citation(pack.file, "(e)(1)b", "between the dates ..."), pack)
    assert view.text == "Village of Edgar Sump Pump Ordinance §(e)(1)b"
    assert ".txt" not in view.text
    assert view.quote == "between the dates ..."


def test_every_pack_has_a_display_name_for_its_citations() -> None:
    for pack in load_packs().values():
        assert pack.display_name, pack.id
        assert pack.title == pack.display_name


def test_evidence_reads_in_words_units_and_the_sites_time_zone() -> None:
    words = dict(
        wording.evidence(
            {
                "outlet_volume_l": 37.85,
                "evidence_log10": 2.0,
                "above_since": "2026-11-30T20:05:00Z",
                "running_for_s": 750,
                "pipe_rigid": False,
            },
            ELM,
            "us",
        )
    )
    assert words["Water measured at the outlet"] == "10 gal"
    assert words["Weight of the evidence"] == "about 1 in 100 that this is chance"
    assert words["Above the alarm mark since"] == "Nov 30, 2:05 PM CST"
    assert words["Pump running for"] == "12 min"
    assert words["Pipe rigid"] == "no"
    assert not any("_" in label or "log10" in label for label in words)


def test_a_silent_sensor_is_named_by_kind_and_id() -> None:
    evidence = {
        "nodes": [
            {
                "node_id": "pit",
                "kind": "pit",
                "status": "silent",
                "last_heard": "2026-11-30T20:50:00Z",
                "silent_for_s": 600,
            }
        ]
    }
    assert wording.silent_sensors(evidence) == "the pit sensor (pit)"
    (label, words), *_ = wording.evidence(evidence, ELM, "us")
    assert label == "The pit sensor (pit)"
    assert words == "stopped reporting, silent for 10 min, last message Nov 30, 2:50 PM CST"


def test_the_installation_record_is_in_one_unit_system_and_says_not_recorded() -> None:
    inst = Installation(
        destination=DischargeDestination.GRADE,
        pipe_rigid=False,
        outlet_to_property_line_ft=10,
        line_length_m=6.096,
    )
    us = dict(wording.installation_facts(inst, "us"))
    metric = dict(wording.installation_facts(inst, "metric"))
    assert us["Rigid discharge pipe"] == "no"
    assert us["Outlet to the property line"] == "10 ft"
    assert us["Discharge line length"] == "20 ft"
    assert metric["Discharge line length"] == "6.1 m"
    assert metric["Outlet to the property line"] == "3.0 m"
    assert us["Check valve"] == "not recorded"


def _pit(level_cm: float, seconds_ago: float) -> Reading:
    ts = NOW - timedelta(seconds=seconds_ago)
    return Reading(
        site_id="elm-16",
        node_id="pit",
        kind=NodeKind.PIT,
        ts=ts,
        received_at=ts,
        seq=0,
        boot="b",
        values={"level_cm": level_cm, "pump_on": False},
    )


def test_rising_water_tells_its_rate_and_the_time_to_the_rim() -> None:
    # 1 cm a minute for five minutes, 20 cm below the rim: 20 minutes left.
    level = ELM.pit.depth_cm - 20
    rows = [_pit(level - 5 + i / 6, 300 - i * 10) for i in range(31)]
    rate = rise_rate(rows, NOW)
    assert rate is not None and abs(rate - 1.0) < 0.01
    assert trend_text(ELM, level, rate, "metric") == "Rising 1 cm/min: at the rim in about 20 min"


def test_a_pit_filling_below_the_pump_on_mark_is_not_news() -> None:
    level = ELM.pit.pump_on_cm - 5
    assert trend_text(ELM, level, 1.0, "us") == ""


def test_a_steady_pit_has_no_trend_and_a_full_one_overflows() -> None:
    rows = [_pit(20.0, 300 - i * 10) for i in range(31)]
    assert trend_text(ELM, 20.0, rise_rate(rows, NOW), "us") == ""
    assert not is_overflowing(ELM, ELM.pit.alarm_cm)
    assert is_overflowing(ELM, ELM.pit.depth_cm)
