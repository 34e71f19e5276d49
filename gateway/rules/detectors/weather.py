"""Cold-weather detectors: frozen discharge line and freezing-walkway (icing) risk."""

from __future__ import annotations

from datetime import datetime

from gateway.domain import Severity
from gateway.registry.models import DischargeDestination
from gateway.rules.detectors.base import INACTIVE, OutletSample, SiteState, Verdict, iso, r1
from gateway.rules.thresholds import (
    AIR_MAX_AGE,
    DEFAULT_ICING_DISTANCE_FT,
    FLOW_ABSENT_LPM,
    FLOW_PRESENT_LPM,
    FREEZING_C,
    FROZEN_FLOW_SAMPLES_TO_CLEAR,
    FROZEN_MIN_SPAN,
    FROZEN_PIPE_TEMP_C,
    FROZEN_SAMPLES_TO_OPEN,
    ICING_MIN_VOLUME_L,
    ICING_VIOLATION_AFTER,
    ICING_WINDOW,
    PRESSURE_BLOCKED_KPA,
    PUMP_STATE_MAX_AGE,
    THAW_FOR,
    THAW_PIPE_TEMP_C,
)


class FrozenLineDetector:
    """Pump running, line pressurised, no outlet flow, pipe at or below 0 °C."""

    rule_id = "frozen_line"

    def __init__(self) -> None:
        self.active = False
        self._hits = 0
        self._flowing = 0
        self._warm_since: datetime | None = None
        self._since: datetime | None = None
        self._blocked_since: datetime | None = None

    def restore_active(self) -> None:
        """Continue a finding restored from the store."""
        self.active = True

    def on_outlet(self, s: OutletSample, state: SiteState) -> Verdict | None:
        """Judge one outlet sample against the pump state at that time."""
        pit = state.pit
        pump_known = pit is not None and abs(s.ts - pit.ts) <= PUMP_STATE_MAX_AGE
        pump_on = pump_known and pit is not None and pit.pump_on
        self._warm_since = (self._warm_since or s.ts) if s.pipe_temp_c > THAW_PIPE_TEMP_C else None
        if pump_on:
            blocked = (
                s.flow_lpm < FLOW_ABSENT_LPM
                and s.pressure_kpa >= PRESSURE_BLOCKED_KPA
                and s.pipe_temp_c <= FROZEN_PIPE_TEMP_C
            )
            self._hits = self._hits + 1 if blocked else 0
            self._blocked_since = (self._blocked_since or s.ts) if blocked else None
            self._flowing = self._flowing + 1 if s.flow_lpm >= FLOW_PRESENT_LPM else 0
        # A line refilling after a start is briefly pressurised and dry too; ice lasts.
        lasting = self._blocked_since is not None and s.ts - self._blocked_since >= FROZEN_MIN_SPAN
        if not self.active and self._hits >= FROZEN_SAMPLES_TO_OPEN and lasting:
            self.active, self._since = True, s.ts
        elif self.active and (
            self._flowing >= FROZEN_FLOW_SAMPLES_TO_CLEAR
            or (self._warm_since is not None and s.ts - self._warm_since >= THAW_FOR)
        ):
            self.active, self._since = False, None
            return INACTIVE
        if not self.active:
            return None
        return Verdict(
            True,
            Severity.CRITICAL,
            "",
            {
                "flow_lpm": r1(s.flow_lpm),
                "pressure_kpa": r1(s.pressure_kpa),
                "pipe_temp_c": r1(s.pipe_temp_c),
                "pump_on": pump_on,
                "pit_level_cm": None if pit is None else r1(pit.level_cm),
                "blocked_since": iso(self._since),
            },
        )


class IcingRiskDetector:
    """Discharge to grade near a walkway or street in the season or in frost.

    Levels: *watch* in the pack's winter season above freezing; *warning* with
    the air at or below 0 °C; *violation* when it has frozen for an hour with
    water discharged and the pack's text forbids icing.
    """

    rule_id = "icing_risk"

    def __init__(self, state: SiteState) -> None:
        self.active = False
        self._freezing_since: datetime | None = None
        inst = state.ctx.site.installation
        pack = state.ctx.pack
        spec = pack.rule(self.rule_id) if pack is not None else None
        number = spec.params.get("distance_ft") if spec is not None else None
        self.enforced = spec is not None and spec.enforced
        self.distance_ft = number.as_float if number is not None else DEFAULT_ICING_DISTANCE_FT
        self.distance_is_default = number is None
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

    def restore_active(self) -> None:
        """Continue a finding restored from the store."""
        self.active = True

    def evaluate(self, now: datetime, state: SiteState) -> Verdict | None:
        """Judge the site at data time ``now`` (after an outlet or air sample)."""
        if not self.applies or self.nearest is None:
            return None
        air = state.air
        air_c = air.air_temp_c if air is not None and now - air.ts <= AIR_MAX_AGE else None
        freezing = air_c is not None and air_c <= FREEZING_C
        if freezing:
            self._freezing_since = self._freezing_since or now
        else:
            self._freezing_since = None
        pack = state.ctx.pack
        local_day = now.astimezone(state.ctx.site.tz).date()
        in_season = pack.season.contains(local_day) if pack is not None else False
        volume = state.outlet.volume_since(now - ICING_WINDOW)
        # Hysteresis: stay open down to half the volume that opened it.
        needed = ICING_MIN_VOLUME_L / 2 if self.active else ICING_MIN_VOLUME_L
        holds = (in_season or freezing) and volume >= needed
        if not holds:
            if self.active:
                self.active = False
                return INACTIVE
            return None
        self.active = True
        what = self.nearest[0].replace("_", " ")
        reasons = [
            f"discharge to grade {self.nearest[1]:g} ft from the {what}"
            f" (within {self.distance_ft:g} ft)",
            f"{volume:.0f} L discharged in the last {ICING_WINDOW.total_seconds() / 3600:g} h",
        ]
        if in_season and pack is not None:
            reasons.append(f"winter season {pack.season.label()}")
        if freezing:
            reasons.append(f"air {air_c:.1f} °C, at or below freezing")
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
                "distance_ft": self.nearest[1],
                "distance_to": self.nearest[0],
                "pack_distance_ft": self.distance_ft,
                "pack_distance_is_default": self.distance_is_default,
                "freezing_since": iso(self._freezing_since),
            },
        )
