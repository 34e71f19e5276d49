"""Declarative scenarios: TOML files in ``firmware_sim/scenarios/`` (format: docs/simulator.md).

A scenario is weather plus a list of home templates, each with its pit, pump,
discharge line, inflow, nodes, fault schedule and the conditions it is expected
to produce. ``--homes N`` cycles through the templates.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from firmware_sim.weather import WeatherConfig, WeatherEvent
from gateway.contract import ID_PATTERN
from gateway.errors import ConfigError
from gateway.tomlfile import load_toml

SCENARIO_DIR = Path(__file__).resolve().parent / "scenarios"
#: Scenarios for the demo's registry (``sumpwatch demo``): loadable by name, but not
#: in the scored suite, whose homes carry their installation in the template.
DEMO_DIR = SCENARIO_DIR / "demo"

_CFG = ConfigDict(extra="forbid", frozen=True)

Destination = Literal["grade", "swale", "storm_lateral", "sanitary"]
FaultKind = Literal[
    "sanitary_hose",
    "sanitary_hose_freezing_nights",
    "sanitary_tee",
    "pump_dead",
    "pump_no_flow",
    "pump_no_current",
    "float_stuck",
    "check_valve_fail",
    "check_valve_leak",
    "node_offline",
]
#: When a ``sanitary_tee`` hose is in place: from start_h to end_h (``window``), every
#: night 22:00-06:00 local, while it rains (and 6 h after), or Saturday and Sunday local.
HoseSchedule = Literal["window", "nights", "storms", "weekends"]
BadKind = Literal[
    "malformed_json",
    "not_utf8",
    "schema_violation",
    "out_of_range",
    "topic_mismatch",
    "oversize",
    "duplicate",
    "out_of_order",
    "clock_skew_future",
    "clock_skew_past",
]
CONDITIONS = (
    "sanitary_discharge",
    "icing_risk",
    "frozen_line",
    "high_water",
    "continuous_run",
    "short_cycling",
    "sensor_silent",
    "pump_failure",
)


class EventModel(BaseModel):
    """A scheduled weather event (see :class:`firmware_sim.weather.WeatherEvent`)."""

    model_config = _CFG
    kind: Literal["rain", "cold_snap", "warm_spell", "dry"]
    start_h: float = Field(ge=0)
    hours: float = Field(gt=0)
    mm_per_h: float = Field(0.0, ge=0)
    delta_c: float = 0.0


class WeatherModel(BaseModel):
    """The ``[weather]`` table."""

    model_config = _CFG
    offset_c: float = 0.0
    anomaly_sigma_c: float = Field(3.0, ge=0)
    anomaly_tau_h: float = Field(36.0, gt=0)
    diurnal_half_range_c: float = Field(5.0, ge=0)
    storms_per_day: float | None = Field(None, ge=0)
    storm_mean_mm: float | None = Field(None, ge=0)
    random_storms: bool = True
    initial_snow_mm: float = Field(0.0, ge=0)
    initial_frost_index: float | None = Field(None, ge=0)
    event: tuple[EventModel, ...] = ()

    def to_config(self) -> WeatherConfig:
        """The frozen weather configuration the model runs on."""
        data = self.model_dump(exclude={"event"})
        events = tuple(WeatherEvent(**e.model_dump()) for e in self.event)
        return WeatherConfig(**data, events=events)


class PitModel(BaseModel):
    """Pit geometry and float marks, cm above the pit floor (defaults: 18 x 30 in basin)."""

    model_config = _CFG
    diameter_cm: float = Field(46.0, gt=0)
    depth_cm: float = Field(76.0, gt=0)
    pump_on_cm: float = Field(40.0, gt=0)
    pump_off_cm: float = Field(18.0, ge=0)
    alarm_cm: float = Field(55.0, gt=0)
    intake_cm: float = Field(6.0, ge=0, description="Below this the pump draws air")
    initial_level_cm: float | None = None

    @model_validator(mode="after")
    def _ordered(self) -> PitModel:
        if not self.intake_cm < self.pump_off_cm < self.pump_on_cm < self.alarm_cm <= self.depth_cm:
            raise ValueError("need intake < pump_off < pump_on < alarm <= depth")
        return self


class PumpModel(BaseModel):
    """Primary pump curve (through shut-off and one catalogue point) and the backup pump."""

    model_config = _CFG
    shutoff_head_ft: float = Field(22.0, gt=0)
    flow_gpm: float = Field(40.0, gt=0)
    at_head_ft: float = Field(10.0, gt=0)
    current_a: float = Field(6.0, gt=0)
    backup: bool = False
    backup_on_cm: float = 50.0
    backup_off_cm: float = 30.0


class LineModel(BaseModel):
    """The discharge line as it truly is (``destination`` is where the water goes)."""

    model_config = _CFG
    destination: Destination = "grade"
    pipe_inside_diameter_in: float = Field(1.25, gt=0)
    line_length_m: float = Field(8.0, gt=0)
    line_rise_m: float = Field(2.5, ge=0)
    exterior_length_m: float = Field(2.0, ge=0, description="Run beyond the outlet node")
    sag_fraction: float = Field(
        0.03, ge=0, le=1, description="Share of the exterior run that holds water"
    )
    minor_loss_k: float = Field(4.0, ge=0)
    check_valve: bool = True
    hose_outlet_above_floor_m: float = Field(
        0.5, description="Where a diversion hose ends: ~0 floor drain, ~0.9 laundry tub rim"
    )
    outlet_to_walkway_ft: float | None = None


class InflowModel(BaseModel):
    """Groundwater and drain-tile inflow: two linear reservoirs fed by rain and melt."""

    model_config = _CFG
    catchment_m2: float = Field(400.0, gt=0)
    recharge_fraction: float = Field(0.6, ge=0, le=1)
    fast_share: float = Field(0.5, ge=0, le=1)
    k_fast_h: float = Field(4.0, gt=0)
    k_slow_d: float = Field(30.0, gt=0)
    baseflow_lpm: float = Field(1.5, ge=0, description="Initial slow-reservoir outflow")
    deep_lpm: float = Field(0.3, ge=0, description="Deep groundwater below the frost line")
    groundwater_c: float = 9.0


class FaultModel(BaseModel):
    """One entry of a home's fault schedule (hours after the scenario start)."""

    model_config = _CFG
    kind: FaultKind
    start_h: float = Field(0.0, ge=0)
    end_h: float | None = None
    node: str | None = Field(None, pattern=ID_PATTERN)
    reboot: bool = True
    from_hour: int = Field(20, ge=0, le=23, description="Freezing-nights hose: local hour")
    to_hour: int = Field(7, ge=0, le=23)
    below_c: float = 0.0
    share: float = Field(
        1.0, gt=0, le=1, description="sanitary_tee: share of the pumped water the hose takes"
    )
    schedule: HoseSchedule = "window"
    leak_lpm: float = Field(0.5, gt=0, description="check_valve_leak: leak-back rate")
    current_share: float = Field(
        0.55, gt=0, le=1.2, description="pump_no_flow: motor current as a share of rated"
    )

    def active(self, hours: float) -> bool:
        """True while the fault is scheduled at ``hours`` after the start."""
        return self.start_h <= hours and (self.end_h is None or hours < self.end_h)


