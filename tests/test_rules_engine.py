"""The engine's contract: one finding per site and rule, device time, restore."""

from __future__ import annotations

import tracemalloc
from datetime import UTC, datetime, timedelta

from gateway.contract import NodeKind
from gateway.domain import FindingChange, FindingEvent, Reading
from gateway.rules.engine import NodeLedger
from gateway.rules.sequences import (
    Faults,
    MiniSump,
    engine_for,
    feed,
    make_site,
    opened,
    reading,
)
from gateway.rules.thresholds import IDENTITIES_KEPT

START = datetime(2026, 6, 1, tzinfo=UTC)


def _dead_pump_run(hours: float = 3):  # type: ignore[no-untyped-def]
    site = make_site()
    return site, MiniSump(site, START, faults=Faults(pump_dead=True)).run(int(hours * 3600))


def test_condition_that_holds_for_hours_is_one_finding_updated_sparingly() -> None:
    site, readings = _dead_pump_run(hours=3)
    events = [e for e in feed(engine_for(site), readings) if e.finding.rule_id == "high_water"]
    assert [e.change for e in events].count(FindingChange.OPENED) == 1
    updates = [e for e in events if e.change is FindingChange.UPDATED]
    assert len(updates) <= 3 * 4 + 1  # at most every 15 min of data time
    assert len({e.finding.id for e in events}) == 1


def test_findings_carry_device_time_not_arrival_time() -> None:
    site = make_site()
    engine = engine_for(site)
    late_arrival = START + timedelta(days=2)
    evs = []
    for i in range(3):
        ts = START + timedelta(seconds=10 * i)
        r = reading(site.id, "pit", NodeKind.PIT, ts, level_cm=60.0, pump_on=False)
        evs += engine.on_reading(
            type(r)(r.site_id, r.node_id, r.kind, r.ts, r.seq, r.boot, r.values, late_arrival)
        )
    (f,) = opened(evs)
    assert f.opened_at == START + timedelta(seconds=10)


def test_readings_of_unknown_sites_are_ignored() -> None:
    engine = engine_for(make_site("known"))
    r = reading("stranger", "pit", NodeKind.PIT, START, level_cm=70.0, pump_on=False)
    assert engine.on_reading(r) == []
    assert engine.tick(START) == []  # only known sites are watched


def test_reading_not_newer_than_the_last_is_ignored() -> None:
    site = make_site()
    engine = engine_for(site)
    high = {"level_cm": 60.0, "pump_on": False}
    engine.on_reading(reading(site.id, "pit", NodeKind.PIT, START, **high))  # type: ignore[arg-type]
    # The same timestamp again, then an older one: neither counts as a second sample.
    engine.on_reading(reading(site.id, "pit", NodeKind.PIT, START, **high))  # type: ignore[arg-type]
    older = START - timedelta(seconds=5)
    assert engine.on_reading(reading(site.id, "pit", NodeKind.PIT, older, **high)) == []  # type: ignore[arg-type]
    newer = START + timedelta(seconds=10)
    assert opened(engine.on_reading(reading(site.id, "pit", NodeKind.PIT, newer, **high)))  # type: ignore[arg-type]


