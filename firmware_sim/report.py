"""Tables of a score: per detector, per sweep dimension, per family (rich and Markdown)."""

from __future__ import annotations

from collections.abc import Iterable

from rich.console import Console
from rich.table import Table

from firmware_sim.scoring import RuleScore, Score, SweepScore, missed_targets

COLUMNS = ("findings", "labels", "precision", "recall", "median delay", "median cycles")


def _cells(rs: RuleScore) -> list[str]:
    recall = "-" if rs.recall is None else f"{rs.recall:.2f}"
    delay = "-" if rs.median_delay_s is None else f"{rs.median_delay_s:.0f} s"
    cycles = "-" if rs.median_delay_cycles is None else f"{rs.median_delay_cycles:g}"
    return [str(rs.findings), str(rs.labels), f"{rs.precision:.2f}", recall, delay, cycles]


def _active(score: Score) -> Iterable[RuleScore]:
    return (rs for rs in score.rules.values() if rs.findings or rs.labels)


def score_table(score: Score, title: str) -> Table:
    """One row per detector (also pasted into docs/detectors.md)."""
    table = Table(title=title)
    table.add_column("detector")
    for col in COLUMNS:
        table.add_column(col, justify="right")
    for rs in score.rules.values():
        table.add_row(rs.rule_id, *_cells(rs))
    return table


def dimension_rows(sweep: SweepScore) -> list[list[str]]:
    """``dimension, value, detector, cells...`` for every detector with findings or labels."""
    rows = []
    for (dim, value), score in sorted(sweep.by_dim.items()):
        for rs in _active(score):
            rows.append([dim, value, rs.rule_id, *_cells(rs)])
    return rows


def dimension_table(sweep: SweepScore) -> Table:
    """Per sweep dimension value and detector."""
    table = Table(title="By sweep dimension")
    for col in ("dimension", "value", "detector"):
        table.add_column(col)
    for col in COLUMNS:
        table.add_column(col, justify="right")
    for row in dimension_rows(sweep):
        table.add_row(*row)
    return table


def family_table(sweep: SweepScore) -> Table:
    """Per case family and detector."""
    table = Table(title="By case family")
    table.add_column("family")
    table.add_column("detector")
    for col in COLUMNS:
        table.add_column(col, justify="right")
    for family, score in sorted(sweep.by_family.items()):
        for rs in _active(score):
            table.add_row(family, rs.rule_id, *_cells(rs))
    return table


def markdown(rows: Iterable[list[str]], header: list[str]) -> str:
    """A Markdown table (for docs/detectors.md)."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def markdown_report(sweep: SweepScore) -> str:
    """The sweep's tables and missed targets as Markdown (for docs/detectors.md)."""
    header = ["detector", *COLUMNS]
    total = markdown(([rs.rule_id, *_cells(rs)] for rs in sweep.total.rules.values()), header)
    families = markdown(
        (
            [family, rs.rule_id, *_cells(rs)]
            for family, score in sorted(sweep.by_family.items())
            for rs in _active(score)
        ),
        ["family", *header],
    )
    dims = markdown(dimension_rows(sweep), ["dimension", "value", *header])
    missed = "\n".join(f"* {f}" for f in missed_targets(sweep)) or "* all targets met"
    clean = len(sweep.total.normal_findings)
    return (
        f"{total}\n\nFindings on {sweep.clean_weeks} clean site-weeks: {clean}\n\n"
        f"Targets missed:\n\n{missed}\n\n{families}\n\n{dims}\n"
    )


def print_scenarios(console: Console, score: Score, *, details: bool) -> None:
    """The scenario suite's report."""
    console.print(score_table(score, f"Detector accuracy over {len(score.scenarios)} scenarios"))
    normal = score.normal_findings
    console.print(f"Findings on normal scenarios: {len(normal)} {normal if normal else ''}")
    if details:
        _details(console, score)


def print_sweep(console: Console, sweep: SweepScore, *, details: bool) -> None:
    """The sweep's report: totals, per family, per dimension, findings on clean weeks,
    and the issue's targets it misses."""
    labels = sum(rs.labels for rs in sweep.total.rules.values())
    console.print(
        score_table(
            sweep.total,
            f"Sweep: {sweep.cases} cases, {labels} labelled episodes, "
            f"{sweep.clean_weeks} clean site-weeks",
        )
    )
    console.print(family_table(sweep))
    console.print(dimension_table(sweep))
    clean = sweep.total.normal_findings
    console.print(f"Findings on clean site-weeks: {len(clean)}")
    for text in clean[:50]:
        console.print(f"  {text}")
    for failure in missed_targets(sweep) or ["all targets met"]:
        console.print(f"[bold]target[/bold] {failure}")
    if details:
        _details(console, sweep.total)


def _details(console: Console, score: Score) -> None:
    for rs in score.rules.values():
        for fp in rs.false_positives:
            console.print(f"[yellow]false positive[/yellow] {rs.rule_id} {fp}")
        for miss in rs.missed:
            console.print(f"[red]missed[/red] {rs.rule_id} {miss}")
