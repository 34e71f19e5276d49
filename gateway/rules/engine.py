"""The rules engine: per-site stateful detectors over validated readings.

Pure apart from its in-memory state: readings, status changes and clock ticks
go in, :class:`FindingEvent` s come out. One open finding per (site, rule): it
opens once, is updated while the condition holds (an event only when its level
or severity changes, or every ``REFRESH_EVERY``), and clears when it ends.

Each site has one :class:`SiteMonitor`: the shared per-site state and one
instance of every detector of ``detectors/registry.py``, fed by stream (the
detector contract is in ``detectors/base.py``).

Detectors use device time (``Reading.ts``), in order *per node*: a node that
buffered through a Wi-Fi outage and flushes its backlog oldest first is judged
reading by reading, however far behind the other nodes' newest it is. A reading
whose identity ``(boot, seq)`` was already seen (QoS 1 redelivery) is ignored
silently. A new reading not newer than its node's newest cannot be fed to the
stateful detectors without rewinding them: it is stored and charted but not
judged, and the engine records it in a :class:`NotEvaluated` span (reported to
``on_not_evaluated``) so pages and reports say so. Readings of unknown sites are
ignored. Sensor silence is about *arrival*, so it compares ``received_at`` with
the clock given to :meth:`RulesEngine.tick` (wall clock live, data time in replay).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from gateway.contract import NodeKind
from gateway.domain import (
    Audience,
    Finding,
    FindingChange,
    FindingEvent,
    NotEvaluated,
    Reading,
    StatusChange,
)
from gateway.registry.models import SiteConfig, SiteRegistry
from gateway.rules.catalog import CATALOG, action_for
from gateway.rules.detectors.base import (
    AirSample,
    Arrival,
    Detector,
    Event,
    OutletSample,
    PitSample,
    SiteContext,
    SiteState,
    Stream,
    Verdict,
    stream_of,
)
from gateway.rules.detectors.registry import build
from gateway.rules.pack import RulePack
from gateway.rules.thresholds import (
    ICING_WINDOW,
    IDENTITIES_KEPT,
    NOT_EVALUATED_MERGE,
    REFRESH_EVERY,
)

log = logging.getLogger(__name__)


def _event(r: Reading) -> tuple[Stream, PitSample | OutletSample | AirSample] | None:
    """The detector event of a validated reading and its stream (None when it lacks a
    needed value). Values are read straight from the mapping: this runs per message."""
    values = r.values
    if r.kind is NodeKind.PIT:
        level, pump = values.get("level_cm"), values.get("pump_on")
        if level is None or pump is None:
            return None
        amps = values.get("pump_current_a")
        backup = bool(values.get("backup_pump_on"))
        sample = PitSample(
            r.ts, float(level), bool(pump), backup, None if amps is None else float(amps)
        )
        return Stream.PIT, sample
    if r.kind is NodeKind.DISCHARGE:
        flow, pressure = values.get("flow_lpm"), values.get("pressure_kpa")
        temp = values.get("pipe_temp_c")
        if flow is None or pressure is None or temp is None:
            return None
        return Stream.OUTLET, OutletSample(r.ts, float(flow), float(pressure), float(temp))
    if r.kind is NodeKind.AIR:
        temp = values.get("air_temp_c")
        return None if temp is None else (Stream.AIR, AirSample(r.ts, float(temp)))
    return None


#: Boots whose sequence numbers a node's ledger remembers (a node that reboots
#: several times within minutes still has its redeliveries told apart).
BOOTS_KEPT = 4


class _Seqs:
    """The sequence numbers of one boot seen lately, compactly: the highest, and one bit
    for each of the ``IDENTITIES_KEPT`` numbers below it (bit ``i``: ``top - i`` seen).

    A node numbers its messages +1 each, so the numbers seen lately are a window below
    the highest: 512 bytes a boot, where a set of ``(boot, seq)`` tuples with their
    arrival order took ~500 kB a node once full (4,096 identities; issue 17 item 2)."""

    __slots__ = ("bits", "top")

    def __init__(self, seq: int) -> None:
        self.top = seq
        self.bits = 1

    def add(self, seq: int) -> bool:
        """Remember ``seq``; True when it was seen already (within the window)."""
        behind = self.top - seq
        if behind < 0:  # the usual case: the next number
            # A jump past the whole window forgets it (and never shifts by billions).
            ahead = -behind
            self.bits = 1 if ahead >= IDENTITIES_KEPT else ((self.bits << ahead) | 1) & _WINDOW
            self.top = seq
            return False
        if behind >= IDENTITIES_KEPT:
            return False  # older than the window: not known to be a redelivery
        bit = 1 << behind
        if self.bits & bit:
            return True
        self.bits |= bit
        return False


_WINDOW = (1 << IDENTITIES_KEPT) - 1


class NodeLedger:
    """Per node: the newest device time judged, the identities recently seen and
    the open not-evaluated span. Decides what the engine does with a reading."""

    __slots__ = ("_boots", "_span", "newest")

    def __init__(self) -> None:
        self.newest: datetime | None = None
        #: Per boot (the last ``BOOTS_KEPT``, oldest first), its numbers seen lately.
        self._boots: dict[str, _Seqs] = {}
        self._span: NotEvaluated | None = None

    def is_duplicate(self, r: Reading) -> bool:
        """The same message again (QoS 1 redelivery); remembers it otherwise."""
        seqs = self._boots.get(r.boot)
        if seqs is not None:
            return seqs.add(r.seq)
        if len(self._boots) >= BOOTS_KEPT:
            del self._boots[next(iter(self._boots))]
        self._boots[r.boot] = _Seqs(r.seq)
        return False

    def in_order(self, r: Reading) -> bool:
        """Newer than the node's newest: advance it (the reading is to be judged)."""
        if self.newest is not None and r.ts <= self.newest:
            return False
        self.newest = r.ts
        return True

    def late(self, r: Reading) -> NotEvaluated:
        """Add an out-of-order reading to the node's not-evaluated span."""
        span = self._span
        if span is None or not (
            span.start - NOT_EVALUATED_MERGE <= r.ts <= span.end + NOT_EVALUATED_MERGE
        ):
            span = NotEvaluated(uuid.uuid4().hex, r.site_id, r.node_id, r.ts, r.ts, 0)
        span = replace(span, start=min(span.start, r.ts), end=max(span.end, r.ts))
        self._span = replace(span, count=span.count + 1)
        return self._span


