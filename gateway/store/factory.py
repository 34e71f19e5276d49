"""Choose the time-series backend from settings."""

from __future__ import annotations

from gateway.settings import Settings
from gateway.state.database import SqliteDatabase
from gateway.store.base import TimeSeriesStore
from gateway.store.sqlite import SqliteStore


def make_store(settings: Settings, db: SqliteDatabase) -> TimeSeriesStore:
    """The configured store (not yet opened)."""
    if settings.store.backend == "sqlite":
        return SqliteStore(db)
    if settings.store.backend == "influxdb":
        # Imported here so the SQLite-only demo never needs the HTTP client set up.
        from gateway.store.influx import InfluxStore

        return InfluxStore(settings, db)
    from gateway.errors import ConfigError

    raise ConfigError(f"store {settings.store.backend!r} is not available in this build")
