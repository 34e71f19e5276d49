"""Shared sump physics: the water balance of a pump cycle, a run that cannot drain
the pit, and when a discharge line can hold ice.

One place, so detectors (and later reports) cannot disagree. Pure functions over
the per-site state the detectors already keep.

Water balance of a cycle (every installation obeys it)::

    pumped out of the pit = (level before the run - level once settled) x pit area
                            + inflow rate x (time from before the run to settled)
    outlet volume         = integral of outlet flow over the run (each instant at the
                            nearest outlet sample's flow; a run no outlet sample fell
                            inside is unobserved, not dry)

The level is read once any water standing in the riser has fallen back (a failed
check valve returns it to the pit: returned water is not pumped away), so leak-back
does not look like water sent elsewhere.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy as np
import numpy.typing as npt

from gateway.rules.detectors.base import OutletSample, PitSample, PumpCycle, SiteState
from gateway.rules.thresholds import (
    ACCOUNTED_RATIO,
    COLD_AIR_FOR,
    COLD_PIPE_C,
    DEADHEAD_CURRENT_SHARE,
    FLOW_PRESENT_LPM,
    MAX_PUMP_LPM,
    MIN_CYCLE_VOLUME_L,
    NO_CURRENT_A,
    OFF_MARK_TOLERANCE_CM,
    PIPE_MAX_AGE,
    RISER_TAP_MIN_KPA,
    STALL_ABOVE_OFF_CM,
    STALL_AFTER,
    STALL_MIN_CM_S,
    STALL_OUTLET_WINDOW,
    STALL_SAMPLES,
    STALL_SHARE,
    SURE_NOISE_SIGMAS,
    SURE_RATE_FACTOR,
    SWING_MIN_CM,
    SWING_NOISE_SIGMAS,
    THAW_FOR,
)


@dataclass(frozen=True, slots=True)
class Balance:
    """Water balance of one or more pooled pump cycles, litres."""

    pit_l: float
    outlet_l: float

    @property
    def ratio(self) -> float:
        """Outlet volume / pumped volume."""
        return self.outlet_l / self.pit_l if self.pit_l > 0 else 0.0

    def share_diverted(self, normal_ratio: float) -> float:
        """Share of the pumped water that did not reach the outlet, against the
        site's normal ratio (geometry is never exact, so 1.0 is not assumed)."""
        return 1.0 - self.ratio / normal_ratio if normal_ratio > 0 else 0.0

    def __add__(self, other: Balance) -> Balance:
        return Balance(self.pit_l + other.pit_l, self.outlet_l + other.outlet_l)


def unaccounted_litres(
    pit_l: float, outlet_l: float, around_pit_l: float, around_outlet_l: float
) -> float:
    """Of ``pit_l`` pumped (``outlet_l`` seen at the outlet), the litres the outlet did
    not account for, 0 when accounted.

    Judged over the ``around`` volumes (the same water over a wider span: a cycle can
    start in one interval and discharge in the next): at least a cycle's volume
    pumped, and the outlet saw less than ``ACCOUNTED_RATIO`` of it (the
    :class:`Balance` ratio, compared without building one: a report asks this of
    every hour of a season, 3.6 million times for a village)."""
    if pit_l < MIN_CYCLE_VOLUME_L or around_outlet_l >= ACCOUNTED_RATIO * around_pit_l:
        return 0.0
    return max(0.0, pit_l - outlet_l)


Litres = npt.NDArray[np.float64]


def unaccounted_litres_each(
    pit_l: Litres, outlet_l: Litres, around_pit_l: Litres, around_outlet_l: Litres
) -> Litres:
    """:func:`unaccounted_litres` of every element of equal-length arrays at once (a
    season report asks it of 3,600 hours a site). The same test written for arrays,
    comparison for comparison (NaN included: ``max(0.0, x)`` is ``x`` only where
    ``x > 0.0``); ``tests/test_reports_units.py`` pins the two equal."""
    judged = ~(pit_l < MIN_CYCLE_VOLUME_L) & ~(around_outlet_l >= ACCOUNTED_RATIO * around_pit_l)
    short = pit_l - outlet_l
    out: Litres = np.where(judged & (short > 0.0), short, 0.0)
    return out


def pipe_can_ice(pipe_temp_c: float) -> bool:
    """A pipe wall this cold can hold ice in the line (NaN, no reading, is False)."""
    return pipe_temp_c <= COLD_PIPE_C


