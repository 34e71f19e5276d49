"""Village winter report benchmark: 1,000 sites x a full season of 1-hour rollups.

Builds a temporary SQLite store the way the gateway leaves it after a winter:
per site a pit, an outlet and an air node, one 1-hour rollup per node and hour
from Nov 15 to Apr 15 (about 11,000 rows a site, 11 million in all), generated
directly (this is a benchmark of the report path, not of ingest), plus findings
for the sites with a sanitary hose or an icy walk. The generated hours mark their
days for the rollup job, which is then run once (``refresh_rollups``: it reduces
the hours to day rollups, as it does a day at a time in service), and timed.

Then, each from nothing, as a clerk asks for them (``build_winter_report``, the
entry point of the CLI, the API and the schedule): the village report as HTML, as
PDF and as CSV, and one site's PDF; with the parts (assembly, each renderer), the
load average and peak memory (issue 17 item 5: PDF < 60 s, HTML < 10 s, one
site's PDF < 1 s, RSS <= 300 MB).

Usage::

    python bench/report_bench.py                 # 1,000 sites, full season
    python bench/report_bench.py --sites 100     # smaller
    python bench/report_bench.py --db /tmp/r.db  # keep / reuse the generated store
    python bench/report_bench.py --tracemalloc   # also trace Python allocations (slower)
    python bench/report_bench.py --digest        # also a digest of every report's content

The digest (sha256 of every site's report ``repr``, the village report's and its
HTML and CSV) is the same before and after a change exactly when the reports are:
``repr`` writes each float to the last bit. Run it on the same ``--db`` with the
code before and after (e.g. an old checkout first on ``PYTHONPATH``).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import math
import os
import random
import resource
import sqlite3
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Awaitable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TypeVar

from gateway.domain import Citation, Finding, FindingChange, FindingEvent, Severity
from gateway.registry.models import SiteConfig, SiteRegistry
from gateway.reports.assemble import assemble_site_report, assemble_village_report
from gateway.reports.render_csv import village_csv
from gateway.reports.render_html import village_html
from gateway.reports.render_pdf import village_pdf
from gateway.reports.season import season_period
from gateway.reports.service import build_winter_report
from gateway.reports.sources import ReportSources, SqliteAlerts
from gateway.rules.pack import load_packs
from gateway.state.database import SqliteDatabase
from gateway.state.findings import FindingRepository
from gateway.state.migrations import upgrade
from gateway.store.sqlite import SqliteStore

SEASON = "2026-2027"
TZ = "America/Chicago"
BAND_L = 22.0 * math.pi * 23.0**2 / 1000  # default pit, 36.6 L a cycle
EDGAR_B = Citation("000_86c7187f3bed6ca5.txt", "(b)")
EDGAR_ICE = Citation("000_86c7187f3bed6ca5.txt", "(c)(2)c")
NOW = datetime(2027, 5, 1, tzinfo=UTC)  # after the season: the whole of it
T = TypeVar("T")


def make_sites(n: int) -> list[SiteConfig]:
    """n Edgar homes with pit, outlet and air nodes; every 10th near a walkway."""
    return [
        SiteConfig.model_validate(
            {
                "id": f"s{i:04d}",
                "name": f"{100 + i} Main St",
                "address": f"{100 + i} Main St, Edgar WI",
                "jurisdiction": "edgar",
                "timezone": TZ,
                "nodes": [
                    {"id": "pit", "kind": "pit"},
                    {"id": "outlet", "kind": "discharge"},
                    {"id": "air", "kind": "air"},
                ],
                "installation": {
                    "destination": "grade",
                    "outlet_to_walkway_ft": 6 if i % 10 == 0 else 30,
                },
            }
        )
        for i in range(n)
    ]


def _stats(prefix: str, lo: float, hi: float, count: int) -> dict[str, float]:
    return {
        f"{prefix}_count": count,
        f"{prefix}_min": lo,
        f"{prefix}_max": hi,
        f"{prefix}_mean": (lo + hi) / 2,
        f"{prefix}_last": hi,
    }


def generate(path: Path, sites: list[SiteConfig], seed: int = 1) -> int:
    """Write a season of hourly rollups for every site; return the rows written."""
    period = season_period(SEASON, load_packs()["edgar"], TZ)
    hours = int((period.end - period.start).total_seconds() // 3600)
    start = int(period.start.timestamp())
    rng = random.Random(seed)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=OFF")
    upgrade(conn)
    # The village shares its weather: a seasonal curve, a daily swing, and noise.
    air = [
        -8.0 * math.sin(math.pi * h / hours)
        + 5.0 * math.sin(2 * math.pi * ((h - 9) % 24) / 24)
        + rng.gauss(0, 2)
        for h in range(hours)
    ]
    pit_cols = (
        "samples",
        "pump_cycles",
        "pump_on_s",
        "level_cm_count",
        "level_cm_min",
        "level_cm_max",
        "level_cm_mean",
        "level_cm_last",
    )
    out_cols = (
        "samples",
        "pumped_volume_l",
        "flow_lpm_count",
        "flow_lpm_min",
        "flow_lpm_max",
        "flow_lpm_mean",
        "flow_lpm_last",
        "pipe_temp_c_count",
        "pipe_temp_c_min",
        "pipe_temp_c_max",
        "pipe_temp_c_mean",
        "pipe_temp_c_last",
    )
    air_cols = (
        "samples",
        "air_temp_c_count",
        "air_temp_c_min",
        "air_temp_c_max",
        "air_temp_c_mean",
        "air_temp_c_last",
    )

    def insert(kind: str, cols: tuple[str, ...]) -> str:
        names = ("site_id", "node_id", "bucket", "kind", *cols)
        return (
            f"INSERT OR REPLACE INTO rollup_1h ({', '.join(names)}) "
            f"VALUES ({', '.join('?' for _ in names)})"
        )

    sql_pit, sql_out, sql_air = (
        insert("pit", pit_cols),
        insert("discharge", out_cols),
        insert("air", air_cols),
    )
    rows = 0
    for i, site in enumerate(sites):
        inflow_lph = rng.uniform(20, 120)  # groundwater into the pit, L/h
        hose = i % 50 == 7  # 2 % pump into the laundry tub all winter
        outage = rng.random() < 0.05  # 5 % lose their outlet sensor for a week
        outage_from = rng.randrange(hours - 200)
        pit_rows, out_rows, air_rows = [], [], []
        for h in range(hours):
            bucket = start + 3600 * h
            cycles = int(inflow_lph * (1 + 0.3 * math.sin(h / 97)) / BAND_L + rng.random())
            pit_rows.append(
                (
                    site.id,
                    "pit",
                    bucket,
                    "pit",
                    360 + 2 * cycles,
                    cycles,
                    15.0 * cycles,
                    360,
                    18.0,
                    40.0,
                    29.0,
                    25.0,
                )
            )
            if not (outage and outage_from <= h < outage_from + 168):
                volume = 0.0 if hose else cycles * BAND_L * rng.uniform(0.95, 1.05)
                pipe = air[h] + 6.0
                out_rows.append(
                    (
                        site.id,
                        "outlet",
                        bucket,
                        "discharge",
                        360,
                        volume,
                        360,
                        0.0,
                        150.0 if volume else 0.0,
                        volume / 60,
                        0.0,
                        360,
                        pipe - 1,
                        pipe + 1,
                        pipe,
                        pipe,
                    )
                )
            t = air[h]
            air_rows.append((site.id, "air", bucket, "air", 60, 60, t - 1, t + 1, t, t))
        conn.executemany(sql_pit, pit_rows)
        conn.executemany(sql_out, out_rows)
        conn.executemany(sql_air, air_rows)
        rows += len(pit_rows) + len(out_rows) + len(air_rows)
        if i % 50 == 49:
            conn.commit()
            print(f"  generated {i + 1}/{len(sites)} sites ({rows:,} rows)", file=sys.stderr)
    # What the store's save_rollups does for hours it writes: mark their days.
    conn.execute(
        "INSERT OR IGNORE INTO rollup_1d_dirty (site_id, node_id, day) "
        "SELECT DISTINCT site_id, node_id, CAST(bucket / 86400 AS INTEGER) * 86400 FROM rollup_1h"
    )
    conn.commit()
    conn.close()
    return rows


async def add_findings(db: SqliteDatabase, sites: list[SiteConfig]) -> int:
    """Open sanitary findings for the hose homes and icing episodes for the near-walk ones."""
    repo = FindingRepository(db)
    await repo.open()
    season_start = datetime(2026, 11, 15, 6, tzinfo=UTC)
    events = []
    for i, site in enumerate(sites):
        if i % 50 == 7:
            rule, cite, level = "sanitary_discharge", EDGAR_B, "violation"
            opened, cleared = season_start + timedelta(hours=5), None
        elif i % 10 == 0:
            rule, cite, level = "icing_risk", EDGAR_ICE, "violation"
            opened = datetime(2027, 1, 10, 12, tzinfo=UTC)
            cleared = opened + timedelta(days=3)
        else:
            continue
        f = Finding(
            id=f"{site.id}-{rule}",
            rule_id=rule,
            site_id=site.id,
            severity=Severity.CRITICAL,
            title=rule.replace("_", " "),
            opened_at=opened,
            updated_at=cleared or opened,
            cleared_at=cleared,
            level=level,
            citations=(cite,),
        )
        events.append(FindingEvent(FindingChange.OPENED, f))
    await repo.apply(events)
    return len(events)


def rss_mib() -> float:
    """Peak resident set size of this process so far, MiB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def load() -> str:
    """The 1-minute load average (the machine is shared: say how busy it was)."""
    return f"{os.getloadavg()[0]:.2f}"


