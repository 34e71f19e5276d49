"""Homeowner-safety detectors on the pit: high water, continuous run, short cycling.

None of them needs an ordinance: they protect the basement. Each works on device
time and on the pit's own marks from the registry.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from itertools import pairwise
from typing import ClassVar

from gateway.domain import Severity
from gateway.rules.detectors.base import (
    INACTIVE,
    CycleEnd,
    Event,
    OutletSample,
    PitSample,
    PumpCycle,
    RuleInfo,
    SiteState,
    Stream,
    Verdict,
    iso,
    r1,
)
from gateway.rules.detectors.lazy import LazyDeque
from gateway.rules.physics import swing_margin_cm
from gateway.rules.thresholds import (
    BACKFLOW_JUDGE_AFTER,
    BACKFLOW_LATE_FROM,
    BACKFLOW_LINE_SHARE,
    BACKFLOW_MAX_LINE_SHARE,
    BACKFLOW_MIN_CM,
    BACKFLOW_NOISE_SIGMAS,
    BACKFLOW_RATE_SPAN,
    BACKFLOW_WINDOW,
    COLUMN_DROP_MIN_KPA,
    COLUMN_DROP_SHARE,
    CONTINUOUS_AT_MARK_CM,
    CONTINUOUS_LOW_FOR,
    CONTINUOUS_LOW_LEVEL_MARGIN_CM,
    CONTINUOUS_MIN_RUN,
    CONTINUOUS_STARVED_SHARE,
    FALL_MIN_CM,
    FALL_SIGMAS,
    FALLBACK_RATE_MAX_AGE,
    HIGH_WATER_CLEAR_MARGIN_CM,
    HIGH_WATER_SAMPLES,
    OFF_MARK_TOLERANCE_CM,
    RECIRC_RETURNS,
    RECIRC_SPAN,
    RISER_TAP_MIN_KPA,
    SEEP_AFTER,
    SEEP_BEFORE,
    SEEP_FLAT_SHARE,
    SEEP_MAX_LINE_SHARE,
    SEEP_MIN_LINE_SHARE,
    SEEP_MIN_SAMPLES,
    SEEP_MIN_SPAN,
    SEEP_STEP_SHARE,
    SEEP_TREND_SHARE,
    SHORT_CYCLE_CLEAR_AFTER,
    SHORT_CYCLE_CLEAR_MAX,
    SHORT_CYCLE_HISTORY,
    SHORT_CYCLE_SE_FACTOR,
    SHORT_CYCLE_TO_OPEN,
    SHORT_CYCLE_WINDOW,
    TREND_MAX_GAP,
    TREND_PERIODS,
)


class HighWaterDetector:
    """Level at or above the alarm mark on consecutive samples."""

    rule_id: ClassVar[str] = "high_water"
    info: ClassVar[RuleInfo] = RuleInfo(
        "high_water",
        "High water in the sump pit",
        "Check that the pump has power (breaker, GFCI outlet) and runs. If the pit "
        "keeps rising, start a backup pump or call a plumber now to avoid a flood.",
    )
    streams: ClassVar[frozenset[Stream]] = frozenset({Stream.PIT})

    def __init__(self, state: SiteState) -> None:
        self.active = False
        self._above = 0
        self._below = 0
        self._peak = 0.0
        self._since: datetime | None = None

    def restore(self) -> None:
        """Continue a finding restored from the store."""
        self.active = True

    def feed(self, event: Event, state: SiteState) -> Verdict | None:
        """Judge one pit sample."""
        if not isinstance(event, PitSample):
            return None
        s = event
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

    rule_id: ClassVar[str] = "continuous_run"
    info: ClassVar[RuleInfo] = RuleInfo(
        "continuous_run",
        "The sump pump keeps running with the pit empty",
        "The float switch is probably stuck. Free the float or unplug and re-plug the "
        "pump; a pump that runs dry overheats and fails.",
    )
    streams: ClassVar[frozenset[Stream]] = frozenset({Stream.PIT})

    def __init__(self, state: SiteState) -> None:
        self.active = False
        self._below_since: datetime | None = None
        self._at_since: datetime | None = None

    def restore(self) -> None:
        """Continue a finding restored from the store."""
        self.active = True

    def feed(self, event: Event, state: SiteState) -> Verdict | None:
        """Judge one pit sample."""
        if not isinstance(event, PitSample):
            return None
        s = event
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
    #: Line pressure with the pump off (a riser tap holds the column behind a good valve).
    pressures: list[float] = field(default_factory=list)


def _times(samples: list[PitSample]) -> list[float]:
    """Seconds of each sample after the first."""
    t0 = samples[0].ts
    return [(x.ts - t0).total_seconds() for x in samples]


def _sxx(xs: list[float]) -> float:
    """Sum of squared deviations from the mean (a fitted slope's sigma is noise / sqrt)."""
    mx = sum(xs) / len(xs)
    return sum((x - mx) ** 2 for x in xs)


def _fit(samples: list[PitSample]) -> tuple[float, float]:
    """Least-squares level rate (cm/s) and the fitted level at the first sample."""
    xs = _times(samples)
    ys = [x.level_cm for x in samples]
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = _sxx(xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx if sxx else 0.0
    return slope, my - slope * mx


def _falls(samples: list[PitSample], noise_cm: float) -> bool:
    """The level falls over these pump-off samples by more than its noise can: the
    fitted rise over their span is below minus ``FALL_SIGMAS`` standard errors of
    that fit, and at least ``FALL_MIN_CM``."""
    if len(samples) < 3:
        return False
    xs = _times(samples)
    sxx = _sxx(xs)
    if sxx <= 0:
        return False
    rate, _ = _fit(samples)
    span = xs[-1]
    return rate * span < -max(FALL_MIN_CM, FALL_SIGMAS * noise_cm / math.sqrt(sxx) * span)


@dataclass(frozen=True, slots=True)
class _Fill:
    """One off period's settled fill."""

    ts: datetime  # its last sample
    rate: float  # cm/s
    seconds: float  # since the stop


@dataclass(frozen=True, slots=True)
class _Seep:
    """A steady seep found: the fill rate before it and the step it added (cm/s),
    and the extra water per off period (cm of pit level)."""

    base: float
    step: float
    extra_cm: float


def _settled_fill(p: _Pending) -> _Fill | None:
    """The period's fill rate on its samples after any fast fall-back: the pump-off
    ones and the restart's (the level the period reached), unless that was taken
    after the pump had drawn the pit down (a node reporting on its interval only)."""
    samples = [x for x in p.samples if x.ts - p.cycle.end_ts >= BACKFLOW_WINDOW]
    off = [x for x in samples if not x.pump_on]
    if off and samples[-1].pump_on and samples[-1].level_cm >= off[-1].level_cm:
        off.append(samples[-1])
    if len(off) < SEEP_MIN_SAMPLES or off[-1].ts - off[0].ts < SEEP_MIN_SPAN:
        return None
    rate, _ = _fit(off)
    return _Fill(off[-1].ts, rate, (off[-1].ts - p.cycle.end_ts).total_seconds())


def _flat(rates: list[float], step: float, *, falling_ok: bool = False) -> bool:
    """The group's rates spread by at most SEEP_FLAT_SHARE of the step, and their
    fitted trend over the group changes them by at most SEEP_TREND_SHARE of it: a
    seep adds a constant rate, rain's ramp keeps rising from period to period.
    ``falling_ok``: a falling trend is no objection (the inflow receding before a
    step up is not rain raising it)."""
    n = len(rates)
    change = statistics.linear_regression(range(n), rates).slope * (n - 1)
    if falling_ok:
        change = max(change, 0.0)
    spread = max(rates) - min(rates)
    return spread <= SEEP_FLAT_SHARE * step and abs(change) <= SEEP_TREND_SHARE * step


def _step(fills: list[_Fill], line_cm: float) -> _Seep | None:
    """A step up between two steady groups of periods (the one between them is the
    period the seep began in) whose extra water per period a seeping valve could
    send back from the line (its volume bounds it; rain's does not stop there)."""
    early = [f.rate for f in fills[:SEEP_BEFORE]]
    late = [f.rate for f in fills[-SEEP_AFTER:]]
    before, after = statistics.median(early), statistics.median(late)
    step = after - before
    if before <= 0 or after < before * (1 + SEEP_STEP_SHARE):
        return None
    if not (_flat(early, step, falling_ok=True) and _flat(late, step)):
        return None
    seconds = statistics.median([f.seconds for f in fills[-SEEP_AFTER:]])
    extra_cm = step * seconds
    low = max(BACKFLOW_MIN_CM, SEEP_MIN_LINE_SHARE * line_cm)
    if not low <= extra_cm <= SEEP_MAX_LINE_SHARE * line_cm:
        return None
    return _Seep(before, step, extra_cm)


class ShortCyclingDetector:
    """Water flowing back from the riser after each stop: a failed or leaking check valve.

    After a normal stop the level rises at the groundwater inflow rate, steadily.
    Water standing in the riser that passes the check valve comes back into the
    pit: at once (a failed valve: a fast rise in the first seconds) or over minutes
    (a leaking valve: the riser empties slowly, the rise is front-loaded while the
    head above the valve is high). Either way the returned volume is at most the
    line's, whatever the weather. Rain raises the inflow for hours, evenly over an
    off period, and does not front-load it. So each off period is judged by its
    *excess*: the level reached at the start of its late part (the last
    ``1 - BACKFLOW_LATE_FROM`` of the period, where any riser has drained) above the
    run's low level plus the late inflow rate (a least-squares fit of the late
    samples) carried back to the stop. A period cut short by a restart is judged
    at the restart against the last inflow that could be measured.

    A valve seeping for the whole off period leaves no kink: the level rises evenly
    at inflow + seep. It shows as a step in the periods' fill rate between two flat
    runs of periods (``_step``); rain ramps up and recedes over hours instead.
    """

    rule_id: ClassVar[str] = "short_cycling"
    info: ClassVar[RuleInfo] = RuleInfo(
        "short_cycling",
        "Water falls back into the pit after every pump cycle",
        "The check valve on the discharge line is failing or missing. Have it replaced; "
        "the extra starts wear out the pump.",
    )
    streams: ClassVar[frozenset[Stream]] = frozenset({Stream.PIT, Stream.CYCLE, Stream.OUTLET})

    def __init__(self, state: SiteState) -> None:
        self.active = False
        self._pending: _Pending | None = None
        self._judged: LazyDeque[float] = LazyDeque(maxlen=SHORT_CYCLE_WINDOW)
        #: The site's recent excesses, for their scatter.
        self._history: LazyDeque[float] = LazyDeque(maxlen=SHORT_CYCLE_HISTORY)
        #: The last inflow rate fitted on a period's late part: (when, cm/s).
        self._rate: tuple[datetime, float] | None = None
        #: The last few fitted late rates, for the inflow's trend.
        self._rates: LazyDeque[tuple[datetime, float]] = LazyDeque(maxlen=TREND_PERIODS)
        #: The last periods' settled fills, for a seep's step (consecutive periods).
        self._fills: LazyDeque[_Fill] = LazyDeque(maxlen=SEEP_BEFORE + 1 + SEEP_AFTER)
        #: A steady seep found and still seen.
        self._seep: _Seep | None = None
        #: The last judged period that showed backflow or a seep (the clearing hold).
        self._last_hit: datetime | None = None
        #: The previous pit sample, and when the level last came back while the pump
        #: read on at both samples around it (water returning between unseen runs).
        self._prev: PitSample | None = None
        self._returns: LazyDeque[datetime] = LazyDeque(maxlen=RECIRC_RETURNS)

    def restore(self) -> None:
        """Continue a finding restored from the store."""
        self.active = True

    def threshold_cm(self, state: SiteState) -> float:
        """Backflow rise that counts, from the line's volume and the pit's area.

        Never more than 60 % of the float band: the backflow cannot lift the level
        above the on mark without restarting the pump. Never under the level
        noise's reach on a difference of fitted levels.
        """
        pit = state.ctx.site.pit
        expected = state.ctx.cm(state.ctx.line_volume_l)
        band = pit.pump_on_cm - pit.pump_off_cm
        noise = BACKFLOW_NOISE_SIGMAS * state.cycles.level_noise_cm()
        return max(BACKFLOW_MIN_CM, min(BACKFLOW_LINE_SHARE * expected, 0.6 * band), noise)

    def feed(self, event: Event, state: SiteState) -> Verdict | None:
        """Watch the level after a stop; judge it at the restart or after a while."""
        if isinstance(event, CycleEnd):
            c = event.cycle
            self._pending = _Pending(c, [event.first_off]) if c.seen else None
            return None
        if isinstance(event, OutletSample):
            p = self._pending
            settled = p is not None and event.ts - p.cycle.end_ts >= BACKFLOW_WINDOW / 5
            if p is not None and settled and not p.samples[-1].pump_on:
                p.pressures.append(event.pressure_kpa)
            return None
        if not isinstance(event, PitSample):
            return None
        s, p = event, self._pending
        if self._returned(s, state):
            self._last_hit = s.ts
            if not self.active and self._recirculating(s, state):
                self.active = True
                return self._verdict(s, self.threshold_cm(state), state)
        if p is None or s.ts <= p.samples[-1].ts:
            return None
        p.samples.append(s)  # a restart sample counts: the level reached the on mark
        if s.pump_on or s.ts - p.cycle.end_ts >= BACKFLOW_JUDGE_AFTER:
            self._pending = None
            return self._judge(p, s, state)
        return None

    def _excess(self, p: _Pending, state: SiteState) -> float | None:
        """Front-loaded rise of one off period over its late inflow, cm."""
        c = p.cycle
        stop = c.last_on_ts  # the pump stopped after this sample
        off = [x for x in p.samples if not x.pump_on]
        if _falls(off, state.cycles.level_noise_cm()):
            # With the pump off the level cannot fall (the pump is the pit's only
            # outlet): these samples straddle runs no sample saw (cycles faster
            # than the pit's interval), not one off period.
            return None
        if p.samples[-1].pump_on and off and p.samples[-1].level_cm < off[-1].level_cm:
            # The restart sample was taken after the pump had drawn the pit down
            # (a node that reports on its interval only): the level the period
            # reached is the last off sample's.
            p = _Pending(c, [*p.samples[:-1]], p.pressures)
        end = p.samples[-1].ts
        late_from = p.cycle.end_ts + max(
            BACKFLOW_WINDOW, (end - p.cycle.end_ts) * BACKFLOW_LATE_FROM
        )
        late = [x for x in off if x.ts >= late_from]
        receding = 0.0  # cm: what an inflow falling since the last period front-loads
        if len(late) >= 3 and late[-1].ts - late[0].ts >= BACKFLOW_RATE_SPAN:
            rate, anchor_level = _fit(late)
            anchor_ts = late[0].ts
            mid = late[0].ts + (late[-1].ts - late[0].ts) / 2
            receding = self._receding_cm(
                mid, rate, (anchor_ts - stop).total_seconds(), (mid - stop).total_seconds()
            )
            self._rate = (mid, max(rate, 0.0))
        elif len(settled := [x for x in off if x.ts - p.cycle.end_ts >= BACKFLOW_WINDOW]) >= 2 and (
            settled[-1].ts - settled[0].ts >= BACKFLOW_RATE_SPAN
        ):
            # Restarted too soon to fit a late part: the samples of this same period
            # once any backflow is over.
            rate, anchor_level = _fit(settled)
            anchor_ts = settled[0].ts
        else:
            # Restarted before this period could show its inflow: that of a recent
            # period, if recent enough that the weather has not changed (rain does).
            if self._rate is None or end - self._rate[0] > FALLBACK_RATE_MAX_AGE:
                return None
            rate = self._rate[1]
            anchor_level, anchor_ts = p.samples[-1].level_cm, p.samples[-1].ts
        # A sparse pit node may only see the level after the backflow: the off mark
        # is read from the recent runs (``CycleTracker.off_level_cm``).
        pit = state.ctx.site.pit
        reference = state.cycles.off_level_cm(
            pit.pump_off_cm, OFF_MARK_TOLERANCE_CM, state.ctx.cm(state.ctx.line_volume_l)
        )
        carried = max(rate, 0.0) * (anchor_ts - stop).total_seconds()
        excess = anchor_level - reference - carried - receding
        # The rate carried back to the stop is one period's; the inflow itself varies
        # from period to period by the scatter of the recent fills (a few % for
        # groundwater, tens of % in a storm). That much of the carried rise is not
        # known, and a rise it could explain is not counted as backflow.
        excess -= self._inflow_scatter(state) * carried
        # What comes back is at most the line's contents (registered length may be
        # 20 % off): a larger excess is the inflow changing (rain), not backflow.
        line_cm = state.ctx.cm(state.ctx.line_volume_l)
        noise = BACKFLOW_NOISE_SIGMAS * state.cycles.level_noise_cm()
        return None if excess > BACKFLOW_MAX_LINE_SHARE * line_cm + noise else excess

    def _standard_error(self) -> float:
        """Standard error of the judged window's mean, from the scatter of the site's
        recent excesses; 0 before SHORT_CYCLE_WINDOW are judged.

        The scatter is read from the differences between consecutive periods (their
        median absolute value: 0.6745 x sqrt(2) sigma for Gaussian scatter), not from
        the excesses' spread about their median. A valve that fails turns the excess
        from about 0 to about the line's volume from one period to the next: that is
        one large difference among eleven, while the spread of a history that mixes
        the periods before the step with those after it is half the step, and a
        failed valve then waited until the history held no period from before."""
        history = list(self._history)
        if len(history) < SHORT_CYCLE_WINDOW:
            return 0.0
        steps = sorted(abs(b - a) for a, b in pairwise(history))
        sigma = steps[len(steps) // 2] / (0.6745 * math.sqrt(2.0))
        return sigma / math.sqrt(len(self._judged))

    @staticmethod
    def _inflow_scatter(state: SiteState) -> float:
        """Relative scatter of the recent inflow rates; 0 before three fills are
        measured (the period's own fit is the only rate then)."""
        if len(state.cycles.fill_rates) < 3:
            return 0.0
        return state.cycles.fill_rate_spread()

    def _receding_cm(self, mid: datetime, rate: float, anchor_s: float, mid_s: float) -> float:
        """Rise an inflow that falls steadily (rain receding) puts before the anchor
        beyond the late rate: with the inflow q(t) falling at dq/dt, the early part
        of the period filled faster than the late fit says, by
        |dq/dt| x (M x A - A^2 / 2), A the anchor's and M the late fit's midpoint's
        time after the stop. Backflow does not depend on the weather's trend; a
        receding storm's front-loading does. The trend counts only when the fitted
        late rates of the last ``TREND_PERIODS`` periods (within ``TREND_MAX_GAP``)
        fell every time: a recession is monotone, the jitter of single fits is not.
        Only a falling inflow is taken (a rising one never makes a false leak)."""
        rates = [(t, q) for t, q in self._rates if mid - t <= TREND_MAX_GAP]
        self._rates.append((mid, max(rate, 0.0)))
        rates.append((mid, max(rate, 0.0)))
        if len(rates) < TREND_PERIODS:
            return 0.0
        rates = rates[-TREND_PERIODS:]
        if any(b[1] >= a[1] for a, b in pairwise(rates)):
            return 0.0
        span = (rates[-1][0] - rates[0][0]).total_seconds()
        if span <= 0:
            return 0.0
        falling = (rates[0][1] - rates[-1][1]) / span
        return falling * max(0.0, mid_s * anchor_s - anchor_s**2 / 2)

    @staticmethod
    def _column_lost(p: _Pending, state: SiteState) -> bool:
        """A riser tap (one that reads the lift while water flows out) held the column
        after the stop and lost it before the restart: the valve lets it back."""
        running = state.outlet.running_kpa()
        n = len(p.pressures)
        if running is None or running < RISER_TAP_MIN_KPA or n < 6:
            return False
        # Medians of the first and last thirds: single readings are noisy (+-1-2 kPa).
        first, last = sorted(p.pressures[: n // 3]), sorted(p.pressures[-(n // 3) :])
        drop = first[len(first) // 2] - last[len(last) // 2]
        return drop >= max(COLUMN_DROP_MIN_KPA, COLUMN_DROP_SHARE * running)

    def _seeping(self, p: _Pending, state: SiteState) -> bool:
        """A valve seeping back over the whole off period: the fill rate stepped up
        from one period to the next and stayed (``_step``); it holds while the fill
        stays above the old rate by half the step."""
        fill = _settled_fill(p)
        if fill is None:
            return self._seep is not None
        if self._fills and fill.ts - self._fills[-1].ts > TREND_MAX_GAP:
            self._fills.clear()  # a gap: the periods before it are not this weather's
        self._fills.append(fill)
        if self._seep is not None:
            if fill.rate >= self._seep.base + self._seep.step / 2:
                return True
            self._seep = None
        if len(self._fills) == self._fills.maxlen:
            self._seep = _step(list(self._fills), state.ctx.cm(state.ctx.line_volume_l))
        return self._seep is not None

    def _returned(self, s: PitSample, state: SiteState) -> bool:
        """The level rose between this sample and the last while both read the pump
        on, by more than noise and the fastest recent inflow over the gap could
        bring, and by no more than the line can give back.

        While the pump runs the level falls; if it stopped and restarted between the
        samples, the inflow alone raised it by at most its rate x the gap. More came
        back from the line: a failed check valve returning more than the float band
        restarts the pump at once after every stop, and a node reporting on its
        interval then reads the pump on at nearly every sample while the level
        swings between the marks, with no off period for the excess to judge."""
        prev, self._prev = self._prev, s
        if prev is None or not (prev.pump_on and s.pump_on) or s.ts <= prev.ts:
            return False
        gap = (s.ts - prev.ts).total_seconds()
        inflow = max(state.cycles.fill_rates, default=0.0) * gap
        margin = swing_margin_cm(state)
        line_cm = state.ctx.cm(state.ctx.line_volume_l)
        rise = s.level_cm - prev.level_cm
        if not margin + inflow < rise <= BACKFLOW_MAX_LINE_SHARE * line_cm + margin:
            return False
        self._returns.append(s.ts)
        return True

    def _recirculating(self, s: PitSample, state: SiteState) -> bool:
        """RECIRC_RETURNS returns within RECIRC_SPAN, judged against an inflow measured
        at most FALLBACK_RATE_MAX_AGE before (a storm's inflow grows: a stale rate
        must not make its refills look like water coming back)."""
        spans = state.cycles.fill_spans
        current = bool(spans) and s.ts - spans[-1][1] <= FALLBACK_RATE_MAX_AGE
        full = len(self._returns) == self._returns.maxlen
        return current and full and s.ts - self._returns[0] <= RECIRC_SPAN

    def _quiet(self, hits: int, now: datetime) -> bool:
        """The backflow has gone: the judged window shows none, and no period has
        for ``SHORT_CYCLE_CLEAR_AFTER`` (a restored finding starts its hold anew)."""
        if hits > SHORT_CYCLE_CLEAR_MAX or len(self._judged) < 2:
            return False
        if self._last_hit is None:
            self._last_hit = now
        return now - self._last_hit >= SHORT_CYCLE_CLEAR_AFTER

    def _judge(self, p: _Pending, now: PitSample, state: SiteState) -> Verdict | None:
        threshold = self.threshold_cm(state)
        backflow = self._excess(p, state)
        seeping = self._seeping(p, state)
        if self._column_lost(p, state):
            # The pit may not show a slow leak; the riser's pressure does.
            backflow = max(backflow or 0.0, threshold)
        if backflow is not None:
            self._judged.append(backflow)
            self._history.append(backflow)
        if not self._judged or (backflow is None and not seeping):
            return None
        hits = sum(1 for b in self._judged if b >= threshold)
        mean = sum(self._judged) / len(self._judged)
        # Opening also needs the window's mean clear of the threshold by its own
        # standard error: the period-to-period scatter of this site's excess (sensor
        # noise, sampling phase, float repeatability, inflow changes: all of it,
        # measured, not modelled). A failing valve returns the same water after
        # every stop (small scatter); noise that only sometimes crosses does not.
        sure = mean - SHORT_CYCLE_SE_FACTOR * self._standard_error()
        kinked = hits >= SHORT_CYCLE_TO_OPEN and sure >= threshold
        if seeping or (backflow is not None and backflow >= threshold):
            self._last_hit = now.ts
        if not self.active and (kinked or seeping):
            self.active = True
        elif self.active and not seeping and self._quiet(hits, now.ts):
            self.active = False
        if not self.active:
            return INACTIVE
        return self._verdict(now, threshold, state)

    def _verdict(self, now: PitSample, threshold: float, state: SiteState) -> Verdict:
        inst = state.ctx.site.installation
        seep = self._seep
        last = r1(state.ctx.litres(self._judged[-1])) if self._judged else None
        return Verdict(
            True,
            Severity.WARNING,
            "",
            {
                "backflow_cm_last_cycles": [r1(b) for b in self._judged],
                "backflow_threshold_cm": r1(threshold),
                "backflow_l_last": last,
                "returns_while_running": len(self._returns),
                "seep_l_per_cycle": None if seep is None else r1(state.ctx.litres(seep.extra_cm)),
                "line_volume_l": r1(state.ctx.line_volume_l),
                "starts_last_hour": state.cycles.starts_within(now.ts, timedelta(hours=1)),
                "registered_check_valve": inst.check_valve,
            },
        )
