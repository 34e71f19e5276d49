"""Sanitary-sewer discharge: the pit says water was pumped away, the outlet did not
see all of it.

Per pump cycle the pit's water balance (``physics``): pumped = level fall to the
settled level x pit area + inflow over the span. The outlet side is pooled over a
*block* of cycles, because a run 0-2 outlet samples fell in says next to nothing
about its own volume: the outlet flow is integrated without gaps across cycles (a
line that drains or refills between runs moves water between cycles, not out of
the balance), and its flow rate while running x the pit's run time is the volume
once flowing samples show the rate (samples that alias with short regular runs
lower the count, never the rate). A block closes once its outlet volume is known
(``BLOCK_REL_ERROR``, ``MIN_RATE_SAMPLES``); a block without a flowing sample is
dry only when samples fell inside its runs, otherwise unobserved.

Each site's normal outlet/pit ratio is calibrated from its own clean blocks (pit
diameter and float marks are never exact: a healthy ratio can be 0.7 or 1.4), only
from blocks inside the physical prior (``HEALTHY_RATIO_LOW..HIGH``), so a site
diverting most of its water from the first cycle cannot teach itself that this is
normal. Before calibration the share is judged against the lowest healthy ratio.

Diverted share per block = 1 - ratio / normal. A sequential test (CUSUM of the
log-likelihood ratio of a 25 % diversion against none) weighs each block by its own
information: its outlet side by the outlet samples its volume rests on (the site's
scatter per sample is learned from its clean blocks), its pit side by the
uncertainty of its own inflow term (inflow error x the whole settling span) and
level noise, its run times by the inflow's error over the net drain rate; and the
sum is widened by how much the site's clean blocks drift together (their lag-one
autocorrelation: weather and a slowly moving sampling phase make neighbouring
blocks err alike). A block resting on one or two samples, or on a storm's inflow,
counts for little; a dense block of dry in-run samples can open the finding alone.
It clears only when the downward test reaches the same height AND no block has
looked diverted for ``SANITARY_CLEAR_AFTER``: one finding per episode of an
intermittent diversion, no flapping inside it, and a new one for the next.

A cycle counts only if it ended near the off mark: a blocked or frozen line never
drains the pit (that is the frozen-line / pump-failure case, decided from the pit,
not from pressure: a riser tap reads the lift even when all the water goes down a
hose). Water falling back from the riser returns to the pit before the settled
level is read, so a leaking check valve is not a diversion. A waiver for this rule
is honoured only where the pack's rule has a waiver clause.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from itertools import pairwise
from typing import Any, ClassVar

from gateway.contract import NodeKind
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
from gateway.rules.detectors.dry_streak import DryStreak
from gateway.rules.detectors.lazy import LazyDeque
from gateway.rules.physics import (
    Balance,
    inflow_trend_error,
    pit_pump_lpm,
    pumped_litres,
    run_span,
    sure_run,
)
from gateway.rules.thresholds import (
    BACKFLOW_MIN_CM,
    BACKFLOW_WINDOW,
    BLOCK_MAX_CYCLES,
    BLOCK_REL_ERROR,
    CALIBRATION_KEEP,
    CALIBRATION_MIN_BLOCKS,
    CUSUM_REFERENCE,
    CYCLE_END_TOLERANCE_CM,
    DIVERTED_LOOKING,
    FLOW_ABSENT_LPM,
    FLOW_PRESENT_LPM,
    HEALTHY_RATIO_HIGH,
    HEALTHY_RATIO_LOW,
    HEALTHY_RATIO_LOW_UNTIMED,
    IDLE_FLOW_LPM,
    LONG_RUN_FACTOR,
    MAX_INFLOW_SHARE,
    MIN_BAND_SHARE,
    MIN_CYCLE_VOLUME_L,
    MIN_DIVERSION_SHARE,
    MIN_PUMP_FLOW_LPM,
    OUTLET_LAG_MIN,
    PRIOR_RATIO,
    RATE_NORMAL_SHARE,
    SANITARY_CLEAR_AFTER,
    SCATTER_FLOOR,
)

RULE_ID = "sanitary_discharge"
#: Variance of the number of outlet samples inside one run (0 or 1 extra: at most 1/4).
RUN_COUNT_VARIANCE = 0.25
#: A block with no flowing outlet sample is judged dry only once this many outlet
#: samples fell inside its runs (after the line's fill time).
MIN_SURE_DRY_SAMPLES = 3
#: Flowing outlet samples that show the outlet's rate well enough to judge a block.
MIN_RATE_SAMPLES = 2
#: Water back in the pit after a stop, as a share of what the line holds, that shows
#: the line emptied (a failed valve): the next run refills it before the outlet
#: answers, so that cycle's silence is no miss and the streak starts again. A
#: smaller return (the level's noise read as one, or a slow seep) leaves the cycle
#: out of the streak without ending it: noise on a 1-2 cm pit ended every few
#: cycles' streak, and a full diversion there was never found (randomised house 4).
LINE_EMPTIED_SHARE = 0.5
#: Judge a cycle with what we have once the pit has moved on this far.
GIVE_UP_AFTER = timedelta(minutes=5)
#: A level still rising faster than the inflow by more than this (plus 3 noise
#: sigmas of a difference) between two samples is water still falling back.
SETTLE_MARGIN_CM = 0.5
#: Flowing outlet samples of clean runs needed before the site's own flowing window
#: (when after a start its outlet flows) is trusted, and how many offsets are kept.
WINDOW_MIN_WET = 20
WINDOW_KEEP = 200
#: A run's start is known well enough to time outlet samples from it when its first
#: on-sample came at most this long after the start estimated from the levels.
WINDOW_START_SLACK = timedelta(seconds=3)
#: Relative scatter of a block's outlet volume per outlet sample it rests on, assumed
#: before the site's own is learned (conservative: two flowing samples then scatter
#: by 0.25, the spread of a sparse outlet's flows caught mid-fill or mid-drain), and
#: the least ever taken (a meter's +-2 L/min and a run timed to a second or two).
UNIT_SCATTER_PRIOR = 0.15
UNIT_SCATTER_FLOOR = 0.1
#: Median of a chi-square with one degree of freedom (squared deviations -> sigma^2).
CHI2_1_MEDIAN = 0.455
#: A block's share is never known better than this (the calibrated normal is the
#: median of 4-25 blocks, itself known to a few %).
BLOCK_SIGMA_FLOOR = 0.05
#: Height of the sequential test (log-likelihood ratio of a 25 % diversion against
#: none): e^-8 ~ 3e-4, of the order of one false alarm in a few thousand blocks of
#: Gaussian scatter, before heavier tails (and before the persistence factor).
SPRT_HEIGHT = 8.0
#: Lag-one autocorrelation of clean blocks' deviations assumed before 8 are known
#: (sparse clean houses measure 0.6-0.75), and the most ever taken (a factor of 9).
RHO_PRIOR = 0.0
RHO_MAX = 0.8
#: A block calibrates only if its share is at most this (against the current normal).
CALIB_MAX_SHARE = 0.3
#: A block calibrates the ratio only if its inflow term is known to this (relative
#: sigma): the CUSUM reference, half the smallest share to catch. (Level noise is not
#: gated: it is random and averages out in the median. Half the reference starved
#: houses with a jittery inflow of calibration blocks: their fills scatter by 15-20 %
#: from minute to minute without any trend.)
CALIB_MAX_PIT_REL = CUSUM_REFERENCE
#: The fills a trend of the inflow is fitted to: a storm's inflow rises and recedes
#: over about an hour.
TREND_SPAN = timedelta(hours=1)
#: A flowing reading under this share of its block's highest is a fraction of the rate
#: (an instant meter's noise is a few %) ...
PARTIAL_READING_SHARE = 0.7
#: ... and a meter with at least this share of such readings, in its clean blocks of
#: two or more flowing readings, averages over its interval (a pulse counter reads
#: the intervals a run started or stopped in as fractions: 0.13-0.49 of its readings,
#: long runs at 10 s to 16 s runs at 30 s); an instant meter next to none (one caught
#: on the ramp as the line fills, a few %). Against the block's own highest, not the
#: site's history: a tee lowers every reading after it alike, and a tee's first hours
#: read against the site's earlier highs made instant meters look like pulse counters.
AVERAGING_PARTIAL_SHARE = 0.1
#: Such flowing readings seen before the meter's kind is decided (until then both
#: volumes must show the water missing).
METER_KIND_READINGS = 30
#: Clean-looking blocks in a row whose instant reading falls under the physical prior
#: while the counted one sits inside it, after which a meter decided instant is
#: doubted for good (``_doubt_meter_kind``).
KIND_CONTRADICTIONS = 3
#: A pulse counter's zero reading counts as a dry outlet only where the overlap of its
#: interval with the certain run would have read this many times the flowing level
#: at the site's normal flow, and at least this many seconds.
COUNTED_OVERLAP_MARGIN = 2.0
MIN_COUNTED_OVERLAP_S = 3.0
#: Outlet readings further apart than this many intervals leave a hole in the volume.
OUTLET_GAP_FACTOR = 1.5
#: Runs of the first untimed block (no earlier block tells how often runs are seen).
UNTIMED_FIRST_BLOCK = 8
#: Blocks of untimed runs whose mean run time sets how many runs the next one pools.
UNTIMED_HISTORY = 9
#: Off periods whose median length tells how the inflow moved since the last fill
#: was measured (each is read to a pit interval).
STALE_OFF_PERIODS = 3


@dataclass
class _Pending:
    cycle: PumpCycle
    last_off: PitSample
    settled: PitSample | None = None
    #: False when the pump restarted before riser water could have fallen back.
    fully_settled: bool = False
    #: A sample after the fall-back window, settled once the next rises only by inflow.
    candidate: PitSample | None = None


@dataclass
class _Block:
    balance: Balance = field(default_factory=lambda: Balance(0.0, 0.0))
    cycles: int = 0
    end: datetime | None = None
    wet_flows: list[float] = field(default_factory=list)
    samples: list[float] = field(default_factory=list)
    pit_l: float = 0.0
    run_s: float = 0.0
    #: Variance of the count of outlet samples inside the block's runs.
    var: float = 0.0
    #: Outlet samples inside the block's runs after the line's fill time.
    sure_dry: int = 0
    outlet_l: float = 0.0
    #: Some cycle's pumped volume is only a lower bound (storm inflow left out).
    bounded: bool = False
    #: Every run was timed from the pit's own net rate (not from sample midpoints).
    timed: bool = True
    #: Seconds from their run's start of the outlet samples that read flowing / dry.
    wet_offsets: list[float] = field(default_factory=list)
    dry_offsets: list[float] = field(default_factory=list)
    #: Variance (L^2) of the block's pumped volume (inflow term and level noise),
    #: and of its inflow term alone (an error that does not average out: it moves
    #: with the weather).
    pit_var: float = 0.0
    inflow_var: float = 0.0
    #: Variance (L^2) of the block's inflow term from the fills' trend alone: the
    #: lag of the fills' median behind a rising or receding inflow, the same for
    #: every block of a storm (``physics.inflow_trend_error``).
    trend_var: float = 0.0
    #: Variance (s^2) of the block's run time from the pit, for runs timed from the
    #: learned net rate; and the runs timed from sample midpoints only (their count
    #: and summed seconds: their variance is the block's, see ``_run_var``).
    run_var: float = 0.0
    untimed_runs: int = 0
    untimed_s: float = 0.0
    #: Outlet samples the block's outlet volume rests on (its information).
    info: float = 0.0
    #: The block's outlet volume as an instant meter's readings give it, and the
    #: larger of that and the counted volume (``_close_block``), L.
    instant_l: float = 0.0
    both_l: float = 0.0
    #: Closed dry on the site's streak of cycles without a flowing reading
    #: (``DryStreak``), not on samples surely inside runs.
    streak_dry: bool = False


@dataclass(frozen=True, slots=True)
class BlockResult:
    """One judged block (for evidence)."""

    end: datetime
    cycles: int
    pit_l: float
    outlet_l: float
    share: float

    def as_evidence(self) -> dict[str, Any]:
        return {
            "end": iso(self.end),
            "cycles": self.cycles,
            "pit_l": r1(self.pit_l),
            "outlet_l": r1(self.outlet_l),
            "diverted_share": round(self.share, 2),
        }


def _rate_ratio(b: _Block) -> float | None:
    """Outlet flow while running / the pump's flow from the pit (pumped / run time)."""
    if not b.wet_flows or b.run_s <= 0 or b.pit_l <= 0:
        return None
    return _median(b.wet_flows) / (b.pit_l * 60.0 / b.run_s)


