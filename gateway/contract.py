"""Telemetry contract v1: MQTT topics and payloads, as pydantic models.

This module is the single source of truth for what a sensor node may publish;
``docs/telemetry.md`` describes it and ``docs/telemetry.schema.json`` is generated
from it (``sumpwatch schema``). Field names carry their units.

Topics::

    sumpwatch/v1/<site_id>/<node_id>/telemetry   QoS 1, not retained
    sumpwatch/v1/<site_id>/<node_id>/status      retained "online" / "offline" (last will)
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, TypeAdapter

CONTRACT_VERSION = 1
TOPIC_ROOT = "sumpwatch/v1"
ID_RE = re.compile(r"^[a-z0-9_-]{1,64}$")
ID_PATTERN = ID_RE.pattern
BOOT_PATTERN = r"^[a-z0-9]{1,32}$"
#: Larger payloads are rejected before parsing; a real node sends ~250 bytes.
MAX_PAYLOAD_BYTES = 4096
#: A device time further ahead of the gateway's clock than this is refused as
#: ``clock_ahead`` (the default of the gateway's ``max_future_skew_s``).
DEFAULT_MAX_FUTURE_SKEW_S = 300.0

TELEMETRY_TOPIC = TOPIC_ROOT + "/{site_id}/{node_id}/telemetry"
STATUS_TOPIC = TOPIC_ROOT + "/{site_id}/{node_id}/status"
ALERTS_TOPIC = TOPIC_ROOT + "/{site_id}/alerts"
SUBSCRIPTIONS = (TOPIC_ROOT + "/+/+/telemetry", TOPIC_ROOT + "/+/+/status")

STATUS_ONLINE = "online"
STATUS_OFFLINE = "offline"


class NodeKind(StrEnum):
    """What a node measures."""

    PIT = "pit"  # sump pit: water level, pump state, water temperature
    DISCHARGE = "discharge"  # discharge line at the outlet: flow, pressure, pipe temperature
    AIR = "air"  # outdoor air temperature at the site


_STRICT = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False, frozen=True)


class PitReadings(BaseModel):
    """Readings of a pit node."""

    model_config = _STRICT
    level_cm: float = Field(ge=0, le=300, description="Water level above the pit floor, cm")
    pump_on: bool = Field(description="Primary pump motor running")
    water_temp_c: float | None = Field(None, ge=-5, le=50, description="Pit water temperature, °C")
    backup_pump_on: bool | None = Field(None, description="Backup pump running, if fitted")
    pump_current_a: float | None = Field(None, ge=0, le=40, description="Pump motor current, A")


class DischargeReadings(BaseModel):
    """Readings of a discharge-line node, mounted at the outlet."""

    model_config = _STRICT
    flow_lpm: float = Field(ge=0, le=1000, description="Flow at the outlet, litres per minute")
    pressure_kpa: float = Field(ge=-50, le=700, description="Gauge pressure in the line, kPa")
    pipe_temp_c: float = Field(ge=-50, le=70, description="Pipe wall temperature at the outlet, °C")


class AirReadings(BaseModel):
    """Readings of an outdoor air-temperature node."""

    model_config = _STRICT
    air_temp_c: float = Field(ge=-60, le=60, description="Outdoor air temperature, °C")


class _TelemetryBase(BaseModel):
    model_config = _STRICT
    v: Literal[1] = Field(description="Contract version")
    site_id: Annotated[str, Field(pattern=ID_PATTERN, description="Must equal the topic's site")]
    node_id: Annotated[str, Field(pattern=ID_PATTERN, description="Must equal the topic's node")]
    ts: AwareDatetime = Field(description="Device time of the sample, RFC 3339 with offset (UTC)")
    seq: int = Field(ge=0, lt=2**32, description="Per-boot sequence number, +1 per message")
    boot: Annotated[str, Field(pattern=BOOT_PATTERN, description="Random id drawn at each boot")]
    battery_v: float | None = Field(None, ge=0, le=15, description="Battery voltage, V")
    rssi_dbm: float | None = Field(None, ge=-130, le=0, description="Radio signal strength, dBm")


class PitTelemetry(_TelemetryBase):
    """A pit node's message."""

    kind: Literal[NodeKind.PIT]
    readings: PitReadings


class DischargeTelemetry(_TelemetryBase):
    """A discharge-line node's message."""

    kind: Literal[NodeKind.DISCHARGE]
    readings: DischargeReadings


class AirTelemetry(_TelemetryBase):
    """An outdoor air node's message."""

    kind: Literal[NodeKind.AIR]
    readings: AirReadings


Telemetry = Annotated[PitTelemetry | DischargeTelemetry | AirTelemetry, Field(discriminator="kind")]
TELEMETRY_ADAPTER: TypeAdapter[PitTelemetry | DischargeTelemetry | AirTelemetry] = TypeAdapter(
    Telemetry
)

READINGS_MODELS: dict[NodeKind, type[BaseModel]] = {
    NodeKind.PIT: PitReadings,
    NodeKind.DISCHARGE: DischargeReadings,
    NodeKind.AIR: AirReadings,
}


@dataclass(frozen=True, slots=True)
class FieldSpec:
    """One reading field: its node kind, unit and whether it is boolean."""

    name: str
    kind: NodeKind
    unit: str
    is_bool: bool
    description: str


_UNITS = {"cm": "cm", "lpm": "L/min", "kpa": "kPa", "c": "°C", "v": "V", "a": "A"}


def _field_specs() -> dict[str, FieldSpec]:
    specs: dict[str, FieldSpec] = {}
    for kind, model in READINGS_MODELS.items():
        for name, info in model.model_fields.items():
            is_bool = info.annotation in (bool, bool | None)
            unit = "bool" if is_bool else _UNITS[name.rsplit("_", 1)[-1]]
            specs[name] = FieldSpec(name, kind, unit, is_bool, info.description or "")
    return specs


#: Every reading field of every node kind, in a stable order (the store's columns).
FIELDS: dict[str, FieldSpec] = _field_specs()


@dataclass(frozen=True, slots=True)
class TopicParts:
    """A parsed contract topic."""

    site_id: str
    node_id: str
    channel: Literal["telemetry", "status"]


def parse_topic(topic: str) -> TopicParts | None:
    """Split a contract topic; ``None`` if it does not match the contract's shape."""
    parts = topic.split("/")
    if len(parts) != 5 or parts[0] != "sumpwatch" or parts[1] != "v1":
        return None
    site_id, node_id, channel = parts[2], parts[3], parts[4]
    if channel not in ("telemetry", "status"):
        return None
    if not ID_RE.match(site_id) or not ID_RE.match(node_id):
        return None
    return TopicParts(site_id, node_id, channel)  # type: ignore[arg-type]


def telemetry_topic(site_id: str, node_id: str) -> str:
    """The telemetry topic of a node."""
    return TELEMETRY_TOPIC.format(site_id=site_id, node_id=node_id)


def status_topic(site_id: str, node_id: str) -> str:
    """The retained status (availability) topic of a node."""
    return STATUS_TOPIC.format(site_id=site_id, node_id=node_id)


def json_schema() -> dict[str, Any]:
    """The JSON Schema of a telemetry payload (for docs/telemetry.schema.json)."""
    schema = TELEMETRY_ADAPTER.json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "SumpWatch telemetry payload v1"
    return schema
