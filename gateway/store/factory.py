"""Choose the time-series backend from the ``store`` section."""

from __future__ import annotations

from pathlib import Path

from gateway.settings import InfluxSettings, StoreSettings
from gateway.state.database import SqliteDatabase
from gateway.store.base import TimeSeriesStore
from gateway.store.sqlite import SqliteStore


def make_store(
    store: StoreSettings, influx: InfluxSettings, db: SqliteDatabase, *, spool_dir: Path
) -> TimeSeriesStore:
    """The configured store (not yet opened). ``influx`` and ``spool_dir`` (where
    InfluxDB writes wait out an outage) matter only to the ``influxdb`` backend."""
    if store.backend == "sqlite":
        return SqliteStore(db)
    if store.backend == "influxdb":
        # Imported here so the SQLite-only demo never needs the HTTP client set up.
        from gateway.store.influx import InfluxStore

        return InfluxStore(influx, db, spool_dir=spool_dir)
    from gateway.errors import ConfigError

    raise ConfigError(f"store {store.backend!r} is not available in this build")
