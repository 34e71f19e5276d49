"""The discovery documents: what each site's entities are, as Home Assistant reads them.

Pure functions of the registry: the same site always yields the same retained
configs, so republishing at every start is idempotent. Field names and device
classes follow Home Assistant's MQTT sensor and binary sensor documentation
(``tests/ha_discovery_schema.py`` checks every config against them).

One compact retained state document per site (``sumpwatch/ha/<site>/state``) feeds
every entity through a ``value_template``: one publish per site update instead of
ten, and a Home Assistant that connects late reads the whole state at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from gateway.contract import NodeKind, status_topic
from gateway.registry.models import SiteConfig
from gateway.rules.catalog import CATALOG, RULE_IDS

#: Retained "online"/"offline": the gateway's birth message and last will.
AVAILABILITY_TOPIC = "sumpwatch/ha/gateway/availability"
MANUFACTURER = "SumpWatch"
MODEL = "Sump pit and discharge monitor"

Component = Literal["sensor", "binary_sensor"]


@dataclass(frozen=True, slots=True)
class Entity:
    """One Home Assistant entity of a site: where its value sits in the state document."""

    key: str  # object id suffix and the state document's key
    component: Component
    name: str
    node_kind: NodeKind | None  # availability follows this node; None: the gateway only
    device_class: str | None = None
    state_class: str | None = None
    unit: str | None = None
    icon: str | None = None
    display_precision: int | None = None


#: Measurements, in the units the contract carries (HA converts for display).
MEASUREMENTS = (
    Entity("pit_level", "sensor", "Pit level", NodeKind.PIT, "distance", "measurement", "cm",
           display_precision=1),
    Entity("pump_running", "binary_sensor", "Pump", NodeKind.PIT, "running"),
    Entity("pump_current", "sensor", "Pump current", NodeKind.PIT, "current", "measurement", "A",
           display_precision=1),
    Entity("cycles_today", "sensor", "Pump cycles today", NodeKind.PIT, None, "total_increasing",
           icon="mdi:counter"),
    Entity("pumped_today", "sensor", "Water pumped today", NodeKind.PIT, "water",
           "total_increasing", "gal", display_precision=0),
    Entity("outlet_flow", "sensor", "Outlet flow", NodeKind.DISCHARGE, "volume_flow_rate",
           "measurement", "L/min", display_precision=1),
    Entity("line_pressure", "sensor", "Line pressure", NodeKind.DISCHARGE, "pressure",
           "measurement", "kPa", display_precision=1),
    Entity("pipe_temperature", "sensor", "Discharge pipe temperature", NodeKind.DISCHARGE,
           "temperature", "measurement", "°C", display_precision=1),
    Entity("air_temperature", "sensor", "Outdoor air temperature", NodeKind.AIR, "temperature",
           "measurement", "°C", display_precision=1),
)  # fmt: skip

#: How Home Assistant shows some rules' problem sensors: (object id, name, device
#: class). Shorter names than the catalog's titles, HA's own device classes where one
#: fits, and ``sensor_offline`` kept as the silent-sensor object id that HA installs
#: already know. A rule not listed gets its id, its catalog title and "problem".
_LOOKS: dict[str, tuple[str, str, str]] = {
    "high_water": ("high_water", "High water", "moisture"),
    "pump_failure": ("pump_failure", "Pump failure", "problem"),
    "sanitary_discharge": ("sanitary_discharge", "Sanitary discharge suspected", "problem"),
    "icing_risk": ("icing_risk", "Icing risk", "cold"),
    "frozen_line": ("frozen_line", "Frozen discharge line", "cold"),
    "sensor_silent": ("sensor_offline", "Sensor offline", "problem"),
}


def _finding_entity(rule_id: str) -> Entity:
    key, name, device_class = _LOOKS.get(rule_id, (rule_id, CATALOG[rule_id].title, "problem"))
    return Entity(key, "binary_sensor", name, None, device_class)


#: Findings as problem sensors: ON while the rule's finding is open. Keyed by rule id,
#: one per detector of the registry (adding a detector adds its sensor).
FINDINGS: dict[str, Entity] = {rule_id: _finding_entity(rule_id) for rule_id in RULE_IDS}

ENTITIES: tuple[Entity, ...] = MEASUREMENTS + tuple(FINDINGS.values())


def state_topic(site_id: str) -> str:
    """The site's retained state document."""
    return f"sumpwatch/ha/{site_id}/state"


def object_id(site_id: str, entity: Entity) -> str:
    """``<site>_<object>``, as the discovery topic and unique id use it."""
    return f"{site_id}_{entity.key}".replace("-", "_")


def config_topic(prefix: str, site_id: str, entity: Entity) -> str:
    """``<prefix>/<component>/<site>_<object>/config``."""
    return f"{prefix}/{entity.component}/{object_id(site_id, entity)}/config"


def _availability(site: SiteConfig, entity: Entity) -> list[dict[str, str]]:
    out = [{"topic": AVAILABILITY_TOPIC}]
    node = site.node_of_kind(entity.node_kind) if entity.node_kind is not None else None
    if node is not None:
        # The node's own retained status (its last will): a dead node greys its sensors.
        out.append({"topic": status_topic(site.id, node.id)})
    return out


def entity_config(site: SiteConfig, entity: Entity, dashboard_url: str) -> dict[str, Any]:
    """One entity's discovery document."""
    config: dict[str, Any] = {
        "name": entity.name,
        "unique_id": f"sumpwatch_{object_id(site.id, entity)}",
        "state_topic": state_topic(site.id),
        "value_template": "{{ value_json." + entity.key + " }}",
        "availability": _availability(site, entity),
        "availability_mode": "all",
        "payload_available": "online",
        "payload_not_available": "offline",
        "device": {
            "identifiers": [f"sumpwatch_{site.id}"],
            "name": site.name,
            "manufacturer": MANUFACTURER,
            "model": MODEL,
            "suggested_area": "Basement",
            "configuration_url": dashboard_url,
        },
        "qos": 1,
    }
    if entity.component == "binary_sensor":
        config["payload_on"], config["payload_off"] = "ON", "OFF"
    optional = {
        "device_class": entity.device_class,
        "state_class": entity.state_class,
        "unit_of_measurement": entity.unit,
        "icon": entity.icon,
        "suggested_display_precision": entity.display_precision,
    }
    config.update({k: v for k, v in optional.items() if v is not None})
    return config


def site_entities(site: SiteConfig) -> list[Entity]:
    """The entities a site has: measurements of the nodes it has, and every finding."""
    kinds = {n.kind for n in site.nodes}
    return [e for e in ENTITIES if e.node_kind is None or e.node_kind in kinds]


def discovery_messages(
    site: SiteConfig, prefix: str, dashboard_url: str
) -> list[tuple[str, dict[str, Any]]]:
    """Every (config topic, config document) of a site."""
    return [
        (config_topic(prefix, site.id, e), entity_config(site, e, dashboard_url))
        for e in site_entities(site)
    ]


def is_ours(config: object) -> bool:
    """A retained config document this bridge published (its unique id says so)."""
    return isinstance(config, dict) and str(config.get("unique_id", "")).startswith("sumpwatch_")
