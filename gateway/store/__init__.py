"""Storage: the time-series store (SQLite or InfluxDB) and the batching writer."""

from gateway.store.base import Point, SeriesQuery, TimeSeriesStore
from gateway.store.database import SqliteDatabase

__all__ = ["Point", "SeriesQuery", "SqliteDatabase", "TimeSeriesStore"]
