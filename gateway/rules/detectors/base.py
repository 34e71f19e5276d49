"""What every detector shares: a verdict type, the site context, and the two
derived streams several detectors need (pump cycles from the pit node, outlet
samples and discharged volume from the discharge node)."""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from gateway.domain import Severity
from gateway.registry.models import SiteConfig
from gateway.rules.pack import RulePack
from gateway.rules.thresholds import BACKFLOW_WINDOW, FLOW_PRESENT_LPM, UNSEEN_CYCLE_DROP_CM

CM3_PER_L = 1000.0
#: Pump starts are remembered this long (evidence: starts in the last hour).
STARTS_KEPT = timedelta(hours=2)
M_PER_IN = 0.0254


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
    """The static facts about a site that detectors use."""

    site: SiteConfig
    pack: RulePack | None

    @property
    def pit_area_cm2(self) -> float:
        """Cross-section of the pit: litres per cm of level = area / 1000."""
        return self.site.pit.area_cm2

    def litres(self, level_cm: float) -> float:
        """Water volume in a level difference."""
        return level_cm * self.pit_area_cm2 / CM3_PER_L

    @property
    def line_volume_l(self) -> float:
        """Water the discharge line holds when full (falls back without a check valve)."""
        # Typical diameter and length where the registry records none.
        diameter_in, length_m, _rise = self.site.installation.line_geometry
        radius_m = diameter_in * M_PER_IN / 2
        return math.pi * radius_m**2 * length_m * 1000.0


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
        self.starts: deque[datetime] = deque()
        #: cm per second the level rises with the pump off (groundwater inflow).
        self.fill_rates: deque[float] = deque(maxlen=9)
        self._fill_from: PitSample | None = None
        self.last_end: datetime | None = None
        self._diffs: deque[float] = deque(maxlen=60)

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
    def running_since(self) -> datetime | None:
        """First sample of the current run, if the pump runs now."""
        return self._run[0].ts if self._run else None

    def fill_rate_cm_s(self) -> float:
        """Median recent inflow in cm/s (0 when unknown)."""
        if not self.fill_rates:
            return 0.0
        ordered = sorted(self.fill_rates)
        return ordered[len(ordered) // 2]

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
            if s.pump_on:
                self._run = [s]
                self._before = s
            else:
                self._fill_from = s
            return None
        if s.pump_on:
            if not self._run:
                self._run = [s]
                self._before = prev
                self.starts.append(s.ts)
                self._close_fill(prev)
            else:
                self._run.append(s)
            return None
        if self._run:
            run, before = self._run, self._before or prev
            self._run = []
            self._fill_from = None
            self.last_end = s.ts
            return PumpCycle(
                before_ts=before.ts,
                first_on_ts=run[0].ts,
                last_on_ts=run[-1].ts,
                end_ts=s.ts,
                start_level_cm=max(before.level_cm, run[0].level_cm),
                low_level_cm=min(min(r.level_cm for r in run), s.level_cm),
                seen=True,
                first_on_level_cm=run[0].level_cm,
                last_on_level_cm=run[-1].level_cm,
            )
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

    def _close_fill(self, last_off: PitSample) -> None:
        start = self._fill_from
        if start is None:
            return
        seconds = (last_off.ts - start.ts).total_seconds()
        if seconds >= 60:
            self.fill_rates.append(max(0.0, (last_off.level_cm - start.level_cm) / seconds))
        self._fill_from = None

    def starts_within(self, now: datetime, span: timedelta) -> int:
        """Pump starts in the last ``span`` (for evidence)."""
        return sum(1 for t in self.starts if now - t <= span)


class OutletHistory:
    """Recent outlet samples and discharged volume (sample-and-hold integration)."""

    def __init__(self, interval_s: float, keep_samples: timedelta, keep_volume: timedelta) -> None:
        self.samples: deque[OutletSample] = deque()
        self._volumes: deque[tuple[datetime, float]] = deque()
        self._keep_samples = keep_samples
        self._keep_volume = keep_volume
        #: A gap longer than this is not integrated (the node was silent).
        self._max_gap = timedelta(seconds=max(3 * interval_s, 30.0))
        self.interval_s = interval_s
        self.last: OutletSample | None = None
        self._flows: deque[float] = deque(maxlen=50)

    def peak_flow_lpm(self) -> float | None:
        """Highest recent outlet flow while pumping, None before any is seen."""
        return max(self._flows) if self._flows else None

    def typical_flow_lpm(self) -> float | None:
        """Median outlet flow while pumping (learned), None before any is seen."""
        if len(self._flows) < 3:
            return None
        ordered = sorted(self._flows)
        return ordered[len(ordered) // 2]

    def add(self, s: OutletSample) -> None:
        """Record a sample; integrate the flow since the previous one."""
        prev, self.last = self.last, s
        self.samples.append(s)
        if s.flow_lpm >= FLOW_PRESENT_LPM:
            self._flows.append(s.flow_lpm)
        if prev is not None:
            gap = s.ts - prev.ts
            if gap <= self._max_gap:
                mean_lpm = (prev.flow_lpm + s.flow_lpm) / 2
                self._volumes.append((s.ts, mean_lpm * gap.total_seconds() / 60.0))
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


@dataclass(frozen=True, slots=True)
class AirSample:
    ts: datetime
    air_temp_c: float


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

    @property
    def pit(self) -> PitSample | None:
        """The latest pit sample."""
        return self.cycles.last


def iso(ts: datetime | None) -> str | None:
    """RFC 3339 text for evidence (JSON-able)."""
    return None if ts is None else ts.isoformat().replace("+00:00", "Z")


def r1(x: float) -> float:
    """Round for evidence: one decimal is below every sensor's resolution."""
    return round(x, 1)
