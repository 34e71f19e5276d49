"""Issue 6: the InfluxDB store against a real influxd (1.6, Debian package)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import httpx
import pytest

from gateway.contract import NodeKind
from gateway.domain import (
    Finding,
    FindingChange,
    FindingEvent,
    Reading,
    Severity,
    StatusChange,
)
from gateway.settings import Settings
from gateway.state.database import SqliteDatabase
from gateway.store.base import SeriesQuery
from gateway.store.factory import make_store
from gateway.store.influx import InfluxStore, SpoolFull
from tests import influx_fixture
from tests.influx_fixture import T0, InfluxServer, one_of_each_kind, pit_series

# The real-server fixtures (the lead's conftest may import them too).
influxd = influx_fixture.influxd
influxd_private = influx_fixture.influxd_private
influx_database = influx_fixture.influx_database

pytestmark = pytest.mark.integration


def influx_settings(
    tmp_path: Path, server: InfluxServer, database: str, **influx: object
) -> Settings:
    """Settings of an InfluxDB store; ``influx`` overrides keys of the influx section."""
    return Settings(
        _env_file=None,
        data_dir=tmp_path / "data",
        store={"backend": "influxdb"},
        influx={"url": server.url, "database": database, **influx},
    )


class Opened:
    """Opens an InfluxStore (and its SQLite side database) and closes both."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.db = SqliteDatabase(settings.sqlite_file)
        store = make_store(
            settings.store, settings.influx, self.db, spool_dir=settings.data_dir / "spool"
        )
        assert isinstance(store, InfluxStore)
        self.store = store
        # Fast retries so outage tests take seconds.
        self.store.retry_min_s = 0.05
        self.store.retry_max_s = 0.3

    async def __aenter__(self) -> InfluxStore:
        self.settings.data_dir.mkdir(parents=True, exist_ok=True)
        await self.db.open()
        await self.store.open()
        return self.store

    async def __aexit__(self, *exc: object) -> None:
        await self.store.close()
        await self.db.close()