async def timed(label: str, coro: Awaitable[T]) -> tuple[T, float]:
    """Await ``coro``; print and return its wall time."""
    t0 = time.perf_counter()
    result = await coro
    seconds = time.perf_counter() - t0
    print(f"  {label:<44} {seconds:8.2f} s  (load {load()})")
    return result, seconds


async def digest(sources: ReportSources, sites: list[SiteConfig]) -> str:
    """sha256 of every site's report, the village report, and its HTML and CSV."""
    h = hashlib.sha256()
    for site in sites:
        h.update(repr(await assemble_site_report(sources, site.id, SEASON, now=NOW)).encode())
    village = await assemble_village_report(sources, SEASON, jurisdiction="edgar", now=NOW)
    for part in (repr(village), village_html(village), village_csv(village)):
        h.update(part.encode())
    return h.hexdigest()


async def run(args: argparse.Namespace) -> None:
    sites = make_sites(args.sites)
    tmp = tempfile.TemporaryDirectory(prefix="report-bench-")
    path = Path(args.db) if args.db else Path(tmp.name) / "bench.db"
    if not path.exists():
        t0 = time.perf_counter()
        rows = await asyncio.to_thread(generate, path, sites)
        print(f"generated {rows:,} rollup rows in {time.perf_counter() - t0:.1f} s")
    db = SqliteDatabase(path)
    await db.open()
    store = SqliteStore(db)
    await store.open()
    findings = await add_findings(db, sites)
    print(
        f"store: {path.stat().st_size / 1e6:,.0f} MB SQLite, "
        f"{len(sites)} sites, {findings} findings"
    )
    print(f"load average at the start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    await timed("rollup job: hours -> day rollups (backlog)", store.refresh_rollups(NOW))
    sources = ReportSources(
        SiteRegistry(sites), load_packs(), store, FindingRepository(db), SqliteAlerts(db)
    )
    rss_before = rss_mib()
    if args.tracemalloc:
        tracemalloc.start()
    print(f"village report for {len(sites)} sites, {SEASON} (Nov 15 - Apr 15), each from nothing:")
    report, t_assemble = await timed(
        "assemble (days, findings, audit, alerts)",
        assemble_village_report(sources, SEASON, jurisdiction="edgar", now=NOW),
    )
    print(f"    {1000 * t_assemble / max(1, len(sites)):.1f} ms a site")
    for name, fn in (("csv", village_csv), ("html", village_html), ("pdf", village_pdf)):
        t1 = time.perf_counter()
        size = len(fn(report))
        print(f"  render {name:<4} {time.perf_counter() - t1:8.2f} s  ({size / 1e3:,.0f} kB)")
    whole: dict[str, float] = {}
    for fmt in ("html", "pdf"):
        _, whole[fmt] = await timed(
            f"village {fmt} (build_winter_report)",
            build_winter_report(sources, SEASON, fmt, jurisdiction="edgar", now=NOW),
        )
    _, whole["site pdf"] = await timed(
        f"one site's pdf ({sites[7].id}, a hose home)",
        build_winter_report(sources, SEASON, "pdf", site=sites[7].id, now=NOW),
    )
    traced = tracemalloc.get_traced_memory()[1] / 2**20 if args.tracemalloc else None
    if args.digest:
        print(f"digest of every report: {await digest(sources, sites)}")
    await db.close()
    print(f"peak RSS: {rss_mib():,.0f} MiB (before the report: {rss_before:,.0f} MiB)")
    if traced is not None:
        print(f"peak traced Python allocations during the report: {traced:,.0f} MiB")
    targets = {"html": 10.0, "pdf": 60.0, "site pdf": 1.0}
    for name, limit in targets.items():
        print(f"target {name}: {whole[name]:.2f} s / {limit:.0f} s = {whole[name] / limit:.2f}")
    print(
        f"totals: {report.totals.outlet_volume_l / 1000:,.0f} m3 at outlets, "
        f"{report.totals.sanitary_l / 1000:,.0f} m3 suspected sanitary, "
        f"{report.totals.sites_in_violation} sites in violation, "
        f"{len(report.priority)} to inspect or order"
    )
    tmp.cleanup()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sites", type=int, default=1000)
    parser.add_argument("--db", help="Keep the generated store here (reused if it exists)")
    parser.add_argument("--tracemalloc", action="store_true")
    parser.add_argument(
        "--digest", action="store_true", help="Also print a digest of every report's content"
    )
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
