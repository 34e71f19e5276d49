"""Public-works console benchmark: the console's data for 1,000 registered sites.

Builds a temporary SQLite store with an hour of 5 s readings from each site's pit,
outlet and air node (about 2 million rows: ``latest`` has to find the newest among
them), open findings for the hose homes (2 %) and the walkway homes (10 %), then
times ``gateway.web.views.console_view`` (what ``/console/<village>`` and its
``view.json`` and live panels render) several times, and prints the median, the
load average and the target ratio (issue 17 item 5: < 300 ms for 1,000 sites).

Usage::

    python bench/console_bench.py                # 1,000 sites
    python bench/console_bench.py --sites 100
    python bench/console_bench.py --digest       # also a digest of the console's data

The digest (sha256 of the view's JSON, every float to the last bit) is the same
before and after a change exactly when the console's data is.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from report_bench import add_findings, make_sites

from gateway.accounts.models import Principal, Role
from gateway.contract import NodeKind
from gateway.domain import Reading
from gateway.registry.models import SiteRegistry
from gateway.rules.pack import load_packs
from gateway.services import Services
from gateway.state.database import SqliteDatabase
from gateway.state.deadletters import StateRepository
from gateway.state.findings import FindingRepository
from gateway.store.sqlite import SqliteStore
from gateway.web.views import console_view

STAFF = Principal("clerk", Role.PUBLIC_WORKS, jurisdictions=frozenset({"edgar"}))
TARGET_S = 0.3
NOW = datetime(2027, 1, 12, 12, tzinfo=UTC)  # inside the walkway homes' icing episode


def _hour_of(site_id: str, start: datetime) -> list[Reading]:
    """An hour of 5 s readings of one site's three nodes."""
    out = []
    for i in range(720):
        ts = start + timedelta(seconds=5 * i)
        out += [
            Reading(site_id, "pit", NodeKind.PIT, ts, i, "b", {"level_cm": 25.0}, ts),
            Reading(site_id, "outlet", NodeKind.DISCHARGE, ts, i, "b", {"flow_lpm": 0.0}, ts),
            Reading(site_id, "air", NodeKind.AIR, ts, i, "b", {"air_temp_c": -3.0}, ts),
        ]
    return out


async def run(args: argparse.Namespace) -> None:
    sites = make_sites(args.sites)
    tmp = tempfile.TemporaryDirectory(prefix="console-bench-")
    db = SqliteDatabase(Path(tmp.name) / "console.db")
    await db.open()
    store = SqliteStore(db)
    await store.open()
    t0 = time.perf_counter()
    for site in sites:
        await store.write(_hour_of(site.id, NOW - timedelta(hours=1)))
    print(f"stored {await store.count():,} readings in {time.perf_counter() - t0:.1f} s")
    findings = FindingRepository(db)
    await findings.open()
    opened = await add_findings(db, sites)
    services = Services(
        data_dir=Path(tmp.name),
        registry=SiteRegistry(sites),
        packs=load_packs(),
        store=store,
        db=db,
        findings=findings,
        alerts=None,
        state=StateRepository(db),
    )
    village = services.registry.in_jurisdiction("edgar")
    times = []
    for _ in range(args.repeat):
        t1 = time.perf_counter()
        view = await console_view(services, "edgar", village, STAFF, "us", now=NOW)
        times.append(time.perf_counter() - t1)
    await db.close()
    tmp.cleanup()
    if args.digest:
        data = view.model_dump_json().encode()
        print(f"digest of the console's data: {hashlib.sha256(data).hexdigest()}")
    median = statistics.median(times)
    print(f"console data for {len(view.rows)} sites, {opened} findings, alerts not wired:")
    print(f"  runs: {', '.join(f'{1000 * t:.0f}' for t in times)} ms")
    print(
        f"  median {1000 * median:.0f} ms "
        f"(target {1000 * TARGET_S:.0f} ms: ratio {median / TARGET_S:.2f})"
    )
    print(f"  load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"  rows with a problem: {sum(r.status == 'problem' for r in view.rows)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sites", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--digest", action="store_true", help="Also print a digest of the data")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