async def wait_until(check: Callable[[], Awaitable[bool]], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if await check():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("condition not reached in time")


@pytest.fixture
async def store(
    tmp_path: Path, influxd: InfluxServer, influx_database: str
) -> AsyncIterator[InfluxStore]:
    async with Opened(influx_settings(tmp_path, influxd, influx_database)) as opened:
        yield opened


def _same(a: Reading, b: Reading) -> None:
    assert (a.site_id, a.node_id, a.kind, a.ts, a.seq, a.boot) == (
        b.site_id,
        b.node_id,
        b.kind,
        b.ts,
        b.seq,
        b.boot,
    )
    assert dict(a.values) == dict(b.values)
    assert a.received_at == b.received_at
    assert (a.battery_v, a.rssi_dbm) == (b.battery_v, b.rssi_dbm)


@pytest.mark.parametrize("gzip", [True, False], ids=["gzip", "plain"])
async def test_every_reading_kind_round_trips_with_all_its_fields(
    tmp_path: Path, influxd: InfluxServer, influx_database: str, gzip: bool
) -> None:
    settings = influx_settings(tmp_path, influxd, influx_database, gzip=gzip)
    async with Opened(settings) as store:
        written = one_of_each_kind(seq=7)
        assert await store.write(written) == 3
        back = await store.readings(SeriesQuery("elm-12"))
        assert sorted(r.kind for r in back) == sorted(NodeKind)
        by_node = {r.node_id: r for r in back}
        for original in written:
            _same(by_node[original.node_id], original)
        assert by_node["pit"].values["pump_on"] is True
        assert by_node["pit"].values["backup_pump_on"] is False
        assert store.stats()["points_written"] == 3


async def test_points_are_stored_with_tags_fields_and_device_time(
    store: InfluxStore, influxd: InfluxServer, influx_database: str
) -> None:
    await store.write(one_of_each_kind(seq=3))
    body = influxd.query(influx_database, 'SELECT * FROM "pit"')
    series = body["results"][0]["series"][0]  # type: ignore[index]
    row = dict(zip(series["columns"], series["values"][0], strict=True))
    assert row["time"] == (T0 + timedelta(seconds=3)).timestamp() * 1_000_000_000
    assert (row["site_id"], row["node_id"], row["seq"], row["boot"]) == ("elm-12", "pit", 3, "b00t")
    assert row["pump_on"] == 1 and row["backup_pump_on"] == 0  # integers 0/1


async def test_writing_the_same_readings_twice_keeps_one_point_each(store: InfluxStore) -> None:
    batch = pit_series(50)
    await store.write(batch)
    await store.write(batch[10:30])
    assert await store.count() == 50
    assert await store.count("elm-12") == 50
    assert await store.count("nowhere") == 0


async def test_range_queries_filter_by_node_time_and_field_in_device_time_order(
    store: InfluxStore,
) -> None:
    await store.write(pit_series(40) + pit_series(40, site="oak-3"))
    for seq in range(5):
        await store.write(one_of_each_kind(seq=100 + seq))
    start, end = T0 + timedelta(seconds=50), T0 + timedelta(seconds=100)
    rows = await store.readings(SeriesQuery("elm-12", node_id="pit", start=start, end=end))
    assert [r.seq for r in rows] == list(range(10, 20))  # 5 s apart, end excluded
    limited = await store.readings(SeriesQuery("elm-12", limit=7))
    assert [r.seq for r in limited] == list(range(7))
    flows = await store.readings(SeriesQuery("elm-12", fields=("flow_lpm",)))
    assert {r.node_id for r in flows} == {"outlet"} and len(flows) == 5
    everything = await store.readings(SeriesQuery("elm-12"))
    assert [r.ts for r in everything] == sorted(r.ts for r in everything)


async def test_latest_gives_the_newest_reading_of_each_node(store: InfluxStore) -> None:
    await store.write(pit_series(30))
    await store.write(one_of_each_kind(seq=500))
    await store.write(one_of_each_kind(seq=400))  # older, written later
    latest = await store.latest("elm-12")
    assert set(latest) == {"pit", "outlet", "air"}
    assert all(r.seq == 500 for r in latest.values())


async def test_writes_to_an_unreachable_server_are_spooled_and_return_at_once(
    tmp_path: Path, influxd_private: InfluxServer, influx_database: str
) -> None:
    async with Opened(influx_settings(tmp_path, influxd_private, influx_database)) as store:
        influxd_private.stop()
        began = time.monotonic()
        assert await store.write(pit_series(100)) == 100
        assert time.monotonic() - began < 2.0
        stats = store.stats()
        assert stats["influx_up"] == 0.0
        assert stats["spool_pending_batches"] >= 1 and stats["spool_bytes"] > 0
        assert await store.healthy()  # the spool has room: writes still succeed


async def test_an_outage_with_messages_still_flowing_loses_nothing(
    tmp_path: Path, influxd_private: InfluxServer, influx_database: str
) -> None:
    async with Opened(influx_settings(tmp_path, influxd_private, influx_database)) as store:
        seq = 0
        total = 0

        async def flow(batches: int) -> None:
            nonlocal seq, total
            for _ in range(batches):
                batch = pit_series(25, start=T0 + timedelta(seconds=5 * seq), start_seq=seq)
                assert await store.write(batch) == 25
                seq += 25
                total += 25
                await asyncio.sleep(0.01)

        await flow(4)
        influxd_private.stop()
        await flow(20)  # messages keep coming during the outage
        assert store.stats()["spool_pending_batches"] > 0
        await asyncio.sleep(0.5)  # replay keeps failing, with backoff
        await flow(5)
        influxd_private.start()
        await flow(5)  # and after it

        async def drained() -> bool:
            return store.spool.empty and store.stats()["influx_up"] == 1.0

        await wait_until(drained)
        assert await store.count() == total
        rows = await store.readings(SeriesQuery("elm-12", limit=total + 10))
        assert [r.seq for r in rows] == list(range(total))
        assert store.stats()["spool_replayed_records"] >= 20


async def test_a_restarted_store_replays_a_spool_left_by_the_previous_run(
    tmp_path: Path, influxd_private: InfluxServer, influx_database: str
) -> None:
    settings = influx_settings(tmp_path, influxd_private, influx_database)
    async with Opened(settings) as store:
        await store.write(pit_series(10))
        influxd_private.stop()
        await store.write(pit_series(30, start_seq=10, start=T0 + timedelta(seconds=50)))
        assert not store.spool.empty
    assert any((settings.data_dir / "spool").glob("*.seg"))
    influxd_private.start()
    async with Opened(settings) as store:

        async def all_there() -> bool:
            return store.spool.empty and await store.count() == 40

        await wait_until(all_there)
    assert not any((settings.data_dir / "spool").glob("*.seg"))  # disk space given back


async def test_a_full_spool_refuses_writes_and_says_so(
    tmp_path: Path,
    influxd_private: InfluxServer,
    influx_database: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    settings = influx_settings(tmp_path, influxd_private, influx_database, spool_max_bytes=20_000)
    async with Opened(settings) as store:
        store.spool.segment_bytes = 4_000
        influxd_private.stop()
        accepted = 0
        with (
            caplog.at_level(logging.ERROR, logger="gateway.store.influx"),
            pytest.raises(SpoolFull),
        ):
            for i in range(100):
                batch = pit_series(10, start_seq=10 * i, start=T0 + timedelta(seconds=50 * i))
                accepted += await store.write(batch)
        assert 0 < accepted < 1000
        assert store.spool_full and store.stats()["spool_full"] == 1.0
        assert not await store.healthy()
        assert any("spool is FULL" in r.getMessage() for r in caplog.records)

        influxd_private.start()

        async def recovered() -> bool:
            return store.spool.empty

        await wait_until(recovered)
        assert await store.count() == accepted  # everything accepted was kept
        await store.write(pit_series(5, start_seq=5000, start=T0 + timedelta(days=1)))
        assert not store.spool_full and await store.healthy()

        async def all_stored() -> bool:
            # A write right after the replay may still be on its way through the spool.
            return await store.count() == accepted + 5

        await wait_until(all_stored)


async def test_the_database_is_created_when_missing(tmp_path: Path, influxd: InfluxServer) -> None:
    database = "created_by_store"
    async with Opened(influx_settings(tmp_path, influxd, database)) as store:
        await store.write(pit_series(3))
        assert await store.count() == 3


async def test_the_v1_api_is_what_this_server_serves_and_v2_write_is_not(
    influxd: InfluxServer, influx_database: str
) -> None:
    # Why the store uses /write + /query: a 1.6 server has no /api/v2 (1.8+ and 2.x do).
    async with httpx.AsyncClient(base_url=influxd.url) as client:
        create = await client.post("/query", params={"q": f'CREATE DATABASE "{influx_database}"'})
        assert create.status_code == 200
        v1 = await client.post("/write", params={"db": influx_database}, content=b"probe v=1 1")
        assert v1.status_code == 204
        v2 = await client.post(
            "/api/v2/write",
            params={"bucket": influx_database, "org": "-"},
            content=b"probe v=1 1",
        )
        assert v2.status_code == 404
        query = await client.get(
            "/query", params={"db": influx_database, "q": "SELECT v FROM probe"}
        )
        assert query.json()["results"][0]["series"][0]["values"] == [
            ["1970-01-01T00:00:00.000000001Z", 1]
        ]


async def test_status_changes_and_findings_are_written_for_the_dashboards(
    store: InfluxStore, influxd: InfluxServer, influx_database: str
) -> None:
    opened = Finding(
        id="f-1",
        rule_id="icing_risk",
        site_id="elm-12",
        severity=Severity.WARNING,
        title='Discharge line "may" freeze, 2 m from walk',
        opened_at=T0,
        updated_at=T0,
        level="watch",
    )
    cleared = replace(
        opened, updated_at=T0 + timedelta(hours=2), cleared_at=T0 + timedelta(hours=2)
    )
    await store.write_events(
        statuses=[StatusChange("elm-12", "pit", False, T0 + timedelta(minutes=5))],
        findings=[
            FindingEvent(FindingChange.OPENED, opened),
            FindingEvent(FindingChange.CLEARED, cleared),
        ],
    )
    status = influxd.query(influx_database, 'SELECT "online" FROM "node_status"')
    assert status["results"][0]["series"][0]["values"][0][1] == 0  # type: ignore[index]
    body = influxd.query(
        influx_database,
        'SELECT "open", "severity", "level", "title" FROM "finding" GROUP BY "rule_id"',
    )
    series = body["results"][0]["series"][0]  # type: ignore[index]
    assert series["tags"] == {"rule_id": "icing_risk"}
    assert [row[1:] for row in series["values"]] == [
        [1, "warning", "watch", 'Discharge line "may" freeze, 2 m from walk'],
        [0, "warning", "watch", 'Discharge line "may" freeze, 2 m from walk'],
    ]


async def test_readings_replayed_from_the_spool_are_rolled_up_too(
    tmp_path: Path, influxd_private: InfluxServer, influx_database: str
) -> None:
    async with Opened(influx_settings(tmp_path, influxd_private, influx_database)) as store:
        series = pit_series(720)  # one hour, one pump start a minute
        await store.write(series[:360])
        influxd_private.stop()
        await store.write(series[360:])  # spooled
        influxd_private.start()

        async def drained() -> bool:
            return store.spool.empty

        await wait_until(drained)
        await store.refresh_rollups(T0 + timedelta(days=1))
        (hour,) = await store.rollups("elm-12", "1h", T0, T0 + timedelta(hours=1))
        assert (hour.samples, hour.pump_cycles) == (720, 60)
        minutes = await store.rollups("elm-12", "1m", T0, T0 + timedelta(hours=1))
        assert len(minutes) == 60 and all(m.samples == 12 for m in minutes)
