"""The time-series store (SQLite or InfluxDB), its rollups, spool and batching writer.

The database handle and every other table live in :mod:`gateway.state`.
"""

from gateway.store.base import Point, SeriesQuery, TimeSeriesStore

__all__ = ["Point", "SeriesQuery", "TimeSeriesStore"]
