"""The pure alert lifecycle (alerts.lifecycle) and the violation clock (alerts.policy):
decisions read without a database, a clock or a channel."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from alerts.lifecycle import (
    HUMAN_REASONS,
    SYSTEM,
    Escalation,
    Notified,
    Policy,
    Send,
    To,
    Tracked,
    acknowledge,
    escalation_due,
    on_event,
    repeat_due,
)
from alerts.models import Alert, AlertState, InvalidTransition, Reason
from alerts.policy import DEFAULT_SEASON_START, season_year_start, violation_clock_start
from gateway.domain import Audience, Citation, Finding, FindingChange, FindingEvent, Severity
from gateway.rules.pack import DEFAULT_SEASON_START as PACK_DEFAULT_SEASON_START

T0 = datetime(2026, 1, 15, 18, 0, tzinfo=UTC)
CHICAGO = ZoneInfo("America/Chicago")
POLICY = Policy(flap_window=timedelta(minutes=10), repeat_interval=timedelta(minutes=15))
NO_GRACE = Escalation(grace=None, clock_start=T0)


def _finding(
    severity: Severity = Severity.CRITICAL, *, level: str = "", ordinance: bool = False
) -> Finding:
    return Finding(
        id="f1", rule_id="sanitary_discharge" if ordinance else "high_water", site_id="elm-12",
        severity=severity, title="t", opened_at=T0, updated_at=T0, level=level,
        audience=(Audience.HOMEOWNER, Audience.PUBLIC_WORKS) if ordinance
        else (Audience.HOMEOWNER,),
        citations=(Citation("000_86c7187f3bed6ca5.txt", "(b)", "No"),) if ordinance else (),
    )  # fmt: skip


def _open(f: Finding, now: datetime = T0, escalation: Escalation = NO_GRACE) -> Alert:
    decision = on_event(
        None, FindingEvent(FindingChange.OPENED, f), now, POLICY,
        new_id="a1", jurisdiction="edgar", escalation=escalation,
    )  # fmt: skip
    assert decision.alert is not None
    return decision.alert


def test_a_new_critical_finding_opens_an_alert_tells_the_homeowner_and_schedules_a_reminder() -> (
    None
):
    decision = on_event(
        None, FindingEvent(FindingChange.OPENED, _finding()), T0, POLICY,
        new_id="a1", jurisdiction="edgar", escalation=NO_GRACE,
    )  # fmt: skip
    assert decision.created and decision.alert is not None
    assert decision.alert.state is AlertState.OPEN
    assert decision.sends == (Send(To.HOMEOWNER, Reason.OPENED),)
    assert decision.alert.next_repeat_at == T0 + POLICY.repeat_interval
    assert decision.notified == Notified(Severity.CRITICAL, "")


def test_a_violation_with_a_grace_period_sets_a_deadline_and_tells_public_works_nothing_yet() -> (
    None
):
    grace = Escalation(grace=timedelta(days=30), clock_start=T0 - timedelta(days=3))
    alert = _open(_finding(Severity.WARNING, ordinance=True), escalation=grace)
    assert alert.escalated_at is None
    assert alert.clock_started_at == T0 - timedelta(days=3)
    assert alert.escalate_at == T0 + timedelta(days=27)


def test_a_violation_whose_season_clock_ran_out_escalates_when_it_opens() -> None:
    late = Escalation(
        grace=timedelta(days=30), clock_start=T0 - timedelta(days=40), default_assignee="insp-1"
    )
    decision = on_event(
        None, FindingEvent(FindingChange.OPENED, _finding(Severity.WARNING, ordinance=True)), T0,
        POLICY, new_id="a1", jurisdiction="edgar", escalation=late,
    )  # fmt: skip
    assert decision.alert is not None and decision.alert.escalated_at == T0
    assert decision.alert.assignee == "insp-1"
    assert Send(To.PUBLIC_WORKS, Reason.ESCALATED) in decision.sends


def test_a_cleared_finding_resolves_and_tells_whoever_was_told_after_the_flap_window() -> None:
    alert = _open(_finding())
    later = T0 + timedelta(hours=1)
    cleared = replace(_finding(), cleared_at=later)
    decision = on_event(
        Tracked(alert, Notified(Severity.CRITICAL, "")),
        FindingEvent(FindingChange.CLEARED, cleared), later, POLICY,
        new_id="unused", jurisdiction="edgar", escalation=NO_GRACE,
    )  # fmt: skip
    assert decision.alert is not None
    assert decision.alert.state is AlertState.RESOLVED and decision.alert.resolved_by == SYSTEM
    assert decision.alert.finding_cleared_at == later
    assert decision.cancel is not None and decision.cancel.reasons == HUMAN_REASONS
    assert decision.sends == (Send(To.TOLD, Reason.RESOLVED, POLICY.flap_window),)


def test_a_flap_reopens_the_same_alert_and_revives_what_the_resolve_cancelled() -> None:
    resolved_at = T0 + timedelta(minutes=5)
    alert = replace(
        _open(_finding()), state=AlertState.RESOLVED, resolved_at=resolved_at, resolved_by=SYSTEM
    )
    decision = on_event(
        Tracked(alert, Notified(Severity.CRITICAL, "")),
        FindingEvent(FindingChange.OPENED, _finding()), T0 + timedelta(minutes=8), POLICY,
        new_id="unused", jurisdiction="edgar", escalation=NO_GRACE,
    )  # fmt: skip
    assert decision.alert is not None and decision.alert.state is AlertState.OPEN
    assert decision.alert.flaps == 1 and decision.alert.resolved_at is None
    assert decision.revive_resolved_at == resolved_at
    assert decision.sends == ()  # nothing worse than already told


def test_a_severity_that_wobbles_below_what_was_notified_tells_nobody() -> None:
    alert = _open(_finding(Severity.CRITICAL))
    decision = on_event(
        Tracked(alert, Notified(Severity.CRITICAL, "")),
        FindingEvent(FindingChange.UPDATED, _finding(Severity.WARNING)), T0, POLICY,
        new_id="unused", jurisdiction="edgar", escalation=NO_GRACE,
    )  # fmt: skip
    assert decision.sends == ()
    assert decision.notified == Notified(Severity.CRITICAL, "")


def test_only_an_open_alert_can_be_acknowledged() -> None:
    alert = replace(_open(_finding()), state=AlertState.RESOLVED)
    with pytest.raises(InvalidTransition):
        acknowledge(alert, T0, by="owner", note=None)


def test_reminders_stop_after_repeat_max() -> None:
    alert = replace(_open(_finding()), repeats=2, next_repeat_at=T0)
    decision = repeat_due(alert, T0, replace(POLICY, repeat_max=3))
    assert decision.alert is not None and decision.alert.repeats == 3
    assert decision.alert.next_repeat_at is None
    assert decision.sends == (Send(To.HOMEOWNER, Reason.REPEAT),)


def test_an_escalation_is_not_due_before_its_deadline() -> None:
    grace = Escalation(grace=timedelta(days=1), clock_start=T0)
    alert = _open(_finding(ordinance=True), escalation=grace)
    assert escalation_due(alert, T0, None).alert is None
    due = escalation_due(alert, T0 + timedelta(days=1), None)
    assert due.alert is not None and due.alert.escalated_at == T0 + timedelta(days=1)


# -- the violation clock ---------------------------------------------------------------


def test_the_clock_starts_at_the_first_episode_of_the_season_year() -> None:
    episodes = [T0 - timedelta(days=40), T0 - timedelta(days=20)]
    assert violation_clock_start(T0, episodes, tz=CHICAGO) == T0 - timedelta(days=40)


def test_episodes_of_an_earlier_season_year_do_not_count() -> None:
    last_winter = datetime(2025, 2, 1, 18, tzinfo=UTC)
    assert violation_clock_start(T0, [last_winter], tz=CHICAGO) == T0


def test_later_episodes_do_not_move_the_clock() -> None:
    assert violation_clock_start(T0, [T0 + timedelta(days=2)], tz=CHICAGO) == T0


def test_the_season_year_turns_at_local_midnight_of_the_season_start() -> None:
    # 03:00 UTC on Nov 15 is still Nov 14 in Chicago: the old season year.
    before = datetime(2026, 11, 15, 3, tzinfo=UTC)
    after = datetime(2026, 11, 15, 7, tzinfo=UTC)
    assert season_year_start(before.astimezone(CHICAGO).date()).year == 2025
    assert season_year_start(after.astimezone(CHICAGO).date()).year == 2026
    assert violation_clock_start(after, [before], tz=CHICAGO) == after


def test_the_default_season_start_is_the_rule_packs_default() -> None:
    assert DEFAULT_SEASON_START == PACK_DEFAULT_SEASON_START


def test_an_ordinance_violation_without_grace_goes_to_public_works_as_an_escalation() -> None:
    # Review O8: sent as "opened" it lost the "Ordinance violation:" subject.
    decision = on_event(
        None, FindingEvent(FindingChange.OPENED, _finding(ordinance=True)), T0, POLICY,
        new_id="a1", jurisdiction="edgar", escalation=NO_GRACE,
    )  # fmt: skip
    assert Send(To.PUBLIC_WORKS, Reason.ESCALATED) in decision.sends
    assert Send(To.PUBLIC_WORKS, Reason.OPENED) not in decision.sends
    assert decision.alert is not None and decision.alert.escalated_at == T0