class HomeModel(BaseModel):
    """One ``[[home]]`` template."""

    model_config = _CFG
    id: str = Field(pattern=ID_PATTERN)
    name: str = ""
    jurisdiction: str = "edgar"
    pit_interval_s: float = Field(10.0, gt=0)
    discharge_interval_s: float = Field(10.0, gt=0)
    air_interval_s: float = Field(60.0, gt=0)
    air_node: bool = True
    change_reports: bool = Field(
        True,
        description="The pit node also reports at once on every pump start and stop "
        "(false: on its interval only, as the shipped ESPHome pit node does)",
    )
    flow_reading: Literal["instant", "mean"] = Field(
        "instant",
        description="The outlet meter reports the flow at the sample's instant, or the "
        "mean flow since its last report (a pulse counter, as the shipped ESPHome "
        "outlet node counts pulses over its interval)",
    )
    sensor_noise: float = Field(1.0, ge=0, description="Multiplies every sensor's noise")
    dropout: float = Field(0.0, ge=0, le=0.2, description="Share of telemetry messages lost")
    pump_current_sensor: bool = True
    pressure_tap: Literal["outlet", "riser"] = "outlet"
    tap_above_floor_m: float = Field(
        1.0, ge=0, description="Riser tap: height above the pit floor (above the check valve)"
    )
    tap_registered: bool = Field(
        False, description="The registry records the tap and its running static head"
    )
    pit: PitModel = PitModel()
    pump: PumpModel = PumpModel()
    line: LineModel = LineModel()
    inflow: InflowModel = InflowModel()
    fault: tuple[FaultModel, ...] = ()
    registered: dict[str, Any] = Field(
        default_factory=dict, description="Registry installation fields that differ from truth"
    )
    registered_pit: dict[str, float] = Field(
        default_factory=dict, description="Registry pit fields that differ from truth"
    )
    expect: tuple[str, ...] = Field((), description="Conditions this home must produce")

    @model_validator(mode="after")
    def _known(self) -> HomeModel:
        unknown = set(self.expect) - set(CONDITIONS)
        if unknown:
            raise ValueError(f"unknown expected conditions {sorted(unknown)}")
        return self


class BadPayloadsModel(BaseModel):
    """The ``[bad_payloads]`` table: a share of messages is broken on purpose."""

    model_config = _CFG
    rate: float = Field(0.02, ge=0, le=1)
    kinds: tuple[BadKind, ...] = (
        "malformed_json",
        "not_utf8",
        "schema_violation",
        "out_of_range",
        "topic_mismatch",
        "oversize",
        "duplicate",
        "out_of_order",
        "clock_skew_future",
        "clock_skew_past",
    )
    skew_future_s: float = 3600.0
    skew_past_s: float = 120.0
    max_delay_messages: int = Field(20, ge=1)


class ScenarioModel(BaseModel):
    """A whole scenario file."""

    model_config = _CFG
    name: str
    description: str = ""
    start: datetime
    duration_h: float = Field(gt=0)
    weather: WeatherModel = WeatherModel()
    home: tuple[HomeModel, ...] = Field(min_length=1)
    bad_payloads: BadPayloadsModel | None = None


def list_scenario_names() -> list[str]:
    """Names of the scenario files shipped in the package, sorted."""
    return sorted(p.stem for p in SCENARIO_DIR.glob("*.toml"))


def load_scenario(name_or_path: str | Path) -> ScenarioModel:
    """A scenario by name (a file in the package) or by path to a TOML file."""
    path = Path(name_or_path)
    if path.suffix != ".toml":
        path = SCENARIO_DIR / f"{name_or_path}.toml"
        if not path.exists() and (DEMO_DIR / path.name).exists():
            path = DEMO_DIR / path.name
    if not path.is_file():
        known = ", ".join(list_scenario_names())
        raise ConfigError(f"no scenario {name_or_path!r} (known: {known})")
    return load_toml(path, ScenarioModel, "scenario")
