"""The one Settings tree. Values come from arguments, ``SUMPWATCH_*`` environment
variables (``SUMPWATCH_MQTT__HOST``: section, two underscores, key), a ``.env`` file,
or a TOML file given with ``--config`` (``[mqtt] host = ...``), in that order.

Each stage is handed its section only (``settings.mqtt`` to the ingest client,
``settings.alerts`` to the alerts stage, ...). The flat names of earlier releases
(``mqtt_host``, ``SUMPWATCH_MQTT_HOST``) still work for one release with a
DeprecationWarning; :data:`FLAT_NAMES` maps them. See docs/configuration.md.
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from gateway.contract import DEFAULT_MAX_FUTURE_SKEW_S
from gateway.examples import EXAMPLE_SITES
from gateway.mqttconn import MqttConnection
from gateway.tomlfile import read_toml

PACKAGE_DIR = Path(__file__).resolve().parent
REPO_DIR = PACKAGE_DIR.parent
ENV_PREFIX = "SUMPWATCH_"


class Section(BaseModel):
    """A settings section: an unknown key is a typo, refused rather than ignored."""

    model_config = ConfigDict(extra="forbid", validate_default=True)


class MqttSettings(Section):
    """The broker connection (gateway ingest, alert publishing, Home Assistant)."""

    host: str = "127.0.0.1"
    port: int = 1883
    username: str | None = None
    password: SecretStr | None = None
    protocol: Literal["5", "3.1.1"] = Field(
        "5", description="MQTT version; 3.1.1 only for the embedded demo broker"
    )
    tls: bool = False
    ca_file: Path | None = None
    client_id: str | None = Field(
        None,
        description="Fixed: the session is persistent (default: generated once, kept in "
        "<data_dir>/mqtt-client-id)",
    )
    keepalive_s: int = Field(30, ge=5, description="Broker declares us gone after 1.5x this")
    session_expiry_s: int = Field(7 * 86400, description="Broker keeps our queue this long")
    receive_maximum: int = Field(
        20000, description="Unacknowledged QoS 1 messages the broker may send us at once"
    )
    shared_group: str | None = Field(
        None, description="Join the $share/<group>/ subscription (scale-out)"
    )
    reconnect_max_s: float = 30.0
    fast_path: bool = Field(
        True,
        description="Parse PUBLISH packets in bulk (gateway/ingest/_paho_fastpath.py); off: "
        "aiomqtt's own message loop, ~5x slower, for a paho release the fast path does not know",
    )
    shards: int = Field(1, ge=1, description="Gateways splitting the sites (scale-out)")
    shard: int | None = Field(
        None, ge=0, description="This gateway's share: sites with crc32(id) % shards == shard"
    )
    partition_all_topics: bool = Field(
        False, description="Partition by reading every topic (covers sites not registered)"
    )

    def connection(self, client_id: str, *, persistent: bool = False) -> MqttConnection:
        """The connection parameters of one client of ours; ``persistent``: the broker
        keeps its session (and queue) ``session_expiry_s`` while it is away."""
        return MqttConnection(
            host=self.host,
            port=self.port,
            client_id=client_id,
            username=self.username,
            password=self.password.get_secret_value() if self.password else None,
            protocol=self.protocol,
            tls=self.tls,
            ca_file=self.ca_file,
            keepalive_s=self.keepalive_s,
            session_expiry_s=self.session_expiry_s if persistent else None,
            receive_maximum=self.receive_maximum if persistent else None,
        )


class StoreSettings(Section):
    """Where telemetry and state are written."""

    backend: Literal["sqlite", "influxdb"] = "sqlite"
    sqlite_path: Path | None = Field(None, description="Default: <data_dir>/sumpwatch.db")
    state_url: SecretStr | None = Field(
        None,
        description="State (findings, alerts, outbox, accounts, cases) in PostgreSQL: "
        "postgresql://user:password@host:port/db (default: in the SQLite file)",
    )
    batch_max: int = Field(5000, ge=1, description="Most messages written in one transaction")
    batch_interval_s: float = Field(0.05, gt=0, description="Longest a message waits to be written")
    rollup_interval_s: float = Field(60.0, gt=0, description="How often rollups are refreshed")

    @field_validator("state_url")
    @classmethod
    def _postgresql_only(cls, value: SecretStr | None) -> SecretStr | None:
        """State lives in SQLite (no URL) or PostgreSQL; any other URL is a typo."""
        if value is not None and not value.get_secret_value().startswith(
            ("postgresql://", "postgres://")
        ):
            raise ValueError("state_url must be a postgresql:// URL (or unset for SQLite)")
        return value


class InfluxSettings(Section):
    """InfluxDB, used when ``store.backend = "influxdb"``."""

    url: str = "http://127.0.0.1:8086"
    database: str = "sumpwatch"
    username: str | None = None
    password: SecretStr | None = None
    token: SecretStr | None = None
    gzip: bool = True
    spool_max_bytes: int = Field(1_000_000_000, description="Disk spool cap (outages)")
    spool_segment_bytes: int = 16 * 1024 * 1024
    batch_bytes: int = Field(4 * 1024 * 1024, description="Largest /write body")
    timeout_s: float = 10.0
    retry_min_s: float = 0.5
    retry_max_s: float = 30.0
    close_drain_s: float = Field(5.0, description="Spool replay allowed at shutdown")


class ValidationSettings(Section):
    """What telemetry is admitted."""

    max_future_skew_s: float = Field(
        DEFAULT_MAX_FUTURE_SKEW_S, description="Device clock may run this far ahead"
    )
    max_age_s: float = Field(90 * 86400, description="Older device timestamps are refused")
    open_enrolment: bool = Field(
        False,
        description="Accept telemetry of sites/nodes missing from the registry "
        "(default: dead-letter them as unknown_site / unknown_node)",
    )
    rate_limit_factor: float = Field(
        10.0,
        ge=0,
        description="A node may send this many times its registered rate, by its own "
        "clock; faster is dead-lettered as rate_limited (0: no limit)",
    )
    rate_limit_burst: float = Field(
        600.0, ge=1, description="Messages a node may send above its rate at once"
    )


class ApiSettings(Section):
    """The HTTP API and web pages."""

    host: str = "127.0.0.1"
    port: int = 8000
    secret_key: SecretStr = Field(
        SecretStr("change-me-in-production"), description="Signs session cookies"
    )
    auth_enabled: bool = Field(
        False, description="Require login/API token on every endpoint but /health"
    )
    users_file: Path | None = Field(None, description="Accounts created at start if missing")
    cookie_secure: bool | None = Field(
        None, description="Force the Secure cookie flag (default: when the request is HTTPS)"
    )
    trusted_proxies: list[str] = Field(
        default_factory=list,
        description="Reverse proxies (IPs or networks) whose X-Forwarded-For/-Proto are "
        "believed; none by default, so a client cannot choose its own address",
    )
    max_body_bytes: int = Field(
        64 * 1024, ge=1024, description="Largest request body (forms, JSON); more is 413"
    )
    public_url: str | None = Field(
        None, description="Base URL of the pages (HA's configuration_url); default the API's"
    )


class AlertsSettings(Section):
    """Alert routing (docs/alerts.md); the secrets are here, never in the routing file."""

    file: Path | None = Field(None, description="Alert routing TOML")
    smtp_password: SecretStr | None = None
    webhook_secret: SecretStr | None = None


class ReportsSettings(Section):
    """Scheduled reports (docs/reports.md)."""

    dir: Path | None = Field(None, description="Default: <data_dir>/reports")
    schedule: bool = Field(True, description="Write monthly and end-of-season reports")
    # Extra report cuts beside the season's (a drill, or the cluster proof): each
    # writes the reports with data through that instant, due settle_s after it.
    extra_cuts: tuple[datetime, ...] = Field((), description="Extra report cut instants")
    settle_s: float = Field(3600.0, ge=0, description="Wait after a cut before its report")
    check_s: float = Field(3600.0, gt=0, description="How often due reports are looked for")


class DetectorsSettings(Section):
    """Detector tuning."""

    silence_factor: float = Field(6.0, description="Silent after this many sample intervals")
    # A new holder of a shard relearns its sites' detectors from this much of the
    # shared time series (docs/deploy.md); 0 turns the warm-up off.
    warm_up_hours: float = Field(6.0, ge=0, description="Detector warm-up window at takeover")


class HomeAssistantSettings(Section):
    """Home Assistant MQTT discovery (docs/home-assistant.md)."""

    discovery: bool = Field(False, description="Publish HA discovery configs and site state")
    discovery_prefix: str = Field("homeassistant", description="Home Assistant's prefix")


class MapSettings(Section):
    """The console's street map (docs/ui.md): a village may run its own tile server."""

    tile_url: str = Field(
        "https://tile.openstreetmap.org/{z}/{x}/{y}.png", description="XYZ tile URL template"
    )
    attribution: str = Field(
        '&copy; <a href="https://www.openstreetmap.org/copyright">OpenStreetMap</a> contributors',
        description="Shown on the map, as the tile provider requires",
    )


