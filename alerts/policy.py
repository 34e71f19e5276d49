"""Pure alerting policy: what counts as a material change, quiet hours, backoff, routing.

No I/O here; the manager applies these inside its transactions.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from alerts.config import CHANNELS, SEVERITY_RANK, Jurisdiction, RetryPolicy
from alerts.sites import ContactView
from gateway.domain import Severity

# Levels the rule packs use, weakest first. An unknown level ranks with "" so a
# change to it is never material on its own: severity still is.
LEVEL_ORDER: tuple[str, ...] = ("", "info", "watch", "advisory", "warning", "alarm", "violation")


def level_rank(level: str) -> int:
    """Rank of a finding level (0 for unknown or empty)."""
    try:
        return LEVEL_ORDER.index(level.lower())
    except ValueError:
        return 0


def is_material(
    notified_severity: Severity, notified_level: str, severity: Severity, level: str
) -> bool:
    """True when an update is worth telling people about: severity or level went up.

    Compared with the highest severity/level already notified, so a value that
    wobbles down and up again notifies at most once per new high.
    """
    if SEVERITY_RANK[severity] > SEVERITY_RANK[notified_severity]:
        return True
    return SEVERITY_RANK[severity] == SEVERITY_RANK[notified_severity] and level_rank(
        level
    ) > level_rank(notified_level)


def max_severity(a: Severity, b: Severity) -> Severity:
    """The more urgent of two severities."""
    return a if SEVERITY_RANK[a] >= SEVERITY_RANK[b] else b


def quiet_until(
    now: datetime, quiet_hours: tuple[int, int] | None, tz: ZoneInfo
) -> datetime | None:
    """When quiet hours end, if ``now`` is inside them (local hours, may span midnight).

    ``(22, 7)`` is 22:00 to 07:00; ``(start, end)`` with start == end means none.
    """
    if quiet_hours is None:
        return None
    start, end = quiet_hours
    if start == end:
        return None
    local = now.astimezone(tz)
    hour = local.hour
    inside = start <= hour < end if start < end else (hour >= start or hour < end)
    if not inside:
        return None
    end_day = local.date()
    if start > end and hour >= start:
        end_day += timedelta(days=1)
    # Wall-clock end in the site's zone; fold/gap edge cases on DST days shift it
    # by at most an hour, which does not matter for a non-critical message.
    return datetime.combine(end_day, time(end % 24), tzinfo=tz).astimezone(now.tzinfo)


def backoff_delay(
    attempt: int, policy: RetryPolicy, rand: Callable[[], float] = random.random
) -> timedelta:
    """Delay before retry number ``attempt`` (1 = after the first failure), with jitter."""
    base = min(policy.max_s, policy.initial_s * policy.multiplier ** max(0, attempt - 1))
    spread = base * policy.jitter
    return timedelta(seconds=max(0.0, base - spread + 2 * spread * rand()))


@dataclass(frozen=True, slots=True)
class Target:
    """One recipient address on one channel."""

    audience: str
    channel: str
    recipient: str
    name: str
    units: str = "us"
    quiet_hours: tuple[int, int] | None = None


def homeowner_targets(contacts: Iterable[ContactView]) -> list[Target]:
    """Every (channel, address) the site's contacts asked for and gave an address for."""
    out: list[Target] = []
    for c in contacts:
        for channel in c.channels:
            for address in _addresses(channel, c.email, c.webhook_url, c.apprise_urls):
                out.append(Target("homeowner", channel, address, c.name, c.units, c.quiet_hours))
    return _unique(out)


def public_works_targets(routing: Jurisdiction, rule_id: str, severity: Severity) -> list[Target]:
    """The jurisdiction's recipients routed this rule at this severity (every channel they gave)."""
    out: list[Target] = []
    for r in routing.recipients:
        if not r.wants(rule_id, severity):
            continue
        for channel in CHANNELS:
            for address in _addresses(channel, r.email, r.webhook_url, r.apprise_urls):
                out.append(Target("public_works", channel, address, r.name, "us"))
    return _unique(out)


def _addresses(
    channel: str, email: str | None, webhook_url: str | None, apprise_urls: tuple[str, ...]
) -> list[str]:
    if channel == "email":
        return [email] if email else []
    if channel == "webhook":
        return [webhook_url] if webhook_url else []
    if channel == "apprise":
        return list(apprise_urls)
    return []


def _unique(targets: list[Target]) -> list[Target]:
    seen: set[tuple[str, str, str]] = set()
    out = []
    for t in targets:
        key = (t.audience, t.channel, t.recipient)
        if key not in seen:
            seen.add(key)
            out.append(t)
    return out


# -- when the compliance clock of a violation starts (issue 15.7) ---------------------

#: The season start of a pack whose text sets none (gateway.rules.pack.DEFAULT_SEASON_START;
#: a test keeps the two equal).
DEFAULT_SEASON_START: tuple[int, int] = (11, 15)


def season_year_start(day: date, season_start: tuple[int, int] = DEFAULT_SEASON_START) -> date:
    """First local day of the season year holding ``day``: the latest season start
    (e.g. Nov 15) on or before it. A season year runs to the day before the next
    season start, so the summer after a winter belongs to that winter's year."""
    this_year = date(day.year, *season_start)
    return this_year if day >= this_year else date(day.year - 1, *season_start)


def violation_clock_start(
    opened_at: datetime,
    earlier_episodes: Iterable[datetime],
    *,
    tz: ZoneInfo,
    season_start: tuple[int, int] = DEFAULT_SEASON_START,
) -> datetime:
    """When the clock of a violation starts: THE rule, for escalation and estimates alike.

    ``opened_at`` is when this episode of a rule at a site was first detected;
    ``earlier_episodes`` when earlier episodes of the same rule at the same site were.
    The clock starts at the first episode in the same season year (local days in
    ``tz``, see :func:`season_year_start`), so a violation that stops and starts again
    (an intermittent hose) runs one clock across its episodes instead of a fresh grace
    period each time; a new season year starts a new clock. Later episodes are ignored.

    Once a case records an order, the order starts the clock instead (Edgar (f)(1):
    the 30 days run "after order issuance"): see :func:`compliance_clock_start`.
    """
    year = season_year_start(opened_at.astimezone(tz).date(), season_start)
    same_year = [
        t
        for t in earlier_episodes
        if t <= opened_at and season_year_start(t.astimezone(tz).date(), season_start) == year
    ]
    return min([opened_at, *same_year])


def compliance_clock_start(
    opened_at: datetime,
    earlier_episodes: Iterable[datetime],
    *,
    tz: ZoneInfo,
    season_start: tuple[int, int] = DEFAULT_SEASON_START,
    order_at: datetime | None = None,
) -> datetime:
    """The one clock of a violation, for the alert, the case deadlines and the estimate.

    With an order (``order_at``, the case's latest connection order) the clock starts
    at the order: Edgar (f)(1) "within thirty (30) days after order issuance", which is
    also the case's ``correct`` deadline's day 0 (``gateway.cases.deadlines``) and the
    month the ledger's surcharge starts when nothing established non-compliance
    earlier. Without one, the first episode of the season year stands in
    (:func:`violation_clock_start`).
    """
    if order_at is not None:
        return order_at
    return violation_clock_start(opened_at, earlier_episodes, tz=tz, season_start=season_start)
