"""Turn an alert and a notification into what a channel sends: subject, plain text,
HTML (escaped), a JSON payload, and the retained MQTT state of a site."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from jinja2 import Environment, select_autoescape

from alerts.models import Alert, AlertState, Notification, OutgoingMessage, Reason
from alerts.sites import SiteView
from gateway.domain import Citation
from gateway.units import UNIT_SYSTEMS, UnitSystem, fmt, parse_unit_system

_REASON_PREFIX = {
    Reason.OPENED: "",
    Reason.RAISED: "Worse: ",
    Reason.REPEAT: "Reminder: ",
    Reason.ESCALATED: "Ordinance violation: ",
    Reason.RESOLVED: "Resolved: ",
    Reason.STATE: "",
}

#: Evidence keys carry their stored unit as a suffix (``level_cm``, ``elsewhere_l``):
#: suffix -> the quantity gateway.units converts, the one place a number's reading is
#: decided for pages, reports and messages alike.
_QUANTITY_OF_SUFFIX = {
    "_lpm": "flow",
    "_kpa": "pressure",
    "_cm": "level",
    "_ft": "distance",
    "_c": "temperature",
    "_l": "volume",
}
#: Suffixes whose unit reads the same in both systems.
_PLAIN_SUFFIX = {"_a": "A", "_s": "s"}


def _measure(key: str, value: float, units: UnitSystem) -> tuple[str, str] | None:
    for suffix, quantity in _QUANTITY_OF_SUFFIX.items():
        if key.endswith(suffix):
            return key[: -len(suffix)].replace("_", " "), fmt(quantity, float(value), units)
    for suffix, unit in _PLAIN_SUFFIX.items():
        if key.endswith(suffix):
            return key[: -len(suffix)].replace("_", " "), f"{value:.1f} {unit}"
    return None


def format_evidence(evidence: Mapping[str, Any], units: str) -> list[tuple[str, str]]:
    """Evidence as (label, value) lines, in the contact's units (US unless "metric")."""
    system = parse_unit_system(units) if units in UNIT_SYSTEMS else "us"
    lines = []
    for key, value in evidence.items():
        line = (key.replace("_", " "), str(value))
        if isinstance(value, list | tuple | dict):
            # A table (e.g. each pump cycle) is for machines: the JSON payload carries
            # it and the dashboard charts it; a message printing its repr is unreadable.
            line = (line[0], f"{len(value)} recorded (on the dashboard)")
        elif isinstance(value, float | int) and not isinstance(value, bool):
            line = _measure(key, value, system) or (line[0], f"{value:g}")
        lines.append(line)
    return lines


_TEXT = """{{ title }}

Site: {{ site_name }}{% if address %}, {{ address }}{% endif %}
Severity: {{ severity }}{% if level %} ({{ level }}){% endif %}
State: {{ state }}
Since: {{ opened }}
{% if resolved %}Resolved: {{ resolved }}{% if resolve_note %} ({{ resolve_note }}){% endif %}
{% endif %}{% if action %}
What to do:
{{ action }}
{% endif %}{% if evidence %}
Evidence:
{% for label, value in evidence %}  - {{ label }}: {{ value }}
{% endfor %}{% endif %}{% if citations %}
Ordinance:
{% for c in citations %}  - {{ c.text }}
{%- if c.quote %}: "{{ c.quote }}"{% endif %}
{% endfor %}{% endif %}
Alert {{ alert_id }}{% if link %} - {{ link }}{% endif %}
{% if ack_hint %}{{ ack_hint }}
{% endif %}"""

_HTML = """<!doctype html>
<html><body style="font-family: sans-serif">
<h2>{{ title }}</h2>
<p><strong>{{ site_name }}</strong>{% if address %}, {{ address }}{% endif %}</p>
<table>
<tr><th align="left">Severity</th>
<td>{{ severity }}{% if level %} ({{ level }}){% endif %}</td></tr>
<tr><th align="left">State</th><td>{{ state }}</td></tr>
<tr><th align="left">Since</th><td>{{ opened }}</td></tr>
{% if resolved %}<tr><th align="left">Resolved</th><td>{{ resolved }}
{% if resolve_note %} ({{ resolve_note }}){% endif %}</td></tr>{% endif %}
</table>
{% if action %}<h3>What to do</h3><p>{{ action }}</p>{% endif %}
{% if evidence %}<h3>Evidence</h3><ul>
{% for label, value in evidence %}<li>{{ label }}: {{ value }}</li>
{% endfor %}</ul>{% endif %}
{% if citations %}<h3>Ordinance</h3><ul>
{% for c in citations %}<li>{{ c.text }}{% if c.quote %}:
<q>{{ c.quote }}</q>{% endif %}</li>
{% endfor %}</ul>{% endif %}
<p>Alert {{ alert_id }}{% if link %} - <a href="{{ link }}">{{ link }}</a>{% endif %}</p>
{% if ack_hint %}<p>{{ ack_hint }}</p>{% endif %}
</body></html>
"""

_ENV = Environment(autoescape=select_autoescape(default=True), keep_trailing_newline=True)
# Plain text: nothing to escape.
_TEXT_ENV = Environment(autoescape=False, keep_trailing_newline=True)
_TEXT_T = _TEXT_ENV.from_string(_TEXT)
_HTML_T = _ENV.from_string(_HTML)


