"""Static installation audit: a site's registered installation against its pack.

Each pack requirement is one of a few *check kinds* (docs/rule-packs.md); this
module is the only code that interprets them, so a new pack needs no code.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import Enum
from typing import Any, Literal

from gateway.domain import Citation
from gateway.registry.models import Installation, SiteConfig
from gateway.rules.pack import Requirement, RulePack, Season

#: fail: recorded and fails; advisory: may fail; unknown: a fact it needs is not
#: recorded (never a pass, never a fail); waived: fails, but a waiver the pack's text
#: provides for covers it at the audit's instant.
AuditStatus = Literal["fail", "advisory", "unknown", "waived"]

#: How the audit names an installation fact nobody recorded.
FIELD_LABELS = {
    "destination": "where the discharge goes",
    "pipe_inside_diameter_in": "the discharge pipe's inside diameter",
    "pipe_rigid": "whether the discharge line is rigid pipe",
    "valving_or_quick_connect": "whether the line has valving or quick connections",
    "check_valve": "whether there is a check valve",
    "check_valve_height_ft": "the check valve's height above the floor",
    "air_gap": "whether the storm connection has an air gap",
    "union_coupling": "whether the storm connection has a union or coupling",
    "outlet_height_above_grade_ft": "the pipe's exit height above grade",
    "outlet_to_foundation_ft": "the outlet's distance from the foundation",
    "outlet_to_property_line_ft": "the outlet's distance from the property line",
    "outlet_to_walkway_ft": "the outlet's distance from a walkway",
    "outlet_to_right_of_way_ft": "the outlet's distance from the street or right-of-way",
    "flows_toward_property_line": "whether the discharge flows toward the property line",
    "absorbent_surface": "whether the discharge lands on an absorbent surface",
    "storm_sewer_available": "whether a storm sewer is available",
    "pit_to_floor_drain_ft": "the pit's distance from a floor drain",
    "discharge_existing_since": "the date the discharge was installed",
}
_MONTHS = (
    "January", "February", "March", "April", "May", "June", "July", "August",
    "September", "October", "November", "December",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class AuditItem:
    """One requirement a site fails (or may fail: advisory; cannot tell: unknown;
    fails under a waiver: waived)."""

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


#: Each check kind as a test of (actual, expected).
_CHECKS: dict[str, Callable[[Any, Any], bool]] = {
    "min": lambda actual, expected: bool(actual >= expected),
    "max": lambda actual, expected: bool(actual <= expected),
    "gt": lambda actual, expected: bool(actual > expected),
    "lt": lambda actual, expected: bool(actual < expected),
    "equals": lambda actual, expected: bool(actual == expected),
    "in": lambda actual, expected: actual in expected,
    "not_in": lambda actual, expected: actual not in expected,
}


def _passes(check: str, actual: Any, expected: Any) -> bool:
    test = _CHECKS.get(check)
    if test is None:
        raise ValueError(f"unknown check kind {check!r}")
    return test(actual, expected)


def season_advice(season: Season, day: Any) -> str:
    """How advice about the winter season starts on local ``day``: "Before November 15,"
    outside the season, "Now, during the winter season (Nov 15 - Apr 15)," inside it."""
    if season.contains(day):
        return f"Now, during the winter season ({season.label()}),"
    month, mday = season.start
    return f"Before {_MONTHS[month - 1]} {mday},"


def _facts(inst: Installation) -> dict[str, Any]:
    """The installation's facts by field name as the checks compare them (enums as
    their values), read once per audit rather than once per requirement."""
    return {name: _plain(value) for name, value in inst}


def _conditions(conds: Mapping[str, Any], facts: Mapping[str, Any]) -> tuple[bool, list[str]]:
    """(all recorded conditions hold, fields that are not recorded)."""
    missing: list[str] = []
    holds = True
    for name, allowed in conds.items():
        value = facts[name]
        if value is None:
            missing.append(name)
        elif value not in allowed:
            holds = False
    return holds, missing


def _unknown(fields: list[str], req: Requirement) -> str:
    labels = "; ".join(FIELD_LABELS.get(f, f.replace("_", " ")) for f in fields)
    return f"Not recorded: {labels}. Requirement {req.id} could not be checked."


#: (status or None when met / not applicable, message, actual value).
_Judgement = tuple[AuditStatus | None, str, Any]


def _judge(req: Requirement, facts: Mapping[str, Any]) -> _Judgement:
    """(status or None when met / not applicable, message, actual value).

    A recorded value that passes is met whatever else is unknown (whether the
    requirement applies, the install date); a failing one counts only once every
    fact deciding that it applies is recorded.
    """
    applies, missing = _conditions(req.when, facts)
    if not applies:
        return None, "", None
    since = facts["discharge_existing_since"]
    before = req.unless_existing_before
    if before is not None:
        if since is None:
            missing.append("discharge_existing_since")
        elif since <= before:  # "existing ... as of January 1, 2024": that day included
            return None, "", None
    actual = facts[req.field]
    if actual is not None and _passes(req.check, actual, req.expected):
        return None, "", actual
    if req.met_if:
        met, unrecorded = _conditions(req.met_if, facts)
        if met and not unrecorded:
            return None, "", actual  # met through the alternative another provision gives
        if met:
            missing += unrecorded
    if actual is None:
        missing.append(req.field)
    if missing:
        return ("unknown" if req.status == "fail" else None), _unknown(missing, req), actual
    return req.status, req.message.format(actual=_fmt(actual), expected=_fmt(req.expected)), actual


#: What a pack's requirements say of one installation: (requirement, status, message,
#: actual, expected) for each it fails, may fail or cannot check.
_Judged = list[tuple[Requirement, AuditStatus, str, Any, Any]]
#: Judgements made, per pack and installation facts: a village's sites mostly record
#: the same few facts (or none), so 1,000 audits make a handful of distinct judgements.
#: Keyed by the pack's identity (the entry keeps the pack, so its id is not reused)
#: and the facts' values and types (6 and 6.0 judge alike but are not the same actual
#: value); emptied when full.
_JUDGED: dict[tuple[int, tuple[Any, ...], tuple[type, ...]], tuple[RulePack, _Judged]] = {}
_MAX_JUDGED = 4096


def _judgements(pack: RulePack, inst: Installation) -> _Judged:
    """Every requirement of ``pack`` that ``inst`` does not meet, judged once per pack
    and distinct installation."""
    values = tuple(inst.__dict__.values())
    key = (id(pack), values, tuple(map(type, values)))
    try:
        found = _JUDGED.get(key)
    except TypeError:  # a fact that cannot be a key: judged every time
        return _judge_all(pack, inst)
    if found is None:
        if len(_JUDGED) >= _MAX_JUDGED:
            _JUDGED.clear()
        found = _JUDGED[key] = (pack, _judge_all(pack, inst))
    return found[1]


def _judge_all(pack: RulePack, inst: Installation) -> _Judged:
    facts = _facts(inst)
    out: _Judged = []
    for req in pack.requirements:
        status, message, actual = _judge(req, facts)
        if status is not None:
            out.append((req, status, message, actual, _plain(req.expected)))
    return out


def _waiver_note(
    req: Requirement, site: SiteConfig, pack: RulePack, at: datetime
) -> tuple[str, Citation] | None:
    """A waiver in force at ``at`` that the pack's text provides for, as (note, citation)."""
    if req.rule is None:
        return None
    cite = pack.rule(req.rule).waiver_citation
    if cite is None:
        return None  # the text has no waiver clause: a registry waiver changes nothing
    for w in site.waivers:
        if w.rule == req.rule and w.covers_at(at, site.tz):
            ref = f" ({w.reference})" if w.reference else ""
            return f" An approved waiver{ref} covers it until {w.end}.", cite
    return None


