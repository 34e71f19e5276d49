"""The time-series store interface every backend implements (SQLite, InfluxDB).

The gateway, API, detectors' history queries and reports use only this
interface, so they work unchanged on either backend.
"""

from __future__ import annotations

from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Literal, Protocol

import numpy as np
import numpy.typing as npt

from gateway.contract import NodeKind
from gateway.domain import FindingEvent, Reading, StatusChange

#: Rollup bucket widths.
Resolution = Literal["1m", "1h"]
RESOLUTION_SECONDS: dict[str, int] = {"1m": 60, "1h": 3600}


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


@dataclass(frozen=True, slots=True)
class FieldStats:
    """Summary of one field's samples in a bucket (booleans as 0/1)."""

    count: int
    min: float
    max: float
    mean: float
    last: float


@dataclass(frozen=True, slots=True)
class Rollup:
    """One node's aggregate over one bucket ``[start, start + resolution)``.

    ``stats`` summarises the samples taken in the bucket. The totals treat each
    sample as holding until the next one (at most ``rollups.MAX_HOLD_S``), clipped
    to the bucket, so they add up exactly from 1-minute to 1-hour buckets and to a
    season: ``pump_on_s`` seconds the primary pump ran, ``pump_cycles`` its
    off→on transitions (counted in the bucket of the "on" sample), the same two for
    the backup pump, and ``pumped_volume_l`` the outlet flow integrated over time
    (discharge nodes). A bucket with no samples may still exist when a held value
    reaches into it (``samples == 0``).
    """

    site_id: str
    node_id: str
    kind: NodeKind
    resolution: Resolution
    start: datetime
    samples: int
    stats: Mapping[str, FieldStats] = field(default_factory=dict)
    pump_cycles: int = 0
    pump_on_s: float = 0.0
    backup_pump_cycles: int = 0
    backup_pump_on_s: float = 0.0
    pumped_volume_l: float = 0.0

    @property
    def end(self) -> datetime:
        """The first instant after the bucket."""
        return self.start + timedelta(seconds=RESOLUTION_SECONDS[self.resolution])


#: The hourly values a day rollup keeps, in the order of its columns (``<name>_h``).
DAY_SERIES = (
    "samples",
    "pump_cycles",
    "pump_on_s",
    "backup_pump_cycles",
    "pumped_volume_l",
    "pipe_temp_c_min",
    "air_temp_c_min",
    "air_temp_c_max",
)


@dataclass(frozen=True, slots=True)
class DayRollup:
    """One node's UTC day ``[day, day + 24 h)`` as its 24 hourly rollups reduced to
    what a season report adds up.

    ``hours[name][k]`` is hour ``k``'s value of a :data:`DAY_SERIES` entry, copied
    from that hour's :class:`Rollup` (``samples`` and the totals; the ``*_min`` and
    ``*_max`` are the stats' extremes). An hour without a rollup holds 0 and NaN; a
    statistic the node's kind never has is absent from ``hours``. Being copies, the
    report's sums over them equal its sums over the hourly rollups bit for bit.
    """

    site_id: str
    node_id: str
    kind: NodeKind
    day: datetime
    hours: Mapping[str, array[float]]


#: One value per hour (float64): what :class:`NodeHours` holds.
HourArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class NodeHours:
    """One node's day rollups laid end to end over ``hours`` hours from a start.

    ``series[name][i]`` is the :data:`DAY_SERIES` value of the node's 1-hour rollup
    that starts in ``[start + i h, start + (i + 1) h)``, copied (0 for a total and
    NaN for an extreme where the node had no such rollup); every series of the
    node's kind is present. What a season report adds up, as one array per series
    rather than a row per day: a site-season is ~10 arrays of 3,600 doubles.
    """

    node_id: str
    kind: NodeKind
    series: Mapping[str, HourArray]


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

    async def reused(self, readings: Sequence[Reading]) -> list[Reading]:
        """Of readings a ``write`` did not add, those whose identity is stored with
        other content (device time or values): a node reusing (boot, seq), not a
        redelivery. Called only when a batch had duplicates."""

    async def readings(self, query: SeriesQuery) -> list[Reading]:
        """Readings in [start, end) in device-time order, at most ``limit``."""

    async def latest(self, site_id: str) -> dict[str, Reading]:
        """The newest reading of each node of a site, by node id."""

    async def latest_of(self, site_ids: Sequence[str]) -> dict[str, dict[str, Reading]]:
        """:meth:`latest` of many sites in one call (the console reads 1,000 at once);
        a site without readings maps to an empty dict."""

    async def count(self, site_id: str | None = None) -> int:
        """How many readings are stored (for a site or in all)."""

    async def healthy(self) -> bool:
        """True when a write would succeed now."""

    async def write_events(
        self, statuses: Sequence[StatusChange] = (), findings: Sequence[FindingEvent] = ()
    ) -> None:
        """Copy node availability and finding changes into the time series (InfluxDB,
        for the Grafana dashboards). The SQLite store keeps these in its state tables
        already and ignores the call."""

    async def rollups(
        self,
        site_id: str,
        resolution: Resolution,
        start: datetime,
        end: datetime,
        node_id: str | None = None,
    ) -> list[Rollup]:
        """Stored rollups of a site whose bucket starts in [start, end), by start then node."""

    async def day_rollups(self, site_id: str, start: datetime, end: datetime) -> list[DayRollup]:
        """A site's day rollups of the UTC days overlapping [start, end), by day then node.

        Always consistent with the stored 1-hour rollups: days whose hours changed since
        the rollup job last reduced them are reduced first.
        """

    async def hour_series(self, site_id: str, start: datetime, hours: int) -> list[NodeHours]:
        """A site's day rollups as hourly series over ``hours`` hours from ``start``,
        one per node that has any day there, by node id.

        The same values as :meth:`day_rollups` (and as consistent with the 1-hour
        rollups), placed hour by hour: what a season report reads.
        """

    async def refresh_rollups(self, until: datetime | None = None) -> int:
        """Recompute the buckets that new readings touched, up to ``until`` (default now).

        Idempotent; call it periodically (the app does every minute). Returns how many
        1-minute buckets were recomputed.
        """

    def stats(self) -> dict[str, float]:
        """The store's own gauges for ``/metrics`` (spool size, ...); may be empty."""
