"""Detector warm-up at shard takeover (issue 18): what one gateway's detectors learned
holds on the gateway that takes the shard over, through the shared time-series store."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from gateway.cluster.warmup import warm_up
from gateway.domain import FindingChange
from gateway.registry.models import PitConfig, SiteConfig
from gateway.rules.sequences import MiniSump, engine_for, feed, make_site, opened
from gateway.state.database import SqliteDatabase
from gateway.store.sqlite import SqliteStore

START = datetime(2026, 6, 1, tzinfo=UTC)
DAY = timedelta(hours=24)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    db = SqliteDatabase(tmp_path / "series.sqlite")
    await db.open()
    series = SqliteStore(db)
    await series.open()
    yield series
    await db.close()


def _sump(site: SiteConfig) -> MiniSump:
    # Registered pit and true pit agree; a steady inflow gives regular cycles.
    return MiniSump(
        site, START, noise=1.0, seed=3, true_pit=PitConfig(diameter_cm=46.0), inflow_lpm=10.0,
        inflow_jitter=0.1,
    )  # fmt: skip


async def test_a_ratio_calibrated_on_gateway_a_finds_a_partial_diversion_on_gateway_b(
    store: SqliteStore,
) -> None:
    site = make_site(destination="grade", pit={"diameter_cm": 46.0})
    sim, gateway_a = _sump(site), engine_for(site)
    clean = sim.run(2 * 3600)  # the calibration hours, judged on A and stored
    feed(gateway_a, clean)
    await store.write(clean)
    gateway_b, cold = engine_for(site), engine_for(site)
    await warm_up(gateway_b, store, [], now=clean[-1].ts, window=DAY)
    sim.faults.sanitary_share = 0.33  # a third down a floor drain: only a calibrated ratio sees it
    diverted = sim.run(2 * 3600)
    on_a = opened(feed(gateway_a, diverted), "sanitary_discharge")
    on_b = opened(feed(gateway_b, diverted), "sanitary_discharge")
    assert opened(feed(cold, diverted), "sanitary_discharge") == []
    assert len(on_a) == 1
    assert [f.opened_at for f in on_b] == [on_a[0].opened_at]


async def test_warm_up_continues_the_stored_open_finding_without_a_second_opening(
    store: SqliteStore,
) -> None:
    site = make_site(destination="grade")
    sim, gateway_a = _sump(site), engine_for(site)
    sim.faults.sanitary_share = 1.0
    before = sim.run(3 * 3600)
    (finding,) = opened(feed(gateway_a, before), "sanitary_discharge")
    await store.write(before)
    gateway_b = engine_for(site)
    await warm_up(gateway_b, store, gateway_a.open_findings(), now=before[-1].ts, window=DAY)
    after = feed(gateway_b, sim.run(3600))
    assert [f.id for f in gateway_b.open_findings()] == [finding.id]
    assert [e for e in after if e.change is FindingChange.OPENED] == []


async def test_warm_up_replays_only_the_window(store: SqliteStore) -> None:
    site = make_site(destination="grade")
    readings = _sump(site).run(2 * 3600)
    await store.write(readings)
    end = readings[-1].ts
    done = await warm_up(engine_for(site), store, [], now=end, window=timedelta(hours=1))
    assert done.readings == sum(1 for r in readings if r.ts >= end - timedelta(hours=1))
