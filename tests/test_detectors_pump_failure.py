"""Pump failure on hand-built sequences: runs without draining, never starts,
switched on without current. High water stays its own finding."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from gateway.domain import FindingChange, FindingEvent, Severity
from gateway.rules.sequences import Faults, MiniSump, engine_for, feed, make_site, opened
from tests.test_detectors_sweep import Case, random_house, run_case

SUMMER = datetime(2026, 7, 1, tzinfo=UTC)
WINTER = datetime(2027, 1, 12, tzinfo=UTC)


def _healthy_then(faults: Faults, start: datetime = SUMMER, **kw: object) -> list[FindingEvent]:
    """An hour of normal cycles (the site's drain rate is learned), then the fault."""
    site = make_site()
    sim = MiniSump(site, start, noise=0.5, **kw)  # type: ignore[arg-type]
    engine = engine_for(site)
    events = feed(engine, sim.run(3600))
    assert opened(events) == []
    sim.faults = faults
    return feed(engine, sim.run(2 * 3600))


def test_pump_that_runs_without_draining_in_warm_weather_is_a_pump_failure() -> None:
    events = _healthy_then(Faults(pump_no_water=True))
    (f,) = opened(events, "pump_failure")
    assert f.severity is Severity.CRITICAL
    assert f.evidence["cause"] == "pump runs but the pit does not drain"
    assert opened(events, "frozen_line") == []


def test_level_above_the_on_mark_without_a_start_is_a_pump_failure() -> None:
    events = _healthy_then(Faults(pump_dead=True))
    (f,) = opened(events, "pump_failure")
    assert f.evidence["cause"] == "water above the on mark and the pump does not start"
    assert opened(events, "high_water")  # the homeowner-critical finding stays separate


def test_pump_switched_on_without_current_is_a_pump_failure() -> None:
    events = _healthy_then(Faults(no_current=True), report_current=True)
    (f,) = opened(events, "pump_failure")
    assert f.evidence["cause"] == "pump switched on but draws no current"


def test_the_same_stalled_run_in_frost_is_a_frozen_line_not_a_pump_failure() -> None:
    events = _healthy_then(Faults(frozen=True), start=WINTER, pipe_c=-3.0, air_c=-10.0)
    assert opened(events, "frozen_line")
    assert opened(events, "pump_failure") == []


def test_a_storm_the_pump_barely_keeps_up_with_is_no_pump_failure() -> None:
    site = make_site()
    sim = MiniSump(site, SUMMER, noise=0.5, inflow_lpm=8.0)
    engine = engine_for(site)
    events = feed(engine, sim.run(3600))
    sim.inflow_lpm = 140.0  # the pump moves 150: long runs, the level barely falls
    events += feed(engine, sim.run(2 * 3600))
    assert opened(events, "pump_failure") == []


def test_registered_on_mark_a_few_cm_low_is_no_pump_failure() -> None:
    # The float really starts the pump 4 cm above the registered mark.
    site = make_site(pit={"pump_on_cm": 36.0})
    from gateway.registry.models import PitConfig

    sim = MiniSump(site, SUMMER, noise=0.5, true_pit=PitConfig(pump_on_cm=40.0))
    assert opened(feed(engine_for(site), sim.run(6 * 3600))) == []


def test_pump_failure_clears_once_the_pump_drains_the_pit_again() -> None:
    site = make_site()
    sim = MiniSump(site, SUMMER, noise=0.5)
    engine = engine_for(site)
    feed(engine, sim.run(3600))
    sim.faults = Faults(pump_no_water=True)
    assert opened(feed(engine, sim.run(1800)), "pump_failure")
    sim.faults = Faults()
    later = feed(engine, sim.run(1800))
    cleared = [e.finding.rule_id for e in later if e.change is FindingChange.CLEARED]
    assert "pump_failure" in cleared


def test_in_frost_a_stalled_motor_without_current_is_the_pump_not_ice() -> None:
    # A pump pushing against ice turns and draws most of its running current; one
    # that draws nothing moves nothing, whatever the weather.
    events = _healthy_then(
        Faults(no_current=True), start=WINTER, pipe_c=-3.0, air_c=-10.0, report_current=True
    )
    assert opened(events, "pump_failure")
    assert opened(events, "frozen_line") == []


def test_in_frost_a_stall_drawing_its_dead_head_current_is_ice() -> None:
    # The same stall with the motor loaded (a plug: shut-off head) stays a frozen line.
    events = _healthy_then(
        Faults(frozen=True), start=WINTER, pipe_c=-3.0, air_c=-10.0, report_current=True
    )
    assert opened(events, "frozen_line")
    assert opened(events, "pump_failure") == []


def test_a_stall_begun_in_warm_weather_stays_a_pump_failure_when_frost_comes() -> None:
    # A broken impeller stalls the pump on a mild night; the still line then cools
    # to freezing. Ice forming in a dead line does not explain the stall.
    site = make_site()
    sim = MiniSump(site, WINTER, noise=0.5, pipe_c=5.0, air_c=5.0, report_current=True)
    engine = engine_for(site)
    feed(engine, sim.run(3600))
    sim.faults = Faults(pump_no_water=True)
    events = feed(engine, sim.run(1200))
    assert opened(events, "pump_failure")
    sim.pipe_c, sim.air_c = -3.0, -10.0
    events += feed(engine, sim.run(3600))
    assert opened(events, "frozen_line") == []


def test_one_warm_pipe_reading_in_a_frozen_stall_is_not_a_pump_failure() -> None:
    # Ice does not melt with one reading of the pipe wall above +1 C.
    site = make_site()
    sim = MiniSump(site, WINTER, noise=0.5, pipe_c=-3.0, air_c=-10.0)
    engine = engine_for(site)
    feed(engine, sim.run(3600))
    sim.faults = Faults(frozen=True)
    events = feed(engine, sim.run(600))
    assert opened(events, "frozen_line")
    sim.pipe_c = 2.0
    events += feed(engine, sim.run(11))
    sim.pipe_c = -3.0
    events += feed(engine, sim.run(1800))
    assert opened(events, "pump_failure") == []


@pytest.mark.parametrize("winter", [False, True], ids=["summer", "frost"])
@pytest.mark.parametrize("seed", [4, 14])
def test_a_failed_valve_returning_more_than_the_band_is_neither_a_stall_nor_ice(
    seed: int, winter: bool
) -> None:
    # Randomised houses 4 and 14 of tests/test_detectors_sweep.py: 26-32 L lines on
    # 42 and 39 cm pits, so a failed check valve returns 22-23 cm to a 17-20 cm band
    # and the pump restarts at once after every stop. A 10-15 s pit node sees the
    # pump on at nearly every sample while the level swings between the marks: the
    # pump moves water round, it is not stalled, and in frost that is no ice.
    case = Case("valve-failed", "short_cycling", Faults(check_valve_failed=True), winter=winter)
    outcome = run_case(random_house(seed), case)
    assert "pump_failure" not in outcome.opened
    assert "frozen_line" not in outcome.opened
