"""Sanitary-sewer discharge: the pit says water was pumped, the outlet did not see it.

Per pump cycle: pit volume = level drop x pit area + inflow during the run;
outlet volume = mean outlet flow while the pump certainly ran x run time. A
cycle is *unaccounted* when the outlet saw under 30 % of it with the line not
pressurised (a blocked line is the frozen-line detector's case). Consecutive
unaccounted cycles open the finding; consecutive accounted ones clear it. Inside
an active waiver for ``sanitary_discharge`` the discharge is lawful: no finding.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from gateway.domain import Severity
from gateway.rules.detectors.base import INACTIVE, PumpCycle, SiteState, Verdict, iso, r1
from gateway.rules.thresholds import (
    ACCOUNTED_RATIO,
    FLOW_ABSENT_LPM,
    FLOW_PRESENT_LPM,
    MAX_PUMP_LPM,
    MIN_CYCLE_VOLUME_L,
    MIN_LINE_FILL,
    MIN_PUMP_FLOW_LPM,
    P_CATCH_MAX,
    P_CATCH_SURE,
    PRESSURE_BLOCKED_KPA,
    SANITARY_CYCLES_TO_CLEAR,
    SANITARY_CYCLES_TO_OPEN,
    SANITARY_EVIDENCE_TO_OPEN,
    SURE_MARGIN_S,
    UNACCOUNTED_RATIO,
)

RULE_ID = "sanitary_discharge"
#: Outlet samples may arrive a little after the pit's end-of-cycle sample.
OUTLET_LAG = timedelta(seconds=5)
#: Judge a cycle with what we have once the pit has moved on this far.
GIVE_UP_AFTER = timedelta(minutes=3)


class CycleClass(StrEnum):
    ACCOUNTED = "accounted"
    UNACCOUNTED = "unaccounted"
    INCONCLUSIVE = "inconclusive"


@dataclass(frozen=True, slots=True)
class CycleJudgement:
    """How one pump cycle's water balance came out."""

    cycle: PumpCycle
    verdict: CycleClass
    pit_l: float
    outlet_l: float | None
    outlet_samples: int
    reason: str
    #: For an uncertain cycle: -log10 P(all its outlet samples dry | healthy line).
    expected_hits: float = 0.0

    @property
    def ratio(self) -> float | None:
        """Outlet volume / pit volume."""
        if self.outlet_l is None or self.pit_l <= 0:
            return None
        return self.outlet_l / self.pit_l