SECTIONS: dict[str, type[Section]] = {
    "mqtt": MqttSettings,
    "store": StoreSettings,
    "influx": InfluxSettings,
    "validation": ValidationSettings,
    "api": ApiSettings,
    "alerts": AlertsSettings,
    "reports": ReportsSettings,
    "detectors": DetectorsSettings,
    "ha": HomeAssistantSettings,
    "map": MapSettings,
}

# Flat names whose new key is not "<section>_<key>" or plain "<key>".
_IRREGULAR: dict[str, tuple[str, str]] = {
    "store": ("store", "backend"),
    "api_host": ("api", "host"),
    "api_port": ("api", "port"),
    "alerts_file": ("alerts", "file"),
    "reports_dir": ("reports", "dir"),
    "report_schedule": ("reports", "schedule"),
    "ha_discovery": ("ha", "discovery"),
    "ha_discovery_prefix": ("ha", "discovery_prefix"),
}
# Sections whose flat names carried the section as a prefix (mqtt_host -> mqtt.host).
_PREFIXED = ("mqtt", "influx", "map")


# Keys new in the tree: they never had a flat name.
_NEW = {
    ("mqtt", "keepalive_s"),
    ("detectors", "warm_up_hours"),
    ("reports", "extra_cuts"),
    ("reports", "settle_s"),
    ("reports", "check_s"),
}


