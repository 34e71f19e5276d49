"""Alert lifecycle, routing and outbox behaviour of AlertManager on a real SQLite file.

Delivery here goes to an in-memory recording channel so the lifecycle rules can be
read one at a time; tests/test_alerts_delivery.py sends through real servers.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

import pytest

from alerts import AlertManager, AlertQuery, AlertsConfig, AlertState, InvalidTransition
from alerts.config import Jurisdiction, Recipient, RetryPolicy
from alerts.models import DeliveryResult, NotificationStatus, OutgoingMessage, Reason
from gateway.domain import Audience, Citation, Finding, FindingChange, FindingEvent, Severity
from gateway.registry.models import Contact, NodeConfig, SiteConfig, SiteRegistry
from gateway.state.database import Database

T0 = datetime(2026, 1, 15, 18, 0, tzinfo=UTC)  # noon in Chicago
CITE = (Citation("000_86c7187f3bed6ca5.txt", "(c)(2)b", "shall not discharge"),)


class Clock:
    """A hand-moved clock."""

    def __init__(self, now: datetime = T0) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **kw: float) -> None:
        self.now += timedelta(**kw)


@dataclass
class Recorder:
    """A channel that keeps what it was asked to send; can be told to fail."""

    name: str = "email"
    sent: list[OutgoingMessage] = field(default_factory=list)
    fail: int = 0  # fail this many sends first
    permanent: bool = False

    async def send(self, message: OutgoingMessage) -> DeliveryResult:
        if self.fail > 0:
            self.fail -= 1
            return DeliveryResult(False, "down", permanent=self.permanent)
        self.sent.append(message)
        return DeliveryResult(True, "ok")

    def reasons(self, recipient: str | None = None) -> list[str]:
        return [
            m.payload["event"] for m in self.sent if recipient is None or m.recipient == recipient
        ]


def site(contacts: tuple[Contact, ...], site_id: str = "elm-12") -> SiteConfig:
    return SiteConfig(
        id=site_id,
        name="12 Elm St",
        jurisdiction="edgar",
        nodes=(NodeConfig(id="pit", kind="pit"),),
        contacts=contacts,
    )


OWNER = Contact(name="Owner", email="owner@example.org")
PW = Recipient(name="Edgar PW", email="pw@edgar.example", min_severity=Severity.WARNING)


def finding(
    rule: str = "high_water",
    severity: Severity = Severity.CRITICAL,
    *,
    fid: str = "f1",
    level: str = "",
    audience: tuple[Audience, ...] = (Audience.HOMEOWNER,),
    citations: tuple[Citation, ...] = (),
    opened: datetime = T0,
    cleared: datetime | None = None,
    level_cm: float = 60.0,
) -> Finding:
    return Finding(
        id=fid,
        rule_id=rule,
        site_id="elm-12",
        severity=severity,
        title=f"{rule} title",
        opened_at=opened,
        updated_at=opened,
        cleared_at=cleared,
        level=level,
        audience=audience,
        evidence={"level_cm": level_cm},
        citations=citations,
        action="Check the pump.",
    )


def ev(change: FindingChange, f: Finding) -> FindingEvent:
    return FindingEvent(change, f)


def violation(fid: str = "f1", opened: datetime = T0) -> Finding:
    """A sanitary-discharge ordinance violation addressed to both audiences."""
    return finding(
        "sanitary_discharge",
        Severity.WARNING,
        fid=fid,
        opened=opened,
        citations=CITE,
        audience=(Audience.HOMEOWNER, Audience.PUBLIC_WORKS),
    )


@dataclass
class Harness:
    manager: AlertManager
    clock: Clock
    email: Recorder

    async def drain(self) -> None:
        """Run passes until nothing is due now."""
        while await self.manager.run_once():
            pass


@pytest.fixture
def db(state_db: Database) -> Database:
    """The state database, on SQLite and on PostgreSQL (each test runs on both)."""
    return state_db


def make(
    db: Database,
    *,
    contacts: tuple[Contact, ...] = (OWNER,),
    grace: timedelta | None = None,
    clock: Clock | None = None,
    email: Recorder | None = None,
    **config: object,
) -> Harness:
    clock = clock or Clock()
    email = email or Recorder()
    cfg = AlertsConfig.model_validate(
        {
            "flap_window_s": 600,
            "repeat_interval_s": 900,
            "retry": RetryPolicy(initial_s=30, jitter=0, max_attempts=3),
            "jurisdictions": {
                "edgar": Jurisdiction(default_assignee="inspector-1", recipients=(PW,))
            },
            "mqtt": {"enabled": False},
            **config,
        }
    )
    manager = AlertManager(
        db=db,
        registry=SiteRegistry([site(contacts)]),
        config=cfg,
        clock=clock,
        grace_period=lambda j, r: grace,
        channels={"email": email},
    )
    return Harness(manager, clock, email)


@pytest.fixture
async def h(db: Database) -> Harness:
    harness = make(db)
    await harness.manager.open()
    return harness


async def test_an_opened_finding_raises_one_open_alert_and_emails_the_homeowner(h: Harness) -> None:
    await h.manager.on_events([ev(FindingChange.OPENED, finding())])
    await h.drain()
    alerts = await h.manager.list_alerts()
    assert [(a.rule_id, a.state) for a in alerts] == [("high_water", AlertState.OPEN)]
    assert [(m.recipient, m.payload["event"]) for m in h.email.sent] == [
        ("owner@example.org", "opened")
    ]


async def test_updates_without_a_material_change_notify_nobody(h: Harness) -> None:
    await h.manager.on_events([ev(FindingChange.OPENED, finding())])
    for i in range(20):
        await h.manager.on_events([ev(FindingChange.UPDATED, finding(level_cm=60 + i / 10))])
    await h.drain()
    assert h.email.reasons() == ["opened"]
    (alert,) = await h.manager.list_alerts()
    assert alert.evidence["level_cm"] == pytest.approx(61.9)


async def test_a_raised_severity_notifies_once_and_wobbling_back_does_not(h: Harness) -> None:
    await h.manager.on_events([ev(FindingChange.OPENED, finding(severity=Severity.WARNING))])
    for sev in (Severity.CRITICAL, Severity.WARNING, Severity.CRITICAL, Severity.WARNING):
        await h.manager.on_events([ev(FindingChange.UPDATED, finding(severity=sev))])
    await h.drain()
    assert h.email.reasons() == ["opened", "raised"]


async def test_a_flapping_finding_keeps_one_alert_and_sends_no_storm(h: Harness) -> None:
    await h.manager.on_events([ev(FindingChange.OPENED, finding(fid="f1"))])
    await h.drain()
    for i in range(5):
        h.clock.advance(seconds=30)
        await h.manager.on_events(
            [ev(FindingChange.CLEARED, finding(fid=f"f{i + 1}", cleared=h.clock.now))]
        )
        await h.drain()
        h.clock.advance(seconds=30)
        await h.manager.on_events([ev(FindingChange.OPENED, finding(fid=f"f{i + 2}"))])
        await h.drain()
    alerts = await h.manager.list_alerts()
    assert len(alerts) == 1
    assert alerts[0].state is AlertState.OPEN and alerts[0].flaps == 5
    assert h.email.reasons() == ["opened"]


async def test_a_cleared_finding_resolves_its_alert_and_says_so_after_the_flap_window(
    h: Harness,
) -> None:
    await h.manager.on_events([ev(FindingChange.OPENED, finding())])
    await h.drain()
    await h.manager.on_events([ev(FindingChange.CLEARED, finding(cleared=h.clock.now))])
    await h.drain()
    (alert,) = await h.manager.list_alerts()
    assert alert.state is AlertState.RESOLVED and alert.resolved_by == "system"
    assert h.email.reasons() == ["opened"]
    h.clock.advance(seconds=601)
    await h.drain()
    assert h.email.reasons() == ["opened", "resolved"]


async def test_a_finding_reopened_after_the_flap_window_raises_a_new_alert(h: Harness) -> None:
    await h.manager.on_events([ev(FindingChange.OPENED, finding(fid="a"))])
    await h.manager.on_events([ev(FindingChange.CLEARED, finding(fid="a", cleared=T0))])
    h.clock.advance(seconds=601)
    await h.manager.on_events([ev(FindingChange.OPENED, finding(fid="b"))])
    alerts = await h.manager.list_alerts()
    assert sorted(a.state for a in alerts) == [AlertState.OPEN, AlertState.RESOLVED]


async def test_a_repeated_open_after_a_gateway_restart_raises_nothing_new(
    db: Database,
) -> None:
    first = make(db)
    await first.manager.open()
    await first.manager.on_events([ev(FindingChange.OPENED, finding())])
    await first.drain()
    await first.manager.close()
    second = make(db, email=first.email, clock=first.clock)
    await second.manager.open()
    await second.manager.on_events([ev(FindingChange.OPENED, finding())])
    await second.drain()
    assert len(await second.manager.list_alerts()) == 1
    assert first.email.reasons() == ["opened"]


async def test_critical_homeowner_alerts_repeat_until_acknowledged(h: Harness) -> None:
    await h.manager.on_events([ev(FindingChange.OPENED, finding())])
    await h.drain()
    for _ in range(2):
        h.clock.advance(seconds=901)
        await h.drain()
    (alert,) = await h.manager.list_alerts()
    acked = await h.manager.acknowledge(alert.id, by="owner", note="on it")
    assert (acked.state, acked.acknowledged_by, acked.ack_note) == (
        AlertState.ACKNOWLEDGED,
        "owner",
        "on it",
    )
    h.clock.advance(seconds=3600)
    await h.drain()
    assert h.email.reasons() == ["opened", "repeat", "repeat"]


async def test_warning_alerts_do_not_repeat(h: Harness) -> None:
    await h.manager.on_events([ev(FindingChange.OPENED, finding(severity=Severity.WARNING))])
    h.clock.advance(hours=5)
    await h.drain()
    assert h.email.reasons() == ["opened"]


async def test_an_ordinance_violation_escalates_to_public_works_after_the_grace_period(
    db: Database,
) -> None:
    h = make(db, grace=timedelta(days=10))
    await h.manager.open()
    f = violation()
    await h.manager.on_events([ev(FindingChange.OPENED, f)])
    h.clock.advance(days=9)
    await h.drain()
    assert h.email.reasons("pw@edgar.example") == []
    h.clock.advance(days=1, seconds=1)
    await h.drain()
    assert h.email.reasons("pw@edgar.example") == ["escalated"]
    assert h.email.reasons("owner@example.org") == ["opened"]
    (alert,) = await h.manager.list_alerts()
    assert alert.assignee == "inspector-1" and alert.escalated_at is not None


async def test_a_violation_fixed_within_the_grace_period_never_reaches_public_works(
    db: Database,
) -> None:
    h = make(db, grace=timedelta(days=10))
    await h.manager.open()
    f = violation()
    await h.manager.on_events([ev(FindingChange.OPENED, f)])
    h.clock.advance(days=3)
    await h.manager.on_events([ev(FindingChange.CLEARED, f)])
    h.clock.advance(days=30)
    await h.drain()
    assert h.email.reasons("pw@edgar.example") == []


async def test_without_a_grace_period_a_violation_goes_to_public_works_at_once(
    db: Database,
) -> None:
    h = make(db, grace=None)
    await h.manager.open()
    f = violation()
    await h.manager.on_events([ev(FindingChange.OPENED, f)])
    await h.drain()
    # Review O8: handed over at once, as an escalation (with its subject prefix).
    assert h.email.reasons("pw@edgar.example") == ["escalated"]


async def test_findings_without_a_citation_never_go_to_public_works(h: Harness) -> None:
    f = finding(
        "continuous_run", Severity.CRITICAL, audience=(Audience.HOMEOWNER, Audience.PUBLIC_WORKS)
    )
    await h.manager.on_events([ev(FindingChange.OPENED, f)])
    h.clock.advance(days=60)
    await h.drain()
    assert h.email.reasons("pw@edgar.example") == []


async def test_public_works_recipients_below_their_minimum_severity_are_not_told(
    h: Harness,
) -> None:
    f = finding("icing_risk", Severity.INFO, citations=CITE, audience=(Audience.PUBLIC_WORKS,))
    await h.manager.on_events([ev(FindingChange.OPENED, f)])
    await h.drain()
    assert h.email.sent == []


async def test_quiet_hours_hold_back_warnings_but_not_critical_alerts(
    db: Database,
) -> None:
    night = datetime(2026, 1, 16, 5, 0, tzinfo=UTC)  # 23:00 in Chicago
    quiet = Contact(name="Owner", email="owner@example.org", quiet_hours=(22, 7))
    h = make(db, contacts=(quiet,), clock=Clock(night))
    await h.manager.open()
    await h.manager.on_events(
        [
            ev(FindingChange.OPENED, finding("short_cycling", Severity.WARNING, fid="w")),
            ev(FindingChange.OPENED, finding("high_water", Severity.CRITICAL, fid="c")),
        ]
    )
    await h.drain()
    assert [m.payload["alert"]["rule_id"] for m in h.email.sent] == ["high_water"]
    h.clock.now = datetime(2026, 1, 16, 12, 59, tzinfo=UTC)  # 06:59 in Chicago
    await h.drain()
    assert "short_cycling" not in [m.payload["alert"]["rule_id"] for m in h.email.sent]
    h.clock.now = datetime(2026, 1, 16, 13, 0, 1, tzinfo=UTC)  # 07:00 in Chicago
    await h.drain()
    assert [m.payload["alert"]["rule_id"] for m in h.email.sent][-1] == "short_cycling"


async def test_resolving_by_hand_records_who_and_why_and_tells_the_homeowner(
    h: Harness,
) -> None:
    await h.manager.on_events([ev(FindingChange.OPENED, finding())])
    await h.drain()
    (alert,) = await h.manager.list_alerts()
    done = await h.manager.resolve(alert.id, by="inspector-1", note="pump replaced", confirm=True)
    assert (done.state, done.resolved_by, done.resolve_note) == (
        AlertState.RESOLVED,
        "inspector-1",
        "pump replaced",
    )
    await h.drain()
    assert h.email.reasons() == ["opened", "resolved"]
    with pytest.raises(InvalidTransition):
        await h.manager.acknowledge(alert.id, by="owner")


async def test_assigning_an_alert_records_the_assignee(h: Harness) -> None:
    await h.manager.on_events([ev(FindingChange.OPENED, finding())])
    (alert,) = await h.manager.list_alerts()
    assert (await h.manager.assign(alert.id, assignee="crew-3")).assignee == "crew-3"


async def test_failed_sends_are_retried_with_backoff_then_given_up(db: Database) -> None:
    h = make(db, email=Recorder(fail=10))
    await h.manager.open()
    await h.manager.on_events([ev(FindingChange.OPENED, finding(severity=Severity.WARNING))])
    await h.drain()
    h.clock.advance(seconds=29)
    assert await h.manager.run_once() == 0  # first retry waits initial_s = 30 s
    h.clock.advance(seconds=2)
    assert await h.manager.run_once() == 1
    h.clock.advance(seconds=61)
    await h.drain()
    (alert,) = await h.manager.list_alerts()
    (n,) = await h.manager.notifications(alert.id)
    assert (n.status, n.attempts) == (NotificationStatus.FAILED, 3)
    log = await h.manager.deliveries(alert_id=alert.id)
    assert [(a.attempt, a.ok, a.detail) for a in log] == [
        (3, False, "down"),
        (2, False, "down"),
        (1, False, "down"),
    ]


async def test_a_permanent_failure_is_not_retried(db: Database) -> None:
    h = make(db, email=Recorder(fail=1, permanent=True))
    await h.manager.open()
    await h.manager.on_events([ev(FindingChange.OPENED, finding())])
    await h.drain()
    h.clock.advance(hours=1)
    (alert,) = await h.manager.list_alerts(AlertQuery(rule_id="high_water"))
    notes = await h.manager.notifications(alert.id)
    assert notes[0].status is NotificationStatus.FAILED and notes[0].reason is Reason.OPENED


async def test_list_filters_by_site_state_severity_and_time(h: Harness) -> None:
    await h.manager.on_events([ev(FindingChange.OPENED, finding("high_water", fid="a"))])
    h.clock.advance(hours=1)
    await h.manager.on_events(
        [ev(FindingChange.OPENED, finding("short_cycling", Severity.WARNING, fid="b"))]
    )
    m = h.manager
    assert [a.rule_id for a in await m.list_alerts(AlertQuery(severity=Severity.WARNING))] == [
        "short_cycling"
    ]
    assert [
        a.rule_id for a in await m.list_alerts(AlertQuery(until=T0 + timedelta(minutes=1)))
    ] == ["high_water"]
    assert len(await m.list_alerts(AlertQuery(site_id="elm-12", state=AlertState.OPEN))) == 2
    assert await m.list_alerts(AlertQuery(jurisdiction="sewer-ord-247")) == []


async def test_a_violation_that_flaps_keeps_its_original_escalation_deadline(
    db: Database,
) -> None:
    h = make(db, grace=timedelta(days=10))
    await h.manager.open()
    f = violation("x1")
    await h.manager.on_events([ev(FindingChange.OPENED, f)])
    h.clock.advance(days=9, hours=23, minutes=55)
    await h.manager.on_events([ev(FindingChange.CLEARED, f)])
    h.clock.advance(minutes=2)
    again = violation("x2", opened=h.clock.now)
    await h.manager.on_events([ev(FindingChange.OPENED, again)])
    h.clock.advance(minutes=4)
    await h.drain()
    assert h.email.reasons("pw@edgar.example") == ["escalated"]


async def test_becoming_critical_after_an_acknowledgement_needs_a_new_one(h: Harness) -> None:
    await h.manager.on_events([ev(FindingChange.OPENED, finding(severity=Severity.WARNING))])
    (alert,) = await h.manager.list_alerts()
    await h.manager.acknowledge(alert.id, by="owner")
    await h.manager.on_events([ev(FindingChange.UPDATED, finding(severity=Severity.CRITICAL))])
    h.clock.advance(seconds=901)
    await h.drain()
    (alert,) = await h.manager.list_alerts()
    assert alert.state is AlertState.OPEN and alert.acknowledged_by is None
    assert h.email.reasons() == ["opened", "raised", "repeat"]


async def test_a_finding_id_reused_long_after_its_alert_resolved_raises_a_new_alert(
    h: Harness,
) -> None:
    await h.manager.on_events([ev(FindingChange.OPENED, finding(fid="elm-12:high_water"))])
    await h.manager.on_events([ev(FindingChange.CLEARED, finding(fid="elm-12:high_water"))])
    h.clock.advance(days=2)
    await h.manager.on_events([ev(FindingChange.OPENED, finding(fid="elm-12:high_water"))])
    alerts = await h.manager.list_alerts()
    assert [a.state for a in alerts] == [AlertState.OPEN, AlertState.RESOLVED]


async def test_an_intermittent_violation_escalates_across_episodes_within_the_season(
    db: Database,
) -> None:
    # A hose into the laundry sink, used for five days at a time: every episode
    # stops well within the 30-day grace period of its own start, but the clock
    # runs from the first episode of the season (issue 15.7).
    h = make(db, grace=timedelta(days=30))
    await h.manager.open()
    for episode, start_day in enumerate((0, 20, 40)):
        h.clock.now = T0 + timedelta(days=start_day)
        f = violation(fid=f"hose-{episode}", opened=h.clock.now)
        await h.manager.on_events([ev(FindingChange.OPENED, f)])
        await h.drain()
        h.clock.advance(days=5)
        await h.manager.on_events([ev(FindingChange.CLEARED, replace(f, cleared_at=h.clock.now))])
        await h.drain()
        expected = ["escalated"] if episode == 2 else []
        assert h.email.reasons("pw@edgar.example") == expected, f"after episode {episode + 1}"
    alerts = await h.manager.list_alerts()
    assert len(alerts) == 3  # still one alert per episode; the clock is shared
    assert {a.clock_started_at for a in alerts} == {T0}


async def test_a_violation_in_a_new_season_year_starts_a_fresh_clock(db: Database) -> None:
    h = make(db, grace=timedelta(days=30))
    await h.manager.open()
    f = violation(fid="first")
    await h.manager.on_events([ev(FindingChange.OPENED, f)])
    h.clock.advance(days=5)
    await h.manager.on_events([ev(FindingChange.CLEARED, replace(f, cleared_at=h.clock.now))])
    h.clock.now = datetime(2026, 11, 20, 18, tzinfo=UTC)  # the season year from Nov 15, 2026
    await h.manager.on_events([ev(FindingChange.OPENED, violation(fid="next", opened=h.clock.now))])
    await h.drain()
    assert h.email.reasons("pw@edgar.example") == []
    newest = (await h.manager.list_alerts())[0]
    assert newest.escalate_at == h.clock.now + timedelta(days=30)
