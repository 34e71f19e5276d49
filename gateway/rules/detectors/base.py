"""The detector contract and what every detector shares.

A detector is one object per (site, rule): it declares the streams it consumes
(``Stream``), is fed the events of those streams with the site's shared state,
and answers a :class:`Verdict` (or None: nothing new). The engine dispatches from
the registry in ``detectors/registry.py``; nothing else knows the detectors.

The shared state (``SiteState``) holds the derived streams several detectors
read: pump cycles and the inflow rate from the pit node, outlet samples, volume
and pressure baselines from the discharge node, and the cold-weather state. The
water balance of a cycle lives in ``gateway/rules/physics.py``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from itertools import pairwise
from typing import Any, ClassVar, Protocol

from gateway.domain import Severity
from gateway.registry.models import SiteConfig
from gateway.rules.detectors.lazy import LazyDeque
from gateway.rules.pack import RulePack
from gateway.rules.thresholds import (
    BACKFLOW_WINDOW,
    FLOW_ABSENT_LPM,
    FLOW_PRESENT_LPM,
    FREEZING_C,
    LONG_RUN_FACTOR,
    NET_RATE_FLOOR_SHARE,
    OFF_MARK_CLUSTER_CM,
    RUNNING_CURRENT_A,
    THAW_AIR_C,
    THAW_FOR,
    UNSEEN_CYCLE_DROP_CM,
)

CM3_PER_L = 1000.0
#: Pump starts are remembered this long (evidence: starts in the last hour).
STARTS_KEPT = timedelta(hours=2)
M_PER_IN = 0.0254


@dataclass(frozen=True, slots=True)
class RuleInfo:
    """Fixed homeowner wording of one rule (the catalog entry)."""

    rule_id: str
    title: str
    action: str


@dataclass(frozen=True, slots=True)
class Verdict:
    """A detector's current opinion about its rule at one site.

    ``active`` False means the condition does not hold (an open finding clears).
    """

    active: bool
    severity: Severity = Severity.WARNING
    level: str = ""
    evidence: Mapping[str, Any] = field(default_factory=dict)


INACTIVE = Verdict(False)


@dataclass(frozen=True, slots=True)
class SiteContext:
    """The static facts about a site that detectors use.

    Registry facts may be unknown (None): each property falls back, explicitly,
    to a typical residential value, never to a guess presented as recorded.
    """

    site: SiteConfig
    pack: RulePack | None
    silence_factor: float = 6.0

    @property
    def pit_area_cm2(self) -> float:
        """Cross-section of the pit: litres per cm of level = area / 1000."""
        return self.site.pit.area_cm2

    def litres(self, level_cm: float) -> float:
        """Water volume in a level difference."""
        return level_cm * self.pit_area_cm2 / CM3_PER_L

    def cm(self, litres: float) -> float:
        """Level difference of a water volume."""
        return litres * CM3_PER_L / self.pit_area_cm2

    @property
    def line_volume_l(self) -> float:
        """Water the discharge line holds when full (falls back without a check valve)."""
        # Typical diameter and length where the registry records none.
        diameter_in, length_m, _rise = self.site.installation.line_geometry
        radius_m = diameter_in * M_PER_IN / 2
        return math.pi * radius_m**2 * length_m * 1000.0

    @property
    def band_l(self) -> float:
        """Registered volume between the float marks (one normal cycle, roughly)."""
        pit = self.site.pit
        return self.litres(pit.pump_on_cm - pit.pump_off_cm)

    @property
    def pressure_tap(self) -> str | None:
        """Where the discharge node's pressure tap sits, None when not recorded."""
        from gateway.contract import NodeKind  # local: keeps base import-light

        node = self.site.node_of_kind(NodeKind.DISCHARGE)
        return None if node is None else node.pressure_tap

    def waived(self, rule_id: str, ts: datetime) -> bool:
        """A waiver covers ``rule_id`` at instant ``ts`` AND the pack's rule has a waiver
        clause (a pack without one, e.g. L.L. 6-2024, honours no waiver)."""
        if self.pack is None or self.pack.rule(rule_id).waiver_citation is None:
            return False
        tz = self.site.tz
        return any(w.rule == rule_id and w.covers_at(ts, tz) for w in self.site.waivers)


