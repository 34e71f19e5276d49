"""The rule ids, their titles and what the homeowner should do, in plain words."""

from __future__ import annotations

from gateway.rules.detectors.base import RuleInfo
from gateway.rules.detectors.registry import DETECTORS
from gateway.rules.pack import RulePack

#: Every rule id, in the registry's order (each detector module holds its wording).
RULE_IDS: tuple[str, ...] = tuple(d.rule_id for d in DETECTORS)

CATALOG: dict[str, RuleInfo] = {d.rule_id: d.info for d in DETECTORS}

__all__ = ["CATALOG", "RULE_IDS", "RuleInfo", "action_for"]


def action_for(rule_id: str, pack: RulePack | None) -> str:
    """The action text, with the pack's deadlines where the text gives them."""
    action = CATALOG[rule_id].action
    if pack is None:
        return action
    spec = pack.rule(rule_id)
    action = spec.advice or action  # the pack's wording where the catalog's breaks its text
    if spec.enforced and spec.grace_period is not None and spec.grace_citation is not None:
        days = spec.grace_period.days
        action += (
            # Worded for people (it is in the alert e-mail): the ordinance by title.
            f" Under {spec.grace_citation.cited(pack.title)} a connection order gives {days}"
            " days to correct it."
        )
    if spec.enforced and spec.waiver_citation is not None:
        waiver_days = pack.number("deadlines.waiver_application_days")
        if waiver_days is not None:
            action += (
                f" A waiver or time extension may be requested within "
                f"{waiver_days.as_float:g} days of a compliance order"
                f" ({waiver_days.citation.cited(pack.title)})."
            )
    return action
