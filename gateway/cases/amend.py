"""What enforcement cases add to a site's registry entry (issue 16.3, 16.4).

The registry file is the owner's declaration; a case records what the village decided
and found since. Two kinds of record change the site every consumer reads:

* a granted waiver (Edgar (f)(3)b "for a limited time specified in the written
  determination") joins ``SiteConfig.waivers``, where the detectors, the audit, the
  verdicts, the reports and the alerts already look (each honours it only where the
  pack's rule has a waiver clause, so L.L. 6-2024 never does);
* an inspection result's recorded facts become the installation in force from the
  inspection's local day (Edgar (f)(2)a: "The purpose of this inspection is to
  confirm ..."); the days before keep the record that was in force then, so a past
  season's report does not change.

Pure functions over the frozen registry models; the repository keeps the records and
the composition root hands it to ``SiteRegistry.amended`` (one merge for everyone).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

from gateway.registry.models import Installation, InstallationRecord, SiteConfig, Waiver


@dataclass(frozen=True, slots=True)
class InspectedFacts:
    """Installation facts an inspector recorded, in force from local ``day`` on."""

    day: date
    facts: tuple[tuple[str, Any], ...]


def installation_with(base: Installation, facts: Mapping[str, Any]) -> Installation:
    """``base`` with the inspected facts (validated: an unknown field or a bad value
    raises pydantic's ``ValidationError``)."""
    unknown = sorted(set(facts) - set(Installation.model_fields))
    if unknown:
        raise ValueError(f"not installation facts: {unknown}")
    return Installation.model_validate({**base.model_dump(), **facts})


def _record(facts: Installation, first: date, last: date) -> InstallationRecord:
    return InstallationRecord.model_validate(
        {**facts.model_dump(), "valid_from": first, "valid_to": last}
    )


def _records_before(site: SiteConfig, day: date) -> list[InstallationRecord]:
    """The site's installation timeline up to the day before ``day``, as records.

    A record in force on ``day`` ends the day before; a record starting on or after it
    is superseded: what the inspector found is the installation from then on.
    """
    history = site.installation_history
    out: list[InstallationRecord] = []
    for record in history:
        if record.valid_to < day:
            out.append(record)
        elif record.valid_from < day:  # in force on the day: it ends the day before
            out.append(record.model_copy(update={"valid_to": day - timedelta(days=1)}))
    # The current installation is in force after the last record (or always).
    current_from = history[-1].valid_to + timedelta(days=1) if history else date.min
    if current_from < day:
        out.append(_record(site.installation, current_from, day - timedelta(days=1)))
    return out


def with_inspection(site: SiteConfig, inspected: InspectedFacts) -> SiteConfig:
    """The site whose installation from ``inspected.day`` on is the one in force that
    day with the inspected facts; earlier days keep their record."""
    base = site.installation_on(inspected.day)
    current = installation_with(base, dict(inspected.facts))
    return site.model_copy(
        update={
            "installation": current,
            "installation_history": tuple(_records_before(site, inspected.day)),
        }
    )


def with_waivers(site: SiteConfig, waivers: Iterable[Waiver]) -> SiteConfig:
    """The site with case-granted waivers after its registry ones (no repeats)."""
    extra = tuple(w for w in waivers if w not in site.waivers)
    if not extra:
        return site
    return site.model_copy(update={"waivers": site.waivers + extra})


def amend_site(
    site: SiteConfig, waivers: Sequence[Waiver], inspections: Sequence[InspectedFacts]
) -> SiteConfig:
    """The site as the cases left it: inspections in day order, then the waivers."""
    for inspected in sorted(inspections, key=lambda i: i.day):
        site = with_inspection(site, inspected)
    return with_waivers(site, waivers)
