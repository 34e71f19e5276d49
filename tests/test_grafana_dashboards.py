"""Issue 6: the provisioned Grafana dashboards are valid and query what the gateway writes.

Static: every dashboard JSON parses into (a strict subset of) Grafana's dashboard JSON
model, schema version 39: unique panel ids, a grid layout, each panel and query on the
provisioned InfluxDB datasource, raw InfluxQL. Every measurement a query reads and
every field it names is one the InfluxDB store writes.
Live: every query (with Grafana's macros filled in) runs without error on a real
influxd holding data written by the store, and returns data.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

import httpx
import pytest
import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator

from gateway.contract import NodeKind
from gateway.domain import Finding, FindingChange, FindingEvent, Severity, StatusChange
from gateway.settings import REPO_DIR
from gateway.state.database import SqliteDatabase
from gateway.store.influx import TAGS, InfluxStore, measurement_fields
from tests import influx_fixture
from tests.conftest import MakeSettings
from tests.influx_fixture import InfluxServer, pit_series, reading

influxd = influx_fixture.influxd

GRAFANA = REPO_DIR / "dashboards" / "grafana"
PROVISIONING = REPO_DIR / "deploy" / "grafana" / "provisioning"
DASHBOARDS = sorted((GRAFANA / "dashboards").glob("*.json"))
DATASOURCE_UID = "sumpwatch-influx"
SITE = "elm-12"


# -- Grafana's dashboard JSON model (the parts we rely on) -------------------------------


class DatasourceRef(BaseModel):
    model_config = ConfigDict(extra="forbid")
    type: Literal["influxdb"]
    uid: Literal["sumpwatch-influx"]


class Target(BaseModel):
    model_config = ConfigDict(extra="forbid")
    refId: str = Field(pattern=r"^[A-Z]$")
    datasource: DatasourceRef
    rawQuery: Literal[True]
    resultFormat: Literal["time_series", "table"]
    query: str = Field(min_length=10)
    alias: str | None = None


class GridPos(BaseModel):
    model_config = ConfigDict(extra="forbid")
    h: int = Field(gt=0)
    w: int = Field(gt=0, le=24)
    x: int = Field(ge=0, lt=24)
    y: int = Field(ge=0)


class Panel(BaseModel):
    model_config = ConfigDict(extra="allow")
    id: int
    type: Literal["stat", "table", "timeseries", "state-timeline", "bargauge", "gauge"]
    title: str = Field(min_length=1)
    datasource: DatasourceRef
    gridPos: GridPos
    targets: list[Target] = Field(min_length=1)
    fieldConfig: dict[str, Any]
    options: dict[str, Any]

    @field_validator("targets")
    @classmethod
    def _unique_ref_ids(cls, targets: list[Target]) -> list[Target]:
        assert len({t.refId for t in targets}) == len(targets), "refIds repeat"
        return targets


class Variable(BaseModel):
    model_config = ConfigDict(extra="allow")
    name: str
    type: Literal["query", "custom", "interval", "constant"]
    datasource: DatasourceRef
    query: str


class Templating(BaseModel):
    list: list[Variable]


class TimeRange(BaseModel):
    model_config = ConfigDict(populate_by_name=True)
    from_: str = Field(alias="from")
    to: str


class Dashboard(BaseModel):
    model_config = ConfigDict(extra="allow")
    uid: str = Field(pattern=r"^[a-zA-Z0-9_-]{1,40}$")
    title: str
    schemaVersion: int = Field(ge=36)
    version: int
    panels: list[Panel] = Field(min_length=1)
    templating: Templating
    time: TimeRange
    tags: list[str]


def load(path: Path) -> Dashboard:
    return Dashboard.model_validate(json.loads(path.read_text()))


def queries(dashboard: Dashboard) -> list[str]:
    return [t.query for p in dashboard.panels for t in p.targets] + [
        v.query for v in dashboard.templating.list
    ]


# -- InfluxQL references -----------------------------------------------------------------

_FROM = re.compile(r'FROM\s+((?:"[a-z0-9_]+"\s*,?\s*)+)')
_QUOTED = re.compile(r'"([A-Za-z0-9_]+)"')
_ALIAS = re.compile(r'\bAS\s+"([A-Za-z0-9_]+)"')
_KEY = re.compile(r'WITH KEY = "([a-z_]+)"')


def references(query: str) -> tuple[set[str], set[str]]:
    """(measurements, field names) a query reads; tags, aliases and keys are left out."""
    measurements: set[str] = set()
    for group in _FROM.findall(query):
        measurements.update(_QUOTED.findall(group))
    names = set(_QUOTED.findall(query)) - measurements - TAGS
    names -= set(_ALIAS.findall(query)) | set(_KEY.findall(query))
    return measurements, names


# -- static checks -----------------------------------------------------------------------


def test_there_are_the_three_dashboards_of_the_issue() -> None:
    uids = {load(p).uid for p in DASHBOARDS}
    assert uids == {"sumpwatch-overview", "sumpwatch-site", "sumpwatch-winter"}


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.stem)
def test_each_dashboard_fits_grafanas_model(path: Path) -> None:
    dashboard = load(path)
    ids = [p.id for p in dashboard.panels]
    assert len(set(ids)) == len(ids), "panel ids repeat"
    for panel in dashboard.panels:
        assert panel.gridPos.x + panel.gridPos.w <= 24, panel.title


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.stem)
def test_every_query_reads_measurements_and_fields_the_gateway_writes(path: Path) -> None:
    written = measurement_fields()
    for query in queries(load(path)):
        measurements, fields = references(query)
        assert measurements, f"no measurement in: {query}"
        unknown = measurements - written.keys()
        assert not unknown, f"unknown measurement {unknown} in: {query}"
        available = set().union(*(written[m] for m in measurements))
        assert fields <= available, f"unknown fields {fields - available} in: {query}"


def test_the_reference_check_catches_a_misspelt_field() -> None:
    _, fields = references('SELECT mean("level_cm"), max("levl_cm") AS "x" FROM "pit"')
    assert fields == {"level_cm", "levl_cm"}
    assert not fields <= measurement_fields()["pit"]


def test_the_provisioned_datasource_is_the_one_the_dashboards_use() -> None:
    provisioning = yaml.safe_load((PROVISIONING / "datasources" / "sumpwatch.yaml").read_text())
    (source,) = provisioning["datasources"]
    assert (source["uid"], source["type"]) == (DATASOURCE_UID, "influxdb")
    assert source["jsonData"]["dbName"] == "${SUMPWATCH_INFLUX_DATABASE}"
    providers = yaml.safe_load((PROVISIONING / "dashboards" / "sumpwatch.yaml").read_text())
    assert providers["providers"][0]["type"] == "file"


# -- live: every query runs on a real influxd with the store's data -----------------------


@pytest.fixture(scope="module")
def now() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


@pytest.fixture
async def populated(
    make_settings: MakeSettings, influxd: InfluxServer, now: datetime
) -> AsyncIterator[tuple[InfluxServer, str]]:
    database = "dashboards"
    settings = make_settings(
        store={"backend": "influxdb"}, influx={"url": influxd.url, "database": database}
    )
    settings.data_dir.mkdir(parents=True)
    db = SqliteDatabase(settings.sqlite_file)
    await db.open()
    store = InfluxStore(settings.influx, db, spool_dir=settings.data_dir / "spool")
    await store.open()
    start = now - timedelta(hours=2)
    await store.write(pit_series(1400, site=SITE, start=start))
    await store.write(pit_series(1400, site=SITE, start=start, start_seq=0, node="pit2"))
    others = []
    for i in range(0, 1400, 6):
        ts = start + timedelta(seconds=5 * i)
        others.append(
            reading(
                NodeKind.DISCHARGE,
                i,
                site=SITE,
                node="outlet",
                ts=ts,
                flow_lpm=90.0 if i % 12 >= 8 else 0.0,
                pressure_kpa=18.0,
                pipe_temp_c=-2.0,
            )
        )
        others.append(reading(NodeKind.AIR, i, site=SITE, node="air", ts=ts, air_temp_c=-8.0))
        others.append(
            reading(
                NodeKind.PIT,
                i,
                site=SITE,
                node="pit3",
                ts=ts,
                level_cm=30.0,
                pump_on=True,
                backup_pump_on=i % 12 == 0,
            )
        )
    await store.write(others)
    findings = [
        Finding(
            id=f"f-{rule}",
            rule_id=rule,
            site_id=SITE,
            severity=Severity.WARNING,
            title=f"{rule} at {SITE}",
            opened_at=now - timedelta(hours=1),
            updated_at=now - timedelta(hours=1),
            level="watch",
        )
        for rule in ("icing_risk", "frozen_line")
    ]
    await store.write_events(
        statuses=[StatusChange(SITE, node, True, start) for node in ("pit", "outlet", "air")],
        findings=[FindingEvent(FindingChange.OPENED, f) for f in findings],
    )
    await store.refresh_rollups(now + timedelta(hours=1))
    yield influxd, database
    await store.close()
    await db.close()


def grafana_macros(query: str) -> str:
    """Fill in what Grafana substitutes before sending a query."""
    return (
        query.replace("$timeFilter", "time > now() - 1d")
        .replace("$__interval", "1m")
        .replace("/^$site$/", f"/^{SITE}$/")
    )


async def test_every_dashboard_query_runs_and_returns_data(
    populated: tuple[InfluxServer, str],
) -> None:
    server, database = populated
    failures = []
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
        for path in DASHBOARDS:
            for query in queries(load(path)):
                resp = await client.get(
                    "/query", params={"db": database, "q": grafana_macros(query), "epoch": "ms"}
                )
                (result,) = resp.json()["results"]
                if resp.status_code != 200 or "error" in result or not result.get("series"):
                    failures.append(f"{path.name}: {query} -> {result}")
    assert not failures, "\n".join(failures)