def judge_cycle(cycle: PumpCycle, state: SiteState) -> CycleJudgement:
    """Classify one finished cycle from the pit's and the outlet's point of view."""
    duration_s = cycle.est_duration.total_seconds()
    inflow_cm = state.cycles.fill_rate_cm_s() * duration_s
    pit_l = state.ctx.litres(cycle.drop_cm + inflow_cm)
    window = state.outlet.between(cycle.before_ts, cycle.end_ts + OUTLET_LAG)
    # Water reaches the outlet only once the pump has refilled the line; a sample
    # taken before that shows no flow even on a healthy line. The fill is timed at
    # the slower of the cycle's own flow and the flow learned at the outlet: a fill
    # taken too short would call a healthy, still-filling line dry.
    pump_lpm = pit_l / max(duration_s, 1.0) * 60.0
    typical = state.outlet.typical_flow_lpm()
    if typical is not None:
        pump_lpm = min(pump_lpm, typical)
    fill = timedelta(minutes=state.ctx.line_volume_l / max(pump_lpm, MIN_PUMP_FLOW_LPM))
    start, stop = _sure_run(cycle, state)
    margin = timedelta(seconds=SURE_MARGIN_S)
    certain = (
        state.outlet.between(start + max(MIN_LINE_FILL, fill) + margin, stop - margin)
        if cycle.seen
        else []
    )

    def result(kind: CycleClass, outlet_l: float | None, reason: str) -> CycleJudgement:
        return CycleJudgement(cycle, kind, pit_l, outlet_l, len(certain), reason)

    if pit_l < MIN_CYCLE_VOLUME_L:
        return result(CycleClass.INCONCLUSIVE, None, "pump moved too little water to judge")
    flow_seen = any(s.flow_lpm >= FLOW_PRESENT_LPM for s in window)
    if not certain:
        if flow_seen:
            return result(CycleClass.ACCOUNTED, None, "outlet flowed during the run")
        if not window or any(s.pressure_kpa >= PRESSURE_BLOCKED_KPA for s in window):
            return result(CycleClass.INCONCLUSIVE, None, "outlet silent or line blocked")
        # Sparse sampling: no sample surely inside the run. How many outlet samples
        # should have caught it flowing? Pooled over cycles by the detector.
        learned = state.outlet.typical_flow_lpm()
        run = timedelta(seconds=pit_l / learned * 60.0 if learned else duration_s)
        chances = [_p_catch(cycle, run, fill + margin, s.ts) for s in window]
        if max(chances) >= P_CATCH_SURE:
            # Pump start/stop reported on change pin the run down: a dry sample
            # inside it is as good as a sure one.
            return result(CycleClass.UNACCOUNTED, 0.0, "dry outlet sample inside the run")
        evidence = sum(-math.log10(1.0 - min(p, P_CATCH_MAX)) for p in chances)
        j = result(CycleClass.INCONCLUSIVE, None, "no outlet sample while the pump ran")
        return CycleJudgement(cycle, j.verdict, pit_l, None, 0, j.reason, evidence)
    mean_flow = sum(s.flow_lpm for s in certain) / len(certain)
    outlet_l = mean_flow * duration_s / 60.0
    ratio = outlet_l / pit_l
    if mean_flow < FLOW_ABSENT_LPM and any(s.pressure_kpa >= PRESSURE_BLOCKED_KPA for s in certain):
        return result(CycleClass.INCONCLUSIVE, outlet_l, "line pressurised without flow (blocked)")
    if ratio < UNACCOUNTED_RATIO:
        return result(CycleClass.UNACCOUNTED, outlet_l, "outlet did not see the pumped water")
    if ratio >= ACCOUNTED_RATIO or flow_seen:
        return result(CycleClass.ACCOUNTED, outlet_l, "outlet accounts for the water")
    return result(CycleClass.INCONCLUSIVE, outlet_l, "partial outlet volume")


def _sure_run(cycle: PumpCycle, state: SiteState) -> tuple[datetime, datetime]:
    """Latest start and earliest stop of the run that the pit's levels allow.

    The pump starts at the on mark and stops at the off mark, and no pump drains
    the pit faster than 1.5 x the highest flow seen at the outlet (a hose to a
    drain faces less head than the line) or ``MAX_PUMP_LPM`` before any is seen.
    So the level at the first on-sample bounds how long ago the run started, and
    the level at the last on-sample how long it still ran. Erring late on the start
    and early on the stop keeps every outlet sample in between inside the real run.
    """
    pit = state.ctx.site.pit
    peak = state.outlet.peak_flow_lpm()
    # A pump discharging down a hose faces less head than up the line: up to ~1.5x.
    max_lpm = min(MAX_PUMP_LPM, 1.5 * peak) if peak else MAX_PUMP_LPM
    cm_per_s = max_lpm / 60.0 / (state.ctx.pit_area_cm2 / 1000.0)
    start, stop = cycle.first_on_ts, cycle.last_on_ts
    if cycle.first_on_level_cm is not None:
        back = max(0.0, pit.pump_on_cm - cycle.first_on_level_cm) / cm_per_s
        start = max(cycle.before_ts, start - timedelta(seconds=back))
    if cycle.last_on_level_cm is not None:
        ahead = max(0.0, cycle.last_on_level_cm - pit.pump_off_cm) / cm_per_s
        stop = min(cycle.end_ts, stop + timedelta(seconds=ahead))
    return start, stop


