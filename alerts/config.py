"""The alert routing file (``deploy/alerts.example.toml``): pydantic at the config edge.

Credentials never come from the file: ``smtp.password`` and ``webhook.secret`` are
refused there and passed in from Settings' alerts section
(``SUMPWATCH_ALERTS__SMTP_PASSWORD``, ``SUMPWATCH_ALERTS__WEBHOOK_SECRET``), which
reads the environment; this module does not. See ``docs/alerts.md``.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from gateway.domain import Severity
from gateway.errors import ConfigError
from gateway.tomlfile import read_toml, validated

# The variables the last release let the routing file rename. Settings reads them now
# (deprecated flat names of alerts.smtp_password / alerts.webhook_secret), so the file
# may still name them but not choose others.
DEFAULT_SMTP_ENV = "SUMPWATCH_SMTP_PASSWORD"
DEFAULT_WEBHOOK_ENV = "SUMPWATCH_WEBHOOK_SECRET"

_CFG = ConfigDict(extra="forbid", frozen=True)

CHANNELS = ("email", "webhook", "apprise")
"""Per-recipient channels. MQTT is per site, not per recipient."""


class SmtpConfig(BaseModel):
    """The outgoing mail server."""

    model_config = _CFG
    host: str = "127.0.0.1"
    port: int = Field(587, gt=0, lt=65536)
    security: Literal["starttls", "tls", "none"] = Field(
        "starttls", description="starttls (587), tls = implicit TLS (465), none (tests only)"
    )
    validate_certs: bool = True
    username: str | None = None
    password: SecretStr | None = Field(None, description="Never in the file: from Settings")
    password_env: str = Field(
        DEFAULT_SMTP_ENV, description="Deprecated: only the default (Settings reads it) is allowed"
    )
    sender: str = "SumpWatch <alerts@localhost>"
    timeout_s: float = Field(30.0, gt=0)


class WebhookConfig(BaseModel):
    """Signing and timeouts for webhook deliveries."""

    model_config = _CFG
    secret: SecretStr | None = Field(None, description="HMAC key; never in the file")
    secret_env: str = Field(
        DEFAULT_WEBHOOK_ENV, description="Deprecated: only the default (Settings reads it)"
    )
    timeout_s: float = Field(10.0, gt=0)


class RetryPolicy(BaseModel):
    """Exponential backoff with jitter between delivery attempts."""

    model_config = _CFG
    initial_s: float = Field(10.0, gt=0)
    multiplier: float = Field(2.0, ge=1)
    max_s: float = Field(1800.0, gt=0)
    jitter: float = Field(0.2, ge=0, le=1, description="+/- this fraction of each delay")
    max_attempts: int = Field(12, ge=1, description="Then the notification is 'failed'")


class MqttStateConfig(BaseModel):
    """Retained alert state per site for home automation."""

    model_config = _CFG
    enabled: bool = True
    topic_prefix: str = "sumpwatch/v1"
    qos: int = Field(1, ge=0, le=2)


class Recipient(BaseModel):
    """A public works recipient, routed by rule and severity."""

    model_config = _CFG
    name: str = ""
    email: str | None = None
    webhook_url: str | None = None
    apprise_urls: tuple[str, ...] = ()
    rules: tuple[str, ...] = Field((), description="Rule ids; empty = every ordinance rule")
    min_severity: Severity = Severity.WARNING

    def wants(self, rule_id: str, severity: Severity) -> bool:
        """True when this recipient is routed alerts of that rule and severity."""
        if self.rules and rule_id not in self.rules:
            return False
        return SEVERITY_RANK[severity] >= SEVERITY_RANK[self.min_severity]


class Jurisdiction(BaseModel):
    """Public works routing for one rule pack / jurisdiction."""

    model_config = _CFG
    name: str = ""
    default_assignee: str | None = Field(None, description="Set on alerts escalated here")
    recipients: tuple[Recipient, ...] = ()


class AlertsConfig(BaseModel):
    """Everything the alert manager is configured with."""

    model_config = _CFG
    smtp: SmtpConfig | None = Field(None, description="No [smtp] table: email is not sent")
    webhook: WebhookConfig = WebhookConfig()
    mqtt: MqttStateConfig = MqttStateConfig()
    retry: RetryPolicy = RetryPolicy()
    repeat_interval_s: float = Field(
        900.0, gt=0, description="Critical homeowner alerts repeat this often until acknowledged"
    )
    repeat_max: int | None = Field(None, ge=0, description="Stop repeating after this many")
    flap_window_s: float = Field(
        600.0, ge=0, description="A finding re-opened this soon after clearing updates its alert"
    )
    poll_interval_s: float = Field(1.0, gt=0, description="Delivery loop tick")
    send_timeout_s: float = Field(60.0, gt=0, description="Longest one send may take")
    max_concurrent_sends: int = Field(8, ge=1)
    public_url: str | None = Field(None, description="Dashboard base URL for links in messages")
    jurisdictions: dict[str, Jurisdiction] = Field(default_factory=dict)

    @property
    def repeat_interval(self) -> timedelta:
        """Repeat interval as a timedelta."""
        return timedelta(seconds=self.repeat_interval_s)

    @property
    def flap_window(self) -> timedelta:
        """Flap window as a timedelta."""
        return timedelta(seconds=self.flap_window_s)

    def jurisdiction(self, jurisdiction_id: str) -> Jurisdiction:
        """The routing of one jurisdiction (empty when not configured)."""
        return self.jurisdictions.get(jurisdiction_id, Jurisdiction())

    def with_secrets(
        self,
        *,
        smtp_password: SecretStr | str | None = None,
        webhook_secret: SecretStr | str | None = None,
    ) -> AlertsConfig:
        """A copy with credentials filled in (from Settings); None keeps the current one."""
        update: dict[str, Any] = {}
        if smtp_password is not None and self.smtp is not None:
            update["smtp"] = self.smtp.model_copy(update={"password": _secret(smtp_password)})
        if webhook_secret is not None:
            update["webhook"] = self.webhook.model_copy(update={"secret": _secret(webhook_secret)})
        return self.model_copy(update=update)


SEVERITY_RANK: dict[Severity, int] = {Severity.INFO: 0, Severity.WARNING: 1, Severity.CRITICAL: 2}


def _secret(value: SecretStr | str) -> SecretStr:
    return value if isinstance(value, SecretStr) else SecretStr(value)


def load_alerts_config(
    path: Path | None,
    *,
    smtp_password: SecretStr | None = None,
    webhook_secret: SecretStr | None = None,
) -> AlertsConfig:
    """Read the routing file (defaults when ``path`` is None) with the secrets given
    (from Settings' alerts section).

    A password or secret written in the file is refused: the file is meant to be
    committed and shared.
    """
    data: dict[str, Any] = {}
    if path is not None:
        data = read_toml(path, "alerts file")
        _refuse_secrets_in(data, path)
    config = validated(data, AlertsConfig, path or Path("(defaults)"), "alerts file")
    return config.with_secrets(smtp_password=smtp_password, webhook_secret=webhook_secret)


def _refuse_secrets_in(data: dict[str, Any], path: Path) -> None:
    checks = (("smtp", "password", DEFAULT_SMTP_ENV), ("webhook", "secret", DEFAULT_WEBHOOK_ENV))
    for table, key, default_env in checks:
        if key in data.get(table, {}):
            raise ConfigError(
                f"alerts file {path}: [{table}].{key} must not be in the file; set "
                f"SUMPWATCH_ALERTS__{table.upper()}_{key.upper()} in the environment"
            )
        if data.get(table, {}).get(f"{key}_env", default_env) != default_env:
            raise ConfigError(
                f"alerts file {path}: [{table}].{key}_env is no longer read; set "
                f"SUMPWATCH_ALERTS__{table.upper()}_{key.upper()} in the environment"
            )
