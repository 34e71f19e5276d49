"""Issue 20.10: late readings are judged in order per node, or recorded as not evaluated.

A node that buffers through a Wi-Fi outage flushes its backlog oldest first: each
reading is newer than that node's newest, however far behind the other nodes it is,
so the detectors judge it. A reading older than its own node's newest cannot be fed
to stateful detectors without rewinding them: it is recorded in a not-evaluated
span. A QoS 1 redelivery (same identity) is neither judged twice nor counted late.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from gateway.contract import NodeKind
from gateway.domain import NotEvaluated, Reading
from gateway.registry.models import SiteConfig, SiteRegistry
from gateway.rules.engine import RulesEngine
from gateway.rules.pack import load_packs
from gateway.rules.sequences import feed, make_site, opened, reading

START = datetime(2026, 11, 30, 12, tzinfo=UTC)
STEP = timedelta(seconds=10)


def _engine(site: SiteConfig, spans: list[NotEvaluated]) -> RulesEngine:
    return RulesEngine(SiteRegistry([site]), load_packs(), on_not_evaluated=spans.append)


def _pit(site: SiteConfig, ts: datetime, level_cm: float, received_at: datetime) -> Reading:
    r = reading(site.id, "pit", NodeKind.PIT, ts, level_cm=level_cm, pump_on=False)
    return replace(r, received_at=received_at)


def _outlet(site: SiteConfig, ts: datetime) -> Reading:
    return reading(
        site.id, "outlet", NodeKind.DISCHARGE, ts, flow_lpm=0.0, pressure_kpa=0.0, pipe_temp_c=8.0
    )


def _normal_pit(site: SiteConfig, minutes: int, start: datetime = START) -> list[Reading]:
    level = site.pit.pump_off_cm + 2
    return [_pit(site, start + i * STEP, level, start + i * STEP) for i in range(minutes * 6)]


def test_backlog_flushed_in_order_after_an_outage_opens_high_water() -> None:
    site = make_site()
    spans: list[NotEvaluated] = []
    engine = _engine(site, spans)
    feed(engine, _normal_pit(site, 5))
    outage = START + timedelta(minutes=5)
    back = outage + timedelta(minutes=20)
    # The outlet node kept reporting through the outage: its newest is ahead.
    feed(engine, [_outlet(site, outage + i * STEP) for i in range(20 * 6)])
    above = site.pit.alarm_cm + 4
    # 7.5 minutes above the alarm mark, buffered and flushed oldest first on reconnect.
    backlog = [_pit(site, outage + i * STEP, above, back) for i in range(45)]
    (finding,) = opened(feed(engine, backlog), "high_water")
    assert finding.opened_at == outage + STEP  # the second sample above: device time
    assert spans == []  # nothing was late for its own node


def test_reading_older_than_its_nodes_newest_is_recorded_not_evaluated() -> None:
    site = make_site()
    spans: list[NotEvaluated] = []
    engine = _engine(site, spans)
    live = _normal_pit(site, 5)
    feed(engine, live)
    newest = live[-1].ts
    above = site.pit.alarm_cm + 4
    # The node sent its live reading first, then a backlog from before it.
    late = [_pit(site, START + timedelta(minutes=1) + i * STEP, above, newest) for i in range(6)]
    assert feed(engine, late) == []  # not judged: the detectors cannot rewind
    span = spans[-1]
    assert (span.site_id, span.node_id, span.count) == (site.id, "pit", 6)
    assert (span.start, span.end) == (late[0].ts, late[-1].ts)
    assert len({s.id for s in spans}) == 1  # one span, grown in place


def test_late_readings_far_apart_form_separate_spans() -> None:
    site = make_site()
    spans: list[NotEvaluated] = []
    engine = _engine(site, spans)
    feed(engine, _normal_pit(site, 120))
    now = START + timedelta(hours=2)
    feed(engine, [_pit(site, START + timedelta(minutes=5), 30.0, now)])
    feed(engine, [_pit(site, START + timedelta(minutes=90), 30.0, now)])
    assert len({s.id for s in spans}) == 2


def test_redelivered_reading_is_ignored_silently_and_not_counted_late() -> None:
    site = make_site()
    spans: list[NotEvaluated] = []
    engine = _engine(site, spans)
    live = _normal_pit(site, 5)
    feed(engine, live)
    # QoS 1 redeliveries of the newest and of an older reading: same identity.
    assert feed(engine, [live[-1], live[3], live[-1]]) == []
    assert spans == []
    late = _pit(site, START + STEP / 2, 30.0, live[-1].ts)
    feed(engine, [late, late])  # a late reading, then its redelivery
    assert [s.count for s in spans] == [1]


def test_redelivered_high_reading_does_not_count_as_a_second_sample_above() -> None:
    site = make_site()
    engine = _engine(site, [])
    feed(engine, _normal_pit(site, 1))
    t = START + timedelta(minutes=1)
    high = _pit(site, t, site.pit.alarm_cm + 4, t)
    assert opened(feed(engine, [high, high])) == []  # one sample, delivered twice
