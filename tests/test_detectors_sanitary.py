"""Sanitary-sewer discharge on hand-built sequences (pure, no services)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from gateway.domain import Audience, FindingChange, Reading, Severity
from gateway.registry.models import SiteConfig
from gateway.rules.sequences import Faults, MiniSump, engine_for, feed, make_site, opened

START = datetime(2026, 6, 1, tzinfo=UTC)


def _starts(readings: list[Reading], until: datetime) -> int:
    count, on = 0, False
    for r in readings:
        if r.node_id == "pit" and r.ts <= until:
            now = bool(r.values["pump_on"])
            count += now and not on
            on = now
    return count


def _run(site: SiteConfig, faults: Faults, hours: float = 4, **kw: object) -> list[Reading]:
    sim = MiniSump(site, START, faults=faults, noise=1.0, **kw)  # type: ignore[arg-type]
    return sim.run(int(hours * 3600))


def test_healthy_line_gives_no_finding() -> None:
    site = make_site(destination="grade")
    assert feed(engine_for(site), _run(site, Faults(), hours=8)) == []


@pytest.mark.parametrize(("pit_s", "outlet_s"), [(5, 5), (10, 10), (10, 30)])
def test_full_diversion_is_found_within_three_pump_cycles(pit_s: int, outlet_s: int) -> None:
    site = make_site(destination="grade", pit_interval_s=pit_s, outlet_interval_s=outlet_s)
    readings = _run(site, Faults(sanitary_share=1.0), outlet_offset_s=outlet_s // 2 + 1)
    (finding,) = opened(feed(engine_for(site), readings), "sanitary_discharge")
    assert _starts(readings, finding.opened_at) <= 3


def test_finding_cites_the_pack_and_goes_to_public_works() -> None:
    site = make_site(destination="grade")
    (f,) = opened(feed(engine_for(site), _run(site, Faults(sanitary_share=1.0))))
    assert f.severity is Severity.CRITICAL and f.level == "violation"
    assert [c.section for c in f.citations] == ["(b)", "(c)(1)"]
    assert f.audience == (Audience.HOMEOWNER, Audience.PUBLIC_WORKS)
    assert f.evidence["pit_volume_l"] > 20
    assert f.evidence["outlet_volume_l"] in (None, 0.0) or f.evidence["outlet_volume_l"] < 5
    assert "floor drain" in f.action and "30 days" in f.action


def test_where_the_text_does_not_forbid_it_the_finding_is_homeowner_advice() -> None:
    site = make_site(jurisdiction="sewer-ord-247", destination="grade")
    (f,) = opened(feed(engine_for(site), _run(site, Faults(sanitary_share=1.0))))
    assert f.citations == ()
    assert f.audience == (Audience.HOMEOWNER,)
    assert f.severity is Severity.WARNING
    assert "does not" in f.evidence["ordinance_note"]


def test_removing_the_hose_clears_the_finding() -> None:
    site = make_site(destination="grade")
    engine = engine_for(site)
    sim = MiniSump(site, START, faults=Faults(sanitary_share=1.0), noise=1.0)
    first = feed(engine, sim.run(2 * 3600))
    sim.faults.sanitary_share = 0.0
    later = feed(engine, sim.run(2 * 3600))
    assert [e.change for e in first if e.change is not FindingChange.UPDATED] == [
        FindingChange.OPENED
    ]
    cleared = [e for e in later if e.change is FindingChange.CLEARED]
    assert len(cleared) == 1 and cleared[0].finding.id == opened(first)[0].id


def test_active_waiver_suppresses_the_finding() -> None:
    waiver = {"rule": "sanitary_discharge", "start": "2026-05-20", "end": "2026-06-10"}
    site = make_site(destination="grade", waivers=(waiver,))
    assert feed(engine_for(site), _run(site, Faults(sanitary_share=1.0))) == []


def test_expired_waiver_does_not_suppress() -> None:
    waiver = {"rule": "sanitary_discharge", "start": "2026-01-01", "end": "2026-05-30"}
    site = make_site(destination="grade", waivers=(waiver,))
    assert opened(feed(engine_for(site), _run(site, Faults(sanitary_share=1.0))))


def test_waiver_for_another_rule_does_not_suppress() -> None:
    waiver = {"rule": "icing_risk", "start": "2026-05-20", "end": "2026-06-10"}
    site = make_site(destination="grade", waivers=(waiver,))
    assert opened(feed(engine_for(site), _run(site, Faults(sanitary_share=1.0))))


def test_finding_clears_when_a_waiver_starts() -> None:
    waiver = {"rule": "sanitary_discharge", "start": "2026-06-02", "end": "2026-06-30"}
    site = make_site(destination="grade", waivers=(waiver,))
    engine = engine_for(site)
    sim = MiniSump(site, START + timedelta(hours=20), faults=Faults(sanitary_share=1.0))
    events = feed(engine, sim.run(10 * 3600))  # local midnight (UTC-5) passes at 05:00 UTC
    changes = [e.change for e in events if e.change is not FindingChange.UPDATED]
    assert changes == [FindingChange.OPENED, FindingChange.CLEARED]


def test_blocked_line_is_not_taken_for_a_sanitary_hose() -> None:
    site = make_site(destination="grade")
    events = feed(engine_for(site), _run(site, Faults(frozen=True), pipe_c=-3.0))
    assert opened(events, "sanitary_discharge") == []


def test_dead_pump_is_not_taken_for_a_sanitary_hose() -> None:
    site = make_site(destination="grade")
    events = feed(engine_for(site), _run(site, Faults(pump_dead=True)))
    assert opened(events, "sanitary_discharge") == []


def test_silent_outlet_node_is_not_taken_for_a_sanitary_hose() -> None:
    site = make_site(destination="grade")
    readings = [r for r in _run(site, Faults()) if r.node_id != "outlet"]
    assert opened(feed(engine_for(site), readings), "sanitary_discharge") == []


def test_duplicates_and_late_messages_change_nothing() -> None:
    site = make_site(destination="grade")
    readings = _run(site, Faults(sanitary_share=1.0))
    noisy: list[Reading] = []
    for i, r in enumerate(readings):
        noisy.append(r)
        noisy.append(r)  # QoS 1 redelivery
        if i > 5 and i % 7 == 0:
            noisy.append(readings[i - 5])  # a late, out-of-order message
    clean = [(f.rule_id, f.opened_at) for f in opened(feed(engine_for(site), readings))]
    dirty = [(f.rule_id, f.opened_at) for f in opened(feed(engine_for(site), noisy))]
    assert clean == dirty and clean
