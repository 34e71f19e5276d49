"""Alerts: lifecycle from findings, two-audience routing, durable delivery (outbox).

Wire with :class:`AlertManager` and :func:`load_alerts_config`; docs/alerts.md.
"""

from alerts.config import AlertsConfig, load_alerts_config
from alerts.manager import AlertManager
from alerts.models import Alert, AlertQuery, AlertState, InvalidTransition

__all__ = [
    "Alert",
    "AlertManager",
    "AlertQuery",
    "AlertState",
    "AlertsConfig",
    "InvalidTransition",
    "load_alerts_config",
]
