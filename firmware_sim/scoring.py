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

Sweeps (``firmware_sim.sweep``) are scored the same way, case by case, and the
per-case scores are summed per detector and per value of each sweep dimension.
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

from firmware_sim.offline import build_simulation, run_offline, sites_toml
from firmware_sim.sweep import SweepCase
from gateway.domain import Finding
from gateway.registry.models import SiteRegistry, load_registry
from gateway.rules.catalog import RULE_IDS
from gateway.rules.pack import RulePack, load_packs
from gateway.rules.replay import ReplayResult, replay
from gateway.validate import shape_only

TOLERANCE = timedelta(minutes=5)
#: Conditions the simulator labels that the catalogue may not know yet (issue 14).
EXTRA_RULES = ("pump_failure",)


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

    def merge(self, other: RuleScore) -> None:
        """Add another score of the same rule."""
        self.findings += other.findings
        self.matched_findings += other.matched_findings
        self.labels += other.labels
        self.detected_labels += other.detected_labels
        self.delays_s += other.delays_s
        self.delays_cycles += other.delays_cycles
        self.false_positives += other.false_positives
        self.missed += other.missed


@dataclass
class Score:
    """The whole scoring run."""

    rules: dict[str, RuleScore]
    scenarios: list[str]
    normal_findings: list[str] = field(default_factory=list)
    #: Findings per scenario (for the report).
    per_scenario: dict[str, int] = field(default_factory=dict)

    def merge(self, other: Score) -> None:
        """Add another score (of other scenarios)."""
        for rule_id, rs in other.rules.items():
            self.rules.setdefault(rule_id, RuleScore(rule_id)).merge(rs)
        self.scenarios += other.scenarios
        self.normal_findings += other.normal_findings
        self.per_scenario |= other.per_scenario


def empty_score() -> Score:
    """A score with a row for every known rule."""
    return Score({r: RuleScore(r) for r in (*RULE_IDS, *EXTRA_RULES)}, [])


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


def score_run(
    scenario: str,
    result: ReplayResult,
    labels: dict[str, Any],
    score: Score,
    *,
    clean: bool | None = None,
) -> None:
    """Add one replayed scenario's findings and labels to ``score``.

    ``clean`` (default: the name starts with ``normal``) marks a run of healthy
    houses: every finding there is also listed in ``normal_findings``.
    """
    end = _ts(labels["end"])
    intervals = label_intervals(labels)
    findings = result.findings
    score.scenarios.append(scenario)
    score.per_scenario[scenario] = len(findings)
    if scenario.startswith("normal") if clean is None else clean:
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
    run = run_offline(name, seed=seed)
    registry = registry_from_toml(run.sites_toml)
    result = replay(
        run.messages,
        registry,
        load_packs(packs_dir),
        validate=shape_only().validate,
        silence_factor=silence_factor,
    )
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
    score = empty_score()
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


@dataclass
class SweepScore:
    """A sweep's score: over everything, per sweep dimension value, per family."""

    total: Score
    #: ``(dimension, value) -> Score`` of the cases with that value.
    by_dim: dict[tuple[str, str], Score]
    by_family: dict[str, Score]
    clean_weeks: int = 0
    cases: int = 0
    #: ``case name -> share/schedule...`` for the delay targets by share.
    dims: dict[str, dict[str, str]] = field(default_factory=dict)
    sanitary_delays: dict[str, list[int]] = field(default_factory=dict)


def _run_case(case: SweepCase, silence_factor: float, packs: dict[str, RulePack]) -> Score:
    """Simulate and replay one sweep case; its own score (runs in workers)."""
    sim = build_simulation(case.scenario, seed=case.seed, step_s=case.step_s)
    messages = [(m.topic, m.payload) for m in sim.messages()]
    registry = registry_from_toml(sites_toml(sim))
    result = replay(
        messages, registry, packs, validate=shape_only().validate, silence_factor=silence_factor
    )
    score = empty_score()
    score_run(case.name, result, sim.labels(), score, clean=case.clean)
    return score


_PACKS: dict[str, RulePack] = {}


def _worker_case(case: SweepCase, silence_factor: float, packs_dir: Path | None) -> Score:
    if not _PACKS:
        _PACKS.update(load_packs(packs_dir))  # once per worker process
    return _run_case(case, silence_factor, _PACKS)


def score_sweep(
    cases: list[SweepCase],
    *,
    packs_dir: Path | None = None,
    silence_factor: float = 6.0,
    workers: int = 2,
    progress: Callable[[int, int], None] | None = None,
) -> SweepScore:
    """Score every case of a sweep (in ``workers`` processes) and sum the scores."""
    out = SweepScore(empty_score(), {}, {})
    if workers <= 1:
        scores = []
        for i, case in enumerate(cases):
            scores.append(_worker_case(case, silence_factor, packs_dir))
            if progress is not None:
                progress(i + 1, len(cases))
    else:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            futures = [pool.submit(_worker_case, c, silence_factor, packs_dir) for c in cases]
            scores = []
            for i, future in enumerate(futures):
                scores.append(future.result())
                if progress is not None:
                    progress(i + 1, len(cases))
    for case, score in zip(cases, scores, strict=True):
        _add_case(out, case, score)
    return out


def _add_case(out: SweepScore, case: SweepCase, score: Score) -> None:
    out.cases += 1
    out.clean_weeks += int(case.clean)
    out.total.merge(score)
    out.by_family.setdefault(case.family, empty_score()).merge(score)
    dims = case.dim
    out.dims[case.name] = dims
    for key, value in dims.items():
        out.by_dim.setdefault((key, value), empty_score()).merge(score)
    share = dims.get("share")
    if share is not None:
        cycles = score.rules["sanitary_discharge"].delays_cycles
        out.sanitary_delays.setdefault(share, []).extend(cycles)


#: Issue 14's targets.
TARGET_PRECISION = 0.95
TARGET_RECALL = 0.95
#: Median delay (pump cycles) of a sanitary finding, by the diversion's share.
DELAY_TARGETS = ((0.50, 3.0), (0.25, 10.0))


def share_delay_target(share_text: str) -> float | None:
    """The delay target (cycles) for a share like ``"33%"``; None below 25 %."""
    share = float(share_text.rstrip("%")) / 100.0
    for floor, cycles in DELAY_TARGETS:
        if share >= floor - 1e-9:
            return cycles
    return None


def missed_targets(sweep: SweepScore) -> list[str]:
    """Every target of issue 14 the sweep misses, in words (empty: all met)."""
    failures = []
    for rs in sweep.total.rules.values():
        if rs.findings and rs.precision < TARGET_PRECISION:
            failures.append(f"{rs.rule_id}: precision {rs.precision:.2f} < {TARGET_PRECISION}")
        if rs.recall is not None and rs.recall < TARGET_RECALL:
            failures.append(f"{rs.rule_id}: recall {rs.recall:.2f} < {TARGET_RECALL}")
    clean = sweep.total.normal_findings
    if clean:
        failures.append(f"{len(clean)} findings on clean site-weeks")
    for share, delays in sorted(sweep.sanitary_delays.items()):
        target = share_delay_target(share)
        if target is None:
            continue
        if not delays:
            failures.append(f"sanitary_discharge at {share}: nothing detected")
        elif statistics.median(delays) > target:
            failures.append(
                f"sanitary_discharge at {share}: median delay "
                f"{statistics.median(delays):g} cycles > {target:g}"
            )
    return failures