def pumped_litres(
    state: SiteState, level_before: float, level_after: float, fill_cm_s: float, seconds: float
) -> float:
    """Water the pump took out of the pit between two samples around a run."""
    return state.ctx.litres(level_before - level_after + fill_cm_s * max(seconds, 0.0))


#: A trend in the recent fills counts only when its slope is this many standard
#: errors from zero: an inflow that jitters from minute to minute (15-20 % in
#: houses fed by several drains) has no trend, and a slope fitted to its jitter
#: must not be read as one.
TREND_T = 2.0
#: Fills needed to fit a trend (a slope and its standard error need n - 2 > 1).
TREND_MIN_FILLS = 4


def inflow_trend_error(
    fills: Sequence[tuple[datetime, float]], at: datetime, used_cm_s: float
) -> float:
    """How far an inflow ``used_cm_s`` (cm/s) is from the inflow the fills' trend gives
    at ``at``; 0 when the fills show no significant trend.

    ``fills`` are (mid-time, rate) of the off periods measured over the span of
    interest (the caller picks it, e.g. the last hour). A storm's inflow rises
    and recedes over an hour: the median of the recent fills then lags it, the
    same way for every cycle of the hour, an error that does not average out over
    blocks. Jitter without a trend averages out and is not counted here. The
    trend is a least-squares line; a slope within ``TREND_T`` standard errors of
    zero is jitter."""
    n = len(fills)
    if n < TREND_MIN_FILLS:
        return 0.0
    ts = [(t - at).total_seconds() for t, _q in fills]
    qs = [q for _t, q in fills]
    mt, mq = sum(ts) / n, sum(qs) / n
    sxx = sum((t - mt) ** 2 for t in ts)
    if sxx <= 0:
        return 0.0
    slope = sum((t - mt) * (q - mq) for t, q in zip(ts, qs, strict=True)) / sxx
    resid = sum((q - mq - slope * (t - mt)) ** 2 for t, q in zip(ts, qs, strict=True))
    se = (resid / (n - 2) / sxx) ** 0.5
    if abs(slope) <= TREND_T * se:
        return 0.0
    return abs(mq - slope * mt - used_cm_s)


def run_span(cycle: PumpCycle, state: SiteState) -> tuple[datetime, datetime]:
    """Best estimate of when the pump ran.

    The pump starts at the on mark and stops at the off mark, and the level falls
    at the net pumping rate in between: run time = (start level - off level) / net
    rate, which no sample phase biases. The start is placed from the first on
    sample's level. Before the net rate is learned (runs with two on-samples), the
    midpoints between the pit samples around the run's edges.
    """
    rate = run_net_rate(cycle, state)
    if rate is None or rate <= 0:
        if cycle.seen:
            start = cycle.before_ts + (cycle.first_on_ts - cycle.before_ts) / 2
            end = cycle.last_on_ts + (cycle.end_ts - cycle.last_on_ts) / 2
            return start, end
        gap = cycle.end_ts - cycle.before_ts
        mid = cycle.before_ts + gap / 2
        return mid - gap / 4, mid + gap / 4
    pit = state.ctx.site.pit
    off = state.cycles.off_level_cm(
        pit.pump_off_cm, OFF_MARK_TOLERANCE_CM, state.ctx.cm(state.ctx.line_volume_l)
    )
    length = timedelta(seconds=max(0.0, cycle.start_level_cm - off) / rate)
    length = min(length, cycle.end_ts - cycle.before_ts)
    if cycle.seen and cycle.first_on_level_cm is not None:
        back = timedelta(seconds=max(0.0, cycle.start_level_cm - cycle.first_on_level_cm) / rate)
        start = min(max(cycle.before_ts, cycle.first_on_ts - back), cycle.first_on_ts)
    else:
        start = cycle.before_ts + (cycle.end_ts - cycle.before_ts - length) / 2
    end = min(start + length, cycle.end_ts)
    return start, max(end, cycle.last_on_ts if cycle.seen else end)