class SiteMonitor:
    """The detectors and shared state of one site; dispatches events by stream."""

    __slots__ = ("_consumers", "_detectors", "nodes", "site", "state")

    def __init__(self, site: SiteConfig, pack: RulePack | None, silence_factor: float) -> None:
        self.site = site
        ctx = SiteContext(site, pack, silence_factor)
        self.state = SiteState(ctx, ICING_WINDOW + timedelta(minutes=5))
        self._detectors = build(self.state)
        #: Each stream's consumers, in dispatch order: an event is offered only to them
        #: (a reading meets 5 of the 8 detectors, a "heard" arrival 1), and no event's
        #: stream is worked out again per detector.
        self._consumers = {
            stream: tuple(d for d in self._detectors if stream in d.streams) for stream in Stream
        }
        self.nodes: dict[str, NodeLedger] = {}

    def refresh(self, site: SiteConfig) -> None:
        """Take the site as the registry now reads it (a case granted a waiver or
        recorded inspected facts). Detectors read waivers through the context at each
        verdict, so the next one honours it; their learned state is kept."""
        if site is self.site or site == self.site:
            return
        self.site = site
        self.state.ctx = replace(self.state.ctx, site=site)

    def detectors(self) -> Mapping[str, Detector]:
        """Detector objects by rule id."""
        return {d.rule_id: d for d in self._detectors}

    def dispatch(
        self, event: Event, at: datetime, stream: Stream | None = None
    ) -> list[tuple[str, Verdict, datetime]]:
        """Feed one event to every detector consuming its stream (``stream``, when the
        caller knows it, else the event's own)."""
        state = self.state
        out: list[tuple[str, Verdict, datetime]] = []
        for d in self._consumers[stream_of(event) if stream is None else stream]:
            verdict = d.feed(event, state)
            if verdict is not None:
                out.append((d.rule_id, verdict, at))
        return out

    def on_reading(self, r: Reading) -> list[tuple[str, Verdict, datetime]]:
        """Feed one fresh reading; the verdicts it produced, with their data time."""
        found = _event(r)
        if found is None:
            return []
        stream, event = found
        ended = self.state.update(event)
        if ended is None:
            return self.dispatch(event, r.ts, stream)
        return self.dispatch(ended, r.ts, Stream.CYCLE) + self.dispatch(event, r.ts, stream)

    def arrival(self, now: datetime, kind: str) -> list[tuple[str, Verdict, datetime]]:
        """Arrival-clock event (heard, status, tick)."""
        stream = Stream.TICK if kind == "tick" else Stream.STATUS
        return self.dispatch(Arrival(now, kind), now, stream)


