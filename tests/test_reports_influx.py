"""The winter report is the same on both stores: SQLite and a real influxd.

The same readings go into a SqliteStore and an InfluxStore, each rolls them up,
and the property report's CSV must come out byte for byte the same.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from gateway.contract import NodeKind
from gateway.domain import Reading
from gateway.registry.models import SiteConfig, SiteRegistry
from gateway.reports.assemble import assemble_site_report
from gateway.reports.render_csv import site_csv
from gateway.reports.sources import ReportSources
from gateway.rules.pack import load_packs
from gateway.state.database import SqliteDatabase
from gateway.store.base import TimeSeriesStore
from gateway.store.factory import make_store
from gateway.store.sqlite import SqliteStore
from tests import influx_fixture
from tests.conftest import MakeSettings
from tests.influx_fixture import T0, InfluxServer, pit_series, reading

influxd = influx_fixture.influxd
influx_database = influx_fixture.influx_database

pytestmark = pytest.mark.integration

SITE = SiteConfig.model_validate(
    {
        "id": "elm-12",
        "name": "12 Elm St",
        "jurisdiction": "edgar",
        "nodes": [
            {"id": "pit", "kind": "pit", "interval_s": 5},
            {"id": "outlet", "kind": "discharge", "interval_s": 5},
            {"id": "air", "kind": "air", "interval_s": 60},
        ],
    }
)


def two_hours() -> list[Reading]:
    """Pit and outlet every 5 s (the pump runs 4 samples in 12), air every minute."""
    pit = pit_series(1440)
    outlet = [
        reading(
            NodeKind.DISCHARGE,
            i,
            node="outlet",
            ts=T0 + timedelta(seconds=5 * i),
            flow_lpm=120.0 if i % 12 >= 8 else 0.0,
            pressure_kpa=12.0,
            pipe_temp_c=-1.0,
        )
        for i in range(1440)
    ]
    air = [
        reading(NodeKind.AIR, i, node="air", ts=T0 + timedelta(minutes=i), air_temp_c=-5.0)
        for i in range(120)
    ]
    return pit + outlet + air


async def _report_csv(store: TimeSeriesStore) -> str:
    await store.write(two_hours())
    await store.refresh_rollups(T0 + timedelta(days=1))
    sources = ReportSources(SiteRegistry([SITE]), load_packs(), store)
    report = await assemble_site_report(sources, "elm-12", "2025-2026", now=T0 + timedelta(hours=3))
    assert report.totals.pump_cycles == 120
    return site_csv(report)


async def test_sqlite_and_influxdb_give_the_same_report(
    tmp_path: Path, make_settings: MakeSettings, influxd: InfluxServer, influx_database: str
) -> None:
    lite_db = SqliteDatabase(tmp_path / "lite.db")
    await lite_db.open()
    lite = SqliteStore(lite_db)
    await lite.open()
    try:
        from_sqlite = await _report_csv(lite)
    finally:
        await lite_db.close()

    settings = make_settings(
        data_dir=tmp_path / "influx",
        store={"backend": "influxdb"},
        influx={"url": influxd.url, "database": influx_database},
    )
    settings.data_dir.mkdir(parents=True)
    side_db = SqliteDatabase(settings.sqlite_file)
    await side_db.open()
    influx = make_store(
        settings.store, settings.influx, side_db, spool_dir=settings.data_dir / "spool"
    )
    await influx.open()
    try:
        from_influx = await _report_csv(influx)
    finally:
        await influx.close()
        await side_db.close()

    assert from_influx == from_sqlite
    total = from_sqlite.splitlines()[-1].split(",")
    assert total[1] == "TOTAL" and total[4] == "120"