def _p_catch(cycle: PumpCycle, run: timedelta, fill: timedelta, t: datetime) -> float:
    """Chance that an outlet sample at ``t`` falls while water leaves the outlet.

    The run (length ``run``) started somewhere the pit samples allow: after the
    last sample with the pump off, no later than the first with it on, and ending
    between the last on-sample and the first off-sample. Taking the start as
    uniform over that range, water is at the outlet during [start + fill, start +
    run]; the sample catches it if start lies in [t - run, t - fill].
    """
    if cycle.seen:
        lo = max(cycle.before_ts, cycle.last_on_ts - run)
        hi = min(cycle.first_on_ts, cycle.end_ts - run)
    else:
        lo, hi = cycle.before_ts, cycle.end_ts - run
    if hi < lo:  # the run estimate does not fit the samples: say nothing
        return 0.0
    span = (hi - lo).total_seconds()
    a, b = max(lo, t - run), min(hi, t - fill)
    if span < 1.0:
        return 1.0 if a <= b else 0.0
    return max(0.0, (b - a).total_seconds()) / span


class SanitaryDischargeDetector:
    """Stateful per-site detector of pumped water that never reaches the outlet."""

    rule_id = RULE_ID

    def __init__(self) -> None:
        self.active = False
        self._pending: deque[PumpCycle] = deque()
        self._recent: deque[CycleJudgement] = deque(maxlen=6)
        self._streak_unaccounted = 0
        self._streak_accounted = 0
        self._evidence = 0.0

    def restore_active(self) -> None:
        """Continue a finding restored from the store."""
        self.active = True

    def add_cycle(self, cycle: PumpCycle) -> None:
        """Queue a finished cycle until the outlet's samples for it have arrived."""
        self._pending.append(cycle)

    def poll(self, now: datetime, state: SiteState) -> Verdict | None:
        """Judge the queued cycles whose outlet evidence is complete."""
        verdict: Verdict | None = None
        outlet_ts = state.outlet.last.ts if state.outlet.last else None
        while self._pending:
            cycle = self._pending[0]
            ready = outlet_ts is not None and outlet_ts >= cycle.end_ts + OUTLET_LAG
            if not ready and now - cycle.end_ts < GIVE_UP_AFTER:
                break
            self._pending.popleft()
            verdict = self._judge(judge_cycle(cycle, state), state) or verdict
        return verdict

    def _judge(self, j: CycleJudgement, state: SiteState) -> Verdict | None:
        if j.verdict is CycleClass.INCONCLUSIVE and j.expected_hits <= 0:
            return None
        if j.verdict is CycleClass.ACCOUNTED:
            self._streak_accounted += 1
            self._streak_unaccounted = 0
            self._evidence = 0.0
            if self._streak_accounted >= SANITARY_CYCLES_TO_CLEAR:
                self.active = False
        else:
            self._recent.append(j)
            self._streak_accounted = 0
            if j.verdict is CycleClass.UNACCOUNTED:
                self._streak_unaccounted += 1
                self._evidence += 1.0
            else:
                # Each dry outlet sample that had chance p of catching a healthy
                # line flowing adds -log10(1 - p) (p capped: sensors glitch).
                self._evidence += j.expected_hits
            if (
                self._streak_unaccounted >= SANITARY_CYCLES_TO_OPEN
                or self._evidence >= SANITARY_EVIDENCE_TO_OPEN
            ):
                self.active = True
        if not self.active:
            return INACTIVE
        site = state.ctx.site
        waiver = next(
            (w for w in site.waivers if w.rule == RULE_ID and w.covers_at(j.cycle.end_ts, site.tz)),
            None,
        )
        if waiver is not None:
            return INACTIVE  # lawful for the time the written determination states
        pack = state.ctx.pack
        enforced = pack is not None and pack.rule(RULE_ID).enforced
        unaccounted = [c for c in self._recent if c.verdict is CycleClass.UNACCOUNTED]
        return Verdict(
            True,
            Severity.CRITICAL if enforced else Severity.WARNING,
            "violation" if enforced else "advice",
            {
                "cycles_unaccounted": self._streak_unaccounted,
                "evidence_log10": round(self._evidence, 2),
                "pit_volume_l": r1(j.pit_l),
                "outlet_volume_l": None if j.outlet_l is None else r1(j.outlet_l),
                "outlet_share": None if j.ratio is None else round(j.ratio, 2),
                "outlet_samples_during_run": j.outlet_samples,
                "cycle_end": iso(j.cycle.end_ts),
                "pumped_unaccounted_l": r1(sum(c.pit_l for c in unaccounted)),
                "reason": j.reason,
            },
        )
