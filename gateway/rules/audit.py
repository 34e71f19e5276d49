"""Static installation audit: a site's registered installation against its pack.

Each pack requirement is one of a few *check kinds* (docs/rule-packs.md); this
module is the only code that interprets them, so a new pack needs no code.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum
from typing import Any, Literal

from gateway.domain import Citation
from gateway.registry.models import SiteConfig
from gateway.rules.pack import Requirement, RulePack

AuditStatus = Literal["fail", "advisory", "unknown"]


@dataclass(frozen=True, slots=True)
class AuditItem:
    """One requirement a site fails (or may fail: advisory; cannot tell: unknown)."""

    site_id: str
    jurisdiction: str
    requirement_id: str
    status: AuditStatus
    message: str
    action: str
    field: str
    actual: Any
    expected: Any
    citations: tuple[Citation, ...]


def _plain(value: Any) -> Any:
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value


def _fmt(value: Any) -> str:
    value = _plain(value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, list):
        return " or ".join(str(v) for v in value)
    return str(value)


def _passes(check: str, actual: Any, expected: Any) -> bool:
    if check == "min":
        return bool(actual >= expected)
    if check == "max":
        return bool(actual <= expected)
    if check == "gt":
        return bool(actual > expected)
    if check == "lt":
        return bool(actual < expected)
    if check == "equals":
        return bool(actual == expected)
    if check == "in":
        return actual in expected
    if check == "not_in":
        return actual not in expected
    raise ValueError(f"unknown check kind {check!r}")


def _applies(req: Requirement, site: SiteConfig) -> bool:
    inst = site.installation
    for name, allowed in req.when.items():
        if _plain(getattr(inst, name)) not in allowed:
            return False
    since = inst.discharge_existing_since
    return not (
        req.unless_existing_before is not None
        and since is not None
        and since < req.unless_existing_before
    )


def audit_site(site: SiteConfig, pack: RulePack) -> list[AuditItem]:
    """Every requirement of the pack that the site fails, in pack order."""
    items: list[AuditItem] = []
    for req in pack.requirements:
        if not _applies(req, site):
            continue
        actual = _plain(getattr(site.installation, req.field))
        if actual is None:
            if req.status != "fail":
                continue  # an advisory on a value nobody recorded is noise
            status: AuditStatus = "unknown"
            message = f"{req.field} is not recorded for this site; cannot check {req.id}."
        elif _passes(req.check, actual, req.expected):
            continue
        else:
            status = req.status
            message = req.message.format(actual=_fmt(actual), expected=_fmt(req.expected))
        items.append(
            AuditItem(
                site_id=site.id,
                jurisdiction=pack.id,
                requirement_id=req.id,
                status=status,
                message=message,
                action=req.action,
                field=req.field,
                actual=actual,
                expected=_plain(req.expected),
                citations=req.citations,
            )
        )
    return items


def audit_sites(sites: Iterable[SiteConfig], packs: dict[str, RulePack]) -> list[AuditItem]:
    """Audit many sites; a site whose jurisdiction has no pack yields one "unknown" item."""
    items: list[AuditItem] = []
    for site in sites:
        pack = packs.get(site.jurisdiction)
        if pack is None:
            items.append(
                AuditItem(
                    site_id=site.id,
                    jurisdiction=site.jurisdiction,
                    requirement_id="rule_pack",
                    status="unknown",
                    message=f"No rule pack for jurisdiction {site.jurisdiction!r}.",
                    action="Add a rule pack for this jurisdiction.",
                    field="jurisdiction",
                    actual=site.jurisdiction,
                    expected=sorted(packs),
                    citations=(),
                )
            )
            continue
        items.extend(audit_site(site, pack))
    return items
