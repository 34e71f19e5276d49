"""Per-site state for Home Assistant: latest values, today's cycles and volume, findings.

Fed in the pipeline's hot path (``observe`` is O(1) per reading), read when a site's
state document is published. Device time decides "today" (the site's local day), so a
backlog drained after an outage counts each cycle on the day it happened.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any
from zoneinfo import ZoneInfo

from gateway.contract import NodeKind
from gateway.domain import Reading
from gateway.homeassistant.discovery import FINDINGS
from gateway.units import convert

LITRES_PER_CM3 = 1e-3


@dataclass(slots=True)
class SiteHaState:
    """What a site's entities show now."""

    tz: ZoneInfo
    pit_area_cm2: float
    values: dict[str, float | str | None] = field(default_factory=dict)
    open_rules: set[str] = field(default_factory=set)
    day: date | None = None
    cycles_today: int = 0
    pumped_l_today: float = 0.0
    _pump_on: bool = False
    _run_start_cm: float | None = None
    _last_ts: dict[NodeKind, datetime] = field(default_factory=dict)

    def observe(self, r: Reading) -> bool:
        """Take one reading; False when it is older than what is shown (late message)."""
        last = self._last_ts.get(r.kind)
        if last is not None and r.ts <= last:
            return False
        self._last_ts[r.kind] = r.ts
        if r.kind is NodeKind.PIT:
            self._pit(r)
        elif r.kind is NodeKind.DISCHARGE:
            self.values["outlet_flow"] = r.number("flow_lpm")
            self.values["line_pressure"] = r.number("pressure_kpa")
            self.values["pipe_temperature"] = r.number("pipe_temp_c")
        else:
            self.values["air_temperature"] = r.number("air_temp_c")
        return True

    def _pit(self, r: Reading) -> None:
        local_day = r.ts.astimezone(self.tz).date()
        if local_day != self.day:
            self.day, self.cycles_today, self.pumped_l_today = local_day, 0, 0.0
        level = r.number("level_cm")
        on = bool(r.values.get("pump_on"))
        if on and not self._pump_on:
            self.cycles_today += 1
            self._run_start_cm = level
        elif not on and self._pump_on and self._run_start_cm is not None and level is not None:
            # Pumped volume from the pit's own drawdown: what left the pit, wherever it went.
            drop = max(0.0, self._run_start_cm - level)
            self.pumped_l_today += drop * self.pit_area_cm2 * LITRES_PER_CM3
            self._run_start_cm = None
        self._pump_on = on
        self.values["pit_level"] = level
        self.values["pump_running"] = "ON" if on else "OFF"
        self.values["pump_current"] = r.number("pump_current_a")

    def document(self) -> dict[str, Any]:
        """The retained state document every entity's value_template reads."""
        doc: dict[str, Any] = {key: None for key in (
            "pit_level", "pump_running", "pump_current", "outlet_flow", "line_pressure",
            "pipe_temperature", "air_temperature",
        )}  # fmt: skip
        doc.update(self.values)
        doc["cycles_today"] = self.cycles_today
        doc["pumped_today"] = round(convert("volume", self.pumped_l_today, "us"), 1)
        for rule_id, entity in FINDINGS.items():
            doc[entity.key] = "ON" if rule_id in self.open_rules else "OFF"
        return doc
