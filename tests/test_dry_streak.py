"""The streak of cycles without a flowing reading, against the site's catch rate."""

from __future__ import annotations

from gateway.rules.detectors.dry_streak import LOCK_FACTOR, MIN_CAUGHT, DryStreak, wilson_low

#: Phases (share of the outlet interval) where a healthy outlet is caught / missed.
FLOWING, BEFORE_THE_WATER = 0.3, 0.85


def _clean_history(streak: DryStreak, cycles: int) -> None:
    """Clean cycles: samples sweep the phases, caught below 0.6."""
    for i in range(cycles):
        phase = (i * 0.37) % 1.0
        streak.observe(phase < 0.6, phase)


def _misses(streak: DryStreak, n: int, phase: float | None = None) -> None:
    for i in range(n):
        streak.observe(False, (i * 0.37) % 1.0 if phase is None else phase)


def test_nothing_is_evidence_until_enough_clean_cycles_were_caught() -> None:
    streak = DryStreak()
    _clean_history(streak, MIN_CAUGHT)
    assert streak.catch_rate(FLOWING) is None
    _misses(streak, 200)
    assert not streak.improbable()


def test_each_phases_catch_rate_is_taken_at_its_lower_bound() -> None:
    streak = DryStreak()
    _clean_history(streak, 400)
    flowing = streak.catch_rate(FLOWING)
    assert flowing is not None
    assert 0.85 < flowing < 1.0
    assert streak.catch_rate(BEFORE_THE_WATER) == 0.0


def test_the_wilson_bound_of_ten_of_ten_is_well_under_one() -> None:
    assert 0.6 < wilson_low(10, 10) < 0.8


def test_a_streak_of_misses_across_the_phases_after_a_clean_history_is_evidence() -> None:
    streak = DryStreak()
    _clean_history(streak, 400)
    _misses(streak, 60)
    assert streak.improbable()


def test_misses_at_a_phase_clean_cycles_also_miss_are_no_evidence() -> None:
    # Phase lock: the pump's period sits on a multiple of the node's interval and
    # every sample falls just before the water reaches the outlet.
    streak = DryStreak()
    _clean_history(streak, 400)
    _misses(streak, 200, phase=BEFORE_THE_WATER)
    assert not streak.improbable()


def test_a_streak_no_longer_than_the_clean_history_allows_is_no_evidence() -> None:
    # The clean history once showed 40 misses in a row before a catch.
    streak = DryStreak()
    _clean_history(streak, 400)
    streak.observe(True, FLOWING)  # the history's last streak ends here
    _misses(streak, 40, phase=BEFORE_THE_WATER)
    streak.observe(True, FLOWING)
    _misses(streak, LOCK_FACTOR * 40)
    assert not streak.improbable()
    _misses(streak, 1)
    assert streak.improbable()


def test_a_streak_through_a_block_that_looked_diverted_never_becomes_normal() -> None:
    # A diversion's misses end with a catch once the hose is gone: the streak must
    # not teach the site that such streaks are normal.
    # Its misses here fall where clean cycles miss too, so only the block's verdict
    # can mark them as a diversion's.
    streak = DryStreak()
    _clean_history(streak, 400)
    _misses(streak, 40, phase=BEFORE_THE_WATER)
    streak.taint()  # a block closed looking diverted
    streak.observe(True, FLOWING)
    _misses(streak, 60)
    assert streak.improbable()


def test_a_streak_that_became_evidence_never_becomes_normal() -> None:
    # A night-only hose: the night's streak grows improbable, the morning's first
    # run is caught; the next night must be found as fast.
    streak = DryStreak()
    _clean_history(streak, 400)
    _misses(streak, 60)
    assert streak.improbable()
    streak.observe(True, FLOWING)
    _misses(streak, 60)
    assert streak.improbable()


def test_clean_cycles_teach_the_catch_rate_as_they_come() -> None:
    # No block needs to calibrate first: a sparse site closes few, and a site with a
    # few hours of history must still weigh a miss.
    streak = DryStreak()
    for _ in range(MIN_CAUGHT):
        streak.observe(True, FLOWING)
    rate = streak.catch_rate(FLOWING)
    assert rate is not None and rate > 0.5


def test_a_seldom_seen_phase_borrows_its_neighbours_rate() -> None:
    streak = DryStreak()
    for _ in range(MIN_CAUGHT):
        streak.observe(True, 0.35)  # bin 3 only
    streak.observe(True, 0.25)  # bin 2: one cycle, caught
    streak.observe(False, 0.55)  # bin 5: one cycle, missed
    streak.observe(True, 0.35)
    borrowed = streak.catch_rate(0.25)
    assert borrowed is not None and borrowed > 0.5
    assert streak.catch_rate(0.55) == 0.0  # its own cycle missed: no rate above that
    assert streak.catch_rate(0.95) == 0.0  # no neighbour within reach was seen


def test_a_line_not_held_full_breaks_the_streak() -> None:
    streak = DryStreak()
    _clean_history(streak, 400)
    _misses(streak, 60)
    streak.break_streak()
    assert streak.streak == 0
    assert not streak.improbable()
