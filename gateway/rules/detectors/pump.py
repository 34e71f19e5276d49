"""Homeowner-safety detectors on the pit: high water, continuous run, short cycling.

None of them needs an ordinance: they protect the basement. Each works on device
time and on the pit's own marks from the registry.
"""

from __future__ import annotations

import math
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
    BACKFLOW_JUDGE_AFTER,
    BACKFLOW_LINE_SHARE,
    BACKFLOW_MIN_CM,
    BACKFLOW_RATE_SPAN,
    BACKFLOW_WINDOW,
    CONTINUOUS_AT_MARK_CM,
    CONTINUOUS_LOW_FOR,
    CONTINUOUS_LOW_LEVEL_MARGIN_CM,
    CONTINUOUS_MIN_RUN,
    CONTINUOUS_STARVED_SHARE,
    HIGH_WATER_CLEAR_MARGIN_CM,
    HIGH_WATER_SAMPLES,
    OFF_MARK_TOLERANCE_CM,
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
    """Pump running long at or below the off mark: a stuck float switch.

    A working float stops the pump the moment the level reaches the off mark. Two
    signatures of one that does not: the level is held clearly *below* the mark
    (the pump drains down to its intake), or it is held *at* the mark while the
    outlet shows the pump starved (well under its usual flow: it is sucking air,
    moving only the inflow). A marginal pump in a storm approaching the mark slowly
    shows neither: its outlet flows at full rate.
    """

    rule_id = "continuous_run"

    def __init__(self) -> None:
        self.active = False
        self._below_since: datetime | None = None
        self._at_since: datetime | None = None

    def restore_active(self) -> None:
        """Continue a finding restored from the store."""
        self.active = True

    def on_pit(self, s: PitSample, state: SiteState) -> Verdict | None:
        """Judge one pit sample."""
        pit = state.ctx.site.pit
        below = s.pump_on and s.level_cm <= pit.pump_off_cm - CONTINUOUS_LOW_LEVEL_MARGIN_CM
        at = s.pump_on and s.level_cm <= pit.pump_off_cm + CONTINUOUS_AT_MARK_CM
        self._below_since = (self._below_since or s.ts) if below else None
        self._at_since = (self._at_since or s.ts) if at else None
        if not at:
            # Pump stopped, or level back above the band (real work: heavy inflow).
            if self.active:
                self.active = False
                return INACTIVE
            return None
        running_since = state.cycles.running_since or s.ts
        run = s.ts - running_since
        starved = self._starved(s.ts, state)
        held_below = (
            self._below_since is not None and s.ts - self._below_since >= CONTINUOUS_LOW_FOR
        )
        held_at = s.ts - self._at_since >= CONTINUOUS_LOW_FOR if self._at_since else False
        if run >= CONTINUOUS_MIN_RUN and (held_below or (held_at and starved)):
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
                "outlet_starved": starved,
                "pump_current_a": s.current_a,
            },
        )

    @staticmethod
    def _starved(now: datetime, state: SiteState) -> bool:
        """Outlet flow over the last minute and a half well under the pump's usual."""
        typical = state.outlet.typical_flow_lpm()
        recent = state.outlet.between(now - CONTINUOUS_LOW_FOR, now)
        if typical is None or not recent:
            return False
        mean = sum(x.flow_lpm for x in recent) / len(recent)
        return mean < CONTINUOUS_STARVED_SHARE * typical


@dataclass
class _Pending:
    cycle: PumpCycle
    samples: list[PitSample]


class ShortCyclingDetector:
    """Water falling back from the riser after each stop: a failed check valve.

    After a normal stop the level rises at the groundwater inflow rate. Without a
    working check valve the line's contents fall back within seconds: a fast
    early rise of about line volume / pit area (or up to the on mark, restarting
    the pump), then the inflow rate again. The detector compares the rise in the
    first ``BACKFLOW_WINDOW`` after the stop with the inflow rate measured later
    in the same fill (or, when the pump restarts too soon, the recent inflow).
    """

    rule_id = "short_cycling"

    def __init__(self) -> None:
        self.active = False
        self._pending: _Pending | None = None
        self._judged: deque[float] = deque(maxlen=SHORT_CYCLE_WINDOW)
        self._late_rate: float | None = None

    def restore_active(self) -> None:
        """Continue a finding restored from the store."""
        self.active = True

    def threshold_cm(self, state: SiteState) -> float:
        """Backflow rise that counts, from the line's volume and the pit's area.

        Never more than 60 % of the float band: the backflow cannot lift the level
        above the on mark without restarting the pump.
        """
        pit = state.ctx.site.pit
        expected = state.ctx.line_volume_l * 1000.0 / state.ctx.pit_area_cm2
        band = pit.pump_on_cm - pit.pump_off_cm
        # A backflow estimate is a difference of two noisy levels: 3 sigma of it.
        noise = 3.0 * math.sqrt(2.0) * state.cycles.level_noise_cm()
        return max(BACKFLOW_MIN_CM, min(BACKFLOW_LINE_SHARE * expected, 0.6 * band), noise)

    def add_cycle(self, cycle: PumpCycle, first_off: PitSample) -> None:
        """Watch the level after a stop."""
        self._pending = _Pending(cycle, [first_off]) if cycle.seen else None

    def on_pit(self, s: PitSample, state: SiteState) -> Verdict | None:
        """Collect the fill after a stop; judge it at the restart or after a while."""
        p = self._pending
        if p is None or s.ts <= p.samples[-1].ts:
            return None
        p.samples.append(s)  # a restart sample counts: the level reached the on mark
        if s.pump_on or s.ts - p.cycle.end_ts >= BACKFLOW_JUDGE_AFTER:
            self._pending = None
            return self._judge(p, s, state)
        return None

    def _judge(self, p: _Pending, now: PitSample, state: SiteState) -> Verdict | None:
        pit = state.ctx.site.pit
        stop = (
            p.cycle.last_on_ts
        )  # the pump stopped after this sample: inflow time is an upper bound
        settled = [
            x for x in p.samples if not x.pump_on and x.ts - p.cycle.end_ts >= BACKFLOW_WINDOW
        ]
        if len(settled) >= 2 and settled[-1].ts - settled[0].ts >= BACKFLOW_RATE_SPAN:
            # Inflow from the level's rise once any backflow is over.
            rate = (settled[-1].level_cm - settled[0].level_cm) / (
                settled[-1].ts - settled[0].ts
            ).total_seconds()
            self._late_rate = max(rate, 0.0)
            anchor = settled[0]
        else:
            # Restarted too soon to measure: the inflow of the last fill that could.
            known = self._late_rate
            if known is None and state.cycles.fill_rates:
                known = state.cycles.fill_rate_cm_s()
            if known is None:
                return None  # no inflow estimate: cannot tell backflow from inflow
            rate = known
            anchor = p.samples[-1]  # the restart sample: the level reached the on mark
        # The float stops the pump at the registered off mark. The lowest level seen
        # can be higher (sampled after the stop, or after the backflow itself), so
        # it is only trusted when it shows the real mark sits lower.
        reference = pit.pump_off_cm
        if p.cycle.low_level_cm < reference - OFF_MARK_TOLERANCE_CM:
            reference = p.cycle.low_level_cm
        backflow = anchor.level_cm - reference - rate * (anchor.ts - stop).total_seconds()
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