def fastest_drain_cm_s(cycle: PumpCycle, state: SiteState) -> float:
    """The fastest this run can have drained the pit, cm/s: an upper bound, never an
    estimate.

    A pump's flow is steady within one run, so a run with two on-samples or more
    bounds its own rate: the fall between them over their span, plus what the level
    noise of two readings can add (``SURE_NOISE_SIGMAS``). Otherwise (and as a cap)
    ``SURE_RATE_FACTOR`` x the learned net rate (a hose faces less head than the
    line), or the fastest sump pump there is before anything is learned.
    """
    learned = state.cycles.net_rate_cm_s()
    bound = SURE_RATE_FACTOR * learned if learned else state.ctx.cm(MAX_PUMP_LPM / 60.0)
    own = cycle_net_rate(cycle)
    noise = state.cycles.level_noise_cm()
    if own is not None and noise > 0:
        span = (cycle.last_on_ts - cycle.first_on_ts).total_seconds()
        bound = min(bound, own + SURE_NOISE_SIGMAS * math.sqrt(2.0) * noise / span)
    return bound


def run_net_rate(cycle: PumpCycle, state: SiteState) -> float | None:
    """Best estimate of this run's net fall rate, cm/s (None before any is known).

    The run's own rate comes from two noisy levels (first and last on-sample): off
    by sqrt(2) x the level noise over their span, a quarter of the rate at a 30 s
    node with a noisy sensor, where the learned rate is the median of 15 runs. The
    two are weighed by their precision: a dense node's own rate, measured over
    many seconds, carries the run (a hose or a worn impeller changes it), a sparse
    node's leans on the learned one. A pump drains no faster than
    ``SURE_RATE_FACTOR`` x its learned rate (a hose faces less head than the line)
    and, still pumping, no slower than 1 / that.
    """
    learned = state.cycles.net_rate_cm_s()
    own = cycle_net_rate(cycle)
    if own is None or learned is None:
        return own or learned
    own = min(max(own, learned / SURE_RATE_FACTOR), learned * SURE_RATE_FACTOR)
    span = (cycle.last_on_ts - cycle.first_on_ts).total_seconds()
    noise = state.cycles.level_noise_cm()
    own_var = 2.0 * noise**2 / span**2
    learned_var = _median_variance(list(state.cycles.pump_rates))
    if own_var <= 0 or learned_var <= 0:
        return own if own_var <= 0 else learned
    w = learned_var / (own_var + learned_var)
    return w * own + (1.0 - w) * learned


