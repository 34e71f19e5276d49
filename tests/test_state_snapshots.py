"""Frozen evidence (issue 15.5): a finding's snapshots at opening and at each level
change, canonical JSON with its SHA-256, never overwritten."""

from __future__ import annotations

import asyncio
import hashlib
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from gateway.contract import NodeKind
from gateway.domain import (
    Audience,
    Citation,
    Finding,
    FindingChange,
    FindingEvent,
    Reading,
    Severity,
    StatusChange,
)
from gateway.errors import StoreError
from gateway.registry import load_registry
from gateway.rules.pack import load_packs
from gateway.runtime import snapshot_context, snapshot_contexts
from gateway.settings import REPO_DIR
from gateway.state.database import Connection, Database, SqliteDatabase
from gateway.state.deadletters import StateRepository
from gateway.state.findings import FindingRepository
from gateway.state.snapshots import SnapshotContext, canonical_json, snapshot_content
from gateway.store.base import SeriesQuery
from gateway.store.sqlite import SqliteStore

T0 = datetime(2026, 12, 1, 6, tzinfo=UTC)
CYCLES = [{"at": "2026-12-01T05:40:00+00:00", "pit_volume_l": 36.5, "outlet_volume_l": 0.0}]


def _finding(level: str = "watch", **changes: object) -> Finding:
    f = Finding(
        id="f1", rule_id="sanitary_discharge", site_id="elm-12", severity=Severity.WARNING,
        title="Sump water may be going into the sanitary sewer", opened_at=T0, updated_at=T0,
        level=level, audience=(Audience.HOMEOWNER, Audience.PUBLIC_WORKS),
        evidence={"cycles": CYCLES, "pit_volume_l": 36.5},
        citations=(Citation("000_86c7187f3bed6ca5.txt", "(b)", "No rain spout"),),
        action="Remove the hose.",
    )  # fmt: skip
    return replace(f, **changes)  # type: ignore[arg-type]


def _context() -> SnapshotContext:
    return SnapshotContext(
        pack="edgar@sha256:0123456789ab",
        window_start=T0 - timedelta(hours=1),
        window_end=T0,
        readings=({"node_id": "pit", "ts": "2026-12-01T05:40:00+00:00",
                   "values": {"level_cm": 31.0}},),
        sensor_health=({"node_id": "pit", "online": True},),
    )  # fmt: skip


@pytest.fixture
async def repo(state_db: Database) -> FindingRepository:
    """Findings on SQLite and on PostgreSQL (each test runs on both)."""
    return FindingRepository(state_db)


async def test_opening_freezes_the_finding_with_its_context(repo: FindingRepository) -> None:
    await repo.apply([FindingEvent(FindingChange.OPENED, _finding())], {"f1": _context()})
    [snap] = await repo.snapshots("f1")
    assert snap.change == "opened" and snap.level == "watch"
    assert snap.data["finding"]["evidence"]["cycles"] == CYCLES
    assert snap.data["pack"] == "edgar@sha256:0123456789ab"
    assert snap.data["readings_window"]["readings"][0]["values"] == {"level_cm": 31.0}
    assert snap.data["sensor_health"] == [{"node_id": "pit", "online": True}]
    assert snap.data["finding"]["citations"][0]["section"] == "(b)"
    await repo.db.close()


async def test_the_hash_is_sha256_of_the_canonical_json(repo: FindingRepository) -> None:
    f = _finding()
    await repo.apply([FindingEvent(FindingChange.OPENED, f)], {"f1": _context()})
    [snap] = await repo.snapshots("f1")
    expected = canonical_json(snapshot_content(f, FindingChange.OPENED, _context()))
    assert snap.content == expected
    assert snap.sha256 == hashlib.sha256(expected.encode("utf-8")).hexdigest()
    assert snap.intact
    await repo.db.close()


async def test_a_level_change_adds_a_snapshot_and_keeps_the_first(repo: FindingRepository) -> None:
    opened = _finding()
    raised = _finding("violation", updated_at=T0 + timedelta(hours=2),
                      evidence={"cycles": CYCLES * 3, "pit_volume_l": 109.5})  # fmt: skip
    await repo.apply([FindingEvent(FindingChange.OPENED, opened)])
    first = await repo.snapshots("f1")
    await repo.apply([FindingEvent(FindingChange.UPDATED, raised)])
    snaps = await repo.snapshots("f1")
    assert [s.level for s in snaps] == ["watch", "violation"]
    assert snaps[0] == first[0]  # what the finding looked like at opening still reads the same
    assert snaps[1].data["finding"]["evidence"]["pit_volume_l"] == 109.5
    await repo.db.close()