def test_restored_open_finding_is_continued_not_reraised() -> None:
    site, readings = _dead_pump_run(hours=2)
    first = engine_for(site)
    before = feed(first, readings[: len(readings) // 2])
    (f,) = opened(before, "high_water")
    second = engine_for(site)  # the gateway restarted
    second.restore(first.open_findings())
    after = feed(second, readings[len(readings) // 2 :])
    assert opened(after) == []
    assert {e.finding.id for e in after if e.finding.rule_id == "high_water"} <= {f.id}


def test_restored_finding_clears_with_its_own_id_when_the_condition_ended() -> None:
    site, readings = _dead_pump_run(hours=1)
    first = engine_for(site)
    (f,) = opened(feed(first, readings), "high_water")
    second = engine_for(site)
    second.restore(first.open_findings())
    healthy = MiniSump(site, readings[-1].ts + timedelta(seconds=1), level_cm=20.0)
    events = feed(second, healthy.run(600))
    cleared = [
        e.finding
        for e in events
        if e.change is FindingChange.CLEARED and e.finding.rule_id == "high_water"
    ]
    assert [c.id for c in cleared] == [f.id]
    assert cleared[0].cleared_at is not None and cleared[0].opened_at == f.opened_at


def _icing_finding(start: datetime, air_c: float):  # type: ignore[no-untyped-def]
    site = make_site(destination="grade", outlet_to_walkway_ft=6, outlet_to_right_of_way_ft=30)
    sim = MiniSump(site, start, air_c=air_c, inflow_lpm=6.0)
    (finding,) = opened(feed(engine_for(site), sim.run(3 * 3600)), "icing_risk")
    return finding


def test_a_finding_cites_only_the_sections_in_force_on_the_day_it_opens() -> None:
    # Edgar (e)(1)b governs "between November 15 and April 15"; (c)(2)c all year.
    april_frost = _icing_finding(datetime(2026, 4, 28, 8, tzinfo=UTC), air_c=-2.0)
    assert [c.section for c in april_frost.citations] == ["(c)(2)c"]
    january = _icing_finding(datetime(2027, 1, 10, 12, tzinfo=UTC), air_c=-6.0)
    assert [c.section for c in january.citations] == ["(c)(2)c", "(e)(1)b"]


def test_the_icing_distance_is_reported_as_a_default_where_the_text_gives_none() -> None:
    # Edgar (c)(2)c forbids "any icy condition" but sets no distance: 10 ft is ours.
    finding = _icing_finding(datetime(2027, 1, 10, 12, tzinfo=UTC), air_c=-6.0)
    assert finding.evidence["pack_distance_is_default"] is True


# -- a batch of readings (the pipeline's, one socket read's worth) ---------------------


def _summary(events: list[FindingEvent]) -> list[tuple[object, ...]]:
    """Events without their random finding ids."""
    return [
        (e.change, e.finding.rule_id, e.finding.level, e.finding.severity, e.finding.updated_at)
        for e in events
    ]


def test_a_batch_of_readings_is_judged_as_reading_by_reading() -> None:
    site, readings = _dead_pump_run(hours=2)
    one_by_one = feed(engine_for(site), readings)
    batched = engine_for(site)
    events = []
    for i in range(0, len(readings), 500):
        events += batched.on_readings(readings[i : i + 500])
    assert opened(one_by_one, "high_water")
    assert _summary(events) == _summary(one_by_one)


def test_a_silent_site_heard_again_in_a_batch_clears_once_at_its_last_arrival() -> None:
    site = make_site()
    engine = engine_for(site)
    engine.tick(START)
    (silent,) = opened(engine.tick(START + timedelta(hours=1)), "sensor_silent")
    back = START + timedelta(hours=1, seconds=5)
    values = {"pit": {"level_cm": 20.0, "pump_on": False}, "air": {"air_temp_c": 5.0}}
    values["outlet"] = {"flow_lpm": 0.0, "pressure_kpa": 0.0, "pipe_temp_c": 5.0}
    kinds = {"pit": NodeKind.PIT, "outlet": NodeKind.DISCHARGE, "air": NodeKind.AIR}
    batch = [
        reading(site.id, node, kinds[node], back + timedelta(seconds=i), **values[node])
        for i, node in enumerate(["air", "outlet", "pit", "pit"])
    ]
    events = [e for e in engine.on_readings(batch) if e.finding.rule_id == "sensor_silent"]
    assert [(e.change, e.finding.id) for e in events] == [(FindingChange.CLEARED, silent.id)]
    assert events[0].finding.cleared_at == batch[-1].received_at


def test_a_detector_failing_on_one_site_leaves_the_rest_of_the_batch_judged() -> None:
    broken, sound = make_site("broken"), make_site("sound")
    engine = engine_for(broken, sound)

    def fail(*_args: object) -> None:
        raise RuntimeError("detector bug")

    engine._monitor("broken").detectors()["high_water"].feed = fail  # type: ignore[union-attr,method-assign]
    high = {"level_cm": 60.0, "pump_on": False}
    batch = [
        reading(s.id, "pit", NodeKind.PIT, START + timedelta(seconds=10 * i), **high)
        for i in range(3)
        for s in (broken, sound)
    ]
    assert [f.site_id for f in opened(engine.on_readings(batch), "high_water")] == ["sound"]


# -- the node ledger: redeliveries told apart in bounded memory ------------------------


def _pit_at(seq: int, boot: str = "b1") -> Reading:
    ts = START + timedelta(seconds=5 * seq)
    return Reading("test-1", "pit", NodeKind.PIT, ts, seq, boot, {"level_cm": 20.0}, ts)


def test_a_redelivery_within_the_window_is_a_duplicate_and_a_new_number_is_not() -> None:
    ledger = NodeLedger()
    assert [ledger.is_duplicate(_pit_at(s)) for s in (0, 1, 2, 1, 0, 3)] == [
        False,
        False,
        False,
        True,
        True,
        False,
    ]


def test_a_number_missed_then_arriving_late_is_new_once() -> None:
    ledger = NodeLedger()
    for s in (0, 1, 3, 4):
        ledger.is_duplicate(_pit_at(s))
    assert ledger.is_duplicate(_pit_at(2)) is False
    assert ledger.is_duplicate(_pit_at(2)) is True


def test_a_rebooted_node_restarting_its_numbers_is_not_a_redelivery() -> None:
    ledger = NodeLedger()
    for s in range(10):
        ledger.is_duplicate(_pit_at(s, "first"))
    assert ledger.is_duplicate(_pit_at(0, "second")) is False
    assert ledger.is_duplicate(_pit_at(9, "first")) is True  # the old boot is still known


def test_a_number_older_than_the_window_is_not_taken_for_a_redelivery() -> None:
    ledger = NodeLedger()
    for s in range(IDENTITIES_KEPT + 10):
        ledger.is_duplicate(_pit_at(s))
    assert ledger.is_duplicate(_pit_at(5)) is False  # judged late by the engine instead


def test_a_nodes_ledger_stays_small_however_many_messages_it_saw() -> None:
    # A set of (boot, seq) tuples with their order took ~500 kB a node once full.
    ledger = NodeLedger()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for s in range(3 * IDENTITIES_KEPT):
        ledger.is_duplicate(_pit_at(s))
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    assert after - before < 4096


def test_a_jump_in_numbers_does_not_grow_the_window() -> None:
    ledger = NodeLedger()
    ledger.is_duplicate(_pit_at(0))
    assert ledger.is_duplicate(_pit_at(2**32 - 1)) is False
    assert ledger.is_duplicate(_pit_at(2**32 - 1)) is True
