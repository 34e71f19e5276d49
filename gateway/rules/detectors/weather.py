"""Cold-weather detectors: frozen discharge line and freezing-walkway (icing) risk."""

from __future__ import annotations

from datetime import datetime
from typing import ClassVar

from gateway.domain import Severity
from gateway.registry.models import DischargeDestination
from gateway.rules.detectors.base import (
    INACTIVE,
    AirSample,
    CycleEnd,
    Event,
    OutletSample,
    PitSample,
    RuleInfo,
    SiteState,
    Stream,
    Verdict,
    iso,
    r1,
)
from gateway.rules.detectors.lazy import LazyDeque
from gateway.rules.physics import (
    blocked_line_cause,
    stall_in_frost,
    stall_onset,
    stalled_run,
)
from gateway.rules.thresholds import (
    AIR_MAX_AGE,
    CYCLE_END_TOLERANCE_CM,
    DEFAULT_ICING_DISTANCE_FT,
    FLOW_PRESENT_LPM,
    FROZEN_FLOW_SAMPLES_TO_CLEAR,
    ICING_MIN_VOLUME_L,
    ICING_VIOLATION_AFTER,
    ICING_WINDOW,
    THAW_FOR,
    THAW_PIPE_TEMP_C,
)


class FrozenLineDetector:
    """The pump runs but the pit does not drain, in weather that can freeze the line.

    Pressure alone cannot say it: a tap on the riser reads the static lift whenever
    the pump runs, even when every litre goes down a hose to a floor drain. Only the
    pit can: a blocked line cannot empty it (the level falls at most by the line's
    volume while the pump dead-heads), a diversion empties it fully. So the finding
    needs a stalled run (``physics.stalled_run``) AND cold (pipe wall near 0 C, or
    the air freezing for hours). A line blocked in warm weather is not ice: that
    stalled run is reported by ``pump_failure`` (the pump moves no water).
    It clears when the pit drains again, water flows at the outlet, or the pipe and
    air have stayed above +1 C for ``THAW_FOR``.
    """

    rule_id: ClassVar[str] = "frozen_line"
    info: ClassVar[RuleInfo] = RuleInfo(
        "frozen_line",
        "The sump discharge line looks frozen",
        "The pump is pushing against a blocked line. Open the winter relief outlet or "
        "remove the outdoor extension, thaw the line (warm water, heat tape), and watch "
        "the pit level until water flows again.",
    )
    streams: ClassVar[frozenset[Stream]] = frozenset({Stream.PIT, Stream.OUTLET})

    def __init__(self, state: SiteState) -> None:
        self.active = False
        self._flowing = 0
        self._warm_since: datetime | None = None
        self._since: datetime | None = None
        self._stall_level: float | None = None
        #: The current run's start and whether its line could freeze at its stall.
        self._onset: tuple[datetime, bool] | None = None

    def restore(self) -> None:
        """Continue a finding restored from the store."""
        self.active = True

    def feed(self, event: Event, state: SiteState) -> Verdict | None:
        """Judge a pit sample (the stall) or an outlet sample (flow again, thaw)."""
        if isinstance(event, OutletSample):
            return self._on_outlet(event, state)
        if not isinstance(event, PitSample):
            return None
        s = event
        stall = stalled_run(s, state)
        if stall is not None:
            # A stall is ice only if its line could freeze when it began, and stays
            # so for its run (``physics.stall_onset``; ``pump_failure`` reads the same).
            self._onset = stall_onset(state, s.ts, self._onset)
        frost = stall is not None and stall_in_frost(self._onset, state, s.ts)
        if stall is not None and frost and blocked_line_cause(state, s) is None:
            if not self.active:
                self.active, self._since = True, s.ts
            self._stall_level = stall.start_level_cm
        elif self.active and self._drained(s, state):
            return self._clear()
        return self._verdict(s.ts, state) if self.active else None

    def _on_outlet(self, o: OutletSample, state: SiteState) -> Verdict | None:
        self._flowing = self._flowing + 1 if o.flow_lpm >= FLOW_PRESENT_LPM else 0
        warm = o.pipe_temp_c > THAW_PIPE_TEMP_C and not state.freeze.freezing
        self._warm_since = (self._warm_since or o.ts) if warm else None
        if not self.active:
            return None
        thawed = self._warm_since is not None and o.ts - self._warm_since >= THAW_FOR
        if self._flowing >= FROZEN_FLOW_SAMPLES_TO_CLEAR or thawed:
            return self._clear()
        return self._verdict(o.ts, state)

    @staticmethod
    def _drained(s: PitSample, state: SiteState) -> bool:
        """The pit emptied to the off mark with the pump working: the line is open."""
        pit = state.ctx.site.pit
        return not s.pump_on and s.level_cm <= pit.pump_off_cm + CYCLE_END_TOLERANCE_CM

    def _clear(self) -> Verdict:
        self.active, self._since, self._stall_level = False, None, None
        return INACTIVE

    def _verdict(self, now: datetime, state: SiteState) -> Verdict:
        pit, out = state.pit, state.outlet.last
        return Verdict(
            True,
            Severity.CRITICAL,
            "",
            {
                "flow_lpm": None if out is None else r1(out.flow_lpm),
                "pressure_kpa": None if out is None else r1(out.pressure_kpa),
                "running_pressure_kpa": state.outlet.running_kpa(),
                "pipe_temp_c": None if out is None else r1(out.pipe_temp_c),
                "air_temp_c": None if state.air is None else r1(state.air.air_temp_c),
                "pump_on": pit is not None and pit.pump_on,
                "pit_level_cm": None if pit is None else r1(pit.level_cm),
                "level_at_run_start_cm": None
                if self._stall_level is None
                else r1(self._stall_level),
                "pump_current_a": None if pit is None else pit.current_a,
                "blocked_since": iso(self._since),
            },
        )