def _median_variance(values: list[float]) -> float:
    """Variance of the median of ``values``: (1.253 x their robust scatter)^2 / n."""
    n = len(values)
    if n < 3:
        return 0.0
    ordered = sorted(values)
    mid = ordered[n // 2]
    mad = sorted(abs(x - mid) for x in ordered)[n // 2]
    return (1.253 * 1.4826 * mad) ** 2 / n


def sure_run(cycle: PumpCycle, state: SiteState) -> tuple[datetime, datetime] | None:
    """The part of a run the pump certainly ran (None for a run no pit sample saw).

    The level at the first on-sample has already fallen from where the run began,
    which took at least that fall / the fastest the run can drain
    (:func:`fastest_drain_cm_s`); likewise after the last on-sample down to the off
    mark. Each fall is taken less the noise of its readings (``SURE_NOISE_SIGMAS``),
    so a noisy high reading before the run cannot move the start early. Outlet
    samples inside are surely during the run. Where the pit node reports the pump's
    start and stop as they happen, this is the run itself; where it samples on an
    interval only, a run seen by one on-sample may surely span little more than that
    sample, and no guess from sample midpoints stands in for it.
    """
    if not cycle.seen or cycle.first_on_level_cm is None or cycle.last_on_level_cm is None:
        return None
    fastest = fastest_drain_cm_s(cycle, state)
    margin = SURE_NOISE_SIGMAS * math.sqrt(2.0) * state.cycles.level_noise_cm()
    pit = state.ctx.site.pit
    off = state.cycles.off_level_cm(
        pit.pump_off_cm, OFF_MARK_TOLERANCE_CM, state.ctx.cm(state.ctx.line_volume_l)
    )
    back = max(0.0, cycle.start_level_cm - cycle.first_on_level_cm - margin) / fastest
    ahead = max(0.0, cycle.last_on_level_cm - off - margin) / fastest
    start = max(cycle.before_ts, cycle.first_on_ts - timedelta(seconds=back))
    end = min(cycle.end_ts, cycle.last_on_ts + timedelta(seconds=ahead))
    return start, end


def pit_pump_lpm(state: SiteState) -> float | None:
    """The pump's flow as the pit sees it (net fall rate + inflow), None before learned."""
    rate = state.cycles.net_rate_cm_s()
    if rate is None:
        return None
    return state.ctx.litres(rate + state.cycles.fill_rate_cm_s()) * 60.0


def cycle_net_rate(cycle: PumpCycle) -> float | None:
    """Net level fall rate of one run from its own on-samples (two or more)."""
    span = (cycle.last_on_ts - cycle.first_on_ts).total_seconds()
    if span <= 0 or cycle.first_on_level_cm is None or cycle.last_on_level_cm is None:
        return None
    fall = cycle.first_on_level_cm - cycle.last_on_level_cm
    return fall / span if fall > 0 else None


def outlet_litres(
    samples: list[OutletSample], start: datetime, end: datetime
) -> tuple[float, int] | None:
    """Outlet volume over ``[start, end]``, each instant taking the nearest sample's flow,
    and how many samples fell inside. None when no sample fell inside: the outlet did
    not observe the run (never read that as "dry")."""
    inside = [o for o in samples if start <= o.ts <= end]
    if not inside:
        return None
    before = [o for o in samples if o.ts < start][-1:]
    after = [o for o in samples if o.ts > end][:1]
    pts = before + inside + after
    litres = 0.0
    for i, o in enumerate(pts):
        lo = start if i == 0 else max(start, pts[i - 1].ts + (o.ts - pts[i - 1].ts) / 2)
        hi = end if i == len(pts) - 1 else min(end, o.ts + (pts[i + 1].ts - o.ts) / 2)
        if hi > lo:
            litres += o.flow_lpm * (hi - lo).total_seconds() / 60.0
    return litres, len(inside)


@dataclass(frozen=True, slots=True)
class Stall:
    """A run that has not drained the pit."""

    running_for: timedelta
    start_level_cm: float
    level_cm: float
    effective_cm_s: float
    expected_cm_s: float | None


def swing_margin_cm(state: SiteState) -> float:
    """How far the level must move between two pit samples to be more than noise."""
    noise = state.cycles.level_noise_cm()
    return SWING_NOISE_SIGMAS * math.sqrt(2.0) * noise + SWING_MIN_CM


def stalled_run(s: PitSample, state: SiteState) -> Stall | None:
    """The current run if the pump runs but the pit does not drain.

    Effective drain = level fall rate + the inflow measured before the run. A
    working pump drains at its learned rate; a stalled one (ice, clog, broken
    impeller, air lock, no power to the motor) at ~0: its level at most falls by
    the line's volume, then rises with the inflow. An outlet flowing normally in
    the last minute means the pump does move water (a storm the pump barely keeps
    up with), so that is never a stall.
    """
    tracker = state.cycles
    since = tracker.running_since
    if not s.pump_on or since is None or tracker.run_start_level is None:
        return None
    running = s.ts - since
    if running < STALL_AFTER or tracker.run_samples < STALL_SAMPLES:
        return None
    fall = tracker.run_start_level - s.level_cm
    line_cm = state.ctx.cm(state.ctx.line_volume_l)
    pit = state.ctx.site.pit
    off = tracker.off_level_cm(pit.pump_off_cm, OFF_MARK_TOLERANCE_CM, line_cm)
    if s.level_cm <= off + max(STALL_ABOVE_OFF_CM, 3.0 * tracker.level_noise_cm()):
        # Nothing left above the off mark to drain: a pump held on at the bottom of
        # the pit (stuck float) moves only the inflow; that is ``continuous_run``.
        return None
    noise = 3.0 * tracker.level_noise_cm() + 1.0
    effective = fall / running.total_seconds() + tracker.run_fill_rate
    learned = tracker.drain_rate_cm_s()
    limit = STALL_SHARE * learned if learned is not None else STALL_MIN_CM_S
    if fall > line_cm + noise or effective >= max(limit, STALL_MIN_CM_S):
        return None
    recent = state.outlet.between(s.ts - STALL_OUTLET_WINDOW, s.ts)
    if any(o.flow_lpm >= FLOW_PRESENT_LPM for o in recent):
        return None
    if tracker.run_drained(s.ts - STALL_AFTER, swing_margin_cm(state)):
        # The level fell again between on-samples well into the run: the pump moves
        # water and stops and restarts faster than the node reports (water coming
        # back through a failed check valve refills more than the band at each
        # stop). Its level stays up because the water goes round, not because the
        # pump moves none.
        return None
    return Stall(running, tracker.run_start_level, s.level_cm, effective, learned)


def blocked_line_cause(state: SiteState, s: PitSample) -> str | None:
    """Why a stalled run cannot be a blocked (frozen) line, or None if it can be.

    A pump pushing against a plug turns (it draws current) and makes its shut-off
    head: a tap on the riser, between the pump and any ice outdoors, then reads
    more than while water flows out. A motor that draws no current moves nothing,
    and a riser tap reading no more than the idle column while the pump "runs"
    shows a pump making no head (air lock, broken impeller): that is the pump, not
    the line. The current is the median over the run (one sample of a noisy clamp
    reads a few tenths of an amp on a dead motor), and against the pump's own
    running current: a centrifugal pump at shut-off head still needs most of its
    running power (a motor's current there is ~75-85 % of its running current), an
    unloaded one (air lock, impeller off its shaft) draws its no-load current
    (~50-60 %), so under ``DEADHEAD_CURRENT_SHARE`` it is not dead-heading. An
    outlet tap (or none) without current sensing cannot tell, so the stall may be
    ice."""
    amps = state.cycles.current_now_a()
    if amps is not None and amps < NO_CURRENT_A:
        return "motor draws no current"
    usual = state.cycles.running_current_a()
    if amps is not None and usual is not None and amps < DEADHEAD_CURRENT_SHARE * usual:
        return "motor draws too little current to be pushing against a blockage"
    running, idle = state.outlet.running_kpa(), state.outlet.idle_kpa()
    if running is None or running < RISER_TAP_MIN_KPA:
        return None
    recent = state.outlet.between(s.ts - STALL_OUTLET_WINDOW, s.ts)
    if len(recent) < 1:
        return None
    ordered = sorted(o.pressure_kpa for o in recent)
    pressure = ordered[len(ordered) // 2]
    # Half way from the idle column to the running head: a dead-headed pump reads
    # at least its running head, a pump making no head at most the idle column.
    base = idle if idle is not None else 0.0
    if pressure < base + 0.5 * max(running - base, 0.0):
        return "riser pressure shows the pump makes no head"
    return None


def cold_enough_for_ice(state: SiteState, now: datetime) -> bool:
    """A discharge line can hold ice: pipe wall near 0 C, or air freezing for hours."""
    last = state.outlet.last
    if last is not None and now - last.ts <= PIPE_MAX_AGE and pipe_can_ice(last.pipe_temp_c):
        return True
    return state.freeze.frozen_for(now) >= COLD_AIR_FOR


def line_may_hold_ice(state: SiteState, now: datetime) -> bool:
    """The line may hold ice now: cold enough for it (``cold_enough_for_ice``), or the
    pipe wall was at or below COLD_PIPE_C within THAW_FOR. Ice that has formed does not
    melt the moment one reading of the pipe wall rises past +1 C (a sensor near its
    threshold dithers, and warm pit water passing the node warms its wall before the
    plug downstream): it melts once the pipe has stayed warm for THAW_FOR, the same
    span that clears ``frozen_line``."""
    if cold_enough_for_ice(state, now):
        return True
    recent = state.outlet.between(now - THAW_FOR, now)
    return any(pipe_can_ice(o.pipe_temp_c) for o in recent)


def stall_onset(
    state: SiteState, now: datetime, onset: tuple[datetime, bool] | None
) -> tuple[datetime, bool] | None:
    """(start of the current run, whether its line could hold ice when its stall was
    first seen), kept for the whole run: ``onset`` is the value from the last call.

    Ice cannot explain a stall that began while the line could not freeze: the pump
    had stopped moving water before any ice formed (the still water of a dead line
    freezes readily later on, which says nothing about why the pump stalled). And a
    stall that began in frost stays a frozen line until it thaws, whatever one pipe
    reading says. None while the pump is not running."""
    since = state.cycles.running_since
    if since is None:
        return None
    if onset is not None and onset[0] == since:
        return onset
    return since, line_may_hold_ice(state, now)


def stall_in_frost(onset: tuple[datetime, bool] | None, state: SiteState, now: datetime) -> bool:
    """The stalled run may be a frozen line: its line could freeze when the stall
    began (``stall_onset``) and may still hold ice now (a line that has stayed warm
    for THAW_FOR has thawed: a stall that goes on is the pump)."""
    return onset is not None and onset[1] and line_may_hold_ice(state, now)
