"""One PNG per scenario: what one home's sensors reported, with its true conditions shaded.

``sumpwatch plot-scenario`` (or ``python -m firmware_sim.plot``) writes
``docs/img/scenarios/<scenario>.png``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.dates as mdates
import matplotlib.pyplot as plt

from firmware_sim.offline import run_offline
from firmware_sim.scenario import load_scenario

# The checkout's docs (plots are drawn from a source tree, not an installed wheel).
DEFAULT_DIR = Path(__file__).resolve().parent.parent / "docs" / "img" / "scenarios"
_COLOURS = {
    "sanitary_discharge": "tab:purple",
    "icing_risk": "tab:cyan",
    "frozen_line": "tab:blue",
    "high_water": "tab:red",
    "continuous_run": "tab:orange",
    "short_cycling": "tab:olive",
    "sensor_silent": "tab:gray",
}


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def pick_home(scenario: str) -> str:
    """The home a scenario's plot shows: the first one expected to show a condition."""
    model = load_scenario(scenario)
    for home in model.home:
        if home.expect:
            return home.id
    return model.home[0].id


def plot_scenario(scenario: str, path: Path, *, seed: int = 1, site_id: str | None = None) -> Path:
    """Run ``scenario`` offline and plot one home's level, pump, flow, pressure and temperatures."""
    site = site_id or pick_home(scenario)
    run = run_offline(scenario, seed=seed)
    series = _telemetry_series(run.messages, site)
    model = load_scenario(scenario)
    home = next((h for h in model.home if h.id == site), model.home[0])

    fig, axes = plt.subplots(5, 1, figsize=(11, 11), sharex=True)
    _draw_panels(axes, series)
    for mark, colour in (
        (home.pit.pump_on_cm, "green"),
        (home.pit.pump_off_cm, "black"),
        (home.pit.alarm_cm, "red"),
    ):
        axes[0].axhline(mark, color=colour, linestyle=":", linewidth=0.8)
    axes[4].axhline(0.0, color="black", linestyle=":", linewidth=0.8)
    truth = next(h for h in run.labels["homes"] if h["site_id"] == site)
    _shade_conditions(axes, truth["conditions"])
    axes[-1].xaxis.set_major_formatter(mdates.DateFormatter("%m-%d %H:%M"))
    axes[-1].set_xlabel("UTC")
    fig.suptitle(f"{scenario} — home {site} (seed {seed})")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def _telemetry_series(
    messages: Iterable[tuple[str, bytes]], site: str
) -> dict[str, list[tuple[datetime, Any]]]:
    """Each field of one home's telemetry as time-sorted (time, value) points."""
    series: dict[str, list[tuple[datetime, Any]]] = {}
    for topic, payload in messages:
        if not topic.endswith("/telemetry") or f"/{site}/" not in topic:
            continue
        try:
            doc = json.loads(payload)
            when = _time(doc["ts"])
            readings = doc["readings"]
        except (ValueError, KeyError, TypeError):
            continue  # the bad_payloads scenario's garbage
        for name, value in readings.items():
            series.setdefault(name, []).append((when, value))
    for values in series.values():
        values.sort(key=lambda p: p[0])
    return series


def _draw_panels(axes: Any, series: dict[str, list[tuple[datetime, Any]]]) -> None:
    panels: list[tuple[Any, list[str], str]] = [
        (axes[0], ["level_cm"], "level (cm)"),
        (axes[1], ["pump_on", "backup_pump_on"], "pump on"),
        (axes[2], ["flow_lpm"], "outlet flow (L/min)"),
        (axes[3], ["pressure_kpa"], "pressure (kPa)"),
        (axes[4], ["air_temp_c", "water_temp_c", "pipe_temp_c"], "temperature (°C)"),
    ]
    for ax, names, ylabel in panels:
        for name in names:
            points = series.get(name)
            if not points:
                continue
            xs = [p[0] for p in points]
            ys = [float(p[1]) for p in points]
            style = {"drawstyle": "steps-post"} if name.endswith("_on") else {}
            ax.plot(xs, ys, linewidth=0.8, label=name, **style)
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        if len(names) > 1:
            ax.legend(loc="upper right", fontsize=8)


def _shade_conditions(axes: Any, conditions: list[dict[str, Any]]) -> None:
    """The true conditions of the home as coloured spans, with a legend."""
    seen: set[str] = set()
    for c in conditions:
        colour = _COLOURS.get(c["condition"], "tab:pink")
        for ax in axes:
            ax.axvspan(_time(c["start"]), _time(c["end"]), color=colour, alpha=0.12)
        if c["condition"] not in seen:
            seen.add(c["condition"])
            axes[0].plot([], [], color=colour, linewidth=6, alpha=0.3, label=c["condition"])
    if seen:
        axes[0].legend(loc="upper right", fontsize=8, title="true conditions")


def main() -> None:
    """Plot every scenario into docs/img/scenarios/."""
    from firmware_sim.offline import list_scenarios

    for name in list_scenarios():
        print(plot_scenario(name, DEFAULT_DIR / f"{name}.png"))


if __name__ == "__main__":
    main()
