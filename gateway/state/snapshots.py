"""Frozen evidence: what a finding looked like when it opened and at each level change.

A snapshot is canonical JSON (sorted keys, no spaces, UTF-8) and its SHA-256, so a
report for a past month can show exactly what the system saw then, and anyone can
check that the stored text is the text that was hashed. Pure functions; the
:class:`~gateway.state.findings.FindingRepository` stores them, never overwriting.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gateway.domain import Finding, FindingChange, FindingEvent, Reading

#: Bumped when the content layout changes, so an old snapshot is read by its own rules.
SNAPSHOT_FORMAT = 1


@dataclass(frozen=True, slots=True)
class SnapshotContext:
    """What surrounded a finding at the moment of the snapshot (gathered by the runtime).

    ``readings`` is the site's readings window as stored; ``sensor_health`` the last
    availability of each node; ``pack`` the rule pack id and the hash of its file.
    """

    pack: str = ""
    window_start: datetime | None = None
    window_end: datetime | None = None
    readings: tuple[Mapping[str, Any], ...] = ()
    sensor_health: tuple[Mapping[str, Any], ...] = ()
    #: What could not be gathered (e.g. the time-series store was down), said plainly.
    note: str = ""


@dataclass(frozen=True, slots=True)
class FindingSnapshot:
    """One stored snapshot: its canonical JSON ``content`` and that text's SHA-256."""

    seq: int
    finding_id: str
    change: str
    at: datetime
    severity: str
    level: str
    content: str
    sha256: str
    data: Mapping[str, Any] = field(default_factory=dict)

    @property
    def intact(self) -> bool:
        """True when the stored text still hashes to the stored digest."""
        return content_hash(self.content) == self.sha256


def canonical_json(value: Mapping[str, Any]) -> str:
    """The one text a mapping hashes as: sorted keys, compact, UTF-8, times as ISO."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def content_hash(text: str) -> str:
    """SHA-256 (hex) of canonical JSON text."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def pack_version(pack_id: str, source: Path | None) -> str:
    """``"edgar@sha256:<12 hex>"``: the pack and the exact file the finding was judged by."""
    if source is None or not source.is_file():
        return pack_id
    return f"{pack_id}@sha256:{content_hash(source.read_text(encoding='utf-8'))[:12]}"


def reading_record(reading: Reading) -> dict[str, Any]:
    """A reading as it goes into a snapshot (every stored field, times as UTC text)."""
    return {
        "node_id": reading.node_id,
        "kind": reading.kind.value,
        "ts": reading.ts.astimezone(UTC).isoformat(),
        "seq": reading.seq,
        "boot": reading.boot,
        "values": {k: reading.values[k] for k in sorted(reading.values)},
        "battery_v": reading.battery_v,
        "rssi_dbm": reading.rssi_dbm,
    }


def needs_snapshot(event: FindingEvent, previous_level: str | None) -> bool:
    """Opened, or updated to another level (``previous_level``: the level stored before)."""
    if event.change is FindingChange.OPENED:
        return True
    return (
        event.change is FindingChange.UPDATED
        and previous_level is not None
        and event.finding.level != previous_level
    )


def snapshot_content(
    finding: Finding, change: FindingChange, context: SnapshotContext
) -> dict[str, Any]:
    """The frozen picture of ``finding`` (evidence exactly as the detector gave it)."""
    return {
        "format": SNAPSHOT_FORMAT,
        "change": change.value,
        "finding": {
            "id": finding.id,
            "rule_id": finding.rule_id,
            "site_id": finding.site_id,
            "severity": finding.severity.value,
            "level": finding.level,
            "title": finding.title,
            "action": finding.action,
            "opened_at": finding.opened_at.astimezone(UTC).isoformat(),
            "updated_at": finding.updated_at.astimezone(UTC).isoformat(),
            "audience": [a.value for a in finding.audience],
            "evidence": dict(finding.evidence),
            "citations": [
                {"file": c.file, "section": c.section, "quote": c.quote} for c in finding.citations
            ],
        },
        "pack": context.pack,
        "readings_window": {
            "start": _iso(context.window_start),
            "end": _iso(context.window_end),
            "readings": [dict(r) for r in context.readings],
        },
        "sensor_health": [dict(h) for h in context.sensor_health],
        "note": context.note,
    }


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.astimezone(UTC).isoformat()


def events_to_snapshot(
    events: Iterable[FindingEvent], stored_levels: Mapping[str, str]
) -> list[FindingEvent]:
    """The events that will be snapshotted, given the levels stored before them."""
    levels = dict(stored_levels)
    out = []
    for e in events:
        if needs_snapshot(e, levels.get(e.finding.id)):
            out.append(e)
        levels[e.finding.id] = e.finding.level
    return out