@dataclass(frozen=True, slots=True)
class PitSample:
    ts: datetime
    level_cm: float
    pump_on: bool
    backup_on: bool
    current_a: float | None


@dataclass(frozen=True, slots=True)
class OutletSample:
    ts: datetime
    flow_lpm: float
    pressure_kpa: float
    pipe_temp_c: float


@dataclass(frozen=True, slots=True)
class PumpCycle:
    """One pump run as the pit node saw it.

    ``before_ts`` is the last sample with the pump off before the run,
    ``first_on_ts``/``last_on_ts`` bound the samples with the pump on (equal to
    ``before_ts``/``end_ts`` for a run shorter than the sample interval, which
    ``seen`` False marks), ``end_ts`` is the first sample with the pump off again.
    """

    before_ts: datetime
    first_on_ts: datetime
    last_on_ts: datetime
    end_ts: datetime
    start_level_cm: float
    low_level_cm: float
    seen: bool
    #: Levels at the first and last sample with the pump on (seen cycles).
    first_on_level_cm: float | None = None
    last_on_level_cm: float | None = None
    #: Levels at the samples just before and just after the run (seen cycles).
    before_level_cm: float | None = None
    end_level_cm: float | None = None

    @property
    def drop_cm(self) -> float:
        """Level fall over the run (a lower bound: inflow during the run adds to it)."""
        return max(0.0, self.start_level_cm - self.low_level_cm)

    @property
    def est_duration(self) -> timedelta:
        """Midpoint estimate of how long the pump ran."""
        if not self.seen:
            return (self.end_ts - self.before_ts) / 2
        inner = self.last_on_ts - self.first_on_ts
        outer = self.end_ts - self.before_ts
        return (inner + outer) / 2


