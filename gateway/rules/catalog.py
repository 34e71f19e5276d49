"""The rule ids, their titles and what the homeowner should do, in plain words."""

from __future__ import annotations

from dataclasses import dataclass

from gateway.rules.pack import RulePack

RULE_IDS = (
    "sanitary_discharge",
    "icing_risk",
    "frozen_line",
    "high_water",
    "continuous_run",
    "short_cycling",
    "sensor_silent",
)


@dataclass(frozen=True, slots=True)
class RuleInfo:
    """Fixed wording of one rule."""

    rule_id: str
    title: str
    action: str


CATALOG: dict[str, RuleInfo] = {
    r.rule_id: r
    for r in (
        RuleInfo(
            "sanitary_discharge",
            "Sump water is going into the sanitary sewer",
            "Your pump runs and the pit empties, but the water never reaches the outdoor "
            "discharge line. Look for a hose or pipe from the sump to a floor drain, laundry "
            "tub or cleanout, remove it, and let the water leave through the outdoor line.",
        ),
        RuleInfo(
            "icing_risk",
            "Sump discharge may ice a walkway or the street",
            "Turn or extend the outlet so the water soaks into the lawn away from the walk "
            "and street, and check the walk for ice (salt or sand it).",
        ),
        RuleInfo(
            "frozen_line",
            "The sump discharge line looks frozen",
            "The pump is pushing against a blocked line. Open the winter relief outlet or "
            "remove the outdoor extension, thaw the line (warm water, heat tape), and watch "
            "the pit level until water flows again.",
        ),
        RuleInfo(
            "high_water",
            "High water in the sump pit",
            "Check that the pump has power (breaker, GFCI outlet) and runs. If the pit "
            "keeps rising, start a backup pump or call a plumber now to avoid a flood.",
        ),
        RuleInfo(
            "continuous_run",
            "The sump pump keeps running with the pit empty",
            "The float switch is probably stuck. Free the float or unplug and re-plug the "
            "pump; a pump that runs dry overheats and fails.",
        ),
        RuleInfo(
            "short_cycling",
            "Water falls back into the pit after every pump cycle",
            "The check valve on the discharge line is failing or missing. Have it replaced; "
            "the extra starts wear out the pump.",
        ),
        RuleInfo(
            "sensor_silent",
            "A sensor has stopped reporting",
            "Check the sensor's power, batteries and Wi-Fi. Until it reports again we "
            "cannot watch this part of the sump.",
        ),
    )
}


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
            f" Under {spec.grace_citation} a connection order gives {days} days to correct it."
        )
    if spec.enforced and spec.waiver_citation is not None:
        waiver_days = pack.number("deadlines.waiver_application_days")
        if waiver_days is not None:
            action += (
                f" A waiver or time extension may be requested within "
                f"{waiver_days.as_float:g} days of a compliance order ({waiver_days.citation})."
            )
    return action