async def test_an_update_at_the_same_level_freezes_nothing(repo: FindingRepository) -> None:
    await repo.apply([FindingEvent(FindingChange.OPENED, _finding())])
    later = _finding(updated_at=T0 + timedelta(hours=1), evidence={"pit_volume_l": 40.0})
    await repo.apply([FindingEvent(FindingChange.UPDATED, later)])
    assert len(await repo.snapshots("f1")) == 1
    await repo.db.close()


async def test_stored_snapshots_cannot_be_rewritten(repo: FindingRepository) -> None:
    await repo.apply([FindingEvent(FindingChange.OPENED, _finding())])

    def tamper(conn: Connection) -> None:
        conn.execute("UPDATE finding_snapshots SET content = '{}'")

    with pytest.raises(StoreError, match="frozen"):
        await repo.db.write(tamper)
    with pytest.raises(StoreError, match="frozen"):
        await repo.db.write(lambda conn: conn.execute("DELETE FROM finding_snapshots"))
    assert (await repo.snapshots("f1"))[0].intact
    await repo.db.close()


async def test_the_gateway_freezes_the_sites_readings_window_health_and_pack(
    tmp_path: Path,
) -> None:
    db = SqliteDatabase(tmp_path / "g.db")
    await db.open()
    store, state = SqliteStore(db), StateRepository(db)
    await store.open()
    readings = [
        Reading(site_id="elm-12", node_id="pit", kind=NodeKind.PIT, ts=T0 - timedelta(minutes=m),
                seq=100 - m, boot="b1", values={"level_cm": 30.0 + m, "pump_on": False},
                received_at=T0 - timedelta(minutes=m))
        for m in (90, 30, 10)
    ]  # fmt: skip
    await store.write(readings)
    await state.save([], [StatusChange("elm-12", "pit", True, T0 - timedelta(hours=2))])
    ctx = await snapshot_context(
        _finding(), store=store, state=state, packs=load_packs(),
        registry=load_registry(REPO_DIR / "deploy" / "sites.example.toml"),
    )  # fmt: skip
    # The window is the hour before the finding's time: the 90-minute-old reading is out.
    assert [r["seq"] for r in ctx.readings] == [70, 90]
    assert ctx.readings[0]["values"]["level_cm"] == 60.0
    assert ctx.sensor_health[0]["node_id"] == "pit" and ctx.sensor_health[0]["online"] is True
    assert ctx.pack.startswith("edgar@sha256:")
    await db.close()


async def test_a_store_outage_leaves_a_snapshot_that_says_what_it_lacks(tmp_path: Path) -> None:
    store_db, state_db = SqliteDatabase(tmp_path / "ts.db"), SqliteDatabase(tmp_path / "st.db")
    await store_db.open()
    await state_db.open()
    store = SqliteStore(store_db)
    await store_db.close()  # the time-series store is down
    ctx = await snapshot_context(
        _finding(), store=store, state=StateRepository(state_db), packs=load_packs(),
        registry=load_registry(REPO_DIR / "deploy" / "sites.example.toml"),
    )  # fmt: skip
    assert ctx.readings == () and ctx.note.startswith("readings window not available")
    repo = FindingRepository(state_db)
    await repo.apply([FindingEvent(FindingChange.OPENED, _finding())], {"f1": ctx})
    [snap] = await repo.snapshots("f1")
    assert snap.data["note"] == ctx.note and snap.intact
    await state_db.close()


class _MeetingStore:
    """A store whose window reads return only once ``parties`` of them are under way."""

    def __init__(self, parties: int) -> None:
        self.barrier = asyncio.Barrier(parties)

    async def readings(self, query: SeriesQuery) -> list[Reading]:
        await self.barrier.wait()
        return []


class _NoHealth:
    async def statuses(self, site_id: str) -> list[object]:
        return []


async def test_the_contexts_of_findings_opened_together_are_read_at_once() -> None:
    events = [FindingEvent(FindingChange.OPENED, _finding(id=f"f{i}")) for i in range(3)]
    async with asyncio.timeout(5):  # read one after the other, the first never returns
        contexts = await snapshot_contexts(
            events, store=_MeetingStore(3), state=_NoHealth(), packs=load_packs(),  # type: ignore[arg-type]
            registry=load_registry(REPO_DIR / "deploy" / "sites.example.toml"),
        )  # fmt: skip
    assert sorted(contexts) == ["f0", "f1", "f2"]
    assert all(c.pack.startswith("edgar@sha256:") for c in contexts.values())