def citations_for_people(
    citations: Iterable[Mapping[str, str]], ordinances: Mapping[str, str]
) -> list[dict[str, str]]:
    """Each citation's words for a message: "<ordinance title> §<section>" and its
    quote. ``ordinances`` maps an ordinance text's file to its pack's title; the file
    name itself stays in the JSON payload only (issue 20.3)."""
    out = []
    for c in citations:
        cite = Citation(c.get("file", ""), c.get("section", ""), c.get("quote", ""))
        out.append({"text": cite.cited(ordinances.get(cite.file)), "quote": cite.quote})
    return out


def _local(ts: datetime | None, tz: ZoneInfo) -> str:
    return "" if ts is None else ts.astimezone(tz).strftime("%Y-%m-%d %H:%M %Z")


def _more_than(address: str, name: str) -> str:
    """What the address adds to the site's name: "Edgar, WI 54426" after "16 Elm St"."""
    if address.strip().lower().startswith(name.strip().lower()):
        return address.strip()[len(name.strip()) :].lstrip(", ")
    return address


def subject(alert: Alert, reason: Reason, site_name: str) -> str:
    """The e-mail subject / notification title."""
    return (
        f"[SumpWatch] {_REASON_PREFIX[reason]}{alert.severity.value.upper()}: "
        f"{alert.title} - {site_name}"
    )


def alert_dict(alert: Alert) -> dict[str, Any]:
    """An alert as JSON-ready data (webhook body, MQTT state)."""

    def iso(ts: datetime | None) -> str | None:
        return None if ts is None else ts.isoformat()

    return {
        "id": alert.id,
        "site_id": alert.site_id,
        "jurisdiction": alert.jurisdiction,
        "rule_id": alert.rule_id,
        "finding_id": alert.finding_id,
        "state": alert.state.value,
        "severity": alert.severity.value,
        "level": alert.level,
        "title": alert.title,
        "action": alert.action,
        "audience": list(alert.audience),
        "evidence": dict(alert.evidence),
        "citations": [dict(c) for c in alert.citations],
        "opened_at": iso(alert.opened_at),
        "updated_at": iso(alert.updated_at),
        "acknowledged_at": iso(alert.acknowledged_at),
        "acknowledged_by": alert.acknowledged_by,
        "resolved_at": iso(alert.resolved_at),
        "resolved_by": alert.resolved_by,
        "assignee": alert.assignee,
        "escalated_at": iso(alert.escalated_at),
    }


def render(
    alert: Alert,
    notification: Notification,
    site: SiteView | None,
    *,
    public_url: str | None = None,
    now: datetime,
    ordinances: Mapping[str, str] | None = None,
) -> OutgoingMessage:
    """Render one notification of one alert for its channel (``ordinances``: the
    title of each ordinance text by file, see :func:`citations_for_people`)."""
    tz = site.tz if site is not None else ZoneInfo("UTC")
    site_name = site.name if site is not None else alert.site_id
    link = f"{public_url.rstrip('/')}/alerts/{alert.id}" if public_url else ""
    ack_hint = (
        "Acknowledge this alert to stop the reminders."
        if notification.audience == "homeowner"
        and alert.state is AlertState.OPEN
        and alert.severity.value == "critical"
        else ""
    )
    ctx = {
        "title": alert.title,
        "site_name": site_name,
        # The address only when it says more than the name ("16 Elm St" twice reads oddly).
        "address": _more_than(site.address, site_name) if site is not None else "",
        "severity": alert.severity.value,
        "level": alert.level,
        "state": alert.state.value,
        "opened": _local(alert.opened_at, tz),
        "resolved": _local(alert.resolved_at, tz),
        "resolve_note": alert.resolve_note or "",
        "action": alert.action,
        "evidence": format_evidence(alert.evidence, notification.units),
        "citations": citations_for_people(alert.citations, ordinances or {}),
        "alert_id": alert.id,
        "link": link,
        "ack_hint": ack_hint,
    }
    payload = {
        "notification_id": notification.id,
        "event": notification.reason.value,
        "audience": notification.audience,
        "sent_at": now.isoformat(),
        "alert": alert_dict(alert),
        "site": {"id": alert.site_id, "name": site_name},
    }
    return OutgoingMessage(
        notification_id=notification.id,
        channel=notification.channel,
        recipient=notification.recipient,
        recipient_name=notification.recipient_name,
        subject=subject(alert, notification.reason, site_name),
        text=_TEXT_T.render(ctx),
        html=_HTML_T.render(ctx),
        payload=payload,
        severity=alert.severity,
    )


def site_state(site_id: str, alerts: Iterable[Alert], now: datetime) -> dict[str, Any]:
    """The retained MQTT document of a site: its alerts that are not resolved."""
    active = [a for a in alerts if a.state is not AlertState.RESOLVED]
    rank = {"info": 0, "warning": 1, "critical": 2}
    highest = max((a.severity.value for a in active), key=rank.__getitem__, default=None)
    return {
        "site_id": site_id,
        "updated_at": now.isoformat(),
        "active": len(active),
        "unacknowledged": sum(a.state is AlertState.OPEN for a in active),
        "highest_severity": highest,
        "alerts": [
            {k: v for k, v in alert_dict(a).items() if k not in ("evidence", "citations")}
            for a in active
        ],
    }
