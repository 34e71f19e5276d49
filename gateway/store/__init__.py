"""Storage: the time-series store (SQLite or InfluxDB) and the batching writer."""

from gateway.state.database import SqliteDatabase
from gateway.store.base import Point, SeriesQuery, TimeSeriesStore

__all__ = ["Point", "SeriesQuery", "SqliteDatabase", "TimeSeriesStore"]
