"""Pump failure: the pump does not move water when it should.

Three signatures, each from physics every installation obeys:

* **runs, pit does not drain** (a stalled run, ``physics.stalled_run``): the pump
  runs (pump_on) for minutes while the level's fall plus the inflow stays near zero
  and the outlet does not flow. In weather where the line may hold ice the same
  signature is a frozen line (``frozen_line``), not a pump failure.
* **never starts**: the level stays above the on mark (the higher of the registered
  mark and the level the pump was seen to start at) by a margin, for minutes, with
  the pump off: a failed float or switch.
* **commanded, no current**: the pump is switched on but its motor draws no current
  (only on sites that report current and whose pump was seen drawing it).

High water is a separate, homeowner-critical finding; both may be open together.
"""

from __future__ import annotations

from datetime import datetime
from typing import ClassVar

from gateway.domain import Severity
from gateway.rules.detectors.base import (
    INACTIVE,
    Event,
    PitSample,
    RuleInfo,
    SiteState,
    Stream,
    Verdict,
    iso,
    r1,
)
from gateway.rules.physics import (
    blocked_line_cause,
    stall_in_frost,
    stall_onset,
    stalled_run,
)
from gateway.rules.thresholds import (
    NO_CURRENT_A,
    NO_CURRENT_FOR,
    NO_START_FOR,
    NO_START_MARGIN_CM,
    PUMP_FAILURE_CLEAR_AFTER,
    RUNNING_CURRENT_A,
)


class PumpFailureDetector:
    """The pump runs without draining the pit, never starts, or draws no current."""

    rule_id: ClassVar[str] = "pump_failure"
    info: ClassVar[RuleInfo] = RuleInfo(
        "pump_failure",
        "The sump pump is not moving water",
        "The pump is not emptying the pit: it runs without lowering the water, does not "
        "start when the water is high, or gets no power. Check the breaker and GFCI "
        "outlet, that the float moves freely, and listen to the pump; if it hums or "
        "stays silent, replace it or call a plumber before the pit overflows.",
    )
    streams: ClassVar[frozenset[Stream]] = frozenset({Stream.PIT})

    def __init__(self, state: SiteState) -> None:
        self.active = False
        self._high_since: datetime | None = None
        self._no_current_since: datetime | None = None
        self._seen_current = False
        self._last_bad: datetime | None = None
        self._cause = ""
        self._since: datetime | None = None
        self._restored = False
        self._healthy_at: datetime | None = None
        #: The current run's start and whether its line could freeze at its stall.
        self._onset: tuple[datetime, bool] | None = None

    def restore(self) -> None:
        """Continue a finding restored from the store (held while it is re-judged)."""
        self.active = True
        self._restored = True

    def feed(self, event: Event, state: SiteState) -> Verdict | None:
        """Judge one pit sample."""
        if not isinstance(event, PitSample):
            return None
        s = event
        if self._restored:
            # A restored finding gets the usual time to show its signature again.
            self._restored, self._last_bad = False, s.ts
        cause = self._signature(s, state)
        if cause:
            self._last_bad = s.ts
            if not self.active:
                self.active, self._since, self._cause = True, s.ts, cause
        elif self._primary_draining(s, state):
            self._healthy_at = s.ts
        # Clears only once the primary pump itself has drained the pit again: a
        # backup pump lowering the level does not mend the primary (no flapping).
        healthy_again = self._healthy_at is not None and (
            self._last_bad is None or self._healthy_at > self._last_bad
        )
        quiet = self._last_bad is None or s.ts - self._last_bad >= PUMP_FAILURE_CLEAR_AFTER
        if self.active and not cause and healthy_again and quiet:
            self.active, self._since = False, None
            return INACTIVE
        if not self.active:
            return None
        pit = state.ctx.site.pit
        return Verdict(
            True,
            Severity.CRITICAL,
            "",
            {
                "cause": self._cause,
                "level_cm": r1(s.level_cm),
                "pump_on_cm": pit.pump_on_cm,
                "pump_off_cm": pit.pump_off_cm,
                "pump_on": s.pump_on,
                "pump_current_a": s.current_a,
                "failing_since": iso(self._since),
            },
        )

    def _signature(self, s: PitSample, state: SiteState) -> str:
        """Which failure signature this sample shows ("" for none)."""
        if s.current_a is not None and s.current_a >= RUNNING_CURRENT_A:
            self._seen_current = True
        no_current = (
            s.pump_on and s.current_a is not None and s.current_a < NO_CURRENT_A
        ) and self._seen_current
        self._no_current_since = (self._no_current_since or s.ts) if no_current else None
        if self._no_current_since is not None and s.ts - self._no_current_since >= NO_CURRENT_FOR:
            return "pump switched on but draws no current"
        motor_off = s.current_a is None or s.current_a < NO_CURRENT_A
        high = not s.pump_on and motor_off and s.level_cm >= self._no_start_cm(state)
        self._high_since = (self._high_since or s.ts) if high else None
        if self._high_since is not None and s.ts - self._high_since >= NO_START_FOR:
            return "water above the on mark and the pump does not start"
        stall = stalled_run(s, state)
        if stall is None:
            return ""
        self._onset = stall_onset(state, s.ts, self._onset)
        frost = stall_in_frost(self._onset, state, s.ts)
        if not frost or blocked_line_cause(state, s) is not None:
            # A stall that began where the line could not freeze is the pump (ice
            # forming later in the dead line does not explain it); in frost, a pump
            # that draws no current or makes no head is the pump, not ice
            # (``frozen_line``, which judges the same onset).
            return "pump runs but the pit does not drain"
        return ""

    @staticmethod
    def _primary_draining(s: PitSample, state: SiteState) -> bool:
        """The primary pump runs and the level has clearly fallen since its start."""
        start = state.cycles.run_start_level
        noise = 3.0 * state.cycles.level_noise_cm() + 1.0
        return s.pump_on and start is not None and s.level_cm < start - max(2.0, noise)

    @staticmethod
    def _no_start_cm(state: SiteState) -> float:
        pit = state.ctx.site.pit
        on = max(pit.pump_on_cm, state.cycles.learned_on_cm() or 0.0)
        band = pit.pump_on_cm - pit.pump_off_cm
        margin = max(NO_START_MARGIN_CM, 0.25 * band, 4.0 * state.cycles.level_noise_cm())
        return on + margin
