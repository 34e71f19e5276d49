"""Issue 7, scale-out: with several gateways, each site's readings reach the one
gateway that holds its detector state.

Mosquitto's shared subscriptions (``$share/<group>/...``) deal messages to the
members one by one, so a site's stream is scattered: both gateways see part of it
and both raise the same finding. :class:`gateway.ingest.mqtt.SitePartition`
instead lets every gateway subscribe to the whole stream and keep only the sites
that hash to its shard.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from gateway.broker import BrokerProcess
from gateway.contract import telemetry_topic
from gateway.ingest.mqtt import SitePartition
from gateway.registry import load_registry
from gateway.runtime import Runtime, run_gateway
from gateway.settings import Settings
from tests.conftest import DEMO_SITES
from tests.mqtt_helpers import pit_payload, publish, wait_connected, wait_until

pytestmark = pytest.mark.integration

SITES = [s.id for s in load_registry(DEMO_SITES)]


def site_stream(site: str, count: int = 16, high_from: int = 10) -> list[tuple[str, bytes]]:
    """A pit node's samples: normal, then above the high-water alarm (55 cm)."""
    start = datetime.now(UTC) - timedelta(seconds=count)
    return [
        (
            telemetry_topic(site, "pit"),
            json.dumps(
                pit_payload(
                    site,
                    "pit",
                    seq,
                    boot="shard",
                    ts=start + timedelta(seconds=seq),
                    level_cm=62.0 if seq >= high_from else 30.0,
                    pump_on=True,
                )
            ).encode(),
        )
        for seq in range(count)
    ]


@contextlib.asynccontextmanager
async def gateways(
    tmp_path: Path, mosquitto: BrokerProcess, count: int, *, shared: bool, all_topics: bool = False
) -> AsyncIterator[list[Runtime]]:
    """``count`` gateways on one broker: partitioned by site, or one $share group."""
    async with contextlib.AsyncExitStack() as stack:
        runtimes = []
        for i in range(count):
            settings = Settings(
                _env_file=None,
                data_dir=tmp_path / f"gw{i}",
                sites_file=DEMO_SITES,
                mqtt={
                    "host": mosquitto.host,
                    "port": mosquitto.port,
                    "client_id": f"gw{i}-{uuid.uuid4().hex[:6]}",
                    "shared_group": "gateways" if shared else None,
                    "shard": None if shared else i,
                    "shards": 1 if shared else count,
                    "partition_all_topics": all_topics,
                },
                store={"batch_interval_s": 0.02},
            )
            runtime = await stack.enter_async_context(run_gateway(settings))
            await wait_connected(runtime)
            runtimes.append(runtime)
        yield runtimes


async def stored_sites(runtime: Runtime) -> dict[str, int]:
    return {site: n for site in SITES if (n := await runtime.store.count(site))}


def high_water_sites(runtime: Runtime) -> list[str]:
    return sorted(f.site_id for f in runtime.engine.open_findings() if f.rule_id == "high_water")


async def settle(runtimes: list[Runtime], total: int) -> None:
    async def done() -> bool:
        counts = [await r.store.count() for r in runtimes]
        return sum(counts) >= total

    await wait_until(done, 20)
    await asyncio.sleep(0.3)


def test_partitions_cover_every_site_exactly_once() -> None:
    for shards in (1, 2, 3, 4, 8):
        parts = [SitePartition(i, shards) for i in range(shards)]
        by_site = [SitePartition(i, shards, tuple(SITES)) for i in range(shards)]
        filters = [t for p in by_site for t in p.topics()]
        assert sorted(filters) == sorted(
            f"sumpwatch/v1/{s}/+/{c}" for s in SITES for c in ("telemetry", "status")
        )
        for site in [*SITES, "x", "a-very-long-site-id-0123456789"]:
            topic = telemetry_topic(site, "pit")
            assert sum(p.owns(topic) for p in parts) == 1
            # Every node and channel of a site goes with the site.
            owner = next(p for p in parts if p.owns(topic))
            assert owner.owns(f"sumpwatch/v1/{site}/outlet/status")


@pytest.mark.parametrize("all_topics", [False, True], ids=["site-subscriptions", "all-topics"])
async def test_partitioned_gateways_each_hold_whole_sites_and_raise_each_finding_once(
    tmp_path: Path, mosquitto: BrokerProcess, all_topics: bool
) -> None:
    stream = [m for site in SITES for m in site_stream(site)]
    async with gateways(tmp_path, mosquitto, 2, shared=False, all_topics=all_topics) as (a, b):
        await asyncio.to_thread(publish, mosquitto.host, mosquitto.port, stream)
        await settle([a, b], len(stream))
        in_a, in_b = await stored_sites(a), await stored_sites(b)
        assert set(in_a).isdisjoint(in_b)
        assert set(in_a) | set(in_b) == set(SITES)
        assert all(n == 16 for n in (in_a | in_b).values())
        assert in_a and in_b  # the load is shared
        # Each site's high water is seen by its one detector: one finding per site.
        assert high_water_sites(a) == sorted(in_a)
        assert high_water_sites(b) == sorted(in_b)
        # Each message was processed by one gateway only (with all-topics, each
        # gateway acked the other's messages unprocessed).
        assert a.metrics.received + b.metrics.received == len(stream)
        skipped = [r.source._fast.skipped for r in (a, b) if r.source._fast is not None]
        assert sum(skipped) == (len(stream) if all_topics else 0)


async def test_a_shared_subscription_scatters_sites_and_duplicates_findings(
    tmp_path: Path, mosquitto: BrokerProcess
) -> None:
    stream = [m for site in SITES for m in site_stream(site)]
    async with gateways(tmp_path, mosquitto, 2, shared=True) as (a, b):
        await asyncio.to_thread(publish, mosquitto.host, mosquitto.port, stream)
        await settle([a, b], len(stream))
        in_a, in_b = await stored_sites(a), await stored_sites(b)
        assert sum(in_a.values()) + sum(in_b.values()) == len(stream)
        # Round-robin delivery: sites end up split between the two gateways...
        assert set(in_a) & set(in_b)
        # ...and both detectors of a split site raise the same finding.
        assert set(high_water_sites(a)) & set(high_water_sites(b))
