"""Detector accuracy against the simulator's ground-truth labels.

Matching (documented in docs/detectors.md):

* A label is one interval ``[start, end]`` in which a condition truly held at a
  home (``sensor_silent`` labels of several nodes of a home are merged).
* A finding of rule R at site S *matches* a label of R at S when the finding's
  open interval ``[opened_at, cleared_at or end of run]`` overlaps
  ``[start - TOLERANCE, end + TOLERANCE]``.
* Precision = matched findings / findings; recall = labels matched by at least
  one finding / labels. With no findings precision is 1, with no labels recall
  is undefined (shown as "-").
* Delay of a detected label = first matching finding's ``opened_at`` - label
  start (0 if it opened earlier); in pump cycles = pump starts at the home in
  that span (from the pit's own telemetry).
"""

from __future__ import annotations

import statistics
import tempfile
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from gateway.domain import Finding
from gateway.registry.models import SiteRegistry, load_registry
from gateway.rules.catalog import RULE_IDS
from gateway.rules.pack import load_packs
from gateway.rules.replay import ReplayResult, replay

TOLERANCE = timedelta(minutes=5)


@dataclass(frozen=True, slots=True)
class Interval:
    site_id: str
    rule_id: str
    start: datetime
    end: datetime


@dataclass
class RuleScore:
    """Counts and delays of one rule over the scored scenarios."""

    rule_id: str
    findings: int = 0
    matched_findings: int = 0
    labels: int = 0
    detected_labels: int = 0
    delays_s: list[float] = field(default_factory=list)
    delays_cycles: list[int] = field(default_factory=list)
    false_positives: list[str] = field(default_factory=list)
    missed: list[str] = field(default_factory=list)

    @property
    def precision(self) -> float:
        """Matched findings / findings (1.0 with no findings)."""
        return self.matched_findings / self.findings if self.findings else 1.0

    @property
    def recall(self) -> float | None:
        """Detected labels / labels (None with no labels)."""
        return self.detected_labels / self.labels if self.labels else None

    @property
    def median_delay_s(self) -> float | None:
        """Median detection delay, seconds."""
        return statistics.median(self.delays_s) if self.delays_s else None

    @property
    def median_delay_cycles(self) -> float | None:
        """Median detection delay, pump cycles."""
        return statistics.median(self.delays_cycles) if self.delays_cycles else None


@dataclass
class Score:
    """The whole scoring run."""

    rules: dict[str, RuleScore]
    scenarios: list[str]
    normal_findings: list[str] = field(default_factory=list)
    #: Findings per scenario (for the report).
    per_scenario: dict[str, int] = field(default_factory=dict)


def _ts(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def label_intervals(labels: dict[str, Any]) -> list[Interval]:
    """Label intervals per (home, condition), overlapping ones merged."""
    out: list[Interval] = []
    for home in labels.get("homes", []):
        by_rule: dict[str, list[tuple[datetime, datetime]]] = {}
        for c in home.get("conditions", []):
            by_rule.setdefault(c["condition"], []).append((_ts(c["start"]), _ts(c["end"])))
        for rule_id, spans in by_rule.items():
            spans.sort()
            merged: list[list[datetime]] = []
            for start, end in spans:
                if merged and start <= merged[-1][1]:
                    merged[-1][1] = max(merged[-1][1], end)
                else:
                    merged.append([start, end])
            out.extend(Interval(home["site_id"], rule_id, s, e) for s, e in merged)
    return out


def score_run(scenario: str, result: ReplayResult, labels: dict[str, Any], score: Score) -> None:
    """Add one replayed scenario's findings and labels to ``score``."""
    end = _ts(labels["end"])
    intervals = label_intervals(labels)
    findings = result.findings
    score.scenarios.append(scenario)
    score.per_scenario[scenario] = len(findings)
    if scenario.startswith("normal"):
        score.normal_findings.extend(f"{scenario}:{f.site_id}:{f.rule_id}" for f in findings)

    def span(f: Finding) -> tuple[datetime, datetime]:
        return f.opened_at, f.cleared_at or end

    def overlaps(f: Finding, i: Interval) -> bool:
        fs, fe = span(f)
        return fs <= i.end + TOLERANCE and fe >= i.start - TOLERANCE

    for f in findings:
        rs = score.rules.setdefault(f.rule_id, RuleScore(f.rule_id))
        rs.findings += 1
        if any(i.site_id == f.site_id and i.rule_id == f.rule_id and overlaps(f, i)
               for i in intervals):  # fmt: skip
            rs.matched_findings += 1
        else:
            rs.false_positives.append(f"{scenario}:{f.site_id}@{f.opened_at:%d %H:%M}")
    for i in intervals:
        rs = score.rules.setdefault(i.rule_id, RuleScore(i.rule_id))
        rs.labels += 1
        hits = [f for f in findings if f.site_id == i.site_id and f.rule_id == i.rule_id
                and overlaps(f, i)]  # fmt: skip
        if not hits:
            rs.missed.append(f"{scenario}:{i.site_id}@{i.start:%d %H:%M}")
            continue
        rs.detected_labels += 1
        first = min(f.opened_at for f in hits)
        rs.delays_s.append(max(0.0, (first - i.start).total_seconds()))
        starts = result.pump_starts.get(i.site_id, [])
        rs.delays_cycles.append(sum(1 for t in starts if i.start <= t <= first))


def registry_from_toml(text: str) -> SiteRegistry:
    """A registry from TOML text (the simulator hands us a string)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "sites.toml"
        path.write_text(text)
        return load_registry(path)


def _run_scenario(
    name: str, seed: int, silence_factor: float, packs_dir: Path | None
) -> tuple[str, ReplayResult, dict[str, Any]]:
    """Simulate one scenario and replay it (a top-level function: runs in workers)."""
    from firmware_sim.offline import run_offline  # the scorer needs the simulator

    run = run_offline(name, seed=seed)
    registry = registry_from_toml(run.sites_toml)
    result = replay(run.messages, registry, load_packs(packs_dir), silence_factor=silence_factor)
    result.events = []  # not needed for scoring; keeps the pickle small
    return name, result, run.labels


def score_scenarios(
    scenarios: Iterable[str],
    *,
    packs_dir: Path | None = None,
    seed: int = 1,
    silence_factor: float = 6.0,
    workers: int = 1,
    progress: Callable[[str], None] | None = None,
) -> Score:
    """Run each scenario offline, replay it through the detectors and score it.

    ``workers`` > 1 runs scenarios in parallel processes (results are scored in
    scenario order, so the score does not depend on it).
    """
    names = list(scenarios)
    score = Score({r: RuleScore(r) for r in RULE_IDS}, [])
    runs: list[tuple[str, ReplayResult, dict[str, Any]]] = []
    if workers <= 1:
        for name in names:
            if progress is not None:
                progress(name)
            runs.append(_run_scenario(name, seed, silence_factor, packs_dir))
    else:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            futures = [
                pool.submit(_run_scenario, n, seed, silence_factor, packs_dir) for n in names
            ]
            for future in futures:
                runs.append(future.result())
                if progress is not None:
                    progress(runs[-1][0])
    for name, result, labels in runs:
        score_run(name, result, labels, score)
    return score
