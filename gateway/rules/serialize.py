"""The stable JSON shape of a finding (replay output, store, API share it).

Documented in ``docs/detectors.md``; add keys, never rename or remove them.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from gateway.domain import Audience, Citation, Finding, FindingEvent, Severity


def ts_text(ts: datetime | None) -> str | None:
    """RFC 3339 in UTC with a Z."""
    if ts is None:
        return None
    return ts.isoformat().replace("+00:00", "Z")


def citation_json(c: Citation) -> dict[str, str]:
    """A citation as a JSON object."""
    return {"file": c.file, "section": c.section, "quote": c.quote, "text": str(c)}


def finding_json(f: Finding) -> dict[str, Any]:
    """A finding as a JSON object (keys in a fixed order)."""
    return {
        "id": f.id,
        "rule_id": f.rule_id,
        "site_id": f.site_id,
        "severity": f.severity.value,
        "level": f.level,
        "title": f.title,
        "opened_at": ts_text(f.opened_at),
        "updated_at": ts_text(f.updated_at),
        "cleared_at": ts_text(f.cleared_at),
        "open": f.is_open,
        "audience": [a.value for a in f.audience],
        "evidence": dict(f.evidence),
        "citations": [citation_json(c) for c in f.citations],
        "action": f.action,
    }


def event_json(e: FindingEvent) -> dict[str, Any]:
    """A finding event: ``{"change": "opened|updated|cleared", "finding": {...}}``."""
    return {"change": e.change.value, "finding": finding_json(e.finding)}


def finding_from_json(d: dict[str, Any]) -> Finding:
    """Inverse of :func:`finding_json`."""
    return Finding(
        id=d["id"],
        rule_id=d["rule_id"],
        site_id=d["site_id"],
        severity=Severity(d["severity"]),
        title=d["title"],
        opened_at=datetime.fromisoformat(d["opened_at"]),
        updated_at=datetime.fromisoformat(d["updated_at"]),
        cleared_at=None if d["cleared_at"] is None else datetime.fromisoformat(d["cleared_at"]),
        level=d.get("level", ""),
        audience=tuple(Audience(a) for a in d.get("audience", ["homeowner"])),
        evidence=d.get("evidence", {}),
        citations=tuple(
            Citation(c["file"], c["section"], c.get("quote", "")) for c in d.get("citations", [])
        ),
        action=d.get("action", ""),
    )
