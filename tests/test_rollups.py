"""Issue 6: 1-minute and 1-hour rollups, computed the same on both stores."""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from gateway.contract import NodeKind
from gateway.domain import Reading
from gateway.state.database import SqliteDatabase
from gateway.store.base import TimeSeriesStore
from gateway.store.factory import make_store
from gateway.store.rollups import (
    MAX_HOLD_S,
    compose,
    compute_minutes,
    hour_fill,
    refresh_forever,
)
from gateway.store.sqlite import SqliteStore
from tests import influx_fixture
from tests.conftest import MakeSettings
from tests.influx_fixture import T0, InfluxServer, one_of_each_kind, pit_series, reading

influxd = influx_fixture.influxd
influx_database = influx_fixture.influx_database

LATER = T0 + timedelta(days=1)  # "now" for refreshes: every test bucket has ended


def flow_series(
    count: int, *, lpm: float, start: datetime = T0, interval_s: float = 5.0
) -> list[Reading]:
    return [
        reading(
            NodeKind.DISCHARGE,
            i,
            node="outlet",
            ts=start + timedelta(seconds=interval_s * i),
            flow_lpm=lpm,
            pressure_kpa=20.0,
            pipe_temp_c=1.0 + i,
        )
        for i in range(count)
    ]


def minute(m: int) -> int:
    return int((T0 + timedelta(minutes=m)).timestamp())


# -- the arithmetic ----------------------------------------------------------------------


def test_stats_cover_the_samples_taken_in_each_minute() -> None:
    rows = compute_minutes(pit_series(24), [minute(0), minute(1)])  # 2 minutes of 5 s samples
    assert [r.samples for r in rows] == [12, 12]
    level = rows[0].stats["level_cm"]
    assert (level.count, level.min, level.max, level.last) == (12, 20.0, 31.0, 31.0)
    assert level.mean == pytest.approx(25.5)
    assert rows[0].stats["pump_on"].mean == pytest.approx(4 / 12)  # duty fraction


def test_pump_cycles_count_off_to_on_transitions_and_run_time_is_held_between_samples() -> None:
    # 5 s samples; the pump is on for samples 8..11 of every 12: one start a minute,
    # on from the 8th sample to the next cycle's first (off) sample = 20 s.
    rows = compute_minutes(pit_series(36), [minute(0), minute(1), minute(2)])
    assert [r.pump_cycles for r in rows] == [1, 1, 1]
    assert [r.pump_on_s for r in rows] == pytest.approx([20.0, 20.0, 20.0])


def test_pumped_volume_integrates_outlet_flow_over_time() -> None:
    # 120 L/min for 60 s of samples (12 x 5 s; the last one holds to the next minute's
    # edge only when a next sample exists, else for MAX_HOLD_S).
    readings = flow_series(13, lpm=120.0) + flow_series(
        1, lpm=0.0, start=T0 + timedelta(seconds=65)
    )
    rows = compute_minutes(readings, [minute(0)])
    assert rows[0].pumped_volume_l == pytest.approx(120.0)


def test_a_silent_node_is_not_assumed_to_keep_running_past_the_hold_limit() -> None:
    lone = [reading(NodeKind.PIT, 0, ts=T0, level_cm=30.0, pump_on=True)]
    rows = compute_minutes(lone, [minute(m) for m in range(10)])
    assert sum(r.pump_on_s for r in rows) == pytest.approx(MAX_HOLD_S)
    assert rows[0].samples == 1 and all(r.samples == 0 for r in rows[1:])


def test_an_hour_composed_from_minutes_equals_the_hour_computed_at_once() -> None:
    readings = pit_series(720)  # one hour of 5 s samples
    minutes = compute_minutes(readings, [minute(m) for m in range(60)])
    hour = compose(minutes, "1h", T0)
    assert hour.samples == 720
    assert hour.pump_cycles == 60
    assert hour.pump_on_s == pytest.approx(sum(r.pump_on_s for r in minutes))
    level = hour.stats["level_cm"]
    assert level.mean == pytest.approx(sum(r.values["level_cm"] for r in readings) / 720)
    assert (level.min, level.max, level.last) == (20.0, 31.0, 31.0)


# -- both stores -------------------------------------------------------------------------


