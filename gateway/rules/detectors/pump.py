"""Homeowner-safety detectors on the pit: high water, continuous run, short cycling.

None of them needs an ordinance: they protect the basement. Each works on device
time and on the pit's own marks from the registry.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from datetime import datetime, timedelta

from gateway.domain import Severity
from gateway.rules.detectors.base import (
    INACTIVE,
    PitSample,
    PumpCycle,
    SiteState,
    Verdict,
    iso,
    r1,
)
from gateway.rules.thresholds import (
    BACKFLOW_LINE_SHARE,
    BACKFLOW_MIN_CM,
    BACKFLOW_WINDOW,
    CONTINUOUS_LOW_FOR,
    CONTINUOUS_LOW_LEVEL_MARGIN_CM,
    CONTINUOUS_MIN_RUN,
    HIGH_WATER_CLEAR_MARGIN_CM,
    HIGH_WATER_SAMPLES,
    SHORT_CYCLE_CLEAR_MAX,
    SHORT_CYCLE_TO_OPEN,
    SHORT_CYCLE_WINDOW,
)


class HighWaterDetector:
    """Level at or above the alarm mark on consecutive samples."""

    rule_id = "high_water"

    def __init__(self) -> None:
        self.active = False
        self._above = 0
        self._below = 0
        self._peak = 0.0
        self._since: datetime | None = None

    def restore_active(self) -> None:
        """Continue a finding restored from the store."""
        self.active = True

    def on_pit(self, s: PitSample, state: SiteState) -> Verdict | None:
        """Judge one pit sample."""
        pit = state.ctx.site.pit
        if s.level_cm >= pit.alarm_cm:
            self._above += 1
            self._below = 0
        elif s.level_cm < pit.alarm_cm - HIGH_WATER_CLEAR_MARGIN_CM:
            self._below += 1
            self._above = 0
        if not self.active and self._above >= HIGH_WATER_SAMPLES:
            self.active = True
            self._since, self._peak = s.ts, s.level_cm
        elif self.active and self._below >= HIGH_WATER_SAMPLES:
            self.active = False
            self._since = None
        if not self.active:
            return INACTIVE
        self._peak = max(self._peak, s.level_cm)
        pump_state = "running" if s.pump_on else "off"
        critical = s.level_cm >= pit.depth_cm - 5 or not s.pump_on
        return Verdict(
            True,
            Severity.CRITICAL if critical else Severity.WARNING,
            "",
            {
                "level_cm": r1(s.level_cm),
                "alarm_cm": pit.alarm_cm,
                "peak_cm": r1(self._peak),
                "pit_depth_cm": pit.depth_cm,
                "pump": pump_state,
                "backup_pump_on": s.backup_on,
                "pump_current_a": s.current_a,
                "above_since": iso(self._since),
            },
        )


class ContinuousRunDetector:
    """Pump running long with the level at or below the off mark: stuck float switch."""

    rule_id = "continuous_run"

    def __init__(self) -> None:
        self.active = False
        self._low_since: datetime | None = None

    def restore_active(self) -> None:
        """Continue a finding restored from the store."""
        self.active = True

    def on_pit(self, s: PitSample, state: SiteState) -> Verdict | None:
        """Judge one pit sample."""
        if not s.pump_on:
            self._low_since = None
            if self.active:
                self.active = False
                return INACTIVE
            return None
        pit = state.ctx.site.pit
        running_since = state.cycles.running_since or s.ts
        if s.level_cm <= pit.pump_off_cm + CONTINUOUS_LOW_LEVEL_MARGIN_CM:
            self._low_since = self._low_since or s.ts
        else:
            self._low_since = None
            # Level back above the band: the pump is doing real work (heavy inflow).
            if self.active:
                self.active = False
                return INACTIVE
            return None
        run = s.ts - running_since
        if run >= CONTINUOUS_MIN_RUN and s.ts - self._low_since >= CONTINUOUS_LOW_FOR:
            self.active = True
        if not self.active:
            return None
        return Verdict(
            True,
            Severity.WARNING,
            "",
            {
                "running_for_s": int(run.total_seconds()),
                "running_since": iso(running_since),
                "level_cm": r1(s.level_cm),
                "pump_off_cm": pit.pump_off_cm,
                "pump_current_a": s.current_a,
            },
        )


@dataclass
class _Pending:
    cycle: PumpCycle
    peak_cm: float


class ShortCyclingDetector:
    """Water falling back from the riser after each stop: a failed check valve.

    After a normal stop the level rises only with groundwater inflow. Without a
    working check valve the line's contents fall back within seconds, a jump of
    about line volume / pit area; the pump then restarts sooner and more often.
    """

    rule_id = "short_cycling"

    def __init__(self) -> None:
        self.active = False
        self._pending: deque[_Pending] = deque()
        self._judged: deque[float] = deque(maxlen=SHORT_CYCLE_WINDOW)

    def restore_active(self) -> None:
        """Continue a finding restored from the store."""
        self.active = True

    def threshold_cm(self, state: SiteState) -> float:
        """Backflow rise that counts, from the line's volume and the pit's area."""
        expected = state.ctx.line_volume_l * 1000.0 / state.ctx.pit_area_cm2
        return max(BACKFLOW_MIN_CM, BACKFLOW_LINE_SHARE * expected)

    def add_cycle(self, cycle: PumpCycle, first_off: PitSample) -> None:
        """Watch the level after a stop."""
        self._pending.append(_Pending(cycle, first_off.level_cm))

    def on_pit(self, s: PitSample, state: SiteState) -> Verdict | None:
        """Track post-stop rises; judge cycles whose window has passed."""
        verdict: Verdict | None = None
        for p in self._pending:
            if s.ts - p.cycle.end_ts <= BACKFLOW_WINDOW and not s.pump_on:
                p.peak_cm = max(p.peak_cm, s.level_cm)
        while self._pending and (
            s.ts - self._pending[0].cycle.end_ts > BACKFLOW_WINDOW or s.pump_on
        ):
            p = self._pending.popleft()
            if not p.cycle.seen:
                continue
            verdict = self._judge(p, s, state) or verdict
        return verdict

    def _judge(self, p: _Pending, now: PitSample, state: SiteState) -> Verdict | None:
        pit = state.ctx.site.pit
        # The float stops the pump at the off mark; the lowest level seen may be
        # higher when the sample came after the stop.
        reference = min(pit.pump_off_cm, p.cycle.low_level_cm)
        span = min(now.ts - p.cycle.end_ts, BACKFLOW_WINDOW) + (p.cycle.end_ts - p.cycle.last_on_ts)
        inflow_cm = state.cycles.fill_rate_cm_s() * span.total_seconds()
        backflow = p.peak_cm - reference - inflow_cm
        self._judged.append(backflow)
        threshold = self.threshold_cm(state)
        hits = sum(1 for b in self._judged if b >= threshold)
        if not self.active and hits >= SHORT_CYCLE_TO_OPEN:
            self.active = True
        elif self.active and hits <= SHORT_CYCLE_CLEAR_MAX and len(self._judged) >= 2:
            self.active = False
        if not self.active:
            return INACTIVE
        inst = state.ctx.site.installation
        return Verdict(
            True,
            Severity.WARNING,
            "",
            {
                "backflow_cm_last_cycles": [r1(b) for b in self._judged],
                "backflow_threshold_cm": r1(threshold),
                "backflow_l_last": r1(state.ctx.litres(backflow)),
                "starts_last_hour": state.cycles.starts_within(now.ts, timedelta(hours=1)),
                "registered_check_valve": inst.check_valve,
            },
        )
