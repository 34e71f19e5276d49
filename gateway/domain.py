"""Frozen value types that flow through the pipeline.

Pydantic lives at the edges (MQTT payloads, API, config files); inside the
pipeline everything is one of these small immutable dataclasses.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, Protocol

from gateway.contract import NodeKind


@dataclass(frozen=True, slots=True)
class RawMessage:
    """An MQTT message as it arrived, before validation."""

    topic: str
    payload: bytes
    received_at: datetime
    mid: int = 0
    qos: int = 0
    retain: bool = False


@dataclass(frozen=True, slots=True)
class Reading:
    """One validated telemetry message: a node's sample at device time ``ts``.

    ``(site_id, node_id, boot, seq)`` is the message's identity: a QoS 1
    redelivery repeats it, a node that reboots draws a new ``boot``.
    """

    site_id: str
    node_id: str
    kind: NodeKind
    ts: datetime
    seq: int
    boot: str
    values: Mapping[str, float | bool]
    received_at: datetime
    battery_v: float | None = None
    rssi_dbm: float | None = None

    def number(self, name: str) -> float | None:
        """A numeric field (booleans as 0/1), or None when absent."""
        value = self.values.get(name)
        return None if value is None else float(value)


@dataclass(frozen=True, slots=True)
class StatusChange:
    """A node's retained availability message (``online``/``offline``)."""

    site_id: str
    node_id: str
    online: bool
    received_at: datetime


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """A message that failed validation, kept with the reason it was refused."""

    topic: str
    payload: bytes
    reason: str
    detail: str
    received_at: datetime
    id: int | None = None


class Severity(StrEnum):
    """How urgent a finding or alert is."""

    INFO = "info"
    WARNING = "warning"
    CRITICAL = "critical"


class Audience(StrEnum):
    """Who a finding is first for."""

    HOMEOWNER = "homeowner"
    PUBLIC_WORKS = "public_works"


@dataclass(frozen=True, slots=True)
class Citation:
    """Where in the ordinance texts a rule or number comes from."""

    file: str  # e.g. "000_86c7187f3bed6ca5.txt"
    section: str  # e.g. "(c)(2)b"
    quote: str = ""

    def __str__(self) -> str:
        # The machine form (logs, replay output); people read :meth:`cited`.
        return f"{self.file} §{self.section}"

    def cited(self, title: str | None) -> str:
        """For people: "<ordinance title> §<section>" (issue 20.3), as pages, alert
        messages and the audit table print it. ``title`` is the display name of the
        pack whose text this file is; None names an unknown text by its file."""
        return f"{ordinance_name(self.file, title)} §{self.section}"


def ordinance_name(file: str, title: str | None) -> str:
    """An ordinance's name for people: its pack's title, else "Ordinance <file>"."""
    return title or "Ordinance " + file


@dataclass(frozen=True, slots=True)
class Finding:
    """What a detector concluded about a site, with its evidence.

    One open finding per (site, rule): updated while the condition holds,
    cleared when it ends.
    """

    id: str
    rule_id: str
    site_id: str
    severity: Severity
    title: str
    opened_at: datetime
    updated_at: datetime
    cleared_at: datetime | None = None
    level: str = ""  # e.g. watch / warning / violation for icing risk
    audience: tuple[Audience, ...] = (Audience.HOMEOWNER,)
    evidence: Mapping[str, Any] = field(default_factory=dict)
    citations: tuple[Citation, ...] = ()
    action: str = ""  # what to do, in plain words

    @property
    def is_open(self) -> bool:
        """True until the condition has cleared."""
        return self.cleared_at is None


class FindingChange(StrEnum):
    """What happened to a finding."""

    OPENED = "opened"
    UPDATED = "updated"
    CLEARED = "cleared"


@dataclass(frozen=True, slots=True)
class FindingEvent:
    """A finding that opened, changed materially, or cleared."""

    change: FindingChange
    finding: Finding


class ConfirmationKind(StrEnum):
    """What kind of record confirms (or refutes) what telemetry suggested."""

    OBSERVATION = "observation"  # a dated sighting by public works or the public
    INSPECTION = "inspection"  # a village inspection result
    CORRECTION_PROOF = "correction_proof"  # a plumber's certificate, a photo of the fix


@dataclass(frozen=True, slots=True)
class Confirmation:
    """A recorded fact that turns a suspected finding into an observed one, or refutes it.

    Telemetry alone only ever suspects a violation: Edgar (c)(2)c needs an actual "icy
    condition", L.L. 6-2024 H "a build-up of icing", and a water balance that does not
    close can also be a leak or a failed sensor. A violation needs one of these.
    ``confirms`` False records a refuting result (an inspection that found no hose).
    """

    id: str
    site_id: str
    rule_id: str
    kind: ConfirmationKind
    observed_at: datetime
    confirms: bool
    source: str  # who: an inspector's name, "public works", a complaint reference
    note: str = ""
    case_id: str | None = None


class ConfirmationSource(Protocol):
    """Where verdicts read confirmations from (the cases package implements it)."""

    def confirmations(self, site_id: str, start: datetime, end: datetime) -> list[Confirmation]:
        """Records for one site with ``start <= observed_at < end``, oldest first."""
        ...


@dataclass(frozen=True, slots=True)
class NotEvaluated:
    """A span of one node's readings that arrived behind that node's newest.

    Stored and charted, but never judged: the detectors hold state in device-time
    order and cannot be rewound. ``id`` names the span so its record is updated in
    place while more late readings extend it; ``count`` is how many readings it holds.
    """

    id: str
    site_id: str
    node_id: str
    start: datetime
    end: datetime
    count: int
