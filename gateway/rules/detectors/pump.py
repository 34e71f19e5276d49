"""Homeowner-safety detectors on the pit: high water, continuous run, short cycling.

None of them needs an ordinance: they protect the basement. Each works on device
time and on the pit's own marks from the registry.
"""

from __future__ import annotations

import math
from collections import deque
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
from gateway.rules.physics import outlet_litres, run_span, sure_run
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
    FALLBACK_RATE_MAX_AGE,
    HIGH_WATER_CLEAR_MARGIN_CM,
    HIGH_WATER_SAMPLES,
    LEAK_BALANCED_SHARE,
    LEAK_BASELINE_KEEP,
    LEAK_BASELINE_MIN,
    LEAK_OUT_SHARE,
    LEAK_OUTLET_AFTER,
    LEAK_POOL,
    LEAK_SEEP_LINE_SHARE,
    MIN_CYCLE_VOLUME_L,
    OFF_MARK_TOLERANCE_CM,
    RISER_TAP_MIN_KPA,
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


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


class _Window:
    """The last SHORT_CYCLE_WINDOW judged periods of one measure of backflow (cm),
    and the site's recent history of it for its scatter."""

    def __init__(self) -> None:
        self.judged: deque[float] = deque(maxlen=SHORT_CYCLE_WINDOW)
        self.history: deque[float] = deque(maxlen=SHORT_CYCLE_HISTORY)

    def add(self, value: float) -> None:
        self.judged.append(value)
        self.history.append(value)

    def hits(self, threshold: float) -> int:
        return sum(1 for b in self.judged if b >= threshold)

    def sure_mean(self) -> float:
        """The window's mean less SHORT_CYCLE_SE_FACTOR standard errors of it, from
        the robust scatter (MAD) of the history; no allowance before a full window."""
        mean = sum(self.judged) / len(self.judged)
        if len(self.history) < SHORT_CYCLE_WINDOW:
            return mean
        mid = _median(list(self.history))
        mad = _median([abs(x - mid) for x in self.history])
        return mean - SHORT_CYCLE_SE_FACTOR * 1.4826 * mad / math.sqrt(len(self.judged))

    def opens(self, threshold: float) -> bool:
        """Backflow on SHORT_CYCLE_TO_OPEN of the window, its mean surely above."""
        return (
            len(self.judged) > 0
            and self.hits(threshold) >= SHORT_CYCLE_TO_OPEN
            and self.sure_mean() >= threshold
        )

    def clear(self, threshold: float) -> bool:
        """At most SHORT_CYCLE_CLEAR_MAX of a window of two or more show backflow."""
        return len(self.judged) >= 2 and self.hits(threshold) <= SHORT_CYCLE_CLEAR_MAX


