"""The one Settings class. Values come from arguments, ``SUMPWATCH_*`` environment
variables, a ``.env`` file, or a TOML file given with ``--config``, in that order."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from gateway.contract import DEFAULT_MAX_FUTURE_SKEW_S
from gateway.examples import EXAMPLE_SITES
from gateway.tomlfile import read_toml

PACKAGE_DIR = Path(__file__).resolve().parent
REPO_DIR = PACKAGE_DIR.parent


class Settings(BaseSettings):
    """Everything the gateway, API and alerting can be configured with."""

    model_config = SettingsConfigDict(
        env_prefix="SUMPWATCH_", env_file=".env", extra="ignore", validate_default=True
    )

    # Where state lives.
    data_dir: Path = Field(Path("data"), description="Folder for the SQLite store and spools")
    sites_file: Path = Field(EXAMPLE_SITES, description="Site registry (TOML)")
    rule_packs_dir: Path | None = Field(None, description="Extra rule packs (TOML) folder")

    # MQTT
    mqtt_host: str = "127.0.0.1"
    mqtt_port: int = 1883
    mqtt_username: str | None = None
    mqtt_password: SecretStr | None = None
    mqtt_protocol: Literal["5", "3.1.1"] = Field(
        "5", description="MQTT version; 3.1.1 only for the embedded demo broker"
    )
    mqtt_tls: bool = False
    mqtt_ca_file: Path | None = None
    mqtt_client_id: str | None = Field(
        None,
        description="Fixed: the session is persistent (default: generated once, kept in "
        "<data_dir>/mqtt-client-id)",
    )
    mqtt_session_expiry_s: int = Field(7 * 86400, description="Broker keeps our queue this long")
    mqtt_receive_maximum: int = Field(
        20000, description="Unacknowledged QoS 1 messages the broker may send us at once"
    )
    mqtt_shared_group: str | None = Field(
        None, description="Join the $share/<group>/ subscription (scale-out)"
    )
    mqtt_reconnect_max_s: float = 30.0
    mqtt_fast_path: bool = Field(
        True,
        description="Parse PUBLISH packets in bulk (gateway/ingest/_paho_fastpath.py); off: "
        "aiomqtt's own message loop, ~5x slower, for a paho release the fast path does not know",
    )
    mqtt_shards: int = Field(1, ge=1, description="Gateways splitting the sites (scale-out)")
    mqtt_shard: int | None = Field(
        None, ge=0, description="This gateway's share: sites with crc32(id) % shards == shard"
    )
    mqtt_partition_all_topics: bool = Field(
        False, description="Partition by reading every topic (covers sites not registered)"
    )

    # Store
    store: Literal["sqlite", "influxdb"] = "sqlite"
    sqlite_path: Path | None = Field(None, description="Default: <data_dir>/sumpwatch.db")
    state_url: SecretStr | None = Field(
        None,
        description="State (findings, alerts, outbox, accounts, cases) in PostgreSQL: "
        "postgresql://user:password@host:port/db (default: in the SQLite file)",
    )
    batch_max: int = Field(5000, ge=1, description="Most messages written in one transaction")
    batch_interval_s: float = Field(0.05, gt=0, description="Longest a message waits to be written")

    # InfluxDB (store = "influxdb")
    influx_url: str = "http://127.0.0.1:8086"
    influx_database: str = "sumpwatch"
    influx_username: str | None = None
    influx_password: SecretStr | None = None
    influx_token: SecretStr | None = None
    influx_gzip: bool = True
    influx_spool_max_bytes: int = Field(1_000_000_000, description="Disk spool cap (outages)")
    influx_spool_segment_bytes: int = 16 * 1024 * 1024
    influx_batch_bytes: int = Field(4 * 1024 * 1024, description="Largest /write body")
    influx_timeout_s: float = 10.0
    influx_retry_min_s: float = 0.5
    influx_retry_max_s: float = 30.0
    influx_close_drain_s: float = Field(5.0, description="Spool replay allowed at shutdown")
    rollup_interval_s: float = Field(60.0, gt=0, description="How often rollups are refreshed")

    # Validation
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

    # API
    api_host: str = "127.0.0.1"
    api_port: int = 8000
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

    # Alerts (routing file: docs/alerts.md; secrets only from the environment)
    alerts_file: Path | None = Field(None, description="Alert routing TOML")
    smtp_password: SecretStr | None = None
    webhook_secret: SecretStr | None = None

    # Reports (docs/reports.md)
    reports_dir: Path | None = Field(None, description="Default: <data_dir>/reports")
    report_schedule: bool = Field(True, description="Write monthly and end-of-season reports")

    # Detectors
    silence_factor: float = Field(6.0, description="Silent after this many sample intervals")

    # Home Assistant MQTT discovery (docs/home-assistant.md)
    ha_discovery: bool = Field(False, description="Publish HA discovery configs and site state")
    ha_discovery_prefix: str = Field("homeassistant", description="Home Assistant's prefix")
    public_url: str | None = Field(
        None, description="Base URL of the pages (HA's configuration_url); default the API's"
    )

    # The console's street map (docs/ui.md): a village may run its own tile server.
    map_tile_url: str = Field(
        "https://tile.openstreetmap.org/{z}/{x}/{y}.png", description="XYZ tile URL template"
    )
    map_attribution: str = Field(
        '&copy; <a href="https://www.openstreetmap.org/copyright">OpenStreetMap</a> contributors',
        description="Shown on the map, as the tile provider requires",
    )

    @field_validator("state_url")
    @classmethod
    def _postgresql_only(cls, value: SecretStr | None) -> SecretStr | None:
        """State lives in SQLite (no URL) or PostgreSQL; any other URL is a typo."""
        if value is not None and not value.get_secret_value().startswith(
            ("postgresql://", "postgres://")
        ):
            raise ValueError("state_url must be a postgresql:// URL (or unset for SQLite)")
        return value

    @property
    def reports_folder(self) -> Path:
        """Where scheduled reports are written."""
        return self.reports_dir or self.data_dir / "reports"

    @property
    def sqlite_file(self) -> Path:
        """The SQLite database file actually used."""
        return self.sqlite_path or self.data_dir / "sumpwatch.db"

    # --- issue 18, several hosts (flat fields to fold into the nested sections) ---
    # A new holder of a shard relearns its sites' detectors from this much of the
    # shared time series (docs/deploy.md); 0 turns the warm-up off.
    warm_up_hours: float = Field(6.0, ge=0, description="Detector warm-up window at takeover")
    # Extra report cuts beside the season's (a drill, or the cluster proof): each
    # writes the reports with data through that instant, due report_settle_s after it.
    report_extra_cuts: tuple[datetime, ...] = Field((), description="Extra report cut instants")
    report_settle_s: float = Field(3600.0, ge=0, description="Wait after a cut before its report")
    report_check_s: float = Field(3600.0, gt=0, description="How often due reports are looked for")
    # --- end of issue 18 block ---


def load_settings(config_file: Path | None = None, **overrides: Any) -> Settings:
    """Build Settings from an optional TOML file plus explicit overrides."""
    values: dict[str, Any] = {}
    if config_file is not None:
        values.update(read_toml(config_file, "settings file"))
    values.update({k: v for k, v in overrides.items() if v is not None})
    return Settings(**values)