class IcingRiskDetector:
    """Discharge to grade near a walkway or street in the season or in frost.

    Levels: *watch* in the pack's winter season above freezing; *warning* with
    the air at or below 0 °C; *violation* when it has frozen for an hour with
    water discharged and the pack's text forbids icing. Freezing has hysteresis
    (``FreezeState``: freezing at <= 0 C, thawed only after +1 C for ``THAW_FOR``),
    so an air sensor dithering around 0 C does not switch the level.
    """

    rule_id: ClassVar[str] = "icing_risk"
    info: ClassVar[RuleInfo] = RuleInfo(
        "icing_risk",
        "Sump discharge may ice a walkway or the street",
        "Turn or extend the outlet so the water soaks into the lawn away from the walk "
        "and street, and check the walk for ice (salt or sand it).",
    )
    streams: ClassVar[frozenset[Stream]] = frozenset({Stream.OUTLET, Stream.AIR, Stream.CYCLE})

    def __init__(self, state: SiteState) -> None:
        self.active = False
        self._freezing_since: datetime | None = None
        #: Litres each recent pump run took out of the pit (its level's fall), by time.
        self._pumped: LazyDeque[tuple[datetime, float]] = LazyDeque()
        inst = state.ctx.site.installation
        pack = state.ctx.pack
        spec = pack.rule(self.rule_id) if pack is not None else None
        number = spec.params.get("distance_ft") if spec is not None else None
        self.enforced = spec is not None and spec.enforced
        self.distance_ft = number.as_float if number is not None else DEFAULT_ICING_DISTANCE_FT
        # Edgar's 10 ft walkway distance is the product's default, not the text's (the
        # pack marks it): the evidence must not present it as the ordinance's number.
        self.distance_is_default = number is None or number.is_default
        distances = {
            "walkway": inst.outlet_to_walkway_ft,
            "right_of_way": inst.outlet_to_right_of_way_ft,
        }
        known = {k: v for k, v in distances.items() if v is not None}
        self.nearest = min(known.items(), key=lambda kv: kv[1]) if known else None
        self.applies = (
            inst.destination in (DischargeDestination.GRADE, DischargeDestination.SWALE)
            and self.nearest is not None
            and self.nearest[1] < self.distance_ft
        )

    def restore(self) -> None:
        """Continue a finding restored from the store."""
        self.active = True

    def feed(self, event: Event, state: SiteState) -> Verdict | None:
        """Judge the site at the data time of an outlet or air sample."""
        if isinstance(event, CycleEnd):
            self._pumped.append((event.cycle.end_ts, state.ctx.litres(event.cycle.drop_cm)))
            return None
        if not isinstance(event, OutletSample | AirSample):
            return None
        now = event.ts
        while self._pumped and now - self._pumped[0][0] > ICING_WINDOW:
            self._pumped.popleft()
        if not self.applies or self.nearest is None:
            return None
        air = state.air
        # The freezing state is the hysteretic one; a silent air node keeps the last
        # known state for a while rather than switching the level.
        fresh = air is not None and now - air.ts <= 8 * AIR_MAX_AGE
        freezing = fresh and state.freeze.freezing
        self._freezing_since = state.freeze.since if freezing else None
        local_day = now.astimezone(state.ctx.site.tz).date()
        pack = state.ctx.pack
        in_season = pack.season.contains(local_day) if pack is not None else False
        volume = self._discharged_l(now, state)
        # Hysteresis: stay open down to half the volume that opened it.
        needed = ICING_MIN_VOLUME_L / 2 if self.active else ICING_MIN_VOLUME_L
        holds = (in_season or freezing) and volume >= needed
        if not holds:
            if self.active:
                self.active = False
                return INACTIVE
            return None
        self.active = True
        return self._verdict(now, self.nearest, air, (freezing, in_season), volume, state)

    def _discharged_l(self, now: datetime, state: SiteState) -> float:
        """Litres that left the line at its outlet in the window: what the outlet's
        meter integrated, and at least what the pump took out of the pit less what
        the line can hold (with a good valve the water pumped has nowhere else to go).
        The pit's bound matters where the meter misses the water: a long line whose
        far part drains down after each stop at a flow under the meter's reach, or a
        run shorter than the outlet node's interval."""
        metered = state.outlet.volume_since(now - ICING_WINDOW)
        pumped = sum(litres for _, litres in self._pumped)
        return max(metered, pumped - state.ctx.line_volume_l)

    def _verdict(
        self,
        now: datetime,
        nearest: tuple[str, float],
        air: AirSample | None,
        why: tuple[bool, bool],
        volume: float,
        state: SiteState,
    ) -> Verdict:
        """The open finding: its level (watch, warning, violation) and its reasons
        (``why``: the air is freezing, the pack's winter season)."""
        freezing, in_season = why
        pack = state.ctx.pack
        air_c = air.air_temp_c if air is not None and now - air.ts <= AIR_MAX_AGE else None
        what = nearest[0].replace("_", " ")
        reasons = [
            f"discharge to grade {nearest[1]:g} ft from the {what}"
            f" (within {self.distance_ft:g} ft)",
            f"{volume:.0f} L discharged in the last {ICING_WINDOW.total_seconds() / 3600:g} h",
        ]
        if in_season and pack is not None:
            reasons.append(f"winter season {pack.season.label()}")
        if freezing and air is not None:
            reasons.append(
                f"air freezing since {iso(self._freezing_since)} (now {air.air_temp_c:.1f} °C)"
            )
        if not freezing:
            level, severity = "watch", Severity.INFO
        elif (
            self.enforced
            and self._freezing_since is not None
            and now - self._freezing_since >= ICING_VIOLATION_AFTER
        ):
            level, severity = "violation", Severity.CRITICAL
        else:
            level, severity = "warning", Severity.WARNING
        return Verdict(
            True,
            severity,
            level,
            {
                "reasons": reasons,
                "air_temp_c": None if air_c is None else r1(air_c),
                "in_season": in_season,
                "season": None if pack is None else pack.season.label(),
                "volume_l_window": r1(volume),
                "distance_ft": nearest[1],
                "distance_to": nearest[0],
                "pack_distance_ft": self.distance_ft,
                "pack_distance_is_default": self.distance_is_default,
                "freezing_since": iso(self._freezing_since),
            },
        )