def _inflow_error_cm_s(state: SiteState) -> float:
    """How far the inflow used (the median of the recent fills) may be off: their
    scatter, and while rain builds or recedes at least how far the latest fill is
    from that median (the median lags the inflow now)."""
    cycles = state.cycles
    fill = cycles.fill_rate_cm_s()
    spread = min(max(cycles.fill_rate_spread(), SCATTER_FLOOR), 1.0)
    latest = cycles.fill_rates[-1] if cycles.fill_rates else fill
    return max(spread * fill, abs(latest - fill))


def _trend_error_cm_s(state: SiteState, at: datetime) -> float:
    """How far the inflow used is from what the last hour's fills' trend gives at
    ``at`` (0 without a significant trend): a systematic error, shared by every
    cycle of a storm's rise or recession."""
    cycles = state.cycles
    fills = [
        (start + (end - start) / 2, rate)
        for (start, end), rate in zip(cycles.fill_spans, cycles.fill_rates, strict=True)
        if at - end <= TREND_SPAN
    ]
    return inflow_trend_error(fills, at, cycles.fill_rate_cm_s())


def _pit_interval_s(state: SiteState) -> float:
    """The pit node's registered sample interval, s (0 without a pit node)."""
    node = state.ctx.site.node_of_kind(NodeKind.PIT)
    return node.interval_s if node is not None else 0.0


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    n = len(ordered)
    return (ordered[(n - 1) // 2] + ordered[n // 2]) / 2


def weighted_median(values: list[float], weights: list[float]) -> float:
    """The value below and above which half the weight lies (the mean of the two
    middle values where the halves meet exactly, as the plain median does)."""
    pairs = sorted(zip(values, weights, strict=True))
    half = sum(w for _v, w in pairs) / 2
    below = 0.0
    for i, (value, weight) in enumerate(pairs):
        below += weight
        if below > half * (1 + 1e-12):
            return value
        if below >= half * (1 - 1e-12):
            return (value + pairs[i + 1][0]) / 2 if i + 1 < len(pairs) else value
    return pairs[-1][0]


class SanitaryDischargeDetector:
    """Per-site water balance of pump cycles against the site's calibrated normal."""

    rule_id: ClassVar[str] = RULE_ID
    info: ClassVar[RuleInfo] = RuleInfo(
        RULE_ID,
        # What telemetry shows is water pumped and not seen at the outlet; where it went
        # is inferred (a leak or a failed outlet sensor fits too), so the title says
        # suspected until an inspection or observation confirms it (issue 15.2).
        "Pumped water is not reaching the outlet: sanitary sewer suspected",
        "Your pump runs and the pit empties, but not all the water reaches the outdoor "
        "discharge line. Look for a hose or pipe from the sump to a floor drain, laundry "
        "tub or cleanout (or a tee on the line), remove it, and let the water leave "
        "through the outdoor line.",
    )
    streams: ClassVar[frozenset[Stream]] = frozenset({Stream.PIT, Stream.OUTLET, Stream.CYCLE})

    def __init__(self, state: SiteState) -> None:
        self.active = False
        self._pending: LazyDeque[_Pending] = LazyDeque(maxlen=20)
        self._block = _Block()
        #: Each calibration block's ratio read two ways: the outlet volume an instant
        #: meter gives (rate x run time where the rate is shown) and the larger of
        #: that and the counted volume (``_close_block``); the site's meter decides
        #: which is used (``_ratio_index``).
        self._calib: LazyDeque[tuple[float, float]] = LazyDeque(maxlen=CALIBRATION_KEEP)
        #: Each calibration block's weight, 1 / sigma^2 of its share: a block of 25
        #: cycles knows the ratio far better than one of two cycles timed only to
        #: the pit's interval.
        self._calib_weight: LazyDeque[float] = LazyDeque(maxlen=CALIBRATION_KEEP)
        #: (ratio, relative variance its pit side and run times explain, samples)
        #: of each calibration block.
        self._calib_info: LazyDeque[tuple[tuple[float, float], float, float]] = LazyDeque(
            maxlen=CALIBRATION_KEEP
        )
        #: Where the outlet's gap-free integral has reached.
        self._integrated_to: datetime | None = None
        #: Outlet flow while running on clean blocks (the pump's normal rate out there).
        self._calib_flow: LazyDeque[float] = LazyDeque(maxlen=CALIBRATION_KEEP)
        #: Outlet flow while running / the pump's flow as the pit saw it, on clean
        #: blocks: the site's normal *rate* ratio (geometry makes it differ from 1).
        self._calib_rate: LazyDeque[float] = LazyDeque(maxlen=CALIBRATION_KEEP)
        #: Seconds from their run's start of outlet samples reading flowing / dry, on
        #: clean blocks: when after a start this site's outlet flows.
        self._calib_wet: LazyDeque[float] = LazyDeque(maxlen=WINDOW_KEEP)
        self._calib_dry: LazyDeque[float] = LazyDeque(maxlen=WINDOW_KEEP)
        self._up = 0.0
        self._down = 0.0
        self._last_diverted: datetime | None = None
        self._recent: LazyDeque[BlockResult] = LazyDeque(maxlen=8)
        self._episode = Balance(0.0, 0.0)
        self._line_held = True
        self._line_emptied = False
        self._prev_leak_back = False
        #: The previous cycle's end, the last off periods' lengths (s), and the length
        #: of the off period the latest fill was measured in.
        self._prev_end: datetime | None = None
        self._off_s: LazyDeque[float] = LazyDeque(maxlen=3 * STALE_OFF_PERIODS)
        #: Flowing readings of clean blocks judged for the meter's kind, how many were
        #: fractions of their block's highest, and the kind once decided
        #: (``_learn_meter``, ``_averaging_meter``).
        self._wet_readings = 0
        self._partial_readings = 0
        self._meter_kind: bool | None = None
        #: Blocks in a row contradicting an instant meter, and whether the kind was
        #: doubted (then it stays unknown: both volumes must show the water missing).
        self._kind_contradictions = 0
        self._kind_doubted = False
        #: Mean estimated run time of the untimed runs of each recent block, s.
        self._untimed_mean: LazyDeque[float] = LazyDeque(maxlen=UNTIMED_HISTORY)
        self._fill_off_s: LazyDeque[float] = LazyDeque(maxlen=STALE_OFF_PERIODS)
        #: Cycles in a row without a flowing reading, against the site's catch rate.
        self._misses = DryStreak()
        interval = state.outlet.interval_s
        self._outlet_wait = max(OUTLET_LAG_MIN, timedelta(seconds=1.5 * interval))

    def restore(self) -> None:
        """Continue a finding restored from the store."""
        self.active = True

    # -- streams ------------------------------------------------------------------

    def feed(self, event: Event, state: SiteState) -> Verdict | None:
        """Queue cycles, settle them on pit samples, judge once the outlet caught up."""
        if isinstance(event, CycleEnd):
            self._pending.append(_Pending(event.cycle, event.first_off))
            return None
        if isinstance(event, PitSample):
            self._settle(event, state)
            return self._poll(event.ts, state)
        if isinstance(event, OutletSample):
            return self._poll(event.ts, state)
        return None

    def _settle(self, s: PitSample, state: SiteState) -> None:
        """The settled level: once riser water has fallen back, or the last off
        sample before a restart.

        Fall-back through a failed valve takes as long as the line takes to drain
        back through the pump (seconds to a minute): a sample at least
        ``BACKFLOW_WINDOW`` after the stop is settled only once the next one rose
        no faster than the inflow (plus the noise of a difference); while the
        level still climbs faster, water is still coming back."""
        noise = 3.0 * 2**0.5 * state.cycles.level_noise_cm() + SETTLE_MARGIN_CM
        fill = state.cycles.fill_rate_cm_s()
        for p in self._pending:
            if p.settled is not None or s.ts <= p.last_off.ts:
                continue
            if s.pump_on:
                p.settled = p.last_off
            elif s.ts - p.cycle.end_ts >= BACKFLOW_WINDOW:
                cand = p.candidate
                if cand is not None:
                    rise = s.level_cm - cand.level_cm
                    if rise <= fill * (s.ts - cand.ts).total_seconds() + noise:
                        p.settled, p.fully_settled = cand, True
                        continue
                p.candidate = p.last_off = s
            else:
                p.last_off = s

    def _poll(self, now: datetime, state: SiteState) -> Verdict | None:
        verdict: Verdict | None = None
        while self._pending:
            p = self._pending[0]
            last = state.outlet.last
            caught_up = last is not None and last.ts >= p.cycle.end_ts + self._outlet_wait
            if not (p.settled is not None and caught_up) and now - p.cycle.end_ts < GIVE_UP_AFTER:
                break
            self._pending.popleft()
            verdict = self._add_cycle(p, state) or verdict
        return verdict

    # -- balance --------------------------------------------------------------------

    def _add_cycle(self, p: _Pending, state: SiteState) -> Verdict | None:
        c = p.cycle
        settled = p.settled or p.last_off
        # From the sample before the run (the inflow is added from its time on): the
        # first on-sample's level would count the inflow in between twice.
        before = c.before_level_cm if c.before_level_cm is not None else c.start_level_cm
        pit_l = pumped_litres(
            state,
            before,
            settled.level_cm,
            state.cycles.fill_rate_cm_s(),
            (settled.ts - c.before_ts).total_seconds(),
        )
        pit = state.ctx.site.pit
        drained = c.low_level_cm <= pit.pump_off_cm + CYCLE_END_TOLERANCE_CM
        big = pit_l >= max(MIN_CYCLE_VOLUME_L, MIN_BAND_SHARE * state.ctx.band_l)
        # A run many times longer than the site's usual was not ended by the float
        # (a stuck float holds the pump on at the intake, moving only the inflow).
        usual = state.cycles.usual_run_s()
        span_s = (c.end_ts - c.before_ts).total_seconds()
        if usual is not None and span_s > LONG_RUN_FACTOR * max(usual, 1.0):
            drained = False
        # Water that came back after the stop (beyond the inflow) shows a line not
        # held full: the next run first refills it, and the outlet answers late.
        returned = (
            settled.level_cm
            - c.low_level_cm
            - state.cycles.fill_rate_cm_s() * max((settled.ts - c.end_ts).total_seconds(), 0.0)
        )
        leak_back = returned > max(BACKFLOW_MIN_CM, 4.0 * state.cycles.level_noise_cm())
        self._line_held = not (leak_back or self._prev_leak_back)
        self._prev_leak_back = leak_back
        # A line that gave back much of what it holds makes the next run refill it
        # before the outlet answers; a return of a few cm may be the level's noise
        # (the run's low is the lowest of several noisy samples) or a slow seep, and
        # shifts the outlet's answer by a second or two.
        self._line_emptied = leak_back and returned >= LINE_EMPTIED_SHARE * state.ctx.cm(
            state.ctx.line_volume_l
        )
        stale_error = self._stale_inflow_error(c, state)
        if not drained or not big:
            self._skip(c, state)
            return None  # blocked line (it never drains the pit) or float chatter
        if self._outlet_gap(c, state):
            self._skip(c, state)
            return None  # a lost outlet message took its water with it: unobserved
        # In a storm the pump mostly moves the inflow during its run, and that inflow
        # is only known from the fills before it: the balance says little then. (The
        # inflow *during the run* decides; the settling span after it is pit level.)
        run_start, run_end = run_span(c, state)
        inflow_l = state.ctx.litres(
            state.cycles.fill_rate_cm_s() * (run_end - run_start).total_seconds()
        )
        # ... and by how much it may be off: the recent fills' scatter (steady
        # groundwater a few %, a storm building or receding tens of %). An inflow
        # term uncertain by more than half the smallest share to detect cannot show
        # that share either.
        uncertain_l = inflow_l * max(state.cycles.fill_rate_spread(), SCATTER_FLOOR)
        bounded = False
        if inflow_l > MAX_INFLOW_SHARE * pit_l or uncertain_l > CUSUM_REFERENCE * pit_l:
            # Only the drawdown is sure: the pump moved at least that much. A block
            # with such a lower bound can show a dry outlet (no flow while the pump
            # surely ran), never a false deficit; it never calibrates.
            pit_l = state.ctx.litres(c.start_level_cm - settled.level_cm)
            if pit_l < max(MIN_CYCLE_VOLUME_L, MIN_BAND_SHARE * state.ctx.band_l):
                self._skip(c, state)
                return None
            bounded = True
        variances = self._pit_variance(c, settled, state, stale_error)
        return self._add_pooled(c, pit_l, state, variances, bounded)

    @staticmethod
    def _pit_variance(
        c: PumpCycle, settled: PitSample, state: SiteState, stale_error: float = 0.0
    ) -> tuple[float, float, float]:
        """Variance (L^2) of the litres the pit says this cycle pumped: its inflow
        term's, its level noise's, and the part of the inflow term's that the
        fills' trend explains (at the span's middle; 0 without a trend).

        Pumped = level before - settled level + inflow x the span from the sample
        before the run to the settled one (30-120 s at sparse nodes, several times
        the run). The inflow term is known only to the recent fills' scatter, and
        that error is multiplied by the whole span, not the run: in rain the
        settled level is read a minute after the stop, and an inflow off by 15 %
        moves the cycle's volume by a quarter. Two level readings add their noise.
        """
        span_s = max((settled.ts - c.before_ts).total_seconds(), 0.0)
        trend = _trend_error_cm_s(state, c.before_ts + (settled.ts - c.before_ts) / 2)
        trend = max(trend, stale_error)
        error_l = state.ctx.litres(max(_inflow_error_cm_s(state), trend) * span_s)
        noise_l = state.ctx.litres(state.cycles.level_noise_cm())
        trend_l = state.ctx.litres(trend * span_s)
        return error_l**2, 2.0 * noise_l**2, trend_l**2

    def _stale_inflow_error(self, c: PumpCycle, state: SiteState) -> float:
        """How far the inflow used may be off (cm/s) because it was measured in an
        earlier, longer or shorter, off period: 0 while the off periods are measured.

        A fill is measured only in an off period at least a minute longer than the
        fall-back window. In a storm the off periods shrink under that, and the
        median of the fills stays at the last value measured, hours old, while
        the inflow moves on (a clean 30 s house in a 5 h storm read ratios 40 %
        off, and taught itself a normal 40 % too high). The pit still shows how
        the inflow moved: the band refills in each off period, so the inflow goes
        as 1 / the off period's length. The median of the last
        ``STALE_OFF_PERIODS`` off periods against the one the latest fill was
        measured in (medians of ``STALE_OFF_PERIODS``) gives the inflow's change
        since, counted beyond twice the off periods' own scatter (a jittery inflow
        moves each one by 15-20 %). A house whose off periods are always short (a
        steady inflow near the pump's) keeps their length, and its inflow is as
        good as when it was measured."""
        prev_end, self._prev_end = self._prev_end, c.end_ts
        if prev_end is None:
            return 0.0
        off_s = (c.before_ts - prev_end).total_seconds()
        if off_s <= 0:
            return 0.0
        self._off_s.append(off_s)
        spans = state.cycles.fill_spans
        if spans and spans[-1][1] >= prev_end:
            self._fill_off_s.append(off_s)  # this off period was measured: current
            return 0.0
        if not self._fill_off_s or len(self._off_s) < STALE_OFF_PERIODS:
            return 0.0
        recent = list(self._off_s)[-STALE_OFF_PERIODS:]
        change = _median(list(self._fill_off_s)) / _median(recent) - 1.0
        # Off periods scatter with the inflow's jitter (and a pit interval each):
        # only a change beyond twice that scatter is the inflow moving on.
        mid = _median(list(self._off_s))
        scatter = 1.4826 * _median([abs(x - mid) for x in self._off_s]) / mid
        if abs(change) <= 2.0 * scatter:
            return 0.0
        return abs(change) * state.cycles.fill_rate_cm_s()

    def _add_pooled(
        self,
        c: PumpCycle,
        pit_l: float,
        state: SiteState,
        variances: tuple[float, float, float],
        bounded: bool,
    ) -> Verdict | None:
        """Pool the cycle into the open block; judge the block once the outlet has had
        enough samples inside runs that its volume is known, not guessed.

        The outlet is integrated without gaps from where the last cycle's integral
        stopped to this run's end plus the line's lag: water a long line drains out
        after a run (or a refill before it) shifts between cycles but stays in the
        block, so only water that truly went elsewhere shows as a deficit. One run
        seen by 0-2 sparse outlet samples says next to nothing; the block's error
        shrinks with the samples that fell in its runs.
        """
        lag = self._line_lag(state) + self._outlet_wait
        end = c.end_ts + lag
        window = state.outlet.between(c.before_ts, end)
        sure, wet_offsets, dry_offsets, run_start = self._run_samples(c, state, end)
        if not sure and self._averaging_meter() and self._counted_dry(window, pit_l, state):
            sure = window[-1:]
        self._count_miss(window, run_start, state)
        verdict = self._close_before_dry_run(window, bool(sure), state)
        b = self._block
        inflow_var, noise_var, trend_var = variances
        b.pit_var += inflow_var + noise_var
        b.inflow_var += inflow_var
        b.trend_var += trend_var
        b.bounded = b.bounded or bounded
        b.sure_dry += len(sure)
        b.wet_offsets += wet_offsets
        b.dry_offsets += dry_offsets
        b.outlet_l += self._outlet_litres(state, self._integrated_to or c.before_ts, end)
        self._integrated_to = end
        b.samples += [o.flow_lpm for o in window]
        b.wet_flows = [x for x in b.samples if x >= FLOW_PRESENT_LPM]
        timed = state.cycles.net_rate_cm_s() is not None
        b.timed = b.timed and timed
        run_s = self._run_seconds(c, state, timed)
        b.run_s += run_s
        if timed:
            b.run_var += self._run_variance(run_s, state, timed)
        else:
            b.untimed_runs += 1
            b.untimed_s += run_s
        # How many outlet samples fall inside a run is floor or ceil of its length in
        # intervals (phase random), and that length is itself only estimated from
        # the pit: each run's count is taken as uncertain by the worst case, 1/4.
        b.var += RUN_COUNT_VARIANCE
        b.pit_l += pit_l
        b.cycles += 1
        b.end = c.end_ts
        expected = b.run_s / max(state.outlet.interval_s, 1.0)
        counted = expected >= 1.0 and b.var**0.5 <= BLOCK_REL_ERROR * expected
        # Known: the outlet's rate seen by enough flowing samples, or enough samples
        # inside runs all dry, or the count of in-run samples known to BLOCK_REL_ERROR.
        b.streak_dry = not b.wet_flows and self._misses.improbable()
        dry = not b.wet_flows and (b.sure_dry >= MIN_SURE_DRY_SAMPLES or b.streak_dry)
        known = dry or len(b.wet_flows) >= MIN_RATE_SAMPLES or (counted and bool(b.wet_flows))
        untimed_need = self._untimed_block_cycles(b, state) if b.untimed_runs else None
        if untimed_need is not None and not dry:
            known = b.cycles >= untimed_need
        if not known and b.cycles < BLOCK_MAX_CYCLES:
            return verdict
        self._block = _Block()
        if b.untimed_runs:
            self._untimed_mean.append(b.untimed_s / b.untimed_runs)
        return self._close_block(b, state) or verdict

    def _close_before_dry_run(
        self, window: list[OutletSample], sure: bool, state: SiteState
    ) -> Verdict | None:
        """A run whose outlet read dry while the pump surely ran (and had filled the
        line), or that makes the streak of runs without water improbable, is not
        pooled with runs that flowed: the flowing runs' rate x this run's time would
        count water its own samples say never came. The open block is judged on its
        own, and this run starts the next. (A block of runs the pit cannot time pools
        up to 120 cycles: one that began before a hose went in held its flowing
        readings for hours.)"""
        if not self._block.wet_flows or any(o.flow_lpm >= FLOW_PRESENT_LPM for o in window):
            return None
        if not (sure or self._misses.improbable()):
            return None
        closing, self._block = self._block, _Block()
        return self._close_block(closing, state)

    def _count_miss(
        self, window: list[OutletSample], run_start: datetime, state: SiteState
    ) -> None:
        """Whether this cycle's outlet showed a flowing reading, at the phase its
        samples fell against the run, for the streak of cycles without one
        (``DryStreak``). A line that emptied behind its check valve answers late
        (the next run refills it first), so such a cycle's silence is no miss: the
        streak starts again. A cycle whose line may not have been held full but
        did not empty is left out of the streak."""
        if self._line_emptied:
            self._misses.break_streak()
            return
        if not self._line_held:
            return  # neither a miss nor a catch: the streak goes on
        interval = max(state.outlet.interval_s, 1.0)
        first = next((o for o in window if o.ts >= run_start), None)
        if first is None or (first.ts - run_start).total_seconds() >= interval:
            return  # no sample in the interval after the start: nothing to phase
        phase = (first.ts - run_start).total_seconds() / interval
        caught = any(o.flow_lpm >= FLOW_PRESENT_LPM for o in window)
        self._misses.observe(caught, phase)

    def _untimed_block_cycles(self, b: _Block, state: SiteState) -> int | None:
        """Cycles a block of runs the pit cannot time pools before it is judged.

        Such a run counts a pit interval if a sample saw it, 0 if none did: unbiased
        only over a number of runs fixed in advance. Closing the block at its second
        flowing outlet sample (as timed blocks do) would stop on the very event that
        makes the estimate large where pit and outlet share a clock: blocks would
        end on a seen run, and read too much outlet water for their cycles. So the
        block pools the runs its estimate needs to be known to ``BLOCK_REL_ERROR``
        (relative variance (I - D) / (n x D) for runs of D s at pit interval I), D
        from the site's earlier blocks, never this one's. None where runs outlast the
        interval (every run is seen: the usual rules close the block)."""
        interval = _pit_interval_s(state)
        history = [d for d in self._untimed_mean if d > 0]
        if not history:
            return UNTIMED_FIRST_BLOCK  # fixed in advance: this block's own runs decide nothing
        mean = _median(history)
        if mean <= 0:
            return BLOCK_MAX_CYCLES  # no run seen yet: nothing to pool towards
        if mean >= interval:
            return None  # runs outlast the interval: every one is seen, no lottery
        need = (interval - mean) / (mean * BLOCK_REL_ERROR**2)
        return min(BLOCK_MAX_CYCLES, math.ceil(need))

    def _run_samples(
        self, c: PumpCycle, state: SiteState, end: datetime
    ) -> tuple[list[OutletSample], list[float], list[float], datetime]:
        """The outlet samples inside this run that can show a dry outlet, every
        sample's offset from the run's start, flowing and dry (the flowing window's
        data), and that start (``run_span``'s best estimate)."""
        # Only outlet samples inside a run (after the line's fill time) can show a dry
        # outlet: short regular runs can fall between samples cycle after cycle (the
        # pump's period locks to the node's), and a missing flow says nothing then.
        # Inside the part of the run the pit makes certain (``physics.sure_run``), not
        # the best estimate of the run: a pit node sampling on an interval places a
        # start only to half an interval, and an outlet sample read before the pump
        # ran (or before it filled the line) is no dry outlet.
        run_start = run_span(c, state)[0]
        certain = sure_run(c, state)
        sure = (
            state.outlet.between(certain[0] + self._line_lag(state), certain[1])
            if certain is not None
            else []
        )
        if certain is not None and self._averaging_meter():
            sure = self._counted_over(state, certain[0] + self._line_lag(state), certain[1])
        # The site's learned flowing window holds only while the line is held full
        # behind its check valve (no water came back after this or the last stop),
        # and offsets from the start mean something only where the pit saw the
        # start within a few seconds (reported as it happened, or dense sampling).
        timed_start = c.seen and (c.first_on_ts - run_start) <= WINDOW_START_SLACK
        flowing = self._flowing_window() if self._line_held and timed_start else None
        seen = state.outlet.between(run_start, end) if timed_start else []
        if flowing is not None:
            lo, hi = flowing
            learned = [o for o in seen if lo <= (o.ts - run_start).total_seconds() <= hi]
            sure = sorted(set(sure) | set(learned), key=lambda o: o.ts)
        wet: list[float] = []
        dry: list[float] = []
        for o in seen:
            offset = (o.ts - run_start).total_seconds()
            (wet if o.flow_lpm >= FLOW_PRESENT_LPM else dry).append(offset)
        return sure, wet, dry, run_start

    def _counted_over(self, state: SiteState, start: datetime, end: datetime) -> list[OutletSample]:
        """A pulse counter's readings whose counting interval (since the reading before)
        overlaps ``[start, end]`` by long enough that the outlet's normal flow over the
        overlap would read as flowing: a zero from such a reading is a dry outlet.

        Its reading is the mean flow over its interval, so a run shorter than the
        interval still lands in one (an instant meter's reading lands in a run only
        by chance). A reading is taken only if the overlap's share of its interval x
        the normal flow reaches ``COUNTED_OVERLAP_MARGIN`` x ``FLOW_PRESENT_LPM`` (and
        never under ``MIN_COUNTED_OVERLAP``): a second of flow in 30 s reads as idle.
        """
        if end <= start:
            return []
        interval = state.outlet.interval_s
        # The outlet's flow while running: the pump's as the pit sees it x the site's
        # normal outlet/pit ratio (the lowest healthy one before calibration). A pulse
        # counter's own readings are fractions of it and cannot tell it.
        normal, _unit, calibrated = self._normal()
        ratio = normal if calibrated else HEALTHY_RATIO_LOW
        flow = max((pit_pump_lpm(state) or 0.0) * ratio, MIN_PUMP_FLOW_LPM)
        cap = timedelta(seconds=OUTLET_GAP_FACTOR * interval)
        pts = state.outlet.between(start - cap, end + cap)
        out: list[OutletSample] = []
        for a, o in pairwise(pts):
            span = (o.ts - a.ts).total_seconds()
            if span <= 0 or o.ts - a.ts > cap:
                continue  # a lost report: this one counted over an unknown span
            overlap = (min(o.ts, end) - max(a.ts, start)).total_seconds()
            need = max(
                MIN_COUNTED_OVERLAP_S, COUNTED_OVERLAP_MARGIN * FLOW_PRESENT_LPM * span / flow
            )
            if overlap >= need:
                out.append(o)
        return out

    def _counted_dry(self, window: list[OutletSample], pit_l: float, state: SiteState) -> bool:
        """Whether a pulse counter's readings over a whole cycle (no report lost: the
        caller checked) say its water never came: every one reads dry, and all they
        could have hidden (each reading plus ``FLOW_ABSENT_LPM``, over its interval)
        is under 1 / ``COUNTED_OVERLAP_MARGIN`` of the least the pit's volume would
        bring at the lowest healthy ratio. A pulse counter misses no run, however
        short: this is the cycle's whole volume, counted, not a sample of it."""
        if not window or any(o.flow_lpm >= FLOW_PRESENT_LPM for o in window):
            return False
        interval = state.outlet.interval_s
        hidden = sum((o.flow_lpm + FLOW_ABSENT_LPM) * interval / 60.0 for o in window)
        return pit_l * HEALTHY_RATIO_LOW >= COUNTED_OVERLAP_MARGIN * hidden

    def _close_block(self, b: _Block, state: SiteState) -> Verdict | None:
        """The closed block's balance (pit volume vs outlet volume), judged."""
        if (b.run_s <= 0 and b.wet_flows) or not b.samples:
            return None  # no run timed (a dry block needs none) or no outlet sample
        if not b.wet_flows and b.sure_dry < MIN_SURE_DRY_SAMPLES and not b.streak_dry:
            return None  # no flowing sample, and too few inside runs: unobserved
        # Two readings of the outlet's volume, each right for one kind of meter, and the
        # larger is taken: water is called missing only when both say so.
        # - The outlet's flow rate while running x the pit's run time, once enough
        #   flowing samples show the rate: right for a meter that reads the flow at
        #   the sample's instant (a tee or hose lowers the rate, while sampling that
        #   aliases with short runs, or a line that drains and refills, only moves
        #   volume between samples).
        # - The counted volume (each reading held back to the one before): exact for
        #   a pulse counter, which reports the mean flow since its last report (the
        #   shipped ESPHome outlet node does). Its readings of a run shorter than the
        #   interval are fractions of the rate, and their median x the run time
        #   would read most of the water as gone.
        #   Which meter a site has shows in its readings: an instant meter reads a
        #   run at its rate (or not at all), a pulse counter reads the intervals a
        #   run's start or stop fell in as fractions of it (``_averaging_meter``).
        #   A block resting on the rate alone needs that rate shown by two readings
        #   of an instant meter; otherwise the counted volume holds too.
        by_rate = _median(b.wet_flows) * b.run_s / 60.0 if b.wet_flows else 0.0
        rate_known = len(b.wet_flows) >= MIN_RATE_SAMPLES
        b.instant_l = by_rate if rate_known else max(b.outlet_l, by_rate)
        b.both_l = max(b.outlet_l, by_rate)
        b.balance = Balance(b.pit_l, b.both_l if self._ratio_index() else b.instant_l)
        # What the outlet volume rests on: the flowing samples that gave its rate, the
        # samples inside runs that read dry, or the in-run samples it was counted from.
        if rate_known:
            b.info = float(len(b.wet_flows))
        elif not b.wet_flows:
            b.info = float(b.sure_dry)
        else:
            b.info = max(b.run_s / max(state.outlet.interval_s, 1.0), 1.0)
        return self._judge(b, state)

    def _skip(self, c: PumpCycle, state: SiteState) -> None:
        """A cycle not judged: the outlet up to its start (the last judged run's tail)
        still belongs to the open block; its own water is left out."""
        if self._integrated_to is not None and c.before_ts > self._integrated_to:
            self._block.outlet_l += self._outlet_litres(state, self._integrated_to, c.before_ts)
        self._integrated_to = c.end_ts + self._line_lag(state) + self._outlet_wait

    def _ratio_index(self) -> int:
        """Which reading of the outlet volume this site's blocks are judged by: 0 for
        an instant meter's, 1 (the larger of rate-based and counted) for a pulse
        counter's or while the meter's kind is unknown."""
        return 0 if self._averaging_meter() is False else 1

    def _learn_meter(self, flows: list[float]) -> None:
        """Count a clean block's flowing readings towards the meter's kind, each against
        the block's highest (``PARTIAL_READING_SHARE``), until the kind is decided
        (``METER_KIND_READINGS``, ``AVERAGING_PARTIAL_SHARE``)."""
        if self._meter_kind is not None or self._kind_doubted or len(flows) < 2:
            return
        high = max(flows)
        self._wet_readings += len(flows)
        self._partial_readings += sum(1 for x in flows if x < PARTIAL_READING_SHARE * high)
        if self._wet_readings >= METER_KIND_READINGS:
            self._meter_kind = self._partial_readings >= (
                AVERAGING_PARTIAL_SHARE * self._wet_readings
            )

    def _doubt_meter_kind(self, instant: float, counted: float, low: float) -> None:
        """Un-decide an instant meter its own volumes contradict.

        A pulse counter whose runs fit inside its interval reads each run as one
        fraction of the rate, the same fraction run after run (a pump whose period
        locks to the node's never straddles two reports): its readings look like an
        instant meter's, and the kind was decided instant. Its rate x the run time
        then reads a third of what the pit pumped, cycle after cycle, below any
        healthy ratio, so no block ever calibrated and a clean house was judged a
        40-50 % diversion against the prior (5 of 200 clean weeks with the shipped
        nodes' reporting, twelfth round). The counted volume is right for either
        kind in the long run; where it sits inside the physical prior while the
        instant reading sits under it, block after block, the instant reading is
        the wrong one. A real tee or hose lowers both alike, and never makes this
        contradiction. The kind then stays unknown: water is called missing only
        where both readings say so."""
        if self._meter_kind is not False:
            return
        if instant < low <= counted <= HEALTHY_RATIO_HIGH:
            self._kind_contradictions += 1
        else:
            self._kind_contradictions = 0
        if self._kind_contradictions >= KIND_CONTRADICTIONS:
            self._meter_kind, self._kind_doubted = None, True

    def _averaging_meter(self) -> bool | None:
        """Whether this site's outlet meter reads the mean flow since its last report
        (a pulse counter) rather than the flow at the instant; None while unknown.

        A pulse counter reads the intervals a run started or stopped in as fractions
        of the run's rate: a fair share of its flowing readings are well under their
        block's highest. An instant meter's readings sit at the outlet's rate, give
        or take its noise. A meter does not change kind: decided once, from the first
        ``METER_KIND_READINGS`` flowing readings of clean blocks, the kind holds (a
        tee fitted later lowers an instant meter's readings for good, which must not
        read as a pulse counter's fractions)."""
        return self._meter_kind

    def _outlet_gap(self, c: PumpCycle, state: SiteState) -> bool:
        """Whether an outlet message is missing around this run (from the sample
        before it to the line's lag after it): two readings further apart than
        ``OUTLET_GAP_FACTOR`` intervals. A pulse counter's lost report takes its
        interval's litres with it, and an instant meter's the run's only reading;
        either way the run's outlet volume is not known, and reading it as low would
        call a lost message water gone elsewhere."""
        interval = state.outlet.interval_s
        gap = timedelta(seconds=OUTLET_GAP_FACTOR * interval)
        end = c.end_ts + self._line_lag(state) + self._outlet_wait
        pts = state.outlet.between(c.before_ts - gap, end)
        # The judge waits for the outlet up to the stop plus one wait, not the lag.
        waited = c.end_ts + self._outlet_wait
        if not pts or pts[0].ts > c.before_ts or waited - pts[-1].ts > gap:
            return True
        return any(b.ts - a.ts > gap for a, b in pairwise(pts))

    @staticmethod
    def _outlet_litres(state: SiteState, start: datetime, end: datetime) -> float:
        """Outlet volume over ``[start, end]``, each sample's flow held back to the
        previous sample (capped at 1.5 intervals: a dropped sample is not a long
        flow). With the sampling phase random this is unbiased however short the runs.
        Readings below ``IDLE_FLOW_LPM`` are the meter's idle noise, not water."""
        cap = state.outlet.interval_s * 1.5
        litres, prev = 0.0, None
        for o in state.outlet.between(start - timedelta(seconds=cap), end):
            if prev is not None and o.ts > start and o.flow_lpm >= IDLE_FLOW_LPM:
                held = min((o.ts - max(prev.ts, start)).total_seconds(), cap)
                litres += o.flow_lpm * max(held, 0.0) / 60.0
            prev = o
        return litres

    @staticmethod
    def _run_seconds(c: PumpCycle, state: SiteState, timed: bool) -> float:
        """How long the pump ran. Timed from the pit levels and the learned net rate
        when runs have shown it; otherwise the midpoint span for a run the pit saw
        and 0 for one it did not: with the pit's sampling phase random, that is an
        unbiased estimate (a run of D s is seen with chance D / interval), summed
        over a block."""
        if timed or c.seen:
            start, end = run_span(c, state)
            return (end - start).total_seconds()
        return 0.0

    @staticmethod
    def _run_var(b: _Block, state: SiteState) -> float:
        """Variance (s^2) of the block's run time: the timed runs' and the untimed ones'.

        A run the pit cannot time (no net rate learned) counts its midpoint span if a
        sample saw it and 0 if none did. For runs of D s under the pit interval I the
        span is I, seen with chance D / I: each run's estimate is I or 0, unbiased,
        with variance D x (I - D), the whole of the estimate's size when D is half
        of I. (Midpoint edges alone, 2 x I^2 / 12, hold only for runs longer than I.)
        D is the block's own mean; where the pump's period locks to the node's clock
        the seen share drifts slowly, which the persistence factor carries."""
        if not b.untimed_runs:
            return b.run_var
        interval = _pit_interval_s(state)
        mean = b.untimed_s / b.untimed_runs
        each = mean * (interval - mean) if mean < interval else interval**2 / 6.0
        return b.run_var + b.untimed_runs * each

    def _judged_run_var(self, b: _Block, state: SiteState) -> float:
        """The run time's variance where the judged outlet volume rests on it (the
        rate x the run time), 0 where it is a pulse counter's counted volume: its
        litres are counted, not timed. An instant meter's count is a sample of the
        runs and keeps the run time's error as before.

        A 75 % hose behind a 30 s pit node that cannot time its runs read 0.31 of
        the pit's volume against a normal 1.25, block after block, and never opened
        in the day it ran: each block carried the untimed runs' error, half the
        share, for a volume no run time entered (diversion-121, twelfth round)."""
        if self._averaging_meter() and b.balance.outlet_l <= b.outlet_l:
            return 0.0
        return self._run_var(b, state)

    @staticmethod
    def _run_variance(run_s: float, state: SiteState, timed: bool) -> float:
        """Variance (s^2) of one run's time. Timed from the pit, run = drawdown / (pump
        rate - inflow): an inflow off by dq makes it off by run x dq / net rate (in a
        storm, where the net rate is small, by much). Timed from sample midpoints,
        each edge is uniform over a pit interval: 2 x interval^2 / 12."""
        net = state.cycles.net_rate_cm_s()
        if timed and net:
            return (run_s * _inflow_error_cm_s(state) / net) ** 2
        pit_interval = _pit_interval_s(state)
        return pit_interval**2 / 6.0 if run_s > 0 else 0.0

    def _line_lag(self, state: SiteState) -> timedelta:
        """How late the outlet may flow after the pump stops: the line's fill time (its
        whole volume at the pump's flow). Only where a cycle's integral ends: the
        integral runs on without gaps, so a longer lag moves water between cycles,
        never out of the balance."""
        pump_lpm = max(MIN_PUMP_FLOW_LPM, pit_pump_lpm(state) or self._normal_flow() or 0.0)
        return timedelta(minutes=state.ctx.line_volume_l / pump_lpm)

    def _flowing_window(self) -> tuple[float, float] | None:
        """When after a start this site's outlet flows on every healthy run, s.

        The line's whole fill time is a bound that holds anywhere (a line drained
        back to the pump), but a good check valve keeps the riser full and only the
        part past the high point drains: the outlet answers sooner, and may flow on
        after the stop while that part drains, so the flowing window is the run
        shifted by the site's own lag. Its clean runs show it: outlet samples at an
        offset from the run's start read flowing or dry. The window is the span
        of the inner 60 % of the flowing offsets with no dry sample seen in it (run
        starts are estimated to a second or two, and each run's lag varies with how
        much of the line drained); it counts once ``WINDOW_MIN_WET`` flowing samples
        are known and half of them fall in it. A dry sample inside it
        is as sure a sign of water gone elsewhere as one inside a run past the
        line's fill time."""
        if len(self._calib_wet) < WINDOW_MIN_WET:
            return None
        wet = sorted(self._calib_wet)
        n = len(wet)
        mid = wet[n // 2]
        # The inner 60 % of the flowing offsets: the edges of the flowing span move
        # with each run's lag (how much of the line drained), its middle does not.
        lo, hi = wet[int(0.2 * n)], wet[int(0.8 * n)]
        lo = max([lo, *(d for d in self._calib_dry if d < mid)])
        hi = min([hi, *(d for d in self._calib_dry if d > mid)])
        if sum(1 for w in wet if lo <= w <= hi) < WINDOW_MIN_WET // 2 or hi <= lo:
            return None
        return lo, hi

    def _normal_flow(self) -> float | None:
        return _median(list(self._calib_flow)) if self._calib_flow else None

    def _normal(self, i: int | None = None) -> tuple[float, float, bool]:
        """The site's normal ratio, its unit scatter, and whether it is calibrated.

        The unit scatter is the relative scatter of a block's outlet volume per
        outlet sample it rests on (a block on ``n`` samples scatters by
        ``unit / sqrt(n)``), learned from the clean blocks: each one's squared
        deviation from the normal, less what its own pit side and run times explain, times its
        samples (the median of a chi-square with one degree of freedom is 0.455).
        Before ``2 x CALIBRATION_MIN_BLOCKS`` blocks it is never taken below the
        conservative prior ``UNIT_SCATTER_PRIOR``, and never below ``UNIT_SCATTER_FLOOR``.
        """
        if len(self._calib) < CALIBRATION_MIN_BLOCKS:
            return PRIOR_RATIO, UNIT_SCATTER_PRIOR, False
        i = self._ratio_index() if i is None else i
        normal = weighted_median([r[i] for r in self._calib], list(self._calib_weight))
        unit2 = [
            max((ratio[i] / normal - 1.0) ** 2 - pit_rel, 0.0) * info
            for ratio, pit_rel, info in self._calib_info
        ]
        unit = math.sqrt(_median(unit2) / CHI2_1_MEDIAN) if unit2 else UNIT_SCATTER_PRIOR
        few = len(self._calib) < 2 * CALIBRATION_MIN_BLOCKS
        return normal, max(unit, UNIT_SCATTER_PRIOR if few else UNIT_SCATTER_FLOOR), True

    def _persistence(self, normal: float, i: int | None = None) -> float:
        """How much more a run of blocks scatters than independent blocks would: the
        long-run variance factor (1 + rho) / (1 - rho) of the clean blocks' deviations
        from normal, rho their lag-one autocorrelation (clipped to 0..``RHO_MAX``).

        A block's error is not independent of the next one's: the inflow the pit's
        balance and run times rest on changes with the weather over hours, and a
        sparse outlet's samples fall at a phase of the runs that drifts slowly (the
        pump's period locks to the node's). A sequential test that sums blocks as
        independent reads such a slow drift as evidence; clean 30 s houses show
        rho ~ 0.7, a factor of ~5."""
        i = self._ratio_index() if i is None else i
        dev = [ratio[i] / normal - 1.0 for ratio, _pit, _info in self._calib_info]
        if len(dev) < 2 * CALIBRATION_MIN_BLOCKS:
            return (1 + RHO_PRIOR) / (1 - RHO_PRIOR)
        power = sum(d * d for d in dev)
        lagged = sum(a * b for a, b in pairwise(dev))
        rho = min(max(lagged / power, 0.0), RHO_MAX) if power > 0 else 0.0
        return (1 + rho) / (1 - rho)

    @staticmethod
    def _block_sigma(b: _Block, unit: float, run_var: float | None = None) -> float:
        """One block's share uncertainty: the outlet side by the samples it rests on,
        the pit side by its own inflow and level-noise variance, and a floor (the
        calibrated normal is itself known only to a few %). ``run_var`` is the
        block's run-time variance (``_run_var``; the timed runs' alone if None)."""
        pit_rel = b.pit_var / b.pit_l**2 if b.pit_l > 0 else 1.0
        # A rate volume (flow x run time) carries the run time's error too. A dry
        # block's outlet volume is zero to the meter's idle noise: its samples fell
        # surely inside runs (after the line's fill time), and none of them flowed;
        # only its pit side is uncertain.
        runs = b.run_var if run_var is None else run_var
        run_rel = runs / b.run_s**2 if b.wet_flows and b.run_s > 0 else 0.0
        outlet = unit**2 / max(b.info, 1.0) + run_rel if b.wet_flows else 0.0
        return math.sqrt(outlet + pit_rel + BLOCK_SIGMA_FLOOR**2)

    def _cusum(self, share: float, sigma: float) -> None:
        """Sequential test (CUSUM of log-likelihood ratios) of share 0 against
        ``MIN_DIVERSION_SHARE``: a block with share ``s`` and uncertainty ``sigma``
        adds ``d / sigma^2 x (s - d / 2)``, so a block resting on one or two outlet
        samples, or on a storm's uncertain inflow, counts for little and a dense
        block for much: a dense block of outlet samples inside runs all reading dry
        can open the finding alone (three such samples at 5 s are two cycles)."""
        d = MIN_DIVERSION_SHARE
        llr = d / sigma**2 * (share - d / 2)
        self._up = max(0.0, self._up + min(llr, SPRT_HEIGHT))
        self._down = max(0.0, self._down + min(-llr, SPRT_HEIGHT)) if self.active else 0.0

    def _share(self, b: _Block) -> tuple[float, int, float, float, bool]:
        """The block's diverted share against the site's normal, with the reading of
        the outlet volume it rests on (``_ratio_index``) and that reading's normal,
        unit scatter and calibration.

        While the meter's kind is unknown the block is read both ways, each against
        the normal learned the same way, and the smaller share is taken: water is
        called missing only when both readings say so (an instant meter's counted
        volume swings with how many runs its readings caught, a pulse counter's
        rate-based one with how many intervals a run straddled)."""
        kind = self._averaging_meter()
        best: tuple[float, int, float, float, bool] | None = None
        for i in (0, 1) if kind is None else (self._ratio_index(),):
            normal, unit, calibrated = self._normal(i)
            balance = Balance(b.pit_l, b.both_l if i else b.instant_l)
            share = max(-1.5, min(1.0, balance.share_diverted(normal)))
            if best is None or share < best[0]:
                best, b.balance = (share, i, normal, unit, calibrated), balance
        assert best is not None
        return best

    def _judge(self, b: _Block, state: SiteState) -> Verdict:
        assert b.end is not None
        share, i, normal, unit, calibrated = self._share(b)
        share = self._refill_explained(b, share, state)
        sigma = self._block_sigma(b, unit, self._judged_run_var(b, state))
        persistence = self._persistence(normal, i) if calibrated else 1.0
        self._cusum(share, sigma * math.sqrt(persistence))
        result = BlockResult(b.end, b.cycles, b.balance.pit_l, b.balance.outlet_l, share)
        self._recent.append(result)
        if share >= DIVERTED_LOOKING:
            self._last_diverted = b.end
        if share >= DIVERTED_LOOKING or self.active:
            self._misses.taint()
        if not self.active:
            self._calibrate(b, share, sigma, calibrated, state)
        if not self.active and self._up >= SPRT_HEIGHT:
            self.active = True
            self._down = 0.0
            self._episode = Balance(0.0, 0.0)
        elif self.active and self._down >= SPRT_HEIGHT:
            quiet = self._last_diverted is None or b.end - self._last_diverted >= (
                SANITARY_CLEAR_AFTER
            )
            if quiet:
                self.active = False
                self._up = self._down = 0.0
        if not self.active:
            return INACTIVE
        self._episode = self._episode + b.balance
        if state.ctx.waived(RULE_ID, b.end):
            return INACTIVE  # lawful for the time the written determination states
        return self._verdict(result, normal, unit, calibrated, state)

    def _calibrate(
        self, b: _Block, share: float, sigma: float, calibrated: bool, state: SiteState
    ) -> None:
        """Learn from a clean block: the normal ratio, its scatter per sample, the
        outlet's rate and the flowing window.

        Only blocks inside the physical prior, not on the diverted side of the
        normal (a ratio above normal is no diversion), not bounded, while the test
        is far from opening; the ratio only from blocks whose inflow term is known
        well (``CALIB_MAX_PIT_REL``: a storm's inflow term, uncertain over the whole
        settling span, would teach the site a ratio its dry weather never shows)."""
        ratio = b.balance.ratio
        # Runs timed only to a pit interval widen what a healthy ratio can be.
        timed = state.cycles.net_rate_cm_s() is not None
        low = HEALTHY_RATIO_LOW if timed else HEALTHY_RATIO_LOW_UNTIMED
        plausible = low <= ratio <= HEALTHY_RATIO_HIGH
        # A block looking diverted by more than CALIB_MAX_SHARE never calibrates,
        # however uncertain it is on its own (three sparse blocks of a real tee would
        # otherwise teach the site the tee's ratio).
        outlier = calibrated and share > CALIB_MAX_SHARE
        pit_rel = b.pit_var / b.pit_l**2 if b.pit_l > 0 else 1.0
        inflow_rel = b.inflow_var / b.pit_l**2 if b.pit_l > 0 else 1.0
        trend_rel = b.trend_var / b.pit_l**2 if b.pit_l > 0 else 1.0
        inflow_known = max(inflow_rel, trend_rel) <= CALIB_MAX_PIT_REL**2
        if not b.bounded and inflow_known and b.pit_l > 0:
            self._doubt_meter_kind(b.instant_l / b.pit_l, b.both_l / b.pit_l, low)
        if not plausible or outlier or b.bounded or self._up >= SPRT_HEIGHT / 2:
            return
        # The outlet's own behaviour (when it flows, at what rate) does not rest on
        # the pit's inflow term; the ratio does.
        # Both readings of the ratio are learned: a ratio read one way must never
        # judge blocks read the other (the meter's kind may become known later).
        if inflow_known:
            ratios = (b.instant_l / b.pit_l, b.both_l / b.pit_l)
            self._calib.append(ratios)
            self._calib_weight.append(1.0 / sigma**2)
            run_var = self._judged_run_var(b, state)
            run_rel = run_var / b.run_s**2 if b.wet_flows and b.run_s > 0 else 0.0
            self._calib_info.append((ratios, pit_rel + run_rel, b.info))
        # The meter's kind, only from clean blocks: a diversion's readings say what
        # the diversion does to the outlet, not how the meter reads.
        self._learn_meter(b.wet_flows)
        self._calib_wet.extend(b.wet_offsets)
        self._calib_dry.extend(b.dry_offsets)
        if b.wet_flows:
            self._calib_flow.append(_median(b.wet_flows))
            rate = _rate_ratio(b) if b.timed else None
            if rate is not None:
                self._calib_rate.append(rate)

    def _refill_explained(self, b: _Block, share: float, state: SiteState) -> float:
        """The share, unless the deficit is a line refill rather than a diversion.

        Water that leaked back through the check valve returns to the pit; the next
        run first refills the line, so the outlet sees less volume, but once the
        line is full it flows at the pump's whole rate. A tee or hose takes a share
        of that rate: the outlet's flow *relative to the pump's flow as the pit sees
        it in the same runs* falls by the diverted share (the pump itself speeds up
        against the hose's lower head, so the outlet's flow alone barely changes).
        So a deficit no larger than the line's volume, with the outlet/pump rate
        ratio at the site's normal, is a refill (short cycling's case). Where the
        pit cannot time the runs (shorter than its interval, no net rate learned)
        the pump's flow is unknown and the outlet's own flow is the only rate.
        """
        if share <= 0 or not b.wet_flows:
            return share
        rate = _rate_ratio(b) if b.timed else None
        if rate is not None and len(self._calib_rate) >= CALIBRATION_MIN_BLOCKS:
            rate_share = 1.0 - rate / _median(list(self._calib_rate))
        elif not b.timed and len(self._calib_flow) >= CALIBRATION_MIN_BLOCKS:
            rate_share = 1.0 - _median(b.wet_flows) / _median(list(self._calib_flow))
        else:
            return share
        refill_share = state.ctx.line_volume_l * b.cycles / max(b.balance.pit_l, 1e-9)
        if rate_share < RATE_NORMAL_SHARE and share <= refill_share + RATE_NORMAL_SHARE:
            return max(rate_share, 0.0)
        return share

    def _verdict(
        self,
        last: BlockResult,
        normal: float,
        scatter: float,
        calibrated: bool,
        state: SiteState,
    ) -> Verdict:
        pack = state.ctx.pack
        enforced = pack is not None and pack.rule(RULE_ID).enforced
        ep = self._episode
        episode_share = ep.share_diverted(normal) if ep.pit_l > 0 else last.share
        return Verdict(
            True,
            Severity.CRITICAL if enforced else Severity.WARNING,
            "violation" if enforced else "advice",
            {
                "diverted_share": round(max(0.0, min(1.0, episode_share)), 2),
                "pumped_l": r1(ep.pit_l),
                "to_outlet_l": r1(ep.outlet_l),
                "elsewhere_l": r1(max(0.0, ep.pit_l - ep.outlet_l / normal)),
                "normal_outlet_ratio": round(normal, 2),
                "normal_ratio_calibrated": calibrated,
                "calibration_blocks": len(self._calib),
                "unit_scatter": round(scatter, 2),
                "pit_volume_l": r1(last.pit_l),
                "outlet_volume_l": r1(last.outlet_l),
                "outlet_share": round(last.outlet_l / last.pit_l, 2) if last.pit_l else None,
                "cycle_end": iso(last.end),
                "recent_balances": [r.as_evidence() for r in self._recent],
                "cycles_without_flowing_reading": self._misses.streak,
                "pressure_tap": state.ctx.pressure_tap,
            },
        )
