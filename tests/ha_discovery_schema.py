"""Home Assistant's MQTT discovery fields, written from its documentation.

The `homeassistant` package itself needs a newer Python than this project's 3.11 and
pins hundreds of dependencies, so the schemas here are transcribed from Home
Assistant's MQTT sensor and binary sensor pages and its sensor/binary sensor device
class tables (the unit each sensor device class accepts, the state classes). Fields
are the documented full names (no abbreviations); anything else is an error, as HA's
own voluptuous schemas reject unknown keys in a discovery payload.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

_STRICT = ConfigDict(extra="forbid")


class Availability(BaseModel):
    model_config = _STRICT
    topic: str = Field(min_length=1)
    payload_available: str | None = None
    payload_not_available: str | None = None
    value_template: str | None = None


class Device(BaseModel):
    model_config = _STRICT
    identifiers: list[str] | str | None = None
    connections: list[list[str]] | None = None
    configuration_url: str | None = Field(None, pattern=r"^(https?://|homeassistant://)")
    hw_version: str | None = None
    manufacturer: str | None = None
    model: str | None = None
    model_id: str | None = None
    name: str | None = None
    serial_number: str | None = None
    suggested_area: str | None = None
    sw_version: str | None = None
    via_device: str | None = None

    @model_validator(mode="after")
    def _identified(self) -> Device:
        if not self.identifiers and not self.connections:
            raise ValueError("a device needs identifiers or connections")
        return self


class _Entity(BaseModel):
    model_config = _STRICT
    availability: list[Availability] | None = None
    availability_mode: Literal["all", "any", "latest"] | None = None
    availability_template: str | None = None
    availability_topic: str | None = None
    device: Device | None = None
    enabled_by_default: bool | None = None
    encoding: str | None = None
    entity_category: Literal["config", "diagnostic"] | None = None
    entity_picture: str | None = None
    expire_after: int | None = Field(None, ge=0)
    force_update: bool | None = None
    icon: str | None = Field(None, pattern=r"^[a-z0-9_-]+:[a-z0-9_-]+$")
    json_attributes_template: str | None = None
    json_attributes_topic: str | None = None
    name: str | None = None
    object_id: str | None = None
    default_entity_id: str | None = None
    payload_available: str | None = None
    payload_not_available: str | None = None
    qos: Literal[0, 1, 2] | None = None
    state_topic: str = Field(min_length=1)
    unique_id: str | None = None
    value_template: str | None = None

    @model_validator(mode="after")
    def _one_availability_form(self) -> _Entity:
        if self.availability is not None and self.availability_topic is not None:
            raise ValueError("availability and availability_topic are mutually exclusive")
        return self


#: Sensor device classes used here, with the units Home Assistant accepts for each.
SENSOR_UNITS: dict[str, set[str | None]] = {
    "current": {"A", "mA"},
    "distance": {"km", "m", "cm", "mm", "mi", "nmi", "yd", "in", "ft"},
    "pressure": {"Pa", "hPa", "kPa", "bar", "cbar", "mbar", "mmHg", "inHg", "psi", "mmH₂O"},
    "temperature": {"°C", "°F", "K"},
    "volume_flow_rate": {"m³/h", "m³/min", "m³/s", "ft³/min", "L/h", "L/min", "L/s", "gal/h",
                         "gal/min", "mL/s", "gal/d"},
    "water": {"L", "gal", "m³", "ft³", "CCF", "MCF"},
}  # fmt: skip
#: State classes a device class allows (HA warns on other combinations).
SENSOR_STATE_CLASSES: dict[str, set[str]] = {
    "water": {"total", "total_increasing"},
}

BINARY_SENSOR_DEVICE_CLASSES = {
    "battery", "battery_charging", "carbon_monoxide", "cold", "connectivity", "door",
    "garage_door", "gas", "heat", "light", "lock", "moisture", "motion", "moving", "occupancy",
    "opening", "plug", "power", "presence", "problem", "running", "safety", "smoke", "sound",
    "tamper", "update", "vibration", "window",
}  # fmt: skip


class SensorConfig(_Entity):
    """``homeassistant/sensor/<object_id>/config``."""

    device_class: str | None = None
    last_reset_value_template: str | None = None
    options: list[str] | None = None
    state_class: Literal["measurement", "measurement_angle", "total", "total_increasing"] | None = (
        None
    )
    suggested_display_precision: int | None = Field(None, ge=0)
    unit_of_measurement: str | None = None

    @model_validator(mode="after")
    def _unit_fits_device_class(self) -> SensorConfig:
        dc = self.device_class
        if dc is None:
            return self
        if dc not in SENSOR_UNITS:
            raise ValueError(f"device class {dc!r} not in the checked table")
        if self.unit_of_measurement not in SENSOR_UNITS[dc]:
            raise ValueError(f"{self.unit_of_measurement!r} is not a unit of {dc!r}")
        allowed = SENSOR_STATE_CLASSES.get(dc)
        if allowed is not None and self.state_class not in allowed:
            raise ValueError(f"state class {self.state_class!r} not allowed for {dc!r}")
        return self


class BinarySensorConfig(_Entity):
    """``homeassistant/binary_sensor/<object_id>/config``."""

    device_class: str | None = None
    off_delay: int | None = Field(None, ge=0)
    payload_off: str | None = None
    payload_on: str | None = None

    @model_validator(mode="after")
    def _known_device_class(self) -> BinarySensorConfig:
        if self.device_class is not None and self.device_class not in BINARY_SENSOR_DEVICE_CLASSES:
            raise ValueError(f"unknown binary sensor device class {self.device_class!r}")
        return self


SCHEMAS: dict[str, type[_Entity]] = {"sensor": SensorConfig, "binary_sensor": BinarySensorConfig}