class CycleTracker:
    """Turns pit samples into pump cycles; keeps the recent fill (inflow) rate."""

    def __init__(self) -> None:
        self.last: PitSample | None = None
        self._run: list[PitSample] = []
        self._before: PitSample | None = None
        self.starts: LazyDeque[datetime] = LazyDeque()
        #: cm per second the level rises with the pump off (groundwater inflow).
        self.fill_rates: LazyDeque[float] = LazyDeque(maxlen=9)
        #: When each of ``fill_rates`` was measured (first and last sample of its
        #: off period): how current the inflow is, and its trend.
        self.fill_spans: LazyDeque[tuple[datetime, datetime]] = LazyDeque(maxlen=9)
        self._fill_from: PitSample | None = None
        self.last_end: datetime | None = None
        self._diffs: LazyDeque[float] = LazyDeque(maxlen=60)
        #: Level of the last pump-off sample before each seen start (the real on
        #: mark sits just above these: registered marks are never exact).
        self.start_levels: LazyDeque[float] = LazyDeque(maxlen=12)
        #: Level the current run started from (highest of the sample before and the first on).
        self.run_start_level: float | None = None
        #: Inflow rate when the current run started (cm/s).
        self.run_fill_rate: float = 0.0
        #: Pit drain rates of finished normal cycles, cm/s (pump flow / pit area).
        self.drain_rates: LazyDeque[float] = LazyDeque(maxlen=15)
        #: Lowest level of recent cycles (where the float really stops the pump).
        self.lows: LazyDeque[float] = LazyDeque(maxlen=12)
        #: Spans of recent runs (sample before to sample after), s.
        self.run_lengths: LazyDeque[float] = LazyDeque(maxlen=15)
        #: Gross pumping rate (cm/s: the net fall plus the inflow at the run's start),
        #: from runs with two on-samples or more.
        self.pump_rates: LazyDeque[float] = LazyDeque(maxlen=15)
        #: Median motor current of recent runs the float ended (A), where reported.
        self.run_currents: LazyDeque[float] = LazyDeque(maxlen=15)

    def net_rate_cm_s(self) -> float | None:
        """Net fall rate while pumping now, None before 3 runs with two on-samples or
        more (a run shorter than the pit interval never shows it).

        The pit's balance while the pump runs: the level falls at the pump's rate
        less the inflow. The pump's rate is a property of the pump and the line
        (learned as the median of runs' net fall plus the inflow then); the inflow
        is the weather's. In a storm the same pump drains the pit more slowly, and
        runs last longer than dry weather's net rate says. Never taken below a
        quarter of the pump's rate: a run that ended at the float outpaced inflow.
        """
        if len(self.pump_rates) < 3:
            return None
        ordered = sorted(self.pump_rates)
        pump = ordered[len(ordered) // 2]
        return max(pump - self.fill_rate_cm_s(), NET_RATE_FLOOR_SHARE * pump)

    def off_level_cm(
        self, registered_cm: float, tolerance_cm: float, spread_cm: float = 0.0
    ) -> float:
        """Where the float stops the pump: the lowest recent low (a sparse pit node
        often sees the level only after riser water fell back) raised by 1.5 noise
        sigmas (the minimum of a dozen noisy samples reads low), capped by the
        registered mark plus its tolerance (registered marks are a few cm off).

        A float stops the pump at one level, so normal lows cluster: at the mark,
        spread upward by at most the water that can fall back before a sample
        (``spread_cm``, the line's volume) and the noise. A low further below the
        median than that was not a float stop (a stuck float or a run by hand
        drains to the intake) and says nothing about the mark: it is left out."""
        cap = registered_cm + tolerance_cm
        if not self.lows:
            return cap
        noise = self.level_noise_cm()
        ordered = sorted(self.lows)
        median = ordered[len(ordered) // 2]
        floor = median - spread_cm - max(OFF_MARK_CLUSTER_CM, 4.0 * noise)
        lowest = min(x for x in ordered if x >= floor)
        return min(lowest + 1.5 * noise, cap)

    def learned_on_cm(self) -> float | None:
        """Highest level the pump was recently seen to wait for before starting."""
        return max(self.start_levels) if len(self.start_levels) >= 3 else None

    def drain_rate_cm_s(self) -> float | None:
        """Median rate a normal run drains the pit (pump flow), None before 3 runs."""
        if len(self.drain_rates) < 3:
            return None
        ordered = sorted(self.drain_rates)
        return ordered[len(ordered) // 2]

    def level_noise_cm(self) -> float:
        """Level sensor noise (1 sigma), from consecutive pump-off samples.

        Robust: the median absolute deviation of the differences ignores the slow
        inflow trend and the odd pump start; 0 until enough samples are seen.
        """
        if len(self._diffs) < 10:
            return 0.0
        ordered = sorted(self._diffs)
        mid = ordered[len(ordered) // 2]
        dev = sorted(abs(d - mid) for d in ordered)
        return 1.4826 * dev[len(dev) // 2] / math.sqrt(2)

    @property
    def run_samples(self) -> int:
        """Pit samples with the pump on in the current run."""
        return len(self._run)

    @property
    def running_since(self) -> datetime | None:
        """First sample of the current run, if the pump runs now."""
        return self._run[0].ts if self._run else None

    def run_drained(self, since: datetime, margin_cm: float) -> bool:
        """Whether the level fell by more than ``margin_cm`` between two consecutive
        on-samples of the current run after ``since``, the run's first sample left
        out (the fall from where the run began is the stall test's own).

        Once a run is under way a stalled pump drains nothing: its level only rises,
        at the inflow's rate. A level that falls again between two samples of one
        "run" is a pump moving water, stopping and restarting faster than the node
        reports (a failed check valve returning more than the float band at each
        stop restarts it at once: the level swings between the marks while every
        sample reads the pump on)."""
        run = [x for x in self._run[1:] if x.ts >= since]
        return any(a.level_cm - b.level_cm > margin_cm for a, b in pairwise(run))

    def fill_rate_cm_s(self) -> float:
        """Median recent inflow in cm/s (0 when unknown)."""
        if not self.fill_rates:
            return 0.0
        ordered = sorted(self.fill_rates)
        return ordered[len(ordered) // 2]

    def fill_rate_spread(self) -> float:
        """Relative scatter of the recent inflow rates (MAD / median); 1.0 (unknown)
        before 3 are measured. Steady groundwater gives a few %; rain starting or
        receding gives tens of %."""
        if len(self.fill_rates) < 3:
            return 1.0
        ordered = sorted(self.fill_rates)
        mid = ordered[len(ordered) // 2]
        if mid <= 0:
            return 0.0 if ordered[-1] <= 0 else 1.0
        dev = sorted(abs(x - mid) for x in ordered)
        return 1.4826 * dev[len(dev) // 2] / mid

    def add(self, s: PitSample) -> PumpCycle | None:
        """Feed one sample; return a cycle when one has just ended."""
        prev, self.last = self.last, s
        while self.starts and s.ts - self.starts[0] > STARTS_KEPT:
            self.starts.popleft()
        quiet = self.last_end is None or prev is None or prev.ts - self.last_end >= BACKFLOW_WINDOW
        if prev is not None and not prev.pump_on and not s.pump_on and quiet:
            # Steady fill only: water falling back after a stop is not noise.
            self._diffs.append(s.level_cm - prev.level_cm)
        if prev is None:
            self._first(s)
            return None
        if s.pump_on:
            self._running(prev, s)
            return None
        if self._run:
            return self._end_run(prev, s)
        if prev.level_cm - s.level_cm >= UNSEEN_CYCLE_DROP_CM:
            # The pump ran between two samples: a cycle shorter than the interval.
            self.starts.append(s.ts)
            self._close_fill(prev)
            self._fill_from = None
            self.last_end = s.ts
            return PumpCycle(prev.ts, prev.ts, s.ts, s.ts, prev.level_cm, s.level_cm, seen=False)
        # Start measuring inflow once water falling back from the riser has settled.
        settled = self.last_end is None or s.ts - self.last_end >= BACKFLOW_WINDOW
        if self._fill_from is None and settled:
            self._fill_from = s
        return None

    def _first(self, s: PitSample) -> None:
        """The site's first sample: a run already under way, or the start of a fill."""
        if s.pump_on:
            self._run = [s]
            self._before = s
            self.run_start_level = s.level_cm
        else:
            self._fill_from = s

    def _running(self, prev: PitSample, s: PitSample) -> None:
        """A sample with the pump on: a run starts (the fill before it closes) or goes on."""
        if self._run:
            self._run.append(s)
            return
        self._run = [s]
        self._before = prev
        self.starts.append(s.ts)
        self._close_fill(prev)
        if not prev.pump_on:
            self.start_levels.append(prev.level_cm)
        self.run_start_level = max(prev.level_cm, s.level_cm)
        self.run_fill_rate = self.fill_rate_cm_s()

    def _end_run(self, prev: PitSample, s: PitSample) -> PumpCycle:
        """The first sample after a run: the cycle it closes, learned from."""
        run, before = self._run, self._before or prev
        self._run = []
        self._fill_from = None
        self.last_end = s.ts
        self.run_start_level = None
        cycle = PumpCycle(
            before_ts=before.ts,
            first_on_ts=run[0].ts,
            last_on_ts=run[-1].ts,
            end_ts=s.ts,
            start_level_cm=max(before.level_cm, run[0].level_cm),
            low_level_cm=min(*(r.level_cm for r in run), s.level_cm),
            seen=True,
            first_on_level_cm=run[0].level_cm,
            last_on_level_cm=run[-1].level_cm,
            before_level_cm=before.level_cm,
            end_level_cm=s.level_cm,
        )
        self._learn_low(cycle, run)
        self._learn_rates(cycle)
        seconds = cycle.est_duration.total_seconds()
        if seconds > 0 and cycle.drop_cm > 0:
            self.drain_rates.append(cycle.drop_cm / seconds + self.fill_rate_cm_s())
        return cycle

    def usual_run_s(self) -> float | None:
        """Median span of recent runs (sample before to sample after), None before 3."""
        if len(self.run_lengths) < 3:
            return None
        ordered = sorted(self.run_lengths)
        return ordered[len(ordered) // 2]

    def _learn_low(self, c: PumpCycle, run: list[PitSample]) -> None:
        """Keep the run's low as a sample of the off mark, if the float ended the run.

        A float stops the pump once the band is drained; a run many times longer
        than the site's usual (a stuck float held on to the intake, a pump run by
        hand) did not end at the float, and its low is not the off mark's. Such a
        normal run's motor current (median of its samples) is the pump's running
        current."""
        run_s = (c.end_ts - c.before_ts).total_seconds()
        usual = self.usual_run_s()
        if usual is None or run_s <= LONG_RUN_FACTOR * usual:
            self.lows.append(c.low_level_cm)
            amps = sorted(r.current_a for r in run if r.current_a is not None)
            if amps and amps[len(amps) // 2] >= RUNNING_CURRENT_A and c.drop_cm > 0:
                self.run_currents.append(amps[len(amps) // 2])
        self.run_lengths.append(run_s)

    def running_current_a(self) -> float | None:
        """The pump's usual running current (median of recent normal runs), None
        before 3 runs reported one."""
        if len(self.run_currents) < 3:
            return None
        return _median(self.run_currents)

    def current_now_a(self) -> float | None:
        """Median motor current over the current run's samples (None: not running,
        or not reported). One sample of a noisy clamp can read a few tenths of an
        amp on a motor that draws nothing."""
        amps = [r.current_a for r in self._run if r.current_a is not None]
        if not amps:
            return None
        return sorted(amps)[len(amps) // 2]

    def _learn_rates(self, c: PumpCycle) -> None:
        first, last = c.first_on_level_cm, c.last_on_level_cm
        span = (c.last_on_ts - c.first_on_ts).total_seconds()
        if first is not None and last is not None and span > 0 and first > last:
            self.pump_rates.append((first - last) / span + self.run_fill_rate)

    def _close_fill(self, last_off: PitSample) -> None:
        start = self._fill_from
        if start is None:
            return
        seconds = (last_off.ts - start.ts).total_seconds()
        if seconds >= 60:
            self.fill_rates.append(max(0.0, (last_off.level_cm - start.level_cm) / seconds))
            self.fill_spans.append((start.ts, last_off.ts))
        self._fill_from = None

    def starts_within(self, now: datetime, span: timedelta) -> int:
        """Pump starts in the last ``span`` (for evidence)."""
        return sum(1 for t in self.starts if now - t <= span)


class OutletHistory:
    """Recent outlet samples, discharged volume (sample-and-hold integration) and the
    site's learned pressure baselines (idle and running into an open line)."""

    def __init__(self, interval_s: float, keep_samples: timedelta, keep_volume: timedelta) -> None:
        self.samples: LazyDeque[OutletSample] = LazyDeque()
        self._volumes: LazyDeque[tuple[datetime, float]] = LazyDeque()
        self._gaps: LazyDeque[datetime] = LazyDeque(maxlen=20)
        self._keep_samples = keep_samples
        self._keep_volume = keep_volume
        #: A gap longer than this is not integrated (the node was silent).
        self.max_gap = timedelta(seconds=max(3 * interval_s, 30.0))
        self.interval_s = interval_s
        self.last: OutletSample | None = None
        self._flows: LazyDeque[float] = LazyDeque(maxlen=50)
        self._running_kpa: LazyDeque[float] = LazyDeque(maxlen=40)
        self._idle_kpa: LazyDeque[float] = LazyDeque(maxlen=40)

    def peak_flow_lpm(self) -> float | None:
        """Highest recent outlet flow while pumping, None before any is seen."""
        return max(self._flows) if self._flows else None

    def typical_flow_lpm(self) -> float | None:
        """Median outlet flow while pumping (learned), None before any is seen."""
        return _median(self._flows) if len(self._flows) >= 3 else None

    def running_kpa(self) -> float | None:
        """Learned pressure while water flows out normally (static lift + friction at
        a riser tap, ~0 at an outlet tap); None before 5 such samples."""
        return _median(self._running_kpa) if len(self._running_kpa) >= 5 else None

    def idle_kpa(self) -> float | None:
        """Learned pressure with the pump off (a riser tap holds the static column
        behind a good check valve); None before 5 such samples."""
        return _median(self._idle_kpa) if len(self._idle_kpa) >= 5 else None

    def add(self, s: OutletSample, pump_on: bool | None) -> None:
        """Record a sample; integrate the flow since the previous one."""
        prev, self.last = self.last, s
        self.samples.append(s)
        if s.flow_lpm >= FLOW_PRESENT_LPM:
            self._flows.append(s.flow_lpm)
            if pump_on:
                self._running_kpa.append(s.pressure_kpa)
        elif pump_on is False and s.flow_lpm < FLOW_ABSENT_LPM:
            self._idle_kpa.append(s.pressure_kpa)
        if prev is not None:
            gap = s.ts - prev.ts
            if gap <= self.max_gap:
                mean_lpm = (prev.flow_lpm + s.flow_lpm) / 2
                self._volumes.append((s.ts, mean_lpm * gap.total_seconds() / 60.0))
            else:
                self._gaps.append(s.ts)
        while self.samples and self.samples[0].ts < s.ts - self._keep_samples:
            self.samples.popleft()
        while self._volumes and self._volumes[0][0] < s.ts - self._keep_volume:
            self._volumes.popleft()

    def between(self, start: datetime, end: datetime) -> list[OutletSample]:
        """Samples with ``start <= ts <= end``."""
        return [s for s in self.samples if start <= s.ts <= end]

    def volume_since(self, start: datetime) -> float:
        """Litres discharged at the outlet since ``start`` (within the kept window)."""
        return sum(v for t, v in self._volumes if t > start)

    def volume_between(self, start: datetime, end: datetime) -> float | None:
        """Litres integrated over ``(start, end]``; None when the node was silent in it
        (a gap, or no sample yet at or after ``end``)."""
        if self.last is None or self.last.ts < end:
            return None
        first = self.samples[0].ts if self.samples else end
        if first > start or any(start < g <= end + self.max_gap for g in self._gaps):
            return None
        return sum(v for t, v in self._volumes if start < t <= end)


def _median(values: Iterable[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


@dataclass(frozen=True, slots=True)
class AirSample:
    ts: datetime
    air_temp_c: float


class FreezeState:
    """Freezing air with hysteresis: freezing at <= 0 C, thawed only after the air has
    stayed above +1 C for ``THAW_FOR`` (a sensor dithering around 0 C changes nothing)."""

    def __init__(self) -> None:
        self.freezing = False
        self.since: datetime | None = None
        self._warm_since: datetime | None = None

    def update(self, s: AirSample) -> None:
        """Feed one air sample."""
        if s.air_temp_c <= FREEZING_C:
            self._warm_since = None
            if not self.freezing:
                self.freezing, self.since = True, s.ts
            return
        if s.air_temp_c > THAW_AIR_C:
            self._warm_since = self._warm_since or s.ts
        if self.freezing and self._warm_since is not None and s.ts - self._warm_since >= THAW_FOR:
            self.freezing, self.since = False, None

    def frozen_for(self, now: datetime) -> timedelta:
        """How long it has been freezing at ``now`` (zero when not)."""
        return now - self.since if self.freezing and self.since is not None else timedelta(0)


class SiteState:
    """Everything the detectors of one site read: context plus derived streams."""

    def __init__(self, ctx: SiteContext, keep_volume: timedelta) -> None:
        from gateway.contract import NodeKind  # local: keeps base import-light

        self.ctx = ctx
        node = ctx.site.node_of_kind(NodeKind.DISCHARGE)
        self.cycles = CycleTracker()
        self.outlet = OutletHistory(
            node.interval_s if node else 10.0, timedelta(minutes=30), keep_volume
        )
        self.air: AirSample | None = None
        self.freeze = FreezeState()
        #: Arrival bookkeeping for sensor silence (arrival clock, not device time).
        self.last_heard: dict[str, datetime] = {}
        self.offline: set[str] = set()
        self.watch_from: datetime | None = None

    @property
    def pit(self) -> PitSample | None:
        """The latest pit sample."""
        return self.cycles.last

    def update(self, event: Event) -> CycleEnd | None:
        """Fold one data event into the shared streams; a finished cycle, if any."""
        if isinstance(event, PitSample):
            cycle = self.cycles.add(event)
            return None if cycle is None else CycleEnd(cycle, event)
        if isinstance(event, OutletSample):
            pit = self.cycles.last
            recent = pit is not None and abs(event.ts - pit.ts) <= timedelta(seconds=45)
            self.outlet.add(event, pit.pump_on if recent and pit is not None else None)
        elif isinstance(event, AirSample):
            self.air = event
            self.freeze.update(event)
        return None


# --- the contract ---------------------------------------------------------------


class Stream(StrEnum):
    """What a detector can consume."""

    PIT = "pit"  # every pit sample (after the shared streams are updated)
    OUTLET = "outlet"  # every discharge-node sample
    AIR = "air"  # every air sample
    CYCLE = "cycle"  # a pump cycle just ended
    STATUS = "status"  # a node's online/offline message, or any message arriving
    TICK = "tick"  # the clock (wall clock live, data time in replay)


@dataclass(frozen=True, slots=True)
class CycleEnd:
    """A pump cycle has ended at ``first_off`` (the first sample with the pump off)."""

    cycle: PumpCycle
    first_off: PitSample


@dataclass(frozen=True, slots=True)
class Arrival:
    """Arrival-clock event: a node's message or status arrived, or the clock ticked.

    ``kind`` is "heard" (a message arrived), "status" (online/offline) or "tick".
    """

    now: datetime
    kind: str


Event = PitSample | OutletSample | AirSample | CycleEnd | Arrival


def stream_of(event: Event) -> Stream:
    """The stream an event belongs to."""
    if isinstance(event, PitSample):
        return Stream.PIT
    if isinstance(event, OutletSample):
        return Stream.OUTLET
    if isinstance(event, AirSample):
        return Stream.AIR
    if isinstance(event, CycleEnd):
        return Stream.CYCLE
    return Stream.TICK if event.kind == "tick" else Stream.STATUS


class Detector(Protocol):
    """One rule at one site. Built with the site's state: ``cls(state)``."""

    rule_id: ClassVar[str]
    info: ClassVar[RuleInfo]
    streams: ClassVar[frozenset[Stream]]
    #: True while the detector holds its finding open.
    active: bool

    def __init__(self, state: SiteState) -> None: ...

    def feed(self, event: Event, state: SiteState) -> Verdict | None:
        """Judge one event of a consumed stream; None means nothing new to say."""
        ...

    def restore(self) -> None:
        """Continue a finding restored from the store (after a restart)."""
        ...


def iso(ts: datetime | None) -> str | None:
    """RFC 3339 text for evidence (JSON-able)."""
    return None if ts is None else ts.isoformat().replace("+00:00", "Z")


def r1(x: float) -> float:
    """Round for evidence: one decimal is below every sensor's resolution."""
    return round(x, 1)
