"""One exception root for the whole product (httpx style).

Library errors (sqlite3, aiomqtt, httpx, pydantic) are translated into these at the
edges, so callers catch ``SumpWatchError`` and never a third-party type.
"""

from __future__ import annotations


class SumpWatchError(Exception):
    """Root of every error SumpWatch raises on purpose."""


class ConfigError(SumpWatchError):
    """A settings value, site registry or rule pack is invalid."""


class RejectedMessage(SumpWatchError):
    """An MQTT message failed validation; ``reason`` is a short stable code."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


class StoreError(SumpWatchError):
    """The time-series or state store could not complete an operation."""


class StoreUnavailable(StoreError):
    """The store cannot be reached right now; the caller may retry later."""


class NotFound(SumpWatchError):
    """A requested site, node, finding or alert does not exist."""


class BrokerError(SumpWatchError):
    """The MQTT broker could not be reached or refused us."""


class NotEnabled(SumpWatchError):
    """A part of the gateway this request needs is not running here (e.g. alerting)."""