def _fit(samples: list[PitSample]) -> tuple[float, float]:
    """Least-squares level rate (cm/s) and the fitted level at the first sample."""
    t0 = samples[0].ts
    xs = [(x.ts - t0).total_seconds() for x in samples]
    ys = [x.level_cm for x in samples]
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx if sxx else 0.0
    return slope, my - slope * mx


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
        #: Front-loaded excess of each period (a valve whose line drains back soon).
        self._front = _Window()
        #: Seep-back over whole periods (a valve still leaking at the restart).
        self._seep = _Window()
        #: Balanced periods' (fill rate cm/s, outlet L, pumped L): the seep's baseline.
        self._baseline: deque[tuple[float, float, float]] = deque(maxlen=LEAK_BASELINE_KEEP)
        #: The last periods' (fill cm/s, off s, pumped L, outlet L, cycle s), pooled.
        self._periods: deque[tuple[float, float, float, float, float]] = deque(maxlen=LEAK_POOL)
        #: The last inflow rate fitted on a period's late part: (when, cm/s).
        self._rate: tuple[datetime, float] | None = None
        #: The last few fitted late rates, for the inflow's trend.
        self._rates: deque[tuple[datetime, float]] = deque(maxlen=TREND_PERIODS)

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
        if p is None or s.ts <= p.samples[-1].ts:
            return None
        p.samples.append(s)  # a restart sample counts: the level reached the on mark
        if s.pump_on or s.ts - p.cycle.end_ts >= BACKFLOW_JUDGE_AFTER:
            self._pending = None
            return self._judge(p, s, state)
        return None

    def _excess(self, p: _Pending, state: SiteState) -> float | None:
        """Front-loaded rise of one off period over its late inflow, cm."""
        stop = p.cycle.last_on_ts  # the pump stopped after this sample
        off = [x for x in p.samples if not x.pump_on]
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

    def _seep_cm(self, p: _Pending, state: SiteState) -> float | None:
        """Line water a valve seeped back per off period, cm, over the last few
        periods (None: not measurable, or balanced periods that taught the baseline).

        A valve that leaks slowly enough has not emptied the line by the restart: the
        level rises evenly, at the inflow plus the leak, and no part of the period
        shows the inflow alone. Two measurements see the leak then, and only it:
        the pit's fill is above the fill of recent periods whose outlet took the
        pumped water (the baseline), and the outlet takes less than the baseline's
        share of the pumped water (each run first refills what seeped back). Rain
        raises the fill with the outlet still taking the water (balanced periods,
        which move the baseline with the weather); a diversion starves the outlet
        without raising the fill. The seep is the smaller of the two. The outlet's
        shortfall is pooled over the last LEAK_POOL observed runs: a sparse outlet node
        catches a short run's flow in one period and misses it in the next."""
        c = p.cycle
        off = [x for x in p.samples if not x.pump_on and x.ts - c.end_ts >= BACKFLOW_WINDOW]
        last = state.outlet.last
        if (
            len(off) < 3
            or off[-1].ts - off[0].ts < BACKFLOW_RATE_SPAN
            or last is None
            or last.ts - c.end_ts < LEAK_OUTLET_AFTER
        ):
            return None
        out_l = self._run_outlet_l(c, state)
        base = list(self._baseline)
        rate = max(0.0, _fit(off)[0])
        fill0 = _median([f for f, _, _ in base]) if base else rate
        pit_l = state.ctx.litres(c.drop_cm + fill0 * c.est_duration.total_seconds())
        if out_l is None or pit_l < MIN_CYCLE_VOLUME_L:
            return None
        if base and pit_l > 2.0 * _median([q for _, _, q in base]):
            return None  # not a float's cycle (a pump back after a failure, run by hand)
        seconds = (off[-1].ts - c.last_on_ts).total_seconds()
        self._periods.append(
            (rate, seconds, pit_l, out_l, (off[-1].ts - c.before_ts).total_seconds())
        )
        periods = list(self._periods)
        # The baseline's outlet/pit ratio pooled over its runs (a ratio of sums: a
        # sparse node reads one short run's flow all or nothing, and the median of
        # such ratios depends on the node's phase).
        ratio0 = sum(o for _, o, _ in base) / sum(q for _, _, q in base) if base else 0.0
        if len(base) < LEAK_BASELINE_MIN or out_l >= LEAK_BALANCED_SHARE * ratio0 * pit_l:
            # The outlet took this run's water: its fill is the inflow alone.
            self._baseline.append((rate, out_l, pit_l))
            return None
        if len(periods) < LEAK_POOL or ratio0 <= 0:
            return None
        # The inflow varies between periods by the baseline's own scatter: that much
        # of the rise is not counted as seep.
        spread = 1.4826 * _median([abs(f - fill0) for f, _, _ in base])
        rise_cm = sum(max(0.0, q - fill0 - spread) * t for q, t, *_ in periods) / len(periods)
        # Rain brings more water in and sends more out; a seep circulates the line's
        # water: the pit fills faster while the house discharges no more than before.
        # Judged over the latest SHORT_CYCLE_WINDOW runs (the weather of now).
        recent = periods[-SHORT_CYCLE_WINDOW:]
        fill_now = sum(x[0] for x in recent) / len(recent)
        out_cm = state.ctx.cm(sum(x[3] for x in recent) / ratio0)
        if out_cm / sum(x[4] for x in recent) - fill0 >= LEAK_OUT_SHARE * (fill_now - fill0):
            return 0.0
        # The outlet's shortfall per run, surely: its mean less two standard errors of
        # it (a seep starves every run). The standard deviation, not a MAD: a sparse
        # node reads a short run all or nothing, and the MAD of such two-valued reads
        # can be 0 while their mean is far from the truth.
        shorts = [x[2] - x[3] / ratio0 for x in periods]
        mean = sum(shorts) / len(shorts)
        sd = math.sqrt(sum((x - mean) ** 2 for x in shorts) / (len(shorts) - 1))
        sure = mean - SHORT_CYCLE_SE_FACTOR * sd / math.sqrt(len(shorts))
        short_cm = state.ctx.cm(sure)
        line_cm = state.ctx.cm(state.ctx.line_volume_l)
        noise = BACKFLOW_NOISE_SIGMAS * state.cycles.level_noise_cm()
        if rise_cm > BACKFLOW_MAX_LINE_SHARE * line_cm + noise:
            return None  # more than the line holds: the inflow changed (rain)
        return max(0.0, min(rise_cm, short_cm))

    @staticmethod
    def _run_outlet_l(c: PumpCycle, state: SiteState) -> float | None:
        """Outlet litres of one run (its estimated span, one outlet interval longer for
        the line's lag), None unless an outlet sample fell where the pump surely ran:
        a run no sample saw is unobserved, not dry (a sparse node's phase can lock to
        the pump's period and miss several runs in a row)."""
        sure = sure_run(c, state)
        if sure is None or not state.outlet.between(*sure):
            return None
        start, end = run_span(c, state)
        lag = timedelta(seconds=state.outlet.interval_s)
        measured = outlet_litres(list(state.outlet.samples), start, end + lag)
        return None if measured is None else measured[0]

    def seep_threshold_cm(self, state: SiteState) -> float:
        """Seep that counts: the share of the line's volume expected back, at least
        BACKFLOW_MIN_CM. No level-noise floor: the seep is a rate fitted over a whole
        period and a volume integrated over a cycle, not a difference of two levels."""
        pit = state.ctx.site.pit
        expected = state.ctx.cm(state.ctx.line_volume_l)
        band = pit.pump_on_cm - pit.pump_off_cm
        return max(BACKFLOW_MIN_CM, LEAK_SEEP_LINE_SHARE * min(expected, band))

    def _judge(self, p: _Pending, now: PitSample, state: SiteState) -> Verdict | None:
        threshold, seep_threshold = self.threshold_cm(state), self.seep_threshold_cm(state)
        backflow = self._excess(p, state)
        if self._column_lost(p, state):
            # The pit may not show a slow leak; the riser's pressure does.
            backflow = max(backflow or 0.0, threshold)
        seep = self._seep_cm(p, state)
        if backflow is None and seep is None:
            return None
        if backflow is not None:
            self._front.add(backflow)
        if seep is not None:
            self._seep.add(seep)
        # Opening also needs the window's mean clear of the threshold by its own
        # standard error: the period-to-period scatter of this site's excess (sensor
        # noise, sampling phase, float repeatability, inflow changes: all of it,
        # measured, not modelled). A failing valve returns the same water after
        # every stop (small scatter); noise that only sometimes crosses does not.
        if not self.active and (self._front.opens(threshold) or self._seep.opens(seep_threshold)):
            self.active = True
        elif (
            self.active
            and self._front.clear(threshold)
            and (len(self._seep.judged) < 2 or self._seep.clear(seep_threshold))
        ):
            self.active = False
        if not self.active:
            return INACTIVE
        inst = state.ctx.site.installation
        return Verdict(
            True,
            Severity.WARNING,
            "",
            {
                "backflow_cm_last_cycles": [r1(b) for b in self._front.judged],
                "seep_cm_last_cycles": [r1(b) for b in self._seep.judged],
                "backflow_threshold_cm": r1(threshold),
                "backflow_l_last": r1(state.ctx.litres(max(backflow or 0.0, seep or 0.0))),
                "line_volume_l": r1(state.ctx.line_volume_l),
                "starts_last_hour": state.cycles.starts_within(now.ts, timedelta(hours=1)),
                "registered_check_valve": inst.check_valve,
            },
        )
