"""Penalty estimates as the texts word them (pure: the packaged packs, no services)."""

from __future__ import annotations

from datetime import date, timedelta

from gateway.reports.penalties import estimate_penalties
from gateway.rules.pack import load_packs

PACKS = load_packs()


def test_the_local_law_misdemeanor_keeps_fine_or_jail_or_both() -> None:
    # L.L. 6-2024 penalties B: "... or imprisonment for a term not to exceed 30 days,
    # or by both such fine and imprisonment" (review §7: drop nothing).
    days = [date(2027, 1, 10) + timedelta(days=i) for i in range(3)]
    estimate = estimate_penalties(PACKS["local-law-6-2024"], days, 1)
    [misdemeanor] = [line for line in estimate.lines if "reach the threshold" in line.basis]
    assert misdemeanor.basis.endswith("or up to 30 days in jail, or both")