@pytest.fixture(params=["sqlite", "influxdb"])
async def store(
    request: pytest.FixtureRequest, make_settings: MakeSettings
) -> AsyncIterator[TimeSeriesStore]:
    extra: dict[str, object] = {}
    if request.param == "influxdb":
        server: InfluxServer = request.getfixturevalue("influxd")
        extra = {
            "influx": {
                "url": server.url,
                "database": request.getfixturevalue("influx_database"),
            }
        }
    settings = make_settings(store={"backend": request.param}, **extra)
    settings.data_dir.mkdir(parents=True)
    db = SqliteDatabase(settings.sqlite_file)
    await db.open()
    opened = make_store(settings.store, settings.influx, db, spool_dir=settings.data_dir / "spool")
    await opened.open()
    yield opened
    await opened.close()
    await db.close()


async def test_refresh_fills_minute_and_hour_rollups_from_raw_readings(
    store: TimeSeriesStore,
) -> None:
    readings = pit_series(1440)  # two hours
    await store.write(readings)
    # 120 minutes with samples, plus 2 that the last sample's held value reaches into.
    assert await store.refresh_rollups(LATER) == 120 + int(MAX_HOLD_S // 60)
    minutes = await store.rollups("elm-12", "1m", T0, T0 + timedelta(hours=2))
    assert [r.start for r in minutes[:2]] == [T0, T0 + timedelta(minutes=1)]
    assert sum(r.samples for r in minutes) == 1440
    assert {r.pump_cycles for r in minutes[:120]} == {1}
    hours = await store.rollups("elm-12", "1h", T0, T0 + timedelta(hours=2))
    assert [h.start for h in hours] == [T0, T0 + timedelta(hours=1)]
    assert [h.samples for h in hours] == [720, 720]
    assert [h.pump_cycles for h in hours] == [60, 60]
    assert hours[0].stats["level_cm"].mean == pytest.approx(25.5)
    assert hours[0].resolution == "1h" and hours[0].kind is NodeKind.PIT


async def test_refresh_is_idempotent_and_only_recomputes_touched_buckets(
    store: TimeSeriesStore,
) -> None:
    await store.write(pit_series(720))
    await store.refresh_rollups(LATER)
    before = await store.rollups("elm-12", "1h", T0, LATER)
    assert await store.refresh_rollups(LATER) == 0  # nothing new
    assert await store.rollups("elm-12", "1h", T0, LATER) == before


async def test_late_readings_update_the_buckets_they_fall_in(store: TimeSeriesStore) -> None:
    series = pit_series(720)
    await store.write(series[:360] + series[400:])  # a gap of 40 samples (200 s)
    await store.refresh_rollups(LATER)
    gappy = (await store.rollups("elm-12", "1h", T0, LATER))[0]
    await store.write(series[360:400])  # they arrive late (e.g. a replayed spool)
    await store.refresh_rollups(LATER)
    full = (await store.rollups("elm-12", "1h", T0, LATER))[0]
    assert (gappy.samples, full.samples) == (680, 720)
    assert full.pump_cycles == 60 and gappy.pump_cycles < 60


async def test_buckets_still_open_are_left_for_a_later_refresh(store: TimeSeriesStore) -> None:
    await store.write(pit_series(24))  # minutes 0 and 1
    assert await store.refresh_rollups(T0 + timedelta(minutes=2)) == 0  # held values may still come
    assert await store.refresh_rollups(T0 + timedelta(minutes=10)) > 0


async def test_rollups_are_per_node_and_filterable(store: TimeSeriesStore) -> None:
    await store.write(pit_series(12) + flow_series(12, lpm=60.0))
    await store.refresh_rollups(LATER)
    both = await store.rollups("elm-12", "1m", T0, T0 + timedelta(minutes=1))
    assert {r.node_id for r in both} == {"pit", "outlet"}
    outlet = await store.rollups("elm-12", "1m", T0, LATER, node_id="outlet")
    assert {r.kind for r in outlet} == {NodeKind.DISCHARGE}
    # 1 L/s over 11 sample intervals of 5 s, then the last value held for MAX_HOLD_S.
    assert sum(r.pumped_volume_l for r in outlet) == pytest.approx(55.0 + MAX_HOLD_S)
    assert await store.rollups("oak-3", "1m", T0, LATER) == []


async def test_the_background_task_keeps_refreshing(store: TimeSeriesStore) -> None:
    task = asyncio.create_task(refresh_forever(store, interval_s=0.05))
    try:
        await store.write(pit_series(12))
        for _ in range(100):
            if await store.rollups("elm-12", "1h", T0, LATER):
                break
            await asyncio.sleep(0.05)
        await store.write(pit_series(12, start=T0 + timedelta(minutes=1), start_seq=12))
        for _ in range(100):
            hours = await store.rollups("elm-12", "1h", T0, LATER)
            if hours and hours[0].samples == 24:
                break
            await asyncio.sleep(0.05)
        assert hours[0].samples == 24
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_readings_stored_before_rollups_existed_are_rolled_up(tmp_path: Path) -> None:
    db = SqliteDatabase(tmp_path / "old.db")
    await db.open()
    try:
        old = SqliteStore(db)
        await old.open()
        await old.write(pit_series(24))
        # As if written by a version without rollups: no marks, no rollups.
        await db.write(lambda conn: conn.execute("DELETE FROM rollup_dirty"))
        await SqliteStore(db).open()
        assert await old.refresh_rollups(LATER) > 0
        (hour,) = await old.rollups("elm-12", "1h", T0, LATER)
        assert hour.samples == 24
    finally:
        await db.close()


async def test_sqlite_reads_back_exactly_the_rollups_it_saved(tmp_path: Path) -> None:
    db = SqliteDatabase(tmp_path / "r.db")
    await db.open()
    store = SqliteStore(db)
    await store.open()
    start = int(T0.timestamp())
    pit = compute_minutes(pit_series(240), range(start, start + 1200, 60))
    outlet = compute_minutes(flow_series(240, lpm=40.0), range(start, start + 1200, 60))
    await store.save_rollups(pit + outlet)
    back = await store.rollups("elm-12", "1m", T0, T0 + timedelta(minutes=20))
    await db.close()
    key = lambda r: (r.start, r.node_id)  # noqa: E731
    assert sorted(back, key=key) == sorted(pit + outlet, key=key)
    assert any(r.stats and r.pumped_volume_l for r in back)


# -- day rollups (issue 17: the season report reads these) ----------------------------------

ACROSS_MIDNIGHT = T0.replace(hour=22)  # 22:00 UTC: the readings run into the next UTC day


async def test_day_rollups_hold_the_raw_readings_totals_hour_by_hour(
    store: TimeSeriesStore,
) -> None:
    pit = pit_series(1440 * 2, start=ACROSS_MIDNIGHT)  # four hours of 5 s samples
    outlet = flow_series(1440 * 2, lpm=30.0, start=ACROSS_MIDNIGHT)
    await store.write(pit + outlet)
    await store.refresh_rollups(LATER + timedelta(days=1))
    days = await store.day_rollups("elm-12", T0, LATER + timedelta(days=1))
    assert [(d.day.day, d.node_id) for d in days] == [
        (15, "outlet"),
        (15, "pit"),
        (16, "outlet"),
        (16, "pit"),
    ]
    pits = [d for d in days if d.node_id == "pit"]
    outlets = [d for d in days if d.node_id == "outlet"]
    # Against the raw readings: every sample counted, one pump start a minute (pit_series),
    # and the outlet's flow integrated: 30 L/min from the first sample to the last, which
    # then holds for MAX_HOLD_S.
    assert sum(sum(d.hours["samples"]) for d in days) == len(pit) + len(outlet)
    assert sum(sum(d.hours["pump_cycles"]) for d in pits) == 4 * 60
    volume = sum(sum(d.hours["pumped_volume_l"]) for d in outlets)
    span_s = (outlet[-1].ts - outlet[0].ts).total_seconds() + MAX_HOLD_S
    assert volume == pytest.approx(30.0 * span_s / 60)
    # Hours without a reading hold NaN; the others their coldest sample (the first here).
    pipe = [v for d in outlets for v in d.hours["pipe_temp_c_min"] if not math.isnan(v)]
    assert len(pipe) == 4 and min(pipe) == 1.0
    # And each hour's value is its 1-hour rollup's, copied, not recomputed.
    hours = await store.rollups("elm-12", "1h", T0, LATER + timedelta(days=1), node_id="pit")
    by_start = {int(r.start.timestamp()): r for r in hours}
    for d in pits:
        for k in range(24):
            r = by_start.get(int(d.day.timestamp()) + 3600 * k)
            assert d.hours["pump_on_s"][k] == (r.pump_on_s if r else 0.0)


async def test_a_day_rollup_follows_hours_saved_after_it(store: TimeSeriesStore) -> None:
    await store.write(pit_series(720))
    await store.refresh_rollups(LATER)
    (before,) = await store.day_rollups("elm-12", T0, LATER)
    await store.write(
        pit_series(720, start=T0 + timedelta(hours=3), start_seq=720)
    )  # later, same day
    await store.refresh_rollups(LATER)
    (after,) = await store.day_rollups("elm-12", T0, LATER)
    assert sum(after.hours["samples"]) == sum(before.hours["samples"]) + 720
    assert after.hours["samples"][T0.hour + 3] == 720


async def test_hours_saved_without_the_rollup_job_are_reduced_when_a_report_reads_them(
    tmp_path: Path,
) -> None:
    db = SqliteDatabase(tmp_path / "r.db")
    await db.open()
    store = SqliteStore(db)
    await store.open()
    start = int(T0.timestamp())
    minutes = compute_minutes(pit_series(720), range(start, start + 3600, 60))
    await store.save_rollups([compose(minutes, "1h", T0)])  # no refresh_rollups
    (day,) = await store.day_rollups("elm-12", T0, LATER)
    await db.close()
    assert day.hours["samples"][T0.hour] == 720
    assert day.hours["pump_cycles"][T0.hour] == 60


async def test_a_database_from_before_day_rollups_gets_them_from_its_hours(
    tmp_path: Path,
) -> None:
    db = SqliteDatabase(tmp_path / "old.db")
    await db.open()
    store = SqliteStore(db)
    await store.open()
    await store.write(pit_series(720))
    await store.refresh_rollups(LATER)
    # As a database of migration 6 upgraded to 7: hours, no day rows yet, every day marked.
    await db.write(lambda conn: conn.execute("DELETE FROM rollup_1d"))
    await db.write(
        lambda conn: conn.execute(
            "INSERT OR IGNORE INTO rollup_1d_dirty SELECT DISTINCT site_id, node_id, "
            "CAST(bucket / 86400 AS INTEGER) * 86400 FROM rollup_1h"
        )
    )
    await store.refresh_rollups(LATER)  # the rollup job works the backlog off
    rows = await db.read(lambda conn: conn.execute("SELECT COUNT(*) FROM rollup_1d").fetchone()[0])
    (day,) = await store.day_rollups("elm-12", T0, LATER)
    await db.close()
    assert rows == 1
    assert sum(day.hours["samples"]) == 720


async def test_hour_series_lays_each_nodes_day_rollups_out_hour_by_hour(
    store: TimeSeriesStore,
) -> None:
    # Readings from 22:00 UTC into the next UTC day, laid out from 06:00 UTC (a Chicago
    # midnight): hour i holds the rollup that starts i hours after 06:00.
    await store.write(
        pit_series(1440 * 2, start=ACROSS_MIDNIGHT)
        + flow_series(1440 * 2, lpm=30.0, start=ACROSS_MIDNIGHT)
    )
    await store.refresh_rollups(LATER + timedelta(days=1))
    start, n = T0, 30
    laid = await store.hour_series("elm-12", start, n)
    days = await store.day_rollups("elm-12", start, start + timedelta(hours=n))
    assert [(h.node_id, h.kind) for h in laid] == [
        ("outlet", NodeKind.DISCHARGE),
        ("pit", NodeKind.PIT),
    ]
    for node in laid:
        of_node = {d.day: d for d in days if d.node_id == node.node_id}
        for name, values in node.series.items():
            expected = []
            for i in range(n):
                at = start + timedelta(hours=i)
                day = of_node.get(at.replace(hour=0))
                expected.append(day.hours[name][at.hour] if day else hour_fill(name))
            assert len(values) == n
            assert [repr(v) for v in values.tolist()] == [repr(v) for v in expected], name
    pit = next(h for h in laid if h.node_id == "pit")
    # 22:00-02:00 UTC are hours 16-19 from 06:00: a pump start a minute, nothing before.
    assert pit.series["pump_cycles"].tolist() == [0.0] * 16 + [60.0] * 4 + [0.0] * 10


async def test_hour_series_follows_hours_saved_after_it(store: TimeSeriesStore) -> None:
    await store.write(pit_series(720))
    await store.refresh_rollups(LATER)
    (before,) = await store.hour_series("elm-12", T0, 24)
    await store.write(pit_series(720, start=T0 + timedelta(hours=3), start_seq=720))  # late
    await store.refresh_rollups(LATER)
    (after,) = await store.hour_series("elm-12", T0, 24)
    assert before.series["samples"][3] == 0.0
    assert after.series["samples"][3] == 720.0
    assert after.series["samples"].sum() == before.series["samples"].sum() + 720


# -- the console's read of a whole village ---------------------------------------------------


async def test_latest_of_many_sites_is_each_sites_latest(store: TimeSeriesStore) -> None:
    await store.write(pit_series(30) + pit_series(30, site="oak-3", node="sump"))
    await store.write(one_of_each_kind(seq=500) + one_of_each_kind(seq=400))
    many = await store.latest_of(["elm-12", "oak-3", "never-heard"])
    assert many == {
        "elm-12": await store.latest("elm-12"),
        "oak-3": await store.latest("oak-3"),
        "never-heard": {},
    }
    assert set(many["elm-12"]) == {"pit", "outlet", "air"}
    assert {r.seq for r in many["elm-12"].values()} == {500}