def _own(value: Any) -> Any:
    """A judged value for one item: a list is copied, so no two items share one."""
    return list(value) if isinstance(value, list) else value


def audit_site(
    site: SiteConfig,
    pack: RulePack,
    *,
    at: datetime | None = None,
    installation: Installation | None = None,
) -> list[AuditItem]:
    """Every requirement of the pack that the site fails, may fail, cannot be checked
    for, or fails under a waiver, in pack order.

    ``at`` (default now) is the instant of the audit: it picks the installation
    record in force on that local day (unless ``installation`` is given), the
    waivers in force, and the wording of seasonal advice.
    """
    at = at or datetime.now(UTC)
    day = at.astimezone(site.tz).date()
    inst = installation if installation is not None else site.installation_on(day)
    before_season = season_advice(pack.season, day)
    items: list[AuditItem] = []
    for req, judged, text, actual, expected in _judgements(pack, inst):
        status, message, citations = judged, text, req.citations
        if status == "fail":
            waived = _waiver_note(req, site, pack, at)
            if waived is not None:
                status, message = "waived", message + waived[0]
                citations = (*citations, waived[1])
        action = req.action.replace("{before_season}", before_season)
        if status == "unknown":
            # Nothing is known to fix: the step is to record the fact.
            action = "Record it in the site registry (from an inspection or the owner)."
        items.append(
            AuditItem(
                site_id=site.id,
                jurisdiction=pack.id,
                requirement_id=req.id,
                status=status,
                message=message,
                action=action,
                field=req.field,
                actual=_own(actual),
                expected=_own(expected),
                citations=citations,
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
