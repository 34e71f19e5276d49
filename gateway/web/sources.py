"""What the pages read from the running gateway: its :class:`~gateway.services.Services`.

Alerting may be off (``services.alerts is None``); the pages then say "not
available" instead of failing. Everything else reads the store interface
(:class:`gateway.store.base.TimeSeriesStore`), so both backends work.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from alerts.models import Alert, AlertQuery, AlertState
from gateway.domain import Finding, Reading
from gateway.registry import NodeConfig, SiteConfig
from gateway.rules.audit import AuditItem, audit_site
from gateway.rules.pack import RulePack
from gateway.rules.verdict import Verdict, site_verdict
from gateway.services import Services, current_verdict
from gateway.store.base import Rollup, SeriesQuery
from gateway.store.rollups import MAX_HOLD_S, compute_minutes, floor_to

#: Alerts that still want someone's attention.
LIVE_ALERT_STATES = (AlertState.OPEN, AlertState.ACKNOWLEDGED)


def packs(services: Services) -> dict[str, RulePack]:
    """The rule packs the gateway judges by."""
    return dict(services.packs)


def pack_of(services: Services, site: SiteConfig) -> RulePack | None:
    """The site's jurisdiction pack, if there is one."""
    return services.packs.get(site.jurisdiction)


def audit(services: Services, site: SiteConfig) -> list[AuditItem]:
    """The static installation audit of one site."""
    pack = pack_of(services, site)
    return [] if pack is None else audit_site(site, pack)


#: The site's one compliance verdict now (see :func:`gateway.services.current_verdict`).
verdict = current_verdict


async def verdicts(
    services: Services, sites: Iterable[SiteConfig], now: datetime, findings: list[Finding]
) -> dict[str, Verdict]:
    """:func:`verdict` of many sites (the console's village), with the level histories
    of all their open findings read at once instead of one query per site."""
    of_site: dict[str, list[Finding]] = {}
    for f in findings:
        of_site.setdefault(f.site_id, []).append(f)
    ids = [f.id for f in findings]
    histories = await services.findings.level_histories(ids) if ids else {}
    out = {}
    for site in sites:
        mine = of_site.get(site.id, [])
        since = min((f.opened_at for f in mine), default=now)
        records = services.confirmations.confirmations(site.id, since, now + timedelta(seconds=1))
        out[site.id] = site_verdict(
            site,
            services.packs.get(site.jurisdiction),
            as_of=now,
            findings=mine,
            histories={f.id: histories[f.id] for f in mine if f.id in histories},
            confirmations=records,
            since=since,
        )
    return out


async def open_findings(services: Services, site_ids: Iterable[str] | None = None) -> list[Finding]:
    """Open findings from the finding repository (the record every gateway process shares)."""
    wanted = None if site_ids is None else set(site_ids)
    found = await services.findings.open_findings()
    return [f for f in found if wanted is None or f.site_id in wanted]


def alerts_enabled(services: Services) -> bool:
    """True when an alert manager is wired."""
    return services.alerts is not None


async def live_alerts(
    services: Services, *, site_id: str | None = None, jurisdiction: str | None = None
) -> list[Alert]:
    """Open and acknowledged alerts, newest first (empty when alerts are not wired)."""
    manager = services.alerts
    if manager is None:
        return []
    found: list[Alert] = []
    for state in LIVE_ALERT_STATES:
        found += await manager.list_alerts(
            AlertQuery(site_id=site_id, jurisdiction=jurisdiction, state=state, limit=500)
        )
    return sorted(found, key=lambda a: a.opened_at, reverse=True)


async def readings(
    services: Services,
    site_id: str,
    node_id: str,
    start: datetime,
    end: datetime,
    fields: tuple[str, ...] = (),
    limit: int = 20_000,
) -> list[Reading]:
    """Raw readings of one node in [start, end)."""
    query = SeriesQuery(site_id, node_id=node_id, fields=fields, start=start, end=end, limit=limit)
    return await services.store.readings(query)


async def minute_rollups(
    services: Services, site: SiteConfig, start: datetime, end: datetime
) -> dict[str, list[Rollup]]:
    """1-minute rollups of every node over [start, end), completed from raw readings.

    Stored rollups lag real time by a few minutes (``refresh_rollups`` runs every
    minute and waits for held values to end), so the minutes after the last stored
    bucket are computed here from the raw readings with the store's own
    :func:`compute_minutes`: the dashboard shows the last minutes too.
    """
    stored = await services.store.rollups(site.id, "1m", start, end)
    by_node: dict[str, list[Rollup]] = {n.id: [] for n in site.nodes}
    for r in stored:
        by_node.setdefault(r.node_id, []).append(r)
    first_minute = floor_to(start.timestamp(), 60)
    for node in site.nodes:
        done = by_node[node.id]
        tail_from = floor_to(done[-1].end.timestamp(), 60) if done else first_minute
        tail_to = end.timestamp()
        if tail_from >= tail_to:
            continue
        raw = await readings(
            services,
            site.id,
            node.id,
            datetime.fromtimestamp(tail_from - MAX_HOLD_S, start.tzinfo),
            end,
        )
        minutes = range(tail_from, int(tail_to) + 1, 60)
        done.extend(r for r in compute_minutes(raw, minutes) if r.start < end)
    return by_node


async def hour_rollups(
    services: Services, site: SiteConfig, start: datetime, end: datetime
) -> dict[str, list[Rollup]]:
    """Stored 1-hour rollups of every node over [start, end)."""
    stored = await services.store.rollups(site.id, "1h", start, end)
    by_node: dict[str, list[Rollup]] = {n.id: [] for n in site.nodes}
    for r in stored:
        by_node.setdefault(r.node_id, []).append(r)
    return by_node


def since_midnight(site: SiteConfig, now: datetime) -> datetime:
    """The start of the site's local day."""
    local = now.astimezone(site.tz)
    return local.replace(hour=0, minute=0, second=0, microsecond=0)


def ago(then: datetime, now: datetime) -> str:
    """E.g. "12 s ago", "5 min ago", "3 h ago", "2 days ago"."""
    seconds = max(0.0, (now - then).total_seconds())
    if seconds < 90:
        return f"{int(seconds)} s ago"
    if seconds < 5400:
        return f"{int(seconds // 60)} min ago"
    if seconds < 2 * 86400:
        return f"{int(seconds // 3600)} h ago"
    return f"{int(seconds // 86400)} days ago"


def local_time(value: datetime, site: SiteConfig, now: datetime | None = None) -> str:
    """A time in the site's zone: "2:05 PM CST" today, else "Nov 28, 2:05 PM CST"."""
    local = value.astimezone(site.tz)
    clock = local.strftime("%I:%M %p").lstrip("0") + " " + (local.tzname() or "")
    if now is not None and local.date() == now.astimezone(site.tz).date():
        return clock
    return local.strftime("%b %d, ").replace(" 0", " ") + clock


def stale_after(site: SiteConfig, node_id: str, factor: float) -> timedelta:
    """How long a node may stay silent before it counts as not reporting."""
    return node_stale_after(site.node(node_id), factor)


def node_stale_after(node: NodeConfig | None, factor: float) -> timedelta:
    """:func:`stale_after` of a node already found (None: a node the site does not have)."""
    interval = node.interval_s if node else 60.0
    return timedelta(seconds=max(60.0, interval * factor))
