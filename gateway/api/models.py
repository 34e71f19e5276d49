"""Response models of the API (pydantic: this is an edge)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from gateway.domain import DeadLetter, Reading
from gateway.registry import SiteConfig


class HealthPublic(BaseModel):
    """Is the gateway doing its job."""

    status: Literal["ok", "degraded"]
    broker_connected: bool
    store: str
    store_writable: bool
    ingest_lag_s: float = Field(description="Age of the oldest message not yet stored")
    pending: int
    last_message_at: datetime | None
    last_flush_at: datetime | None
    uptime_s: float


class NodePublic(BaseModel):
    """A node of a site, with its availability."""

    id: str
    kind: str
    interval_s: float
    online: bool | None = None
    last_seen: datetime | None = None


class SiteSummary(BaseModel):
    """A site in a list."""

    id: str
    name: str
    address: str
    jurisdiction: str
    timezone: str
    lat: float | None
    lon: float | None


class SitePublic(SiteSummary):
    """A site with its nodes and installation."""

    nodes: list[NodePublic]
    pit: dict[str, float]
    installation: dict[str, object]
    waivers: list[dict[str, object]]

    @classmethod
    def summary(cls, site: SiteConfig) -> SiteSummary:
        """The short form."""
        return SiteSummary(
            id=site.id,
            name=site.name,
            address=site.address,
            jurisdiction=site.jurisdiction,
            timezone=site.timezone,
            lat=site.lat,
            lon=site.lon,
        )


class ReadingPublic(BaseModel):
    """One stored message."""

    node_id: str
    kind: str
    ts: datetime
    seq: int
    boot: str
    values: dict[str, float | bool]

    @classmethod
    def of(cls, reading: Reading, fields: tuple[str, ...] = ()) -> ReadingPublic:
        """From a Reading, keeping only ``fields`` when given."""
        values = dict(reading.values)
        if fields:
            values = {k: v for k, v in values.items() if k in fields}
        return cls(
            node_id=reading.node_id,
            kind=reading.kind.value,
            ts=reading.ts,
            seq=reading.seq,
            boot=reading.boot,
            values=values,
        )


class ReadingsPublic(BaseModel):
    """A range of readings of one site."""

    site_id: str
    count: int
    readings: list[ReadingPublic]


class DeadLetterPublic(BaseModel):
    """A refused message and why."""

    id: int | None
    received_at: datetime
    topic: str
    reason: str
    detail: str
    payload: str = Field(description="The raw payload, UTF-8 with replacement characters")
    payload_bytes: int

    @classmethod
    def of(cls, letter: DeadLetter) -> DeadLetterPublic:
        """From a DeadLetter."""
        return cls(
            id=letter.id,
            received_at=letter.received_at,
            topic=letter.topic,
            reason=letter.reason,
            detail=letter.detail,
            payload=letter.payload[:4096].decode("utf-8", "replace"),
            payload_bytes=len(letter.payload),
        )


class DeadLettersPublic(BaseModel):
    """Dead letters with totals by reason."""

    counts: dict[str, int]
    items: list[DeadLetterPublic]
