"""Frozen discharge line and freezing-walkway (icing) risk on hand-built sequences."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime

import pytest

from gateway.domain import FindingChange, Severity
from gateway.rules.sequences import Faults, MiniSump, engine_for, feed, make_site, opened

WINTER = datetime(2027, 1, 10, 12, tzinfo=UTC)
SUMMER = datetime(2026, 7, 10, 12, tzinfo=UTC)


def test_ice_plug_with_pump_pushing_is_a_frozen_line() -> None:
    site = make_site(destination="storm_lateral")
    sim = MiniSump(site, WINTER, faults=Faults(frozen=True), pipe_c=-4.0, air_c=-12.0)
    events = feed(engine_for(site), sim.run(1800))
    (f,) = opened(events, "frozen_line")
    assert f.severity is Severity.CRITICAL
    assert f.evidence["flow_lpm"] < 3 and f.evidence["pressure_kpa"] >= 15
    assert f.evidence["pipe_temp_c"] <= 0
    assert opened(events, "sanitary_discharge") == []


def test_frozen_line_needs_the_pipe_at_or_below_zero() -> None:
    site = make_site(destination="storm_lateral")
    sim = MiniSump(site, WINTER, faults=Faults(frozen=True), pipe_c=4.0)  # a clog, not ice
    assert opened(feed(engine_for(site), sim.run(1800)), "frozen_line") == []


def test_frozen_line_clears_when_water_flows_again() -> None:
    site = make_site(destination="storm_lateral")
    engine = engine_for(site)
    sim = MiniSump(site, WINTER, faults=Faults(frozen=True), pipe_c=-4.0, air_c=-12.0)
    feed(engine, sim.run(1800))
    sim.faults.frozen, sim.pipe_c = False, 1.0
    later = feed(engine, sim.run(1800))
    assert "frozen_line" in [e.finding.rule_id for e in later if e.change is FindingChange.CLEARED]


def _icing(site_kw: dict[str, object], start: datetime, air_c: float, hours: float = 3) -> list:  # type: ignore[type-arg]
    site = make_site(**site_kw)  # type: ignore[arg-type]
    sim = MiniSump(site, start, air_c=air_c, inflow_lpm=6.0)
    return feed(engine_for(site), sim.run(int(hours * 3600)))


NEAR = {"destination": "grade", "outlet_to_walkway_ft": 6, "outlet_to_right_of_way_ft": 30}


def test_freezing_air_near_a_walkway_is_a_warning_then_a_violation_in_edgar() -> None:
    events = _icing(NEAR, WINTER, air_c=-6.0)
    (f,) = opened(events, "icing_risk")
    assert f.level == "warning"
    assert [c.section for c in f.citations] == ["(c)(2)c", "(e)(1)b"]
    levels = [e.finding.level for e in events if e.finding.rule_id == "icing_risk"]
    assert levels[-1] == "violation"
    assert any("6 ft from the walkway" in r for r in events[-1].finding.evidence["reasons"])


def test_in_season_above_freezing_is_a_watch() -> None:
    (f,) = opened(_icing(NEAR, WINTER, air_c=3.0), "icing_risk")
    assert (f.level, f.severity) == ("watch", Severity.INFO)
    assert f.evidence["in_season"] is True


def test_summer_warm_air_is_no_risk() -> None:
    assert opened(_icing(NEAR, SUMMER, air_c=20.0), "icing_risk") == []


def test_frost_outside_the_season_still_counts() -> None:
    april_frost = datetime(2026, 4, 28, 8, tzinfo=UTC)
    (f,) = opened(_icing(NEAR, april_frost, air_c=-2.0), "icing_risk")
    assert f.level == "warning" and f.evidence["in_season"] is False


@pytest.mark.parametrize(
    "site_kw",
    [
        {"destination": "grade", "outlet_to_walkway_ft": 30, "outlet_to_right_of_way_ft": 40},
        {"destination": "storm_lateral", "outlet_to_walkway_ft": 3},
        {"destination": "grade"},  # distances unknown: cannot tell
    ],
)
def test_no_icing_risk_far_from_walks_or_piped_to_the_storm_sewer(
    site_kw: dict[str, object],
) -> None:
    assert opened(_icing(site_kw, WINTER, air_c=-6.0), "icing_risk") == []


def test_no_icing_risk_without_discharge() -> None:
    site = make_site(**NEAR)  # type: ignore[arg-type]
    sim = MiniSump(site, WINTER, air_c=-6.0, inflow_lpm=0.0, level_cm=20.0)
    assert opened(feed(engine_for(site), sim.run(3 * 3600)), "icing_risk") == []


def test_pack_without_icing_rule_never_calls_it_a_violation() -> None:
    kw = {**NEAR, "jurisdiction": "sewer-ord-247"}
    events = _icing(kw, WINTER, air_c=-6.0)
    levels = {e.finding.level for e in events if e.finding.rule_id == "icing_risk"}
    assert levels == {"warning"}
    f = opened(events, "icing_risk")[0]
    assert f.citations == () and f.evidence["pack_distance_is_default"] is True


def test_local_law_uses_its_default_season_marked_as_default() -> None:
    kw = {**NEAR, "jurisdiction": "local-law-6-2024"}
    (f,) = opened(_icing(kw, WINTER, air_c=3.0), "icing_risk")
    assert f.evidence["season"] == "Nov 15 - Apr 15 (default)"
    assert [c.section for c in f.citations] == ["H", "existing-discharge A(2)"]


# --- frozen line decided by the pit, icing without flapping (issue 14) -----------


def test_frozen_line_with_a_riser_tap_is_found_from_the_pit() -> None:
    site = make_site(destination="storm_lateral", outlet_node={"pressure_tap": "riser"})
    sim = MiniSump(
        site, WINTER, faults=Faults(frozen=True), pressure_tap="riser", pipe_c=-4.0, air_c=-12.0
    )
    events = feed(engine_for(site), sim.run(1800))
    (f,) = opened(events, "frozen_line")
    assert f.evidence["pit_level_cm"] >= f.evidence["level_at_run_start_cm"] - 3
    assert opened(events, "sanitary_discharge") == []


def test_a_line_blocked_in_july_is_not_ice() -> None:
    site = make_site(destination="storm_lateral")
    sim = MiniSump(site, SUMMER, faults=Faults(frozen=True), pipe_c=22.0, air_c=25.0)
    events = feed(engine_for(site), sim.run(1800))
    assert opened(events, "frozen_line") == []
    assert opened(events, "pump_failure")  # the pump moves no water: that is reported


def test_outlet_pressure_without_flow_while_the_pit_drains_is_not_a_frozen_line() -> None:
    # Riser tap, every litre to a floor drain, in frost: pressure and no flow, pit empties.
    site = make_site(destination="storm_lateral")
    sim = MiniSump(
        site, WINTER, faults=Faults(sanitary_share=1.0), pressure_tap="riser",
        pipe_c=-1.0, air_c=-6.0,
    )  # fmt: skip
    assert opened(feed(engine_for(site), sim.run(3 * 3600)), "frozen_line") == []


def test_icing_level_does_not_flap_with_air_noise_around_zero() -> None:
    site = make_site(**NEAR)  # type: ignore[arg-type]
    sim = MiniSump(site, WINTER, air_c=0.2, air_noise_c=0.6, inflow_lpm=6.0, seed=7)
    events = feed(engine_for(site), sim.run(12 * 3600))
    icing = [e for e in events if e.finding.rule_id == "icing_risk"]
    assert [e.change for e in icing].count(FindingChange.OPENED) == 1
    levels = [e.finding.level for e in icing]
    switches = sum(1 for a, b in itertools.pairwise(levels) if a != b)
    assert switches <= 2  # watch -> warning (-> violation), never back and forth


def test_icing_returns_to_watch_only_after_a_real_thaw() -> None:
    site = make_site(**NEAR)  # type: ignore[arg-type]
    engine = engine_for(site)
    sim = MiniSump(site, WINTER, air_c=-3.0, inflow_lpm=6.0)
    feed(engine, sim.run(3 * 3600))
    sim.air_c = 0.5  # above 0 but not a thaw
    brief = feed(engine, sim.run(3600))
    assert {e.finding.level for e in brief if e.finding.rule_id == "icing_risk"} <= {
        "warning",
        "violation",
    }
    sim.air_c = 4.0  # a real thaw
    later = feed(engine, sim.run(2 * 3600))
    assert [e.finding.level for e in later if e.finding.rule_id == "icing_risk"][-1] == "watch"


def test_water_pumped_out_that_the_outlet_meter_misses_still_counts_for_icing() -> None:
    # The outlet's meter reads nothing while the pit empties every cycle through a
    # good valve: what the line cannot hold left it (the pit's balance bounds it).
    site = make_site(**NEAR)  # type: ignore[arg-type]
    sim = MiniSump(site, WINTER, air_c=-5.0, inflow_lpm=6.0, faults=Faults(sanitary_share=1.0))
    (f,) = opened(feed(engine_for(site), sim.run(3 * 3600)), "icing_risk")
    assert f.level == "warning"
