"""Case deadlines drive public-works alerts (16.2): escalation follows the case, not an alert's age.

Every binding deadline that is due today or overdue becomes a finding for public
works only (rule id ``case_deadline.<deadline id>``, citing the deadline's section),
fed to the alert manager like any detector finding; when the deadline is met,
suspended or the case closes, the finding clears and the alert resolves itself.
These rules have no grace period in any pack, so they reach public works at once;
the detector alert of a rule with an order step (:func:`has_order_step`) no longer
escalates by its own age, so the two cannot disagree.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from datetime import datetime

from gateway.cases.deadlines import local_day
from gateway.cases.models import DeadlineStatus
from gateway.cases.service import CaseService, CaseView
from gateway.domain import Audience, Finding, FindingChange, FindingEvent, Severity
from gateway.rules.pack import RulePack

log = logging.getLogger(__name__)

RULE_PREFIX = "case_deadline."
#: How often deadlines are re-checked (they change at local midnights and on steps).
INTERVAL_S = 600.0

Sink = Callable[[list[FindingEvent]], Awaitable[None]]


def has_order_step(pack: RulePack, rule_id: str) -> bool:
    """True when a confirmed violation of the rule leads to an order the pack provides
    (Edgar sanitary discharge, (f)(1)): public works then hears of it through the case
    deadlines this module watches, not through the detector alert's age (16.2)."""
    spec = pack.rules.get(rule_id)
    if spec is None or not spec.enforced or spec.on_confirmed is None:
        return False
    return spec.on_confirmed.step == "order" and pack.enforcement.offers("order")


def deadline_findings(views: Sequence[CaseView], now: datetime) -> dict[str, Finding]:
    """Findings for the binding deadlines that are due today or overdue, by id."""
    found: dict[str, Finding] = {}
    for v in views:
        today = local_day(now, v.site.tz)
        for d in v.deadlines:
            if not d.binding or d.due_at is None:
                continue
            overdue = d.status is DeadlineStatus.OVERDUE
            due_today = d.status is DeadlineStatus.OPEN and d.due_on == today
            if not (overdue or due_today):
                continue
            fid = f"{v.case.id}:{d.id}:{d.anchor_step_id}"
            who = "the owner" if d.party == "owner" else "the village"
            found[fid] = Finding(
                id=fid,
                rule_id=RULE_PREFIX + d.id,
                site_id=v.case.site_id,
                severity=Severity.CRITICAL if overdue else Severity.WARNING,
                title=f"{'Overdue' if overdue else 'Due today'}: {d.label} ({v.case.title})",
                opened_at=d.due_at if overdue else v.case.opened_at,
                updated_at=d.due_at if overdue else v.case.opened_at,
                level="overdue" if overdue else "due_today",
                audience=(Audience.PUBLIC_WORKS,),
                evidence={
                    "case_id": v.case.id,
                    "deadline": d.id,
                    "due_on": str(d.due_on),
                    "party": d.party,
                },
                citations=d.citations,
                action=f"Open case {v.case.id}: the step is for {who}.",
            )
    return found


class DeadlineWatch:
    """Re-checks case deadlines and sends opened, changed and cleared findings to a sink."""

    def __init__(self, service: CaseService, sink: Sink, interval_s: float = INTERVAL_S) -> None:
        self.service = service
        self.sink = sink
        self.interval_s = interval_s
        self._active: dict[str, Finding] = {}

    async def check(self) -> list[FindingEvent]:
        """One pass: events for what started, escalated (due today -> overdue) or ended."""
        now = self.service.clock()
        current = deadline_findings(await self.service.views(None), now)
        events: list[FindingEvent] = []
        for fid, finding in current.items():
            before = self._active.get(fid)
            if before is None:
                events.append(FindingEvent(FindingChange.OPENED, finding))
            elif before.level != finding.level:
                events.append(FindingEvent(FindingChange.UPDATED, finding))
        for fid, finding in self._active.items():
            if fid not in current:
                cleared = replace(finding, cleared_at=now, updated_at=now)
                events.append(FindingEvent(FindingChange.CLEARED, cleared))
        self._active = current
        if events:
            await self.sink(events)
        return events

    async def run(self) -> None:
        """Check forever (a gateway task)."""
        while True:
            try:
                await self.check()
            except Exception:
                log.exception("case deadline check failed")
            await asyncio.sleep(self.interval_s)
