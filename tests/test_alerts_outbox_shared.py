"""Gateways on several hosts share one outbox in PostgreSQL: each notification is
claimed, and sent, by one of them (FOR UPDATE SKIP LOCKED), and a dead gateway's
claims come back once they run out."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta

import psycopg
import pytest

from alerts import outbox
from gateway.domain import FindingChange
from gateway.registry.models import Contact
from gateway.state.postgres import PgConnection, PostgresDatabase, pg_row
from tests.test_alerts_manager import Harness, ev, finding, make, violation

OWNERS = tuple(Contact(name=f"Owner {i}", email=f"owner{i}@example.org") for i in range(12))


@pytest.fixture
async def shared(pg_url: str) -> AsyncIterator[tuple[PostgresDatabase, PostgresDatabase]]:
    """Two gateways' connections to one state database."""
    first, second = PostgresDatabase(pg_url), PostgresDatabase(pg_url)
    await first.open()
    await second.open()
    yield first, second
    await first.close()
    await second.close()


async def _queued(db: PostgresDatabase) -> Harness:
    """An alert opened for twelve owners: twelve notifications due now."""
    harness = make(db, contacts=OWNERS)
    await harness.manager.open()
    await harness.manager.on_events([ev(FindingChange.OPENED, finding())])
    return harness


async def test_a_gateway_claims_around_rows_another_holds_without_waiting(
    shared: tuple[PostgresDatabase, PostgresDatabase], pg_url: str
) -> None:
    db, _ = shared
    now = (await _queued(db)).clock.now
    with psycopg.connect(pg_url, row_factory=pg_row) as first:
        # The first gateway's claim is still uncommitted (its rows locked) ...
        held = outbox.claim(PgConnection(first), now, 5, skip_locked=True)
        # ... and the second takes the rest at once instead of waiting on those.
        rest = await asyncio.wait_for(
            db.write(lambda conn: outbox.claim(conn, now, 100, skip_locked=True)), 5
        )
        first.commit()
    held_ids, rest_ids = {n.id for n, _ in held}, {n.id for n, _ in rest}
    assert (len(held_ids), len(rest_ids)) == (5, 7)
    assert not held_ids & rest_ids


async def test_two_gateways_delivering_at_once_send_each_notification_once(
    shared: tuple[PostgresDatabase, PostgresDatabase],
) -> None:
    first_db, second_db = shared
    first = await _queued(first_db)
    second = make(second_db, contacts=OWNERS, clock=first.clock)
    await second.manager.open()
    for _ in range(5):
        await asyncio.gather(first.manager.run_once(), second.manager.run_once())
    sent = [m.recipient for m in (*first.email.sent, *second.email.sent)]
    assert sorted(sent) == sorted(o.email for o in OWNERS if o.email)


async def test_a_claim_that_ran_out_is_taken_back_and_a_live_one_is_not(
    shared: tuple[PostgresDatabase, PostgresDatabase],
) -> None:
    db, other = shared
    now = (await _queued(db)).clock.now
    lease = timedelta(minutes=10)
    await db.write(lambda conn: outbox.claim(conn, now, 3, skip_locked=True, lease=lease))

    async def recover_at(later: timedelta) -> int:
        return await other.write(
            lambda conn: outbox.recover_interrupted(
                conn, now + later, owner="another", skip_locked=True
            )
        )

    alive, dead = await recover_at(timedelta(minutes=5)), await recover_at(timedelta(minutes=11))
    assert (alive, dead) == (0, 3)


async def test_two_gateways_escalate_a_violation_to_public_works_once(
    shared: tuple[PostgresDatabase, PostgresDatabase],
) -> None:
    first_db, second_db = shared
    first = make(first_db, grace=timedelta(days=10))
    second = make(second_db, grace=timedelta(days=10), clock=first.clock, email=first.email)
    await first.manager.open()
    await second.manager.open()
    await first.manager.on_events([ev(FindingChange.OPENED, violation())])
    first.clock.advance(days=10, seconds=1)
    for _ in range(3):
        await asyncio.gather(first.manager.run_once(), second.manager.run_once())
    assert first.email.reasons("pw@edgar.example") == ["escalated"]


async def test_an_action_on_a_web_server_waits_for_a_gateways_change_and_keeps_it(
    shared: tuple[PostgresDatabase, PostgresDatabase], pg_url: str
) -> None:
    db, _ = shared
    harness = await _queued(db)
    (alert,) = await harness.manager.list_alerts()
    with psycopg.connect(pg_url) as gateway:
        # A gateway's reminder, not yet committed, when someone acknowledges the alert.
        gateway.execute("UPDATE alerts SET repeats = 5 WHERE id = %s", (alert.id,))
        ack = asyncio.create_task(harness.manager.acknowledge(alert.id, by="ann"))
        await asyncio.sleep(0.3)
        assert not ack.done()  # it waits for the row instead of reading it stale
        gateway.commit()
        acknowledged = await asyncio.wait_for(ack, 5)
    assert (acknowledged.state.value, acknowledged.repeats) == ("acknowledged", 5)
