"""The time-series store interface every backend implements (SQLite, InfluxDB).

The gateway, API, detectors' history queries and reports use only this
interface, so they work unchanged on either backend.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from gateway.domain import Reading


@dataclass(frozen=True, slots=True)
class Point:
    """One value of one field at one time."""

    ts: datetime
    value: float


@dataclass(frozen=True, slots=True)
class SeriesQuery:
    """A range query for one site's readings."""

    site_id: str
    node_id: str | None = None
    fields: tuple[str, ...] = ()
    start: datetime | None = None
    end: datetime | None = None
    limit: int = 10_000


class TimeSeriesStore(Protocol):
    """Where validated readings are kept."""

    name: str

    async def open(self) -> None:
        """Connect and create what is missing."""

    async def close(self) -> None:
        """Flush and release resources."""

    async def write(self, readings: Sequence[Reading]) -> int:
        """Store a batch idempotently; return how many were new.

        The identity of a reading is (site_id, node_id, boot, seq): writing the
        same reading twice keeps one copy.
        """

    async def readings(self, query: SeriesQuery) -> list[Reading]:
        """Readings in [start, end) in device-time order, at most ``limit``."""

    async def latest(self, site_id: str) -> dict[str, Reading]:
        """The newest reading of each node of a site, by node id."""

    async def count(self, site_id: str | None = None) -> int:
        """How many readings are stored (for a site or in all)."""

    async def healthy(self) -> bool:
        """True when a write would succeed now."""
