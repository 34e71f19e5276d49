"""Pure alerting logic: material changes, quiet hours, backoff, routing, config,
rendering and webhook signatures. No servers."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from pydantic import SecretStr

from alerts.channels.email import build_message, message_id
from alerts.channels.webhook import sign, verify
from alerts.config import Jurisdiction, Recipient, RetryPolicy, load_alerts_config
from alerts.models import Alert, AlertState, Notification, NotificationStatus, Reason
from alerts.policy import (
    backoff_delay,
    homeowner_targets,
    is_material,
    public_works_targets,
    quiet_until,
)
from alerts.render import format_evidence, render
from gateway.domain import Severity
from gateway.errors import ConfigError
from gateway.registry.models import Contact
from gateway.rules.catalog import action_for
from gateway.rules.pack import load_packs
from gateway.settings import REPO_DIR

CHICAGO = ZoneInfo("America/Chicago")
EXAMPLE = REPO_DIR / "deploy" / "alerts.example.toml"


def test_a_higher_severity_is_material() -> None:
    assert is_material(Severity.WARNING, "", Severity.CRITICAL, "")


def test_a_lower_or_equal_severity_is_not_material() -> None:
    assert not is_material(Severity.CRITICAL, "", Severity.WARNING, "")
    assert not is_material(Severity.WARNING, "", Severity.WARNING, "")


def test_a_higher_level_at_the_same_severity_is_material() -> None:
    assert is_material(Severity.WARNING, "watch", Severity.WARNING, "violation")
    assert not is_material(Severity.WARNING, "violation", Severity.WARNING, "watch")


def test_quiet_hours_across_midnight_end_the_next_morning_local_time() -> None:
    late = datetime(2026, 1, 16, 5, 30, tzinfo=UTC)  # 23:30 Chicago
    assert quiet_until(late, (22, 7), CHICAGO) == datetime(2026, 1, 16, 13, 0, tzinfo=UTC)
    early = datetime(2026, 1, 16, 11, 0, tzinfo=UTC)  # 05:00 Chicago
    assert quiet_until(early, (22, 7), CHICAGO) == datetime(2026, 1, 16, 13, 0, tzinfo=UTC)


def test_outside_quiet_hours_nothing_waits() -> None:
    noon = datetime(2026, 1, 16, 18, 0, tzinfo=UTC)
    assert quiet_until(noon, (22, 7), CHICAGO) is None
    assert quiet_until(noon, None, CHICAGO) is None


def test_backoff_grows_exponentially_up_to_the_cap() -> None:
    policy = RetryPolicy(initial_s=10, multiplier=2, max_s=60, jitter=0)
    assert [backoff_delay(n, policy).total_seconds() for n in (1, 2, 3, 4, 5)] == [
        10,
        20,
        40,
        60,
        60,
    ]


def test_backoff_jitter_stays_within_its_fraction() -> None:
    policy = RetryPolicy(initial_s=100, jitter=0.2)
    assert backoff_delay(1, policy, rand=lambda: 0.0) == timedelta(seconds=80)
    assert backoff_delay(1, policy, rand=lambda: 1.0) == timedelta(seconds=120)


def test_homeowner_targets_follow_the_chosen_channels_that_have_an_address() -> None:
    contact = Contact(
        name="Pat",
        email="pat@example.org",
        webhook_url=None,
        apprise_urls=("ntfy://ntfy.sh/pat",),
        channels=("email", "webhook", "apprise"),
    )
    assert [(t.channel, t.recipient) for t in homeowner_targets([contact])] == [
        ("email", "pat@example.org"),
        ("apprise", "ntfy://ntfy.sh/pat"),
    ]


def test_public_works_routing_is_by_rule_and_minimum_severity() -> None:
    routing = Jurisdiction(
        recipients=(
            Recipient(email="sewer@x.gov", rules=("sanitary_discharge",)),
            Recipient(email="all@x.gov", min_severity=Severity.CRITICAL),
        )
    )
    pick = lambda rule, sev: [t.recipient for t in public_works_targets(routing, rule, sev)]  # noqa: E731
    assert pick("sanitary_discharge", Severity.WARNING) == ["sewer@x.gov"]
    assert pick("sanitary_discharge", Severity.CRITICAL) == ["sewer@x.gov", "all@x.gov"]
    assert pick("icing_risk", Severity.WARNING) == []
    assert pick("sanitary_discharge", Severity.INFO) == []


def test_the_example_routing_file_loads_with_the_secrets_given() -> None:
    cfg = load_alerts_config(
        EXAMPLE, smtp_password=SecretStr("s3cret"), webhook_secret=SecretStr("k")
    )
    assert cfg.smtp is not None and cfg.smtp.password is not None
    assert cfg.smtp.password.get_secret_value() == "s3cret"
    assert cfg.webhook.secret is not None and cfg.webhook.secret.get_secret_value() == "k"
    assert set(cfg.jurisdictions) == {
        "edgar",
        "sewer-ord-247",
        "local-law-6-2024",
        "storm-ord-1991-43",
    }


def test_a_password_written_in_the_routing_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "alerts.toml"
    path.write_text('[smtp]\nhost = "x"\npassword = "hunter2"\n')
    with pytest.raises(ConfigError, match="must not be in the file"):
        load_alerts_config(path)


def test_a_routing_file_naming_another_secret_variable_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "alerts.toml"
    path.write_text('[webhook]\nsecret_env = "MY_SECRET"\n')
    with pytest.raises(ConfigError, match="SUMPWATCH_ALERTS__WEBHOOK_SECRET"):
        load_alerts_config(path)


def test_no_routing_file_means_defaults() -> None:
    cfg = load_alerts_config(None)
    assert cfg.smtp is None and cfg.flap_window_s == 600


def test_evidence_is_shown_in_the_contacts_units() -> None:
    evidence = {
        "level_cm": 50.8,
        "pipe_temp_c": -2.0,
        "flow_lpm": 0.0,
        "elsewhere_l": 114.9,
        "starts": 14,
    }
    # The same readings the pages give (gateway.units), litres included.
    assert format_evidence(evidence, "us") == [
        ("level", "20.0 in"),
        ("pipe temp", "28°F"),
        ("flow", "0.0 gpm"),
        ("elsewhere", "30 gal"),
        ("starts", "14"),
    ]
    assert format_evidence(evidence, "metric")[:2] == [("level", "51 cm"), ("pipe temp", "-2.0°C")]
    assert format_evidence(evidence, "metric")[3] == ("elsewhere", "115 L")


def test_an_evidence_table_is_counted_in_the_message_not_printed_as_data() -> None:
    cycles = [{"start": "2026-12-01T18:00:00+00:00", "outlet_l": 0.0}] * 3
    assert format_evidence({"cycles": cycles}, "us") == [
        ("cycles", "3 recorded (on the dashboard)")
    ]


def _alert() -> Alert:
    t = datetime(2026, 1, 15, 18, 0, tzinfo=UTC)
    return Alert(
        id="a1",
        site_id="elm-12",
        jurisdiction="edgar",
        rule_id="icing_risk",
        finding_id="f1",
        state=AlertState.OPEN,
        severity=Severity.WARNING,
        level="violation",
        title="Discharge can ice <the> walk",
        action="Move the outlet",
        audience=("homeowner",),
        citations=({"file": "000_86c7187f3bed6ca5.txt", "section": "(d)(1)", "quote": "q"},),
        evidence={"air_temp_c": -5.0},
        opened_at=t,
        updated_at=t,
    )


def _note(reason: Reason = Reason.OPENED) -> Notification:
    t = datetime(2026, 1, 15, 18, 0, tzinfo=UTC)
    return Notification(
        id="n1",
        alert_id="a1",
        site_id="elm-12",
        audience="homeowner",
        channel="email",
        recipient="pat@example.org",
        recipient_name="Pat",
        reason=reason,
        severity=Severity.WARNING,
        created_at=t,
        not_before=t,
        status=NotificationStatus.PENDING,
    )


def test_the_rendered_message_carries_action_evidence_and_citation() -> None:
    ordinances = {pack.file: pack.title for pack in load_packs().values()}
    msg = render(
        _alert(), _note(Reason.ESCALATED), None, now=datetime.now(UTC), ordinances=ordinances
    )
    assert msg.subject.startswith("[SumpWatch] Ordinance violation: WARNING:")
    assert "Move the outlet" in msg.text and "air temp: 23°F" in msg.text
    # People read the ordinance's title; the file name stays in the machine payload.
    assert "Village of Edgar Sump Pump Ordinance §(d)(1)" in msg.text
    assert "Village of Edgar Sump Pump Ordinance §(d)(1)" in msg.html
    assert ".txt" not in msg.text and ".txt" not in msg.html
    assert msg.payload["alert"]["citations"][0]["file"] == "000_86c7187f3bed6ca5.txt"
    assert "&lt;the&gt;" in msg.html and "<the>" in msg.text
    assert msg.payload["event"] == "escalated"


def test_a_citation_of_a_text_no_pack_knows_is_named_as_an_ordinance_not_a_bare_file() -> None:
    msg = render(_alert(), _note(), None, now=datetime.now(UTC))
    assert "Ordinance 000_86c7187f3bed6ca5.txt §(d)(1)" in msg.text


def test_the_email_message_id_is_derived_from_the_notification_id() -> None:
    msg = render(_alert(), _note(), None, now=datetime.now(UTC))
    mail = build_message(msg, "SumpWatch <alerts@example.org>")
    assert mail["Message-ID"] == message_id("n1", "alerts@example.org") == "<n1@example.org>"


def test_a_webhook_signature_verifies_and_fails_on_any_change() -> None:
    body, stamp = b'{"a":1}', "1700000000"
    headers = {"X-SumpWatch-Timestamp": stamp, "X-SumpWatch-Signature": sign(b"k", stamp, body)}
    now = lambda: 1700000010.0  # noqa: E731
    assert verify(b"k", headers, body, now=now)
    assert not verify(b"k", headers, b'{"a":2}', now=now)
    assert not verify(b"other", headers, body, now=now)
    assert not verify(b"k", {**headers, "X-SumpWatch-Timestamp": "1700000001"}, body, now=now)


def test_an_old_webhook_timestamp_is_a_replay() -> None:
    body, stamp = b"{}", "1700000000"
    headers = {"X-SumpWatch-Timestamp": stamp, "X-SumpWatch-Signature": sign(b"k", stamp, body)}
    assert not verify(b"k", headers, body, now=lambda: 1700000000.0 + 3600)


def test_the_action_an_alert_carries_names_the_ordinance_of_its_deadlines_not_its_file() -> None:
    # "What to do" is in the e-mail too: its grace and waiver citations name the text.
    edgar = load_packs()["edgar"]
    action = action_for("sanitary_discharge", edgar)
    assert "Under Village of Edgar Sump Pump Ordinance §(f)(1) a connection order" in action
    assert ".txt" not in action
