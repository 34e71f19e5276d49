"""FindingRepository on real SQLite and PostgreSQL databases, and restore after a restart."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from gateway.domain import (
    Audience,
    Citation,
    Finding,
    FindingChange,
    FindingEvent,
    Severity,
)
from gateway.rules.sequences import Faults, MiniSump, engine_for, feed, make_site
from gateway.state.database import Database
from gateway.state.findings import FindingRepository
from tests.pg_fixture import StateDbFactory

T0 = datetime(2026, 12, 1, 6, tzinfo=UTC)


def _finding(fid: str, site: str, rule: str, opened: datetime) -> Finding:
    return Finding(
        id=fid, rule_id=rule, site_id=site, severity=Severity.CRITICAL, title="t",
        opened_at=opened, updated_at=opened, level="violation",
        audience=(Audience.HOMEOWNER, Audience.PUBLIC_WORKS),
        evidence={"pit_volume_l": 36.5, "reasons": ["a", "b"]},
        citations=(Citation("000_86c7187f3bed6ca5.txt", "(b)", "No rain spout"),),
        action="do it",
    )  # fmt: skip


async def _repo(state_db: Database) -> FindingRepository:
    repo = FindingRepository(state_db)
    await repo.open()
    return repo


async def test_stored_finding_reads_back_equal(state_db: Database) -> None:
    repo = await _repo(state_db)
    f = _finding("a1", "elm-12", "sanitary_discharge", T0)
    await repo.apply([FindingEvent(FindingChange.OPENED, f)])
    assert await repo.get("a1") == f
    assert await repo.get("nope") is None
    await repo.db.close()


async def test_events_update_one_row_and_are_logged(state_db: Database) -> None:
    repo = await _repo(state_db)
    f = _finding("a1", "elm-12", "icing_risk", T0)
    later = replace(f, updated_at=T0 + timedelta(hours=1), level="warning")
    done = replace(later, cleared_at=T0 + timedelta(hours=2))
    await repo.apply([FindingEvent(FindingChange.OPENED, f)])
    await repo.apply([FindingEvent(FindingChange.UPDATED, later)])
    await repo.apply([FindingEvent(FindingChange.CLEARED, done)])
    assert await repo.list() == [done]
    assert [h["change"] for h in await repo.history("a1")] == ["opened", "updated", "cleared"]
    await repo.db.close()


async def test_filters_by_site_rule_open_and_time(state_db: Database) -> None:
    repo = await _repo(state_db)
    a = _finding("a", "elm-12", "sanitary_discharge", T0)
    b = replace(_finding("b", "elm-14", "high_water", T0 + timedelta(days=1)),
                cleared_at=T0 + timedelta(days=1, hours=2))  # fmt: skip
    c = _finding("c", "elm-14", "sanitary_discharge", T0 + timedelta(days=3))
    await repo.apply([FindingEvent(FindingChange.OPENED, x) for x in (a, b, c)])
    assert [f.id for f in await repo.list()] == ["c", "b", "a"]
    assert [f.id for f in await repo.list(site_id="elm-14")] == ["c", "b"]
    assert [f.id for f in await repo.list(rule_id="sanitary_discharge")] == ["c", "a"]
    assert [f.id for f in await repo.list(open_only=True)] == ["c", "a"]
    assert [f.id for f in await repo.open_findings()] == ["c", "a"]
    window = await repo.list(since=T0 + timedelta(days=1, hours=3), until=T0 + timedelta(days=2))
    assert [f.id for f in window] == ["a"]  # b had cleared, c not yet opened
    assert [f.id for f in await repo.list(limit=1)] == ["c"]
    assert [f.id for f in await repo.list(site_ids=frozenset({"elm-12"}))] == ["a"]
    assert await repo.list(site_ids=frozenset()) == []
    await repo.db.close()


async def test_gateway_restart_continues_open_findings_from_the_store(
    state_db_factory: StateDbFactory,
) -> None:
    site = make_site()
    readings = MiniSump(site, T0, faults=Faults(pump_dead=True)).run(2 * 3600)
    db = state_db_factory()
    await db.open()
    repo = await _repo(db)
    first = engine_for(site)
    await repo.apply(feed(first, readings[: len(readings) // 2]))
    await repo.db.close()

    db = state_db_factory()
    await db.open()
    repo = await _repo(db)  # the restarted gateway
    second = engine_for(site)
    second.restore(await repo.open_findings())
    events = feed(second, readings[len(readings) // 2 :])
    assert FindingChange.OPENED not in {e.change for e in events}
    await repo.apply(events)
    # One finding per rule (a dead pump is high water and a pump failure), none twice.
    assert sorted(f.rule_id for f in await repo.list()) == ["high_water", "pump_failure"]
    await repo.db.close()
