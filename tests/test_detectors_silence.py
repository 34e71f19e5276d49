"""Sensor silence: no message for silence_factor x interval, or status offline."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from gateway.contract import NodeKind
from gateway.domain import FindingChange, StatusChange
from gateway.rules.sequences import engine_for, make_site, reading

T0 = datetime(2026, 11, 20, 6, tzinfo=UTC)


def _pit(site_id: str, at: datetime):  # type: ignore[no-untyped-def]
    return reading(site_id, "pit", NodeKind.PIT, at, level_cm=25.0, pump_on=False)


def _all_nodes(engine, site_id: str, at: datetime) -> None:  # type: ignore[no-untyped-def]
    engine.on_reading(_pit(site_id, at))
    engine.on_reading(
        reading(site_id, "outlet", NodeKind.DISCHARGE, at, flow_lpm=0.0, pressure_kpa=0.0,
                pipe_temp_c=5.0)
    )  # fmt: skip
    engine.on_reading(reading(site_id, "air", NodeKind.AIR, at, air_temp_c=3.0))


def test_node_silent_for_the_factor_times_its_interval_opens_once() -> None:
    site = make_site("s1", pit_interval_s=10)
    engine = engine_for(site, silence_factor=6)
    _all_nodes(engine, "s1", T0)
    assert engine.tick(T0 + timedelta(seconds=59)) == []
    events = engine.tick(T0 + timedelta(seconds=61))
    assert [e.change for e in events] == [FindingChange.OPENED]
    f = events[0].finding
    assert f.rule_id == "sensor_silent"
    assert [n["node_id"] for n in f.evidence["nodes"]] == ["pit", "outlet"]
    assert engine.tick(T0 + timedelta(seconds=70)) == []  # held, not re-raised


def test_a_reading_clears_silence_once_every_node_reports() -> None:
    site = make_site("s1")
    engine = engine_for(site)
    _all_nodes(engine, "s1", T0)
    engine.tick(T0 + timedelta(seconds=120))
    later = T0 + timedelta(seconds=125)
    assert engine.on_reading(_pit("s1", later)) == []  # the outlet is still silent
    events = engine.on_reading(
        reading("s1", "outlet", NodeKind.DISCHARGE, later, flow_lpm=0.0, pressure_kpa=0.0,
                pipe_temp_c=5.0)
    )  # fmt: skip
    assert [e.change for e in events] == [FindingChange.CLEARED]


def test_offline_status_opens_at_once_and_online_plus_data_clears() -> None:
    site = make_site("s1")
    engine = engine_for(site)
    _all_nodes(engine, "s1", T0)
    events = engine.on_status(StatusChange("s1", "pit", False, T0 + timedelta(seconds=5)))
    assert [e.change for e in events] == [FindingChange.OPENED]
    assert events[0].finding.level == "offline"
    assert events[0].finding.evidence["nodes"][0]["status"] == "offline"
    back = engine.on_status(StatusChange("s1", "pit", True, T0 + timedelta(seconds=8)))
    assert [e.change for e in back] == [FindingChange.CLEARED]


def test_refused_messages_still_show_the_node_is_alive() -> None:
    site = make_site("s1")
    engine = engine_for(site)
    _all_nodes(engine, "s1", T0)
    for s in range(10, 130, 10):
        at = T0 + timedelta(seconds=s)
        _all_nodes(engine, "s1", at)
        engine.on_heard("s1", "pit", at)  # e.g. a pit message dead-lettered: clock ahead
    silent_pit_data = T0 + timedelta(seconds=200)
    engine.on_heard("s1", "pit", silent_pit_data - timedelta(seconds=5))
    events = engine.tick(silent_pit_data)
    nodes = [n["node_id"] for e in events for n in e.finding.evidence["nodes"]]
    assert "pit" not in nodes and "outlet" in nodes


def test_never_heard_node_is_silent_after_the_factor_from_the_first_tick() -> None:
    site = make_site("s1")
    engine = engine_for(site)
    assert engine.tick(T0) == []
    events = engine.tick(T0 + timedelta(seconds=61))
    assert [n["node_id"] for n in events[0].finding.evidence["nodes"]] == ["pit", "outlet"]


def test_status_of_unknown_site_or_node_is_ignored() -> None:
    engine = engine_for(make_site("s1"))
    assert engine.on_status(StatusChange("nope", "pit", False, T0)) == []
    assert engine.on_status(StatusChange("s1", "nope", False, T0)) == []