def _flat_names() -> dict[str, tuple[str, str]]:
    table = dict(_IRREGULAR)
    renamed = set(_IRREGULAR.values()) | _NEW
    for section, model in SECTIONS.items():
        for key in model.model_fields:
            if (section, key) not in renamed:
                table[f"{section}_{key}" if section in _PREFIXED else key] = (section, key)
    return table


FLAT_NAMES: dict[str, tuple[str, str]] = _flat_names()
"""Deprecated flat name -> (section, key). Kept for one release."""


def _warn_flat(flat: str, section: str, key: str, env: bool) -> None:
    old = f"{ENV_PREFIX}{flat.upper()}" if env else flat
    new = f"{ENV_PREFIX}{section.upper()}__{key.upper()}" if env else f"{section}.{key}"
    message = f"setting {old} is deprecated; use {new}"
    warnings.warn(message, DeprecationWarning, stacklevel=_callers_level())


def _callers_level() -> int:
    """The stack level of the first frame outside this module and pydantic: the
    warning then names the line that used the old name."""
    frame, level = sys._getframe(2), 2  # noqa: SLF001 (the caller of _warn_flat; cheap)
    while frame.f_back is not None and (
        frame.f_code.co_filename == __file__ or "pydantic" in frame.f_code.co_filename
    ):
        frame, level = frame.f_back, level + 1
    return level


def nest_flat(values: dict[str, Any], *, env: bool = False) -> dict[str, Any]:
    """``values`` with every flat name moved into its section (warning once each)."""
    nested: dict[str, Any] = {}
    for name, value in values.items():
        target = FLAT_NAMES.get(name)
        if name == "store" and isinstance(value, dict):
            target = None  # the new [store] section, not the old backend name
        if target is None:
            current = nested.get(name)
            both = isinstance(current, dict) and isinstance(value, dict)
            nested[name] = merge_overrides(current, value) if both else value  # type: ignore[arg-type]
            continue
        section, key = target
        _warn_flat(name, section, key, env)
        current = nested.get(section, {})
        if isinstance(current, dict):  # a copy: the caller's dict stays as it was
            nested[section] = {key: value, **current}
    return nested


class _LegacyEnvSource(PydanticBaseSettingsSource):
    """``SUMPWATCH_MQTT_HOST`` and the other flat variables of the last release, in
    ``variables`` (the environment, or a ``.env`` file's)."""

    def __init__(self, settings_cls: type[BaseSettings], variables: Mapping[str, str]) -> None:
        super().__init__(settings_cls)
        self._variables = variables

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # __call__ reads the whole environment at once

    def __call__(self) -> dict[str, Any]:
        found: dict[str, Any] = {}
        environ = {k.upper(): v for k, v in self._variables.items()}
        for flat in FLAT_NAMES:
            value = environ.get(f"{ENV_PREFIX}{flat.upper()}")
            if value is not None and flat != "store":
                found[flat] = value
        if "trusted_proxies" in found:
            found["trusted_proxies"] = _json_or_raw(found["trusted_proxies"])
        return nest_flat(found, env=True)


