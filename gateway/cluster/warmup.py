"""Detector warm-up: the new holder of a shard relearns what its sites' detectors
had learned on the previous holder (cycle baselines, the calibrated outlet/pit ratio,
pressure baselines, cold-weather state) by replaying the sites' recent readings from
the shared time-series store, then continues the open findings from the state.

Replay rather than snapshots of detector objects: the readings are already stored
(every acknowledged one), the detectors stay free of a persistence format, and a
detector changed between versions relearns under its new code. The window bounds
the takeover time (docs/deploy.md gives the figures)."""

from __future__ import annotations

import heapq
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from gateway.domain import Finding, Reading
from gateway.rules.engine import RulesEngine
from gateway.store.base import SeriesQuery, TimeSeriesStore

log = logging.getLogger(__name__)

#: At most this many readings per node are replayed (a 24 h window at 5 s is 17 280).
MAX_PER_NODE = 50_000


@dataclass(frozen=True, slots=True)
class WarmUp:
    """What one warm-up did."""

    sites: int
    readings: int
    seconds: float


async def _recent(store: TimeSeriesStore, engine: RulesEngine, start: datetime) -> list[Reading]:
    """Every owned site's readings since ``start``, in device-time order across nodes
    (each node's own order is what the detectors need; the merge keeps it)."""
    per_node: list[list[Reading]] = []
    for site in engine.registry:
        for node in site.nodes:
            per_node.append(
                await store.readings(
                    SeriesQuery(site.id, node_id=node.id, start=start, limit=MAX_PER_NODE)
                )
            )
    return list(heapq.merge(*per_node, key=lambda r: r.ts))


async def warm_up(
    engine: RulesEngine,
    store: TimeSeriesStore,
    open_findings: Iterable[Finding],
    *,
    now: datetime,
    window: timedelta,
) -> WarmUp:
    """Replay ``window`` of the owned sites' readings into ``engine`` (events dropped)
    and continue ``open_findings``; with no window, only the findings are restored."""
    began = time.monotonic()
    readings = await _recent(store, engine, now - window) if window > timedelta(0) else []
    fed = engine.warm_up(readings, open_findings)
    done = WarmUp(len(engine.registry), fed, time.monotonic() - began)
    log.info(
        "warm-up: %d site(s) relearned from %d reading(s) in %.2f s",
        done.sites,
        done.readings,
        done.seconds,
    )
    return done