class RulesEngine:
    """Stateful detectors for every site of a registry, under each site's rule pack."""

    def __init__(
        self,
        registry: SiteRegistry,
        packs: dict[str, RulePack],
        silence_factor: float = 6.0,
        on_not_evaluated: Callable[[NotEvaluated], None] | None = None,
    ) -> None:
        self.registry = registry
        self.packs = packs
        self.silence_factor = silence_factor
        #: Told of every late reading's span (the runtime stores it for pages and reports).
        self.on_not_evaluated = on_not_evaluated
        self._monitors: dict[str, SiteMonitor] = {}
        self._open: dict[tuple[str, str], Finding] = {}
        self._emitted: dict[tuple[str, str], datetime] = {}

    # -- inputs ---------------------------------------------------------------

    def on_reading(self, reading: Reading) -> list[FindingEvent]:
        """Run the site's detectors on one validated reading."""
        mon = self._to_judge(reading)
        if mon is None:
            return []
        verdicts = mon.on_reading(reading)
        verdicts += mon.arrival(reading.received_at, "heard")
        return self._apply_all(mon, verdicts) if verdicts else []

    def on_readings(self, readings: Sequence[Reading]) -> list[FindingEvent]:
        """Judge a batch of readings in arrival order (the pipeline's, one socket read's
        worth); what :meth:`on_reading` does for each, except that each site's arrival
        clock ("heard": a message arrived) is advanced once, after the site's last
        judged reading of the batch, at its arrival time. That event only tells the
        silence rule that the site's nodes are alive; the last arrival of a batch tells
        it what every earlier one would, within the batch's milliseconds.

        A detector failing on one reading is logged and the batch goes on: one bug must
        not leave the other sites unjudged."""
        events: list[FindingEvent] = []
        heard: dict[str, tuple[SiteMonitor, datetime]] = {}
        for reading in readings:
            try:
                mon = self._to_judge(reading)
                if mon is None:
                    continue
                heard[reading.site_id] = (mon, reading.received_at)
                verdicts = mon.on_reading(reading)
                if verdicts:
                    events += self._apply_all(mon, verdicts)
            except Exception:
                log.exception("detector failed on %s/%s", reading.site_id, reading.node_id)
        for mon, at in heard.values():
            try:
                verdicts = mon.arrival(at, "heard")
                if verdicts:
                    events += self._apply_all(mon, verdicts)
            except Exception:
                log.exception("detector failed on %s (heard)", mon.site.id)
        return events

    def _to_judge(self, reading: Reading) -> SiteMonitor | None:
        """The monitor of a reading's site when the reading is to be judged: not of an
        unknown site, not a redelivery, not behind its node's newest (recorded as not
        evaluated). Any message is a sign of life, whatever is then done with it."""
        mon = self._monitors.get(reading.site_id) or self._monitor(reading.site_id)
        if mon is None:
            return None
        node_id = reading.node_id
        state = mon.state
        state.last_heard[node_id] = reading.received_at
        state.offline.discard(node_id)
        ledger = mon.nodes.get(node_id)
        if ledger is None:
            ledger = mon.nodes[node_id] = NodeLedger()
        if ledger.is_duplicate(reading):
            return None  # QoS 1 redelivery: judged (or recorded) the first time
        if not ledger.in_order(reading):
            span = ledger.late(reading)
            if self.on_not_evaluated is not None:
                self.on_not_evaluated(span)
            return None
        return mon

    def on_heard(self, site_id: str, node_id: str, received_at: datetime) -> list[FindingEvent]:
        """A message from a node arrived but was refused (dead letter): it is alive.

        The sensor-silent rule is about messages arriving at all; a node whose
        clock runs ahead or that sends a malformed payload is not silent.
        """
        mon = self._monitor(site_id)
        if mon is None or mon.site.node(node_id) is None:
            return []
        mon.state.last_heard[node_id] = received_at
        return self._apply_all(mon, mon.arrival(received_at, "heard"))

    def on_status(self, status: StatusChange) -> list[FindingEvent]:
        """A node's retained online/offline message."""
        mon = self._monitor(status.site_id)
        if mon is None or mon.site.node(status.node_id) is None:
            return []
        if status.online:
            mon.state.offline.discard(status.node_id)
        else:
            mon.state.offline.add(status.node_id)
        return self._apply_all(mon, mon.arrival(status.received_at, "status"))

    def tick(self, now: datetime) -> list[FindingEvent]:
        """Check every site for silent sensors at ``now``, and take each site as the
        registry reads it now (case records amend sites while the gateway runs)."""
        events: list[FindingEvent] = []
        for site in self.registry:
            mon = self._monitor(site.id)
            assert mon is not None
            mon.refresh(site)
            events.extend(self._apply_all(mon, mon.arrival(now, "tick")))
        return events

    def restore(self, findings: Iterable[Finding]) -> None:
        """Continue open findings from the store (after a restart): no re-raise."""
        for f in findings:
            if not f.is_open:
                continue
            mon = self._monitor(f.site_id)
            if mon is None:
                continue
            key = (f.site_id, f.rule_id)
            self._open[key] = f
            self._emitted[key] = f.updated_at
            detector = mon.detectors().get(f.rule_id)
            if detector is not None:
                detector.restore()

    def warm_up(self, readings: Iterable[Reading], findings: Iterable[Finding]) -> int:
        """Relearn the detectors' state (baselines, calibrations, cycles) from readings
        another gateway already judged, then continue ``findings`` (the stored open
        ones): the replay's own events are dropped, so nothing opens or goes out twice.
        Readings in device-time order per node; returns how many were fed."""
        fed, told = 0, self.on_not_evaluated
        self.on_not_evaluated = None  # late spans were recorded by the gateway that judged them
        try:
            for r in readings:
                self.on_reading(r)
                fed += 1
        finally:
            self.on_not_evaluated = told
        self._open.clear()
        self._emitted.clear()
        self.restore(findings)
        return fed

    def open_findings(self) -> list[Finding]:
        """Every open finding held in memory."""
        return list(self._open.values())

    # -- internals ------------------------------------------------------------

    def _monitor(self, site_id: str) -> SiteMonitor | None:
        mon = self._monitors.get(site_id)
        if mon is None:
            site = self.registry.get(site_id)
            if site is None:
                return None
            mon = SiteMonitor(site, self.packs.get(site.jurisdiction), self.silence_factor)
            self._monitors[site_id] = mon
        return mon

    def _apply_all(
        self, mon: SiteMonitor, verdicts: list[tuple[str, Verdict, datetime]]
    ) -> list[FindingEvent]:
        events: list[FindingEvent] = []
        site_id, open_ = mon.site.id, self._open
        for rule_id, verdict, at in verdicts:
            # Most verdicts are "still not happening" (high water says so on every pit
            # sample): with nothing open for the rule there is nothing to do.
            if verdict.active or (site_id, rule_id) in open_:
                events.extend(self._apply(mon, rule_id, verdict, at))
        return events

    def _apply(
        self, mon: SiteMonitor, rule_id: str, verdict: Verdict, at: datetime
    ) -> list[FindingEvent]:
        key = (mon.site.id, rule_id)
        current = self._open.get(key)
        if not verdict.active:
            if current is None:
                return []
            cleared = replace(
                current,
                cleared_at=max(at, current.updated_at),
                updated_at=max(at, current.updated_at),
            )
            del self._open[key]
            self._emitted.pop(key, None)
            return [FindingEvent(FindingChange.CLEARED, cleared)]
        if current is None:
            finding = self._new_finding(mon, rule_id, verdict, at)
            self._open[key] = finding
            self._emitted[key] = at
            return [FindingEvent(FindingChange.OPENED, finding)]
        changed = verdict.level != current.level or verdict.severity != current.severity
        updated = replace(
            current,
            updated_at=max(at, current.updated_at),
            severity=verdict.severity,
            level=verdict.level,
            evidence=dict(verdict.evidence),
        )
        self._open[key] = updated
        if changed or at - self._emitted.get(key, at) >= REFRESH_EVERY:
            self._emitted[key] = at
            return [FindingEvent(FindingChange.UPDATED, updated)]
        return []

    def _new_finding(
        self, mon: SiteMonitor, rule_id: str, verdict: Verdict, at: datetime
    ) -> Finding:
        pack = mon.state.ctx.pack
        spec = pack.rule(rule_id) if pack is not None else None
        enforced = spec is not None and spec.enforced
        evidence = dict(verdict.evidence)
        citations: tuple[Any, ...] = ()
        if spec is not None and enforced and pack is not None:
            # Only the sections in force on the day it opens: Edgar (e)(1)b governs
            # "between November 15 and April 15" and is not cited in April frost.
            citations = pack.citations_on(rule_id, at.astimezone(mon.site.tz).date())
        elif spec is not None and spec.note:
            evidence["ordinance_note"] = spec.note
        audience = (
            (Audience.HOMEOWNER, Audience.PUBLIC_WORKS) if enforced else (Audience.HOMEOWNER,)
        )
        return Finding(
            id=uuid.uuid4().hex,
            rule_id=rule_id,
            site_id=mon.site.id,
            severity=verdict.severity,
            title=CATALOG[rule_id].title,
            opened_at=at,
            updated_at=at,
            level=verdict.level,
            audience=audience,
            evidence=evidence,
            citations=citations,
            action=action_for(rule_id, pack),
        )