class _EnvSource(EnvSettingsSource):
    """The nested environment, plus the old ``SUMPWATCH_STORE=sqlite|influxdb``."""

    def prepare_field_value(
        self, field_name: str, field: FieldInfo, value: Any, value_is_complex: bool
    ) -> Any:
        if field_name == "store" and isinstance(value, str) and not value.startswith("{"):
            _warn_flat("store", "store", "backend", env=True)
            value = None  # merged back in by __call__
        return super().prepare_field_value(field_name, field, value, value_is_complex)

    def __call__(self) -> dict[str, Any]:
        data = super().__call__()
        backend = {k.upper(): v for k, v in os.environ.items()}.get(f"{ENV_PREFIX}STORE")
        if backend is not None and not backend.startswith("{"):
            store = data.setdefault("store", {})
            if isinstance(store, dict):
                store.setdefault("backend", backend)
        return data


def _json_or_raw(value: str) -> Any:
    import json

    try:
        return json.loads(value)
    except ValueError:
        return value


class Settings(BaseSettings):
    """Everything the gateway, API and alerting can be configured with, by section."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_file=".env",
        env_nested_delimiter="__",
        extra="ignore",
        validate_default=True,
    )

    # Where state lives.
    data_dir: Path = Field(Path("data"), description="Folder for the SQLite store and spools")
    sites_file: Path = Field(EXAMPLE_SITES, description="Site registry (TOML)")
    rule_packs_dir: Path | None = Field(None, description="Extra rule packs (TOML) folder")

    mqtt: MqttSettings = Field(default_factory=MqttSettings)
    store: StoreSettings = Field(default_factory=StoreSettings)
    influx: InfluxSettings = Field(default_factory=InfluxSettings)
    validation: ValidationSettings = Field(default_factory=ValidationSettings)
    api: ApiSettings = Field(default_factory=ApiSettings)
    alerts: AlertsSettings = Field(default_factory=AlertsSettings)
    reports: ReportsSettings = Field(default_factory=ReportsSettings)
    detectors: DetectorsSettings = Field(default_factory=DetectorsSettings)
    ha: HomeAssistantSettings = Field(default_factory=HomeAssistantSettings)
    map: MapSettings = Field(default_factory=MapSettings)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Nested variables win over the deprecated flat ones."""
        return (
            init_settings,
            _EnvSource(settings_cls),
            _LegacyEnvSource(settings_cls, os.environ),
            dotenv_settings,
            file_secret_settings,
        )

    @model_validator(mode="before")
    @classmethod
    def _nest_flat_names(cls, data: Any) -> Any:
        """Flat keyword arguments and TOML keys of the last release, into their section."""
        return nest_flat(data) if isinstance(data, dict) else data

    def updated(self, **overrides: Any) -> Settings:
        """A validated copy with nested overrides: ``updated(mqtt={"port": 1884})``.

        Not ``model_copy(update=...)``, which neither validates nor merges sections.
        """
        return type(self).model_validate(merge_overrides(self.model_dump(), overrides))

    @property
    def reports_folder(self) -> Path:
        """Where scheduled reports are written."""
        return self.reports.dir or self.data_dir / "reports"

    @property
    def sqlite_file(self) -> Path:
        """The SQLite database file actually used."""
        return self.store.sqlite_path or self.data_dir / "sumpwatch.db"


def merge_overrides(base: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``update`` laid over it, section by section."""
    merged = dict(base)
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge_overrides(merged[key], value)
        else:
            merged[key] = value
    return merged


def load_settings(config_file: Path | None = None, **overrides: Any) -> Settings:
    """Build Settings from an optional TOML file plus explicit (nested) overrides.

    ``overrides`` are ``section={"key": value}`` or top-level ``data_dir=...``; a None
    value (an unset CLI flag) is left out.
    """
    values: dict[str, Any] = {}
    if config_file is not None:
        values = nest_flat(read_toml(config_file, "settings file"))
    given = {k: _drop_none(v) for k, v in overrides.items() if v is not None}
    return Settings(**merge_overrides(values, {k: v for k, v in given.items() if v != {}}))


def _drop_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: v for k, v in value.items() if v is not None}
    return value
