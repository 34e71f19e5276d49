"""The demo's admin action "inject a scenario into site X" (issue 20.1).

The demo's homes are played by one simulator child (``sumpwatch simulate``), whose
pid and command line ``sumpwatch demo`` records in its data dir. Injecting gives one
site a fault template of another scenario: the simulator is restarted with the same
options on a scenario file written here, in which that site's home template is the
chosen scenario's first faulty home, its faults shifted to have begun
:data:`LEAD` ago (so the page shows the effect now, not hours later). Every other
site keeps its own template. ``--since now`` keeps the restarted simulator from
sending a second history over the one already stored.

The product never imports the simulator: this module reads scenario files as TOML
(found with ``importlib.util.find_spec``, which does not import) and runs the
simulator as a child process, ``python -m gateway.cli simulate ...``. Without the
simulator, or outside the demo, it says so instead (:class:`Availability`).
"""

from __future__ import annotations

import copy
import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import tomli_w

from gateway.tomlfile import read_toml

#: How long before the injection the fault is made to begin, so its effect (a pit
#: over its alarm mark, a silent node) is there in the first live readings.
LEAD = timedelta(minutes=15)
#: The record ``sumpwatch demo`` keeps of its children (gateway/demo_lifecycle.py).
CHILDREN_FILE = "demo-children.json"
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)([smhd])$")
_UNIT_H = {"s": 1 / 3600, "m": 1 / 60, "h": 1.0, "d": 24.0}
#: One injection at a time: two at once would both stop the same simulator and start
#: two in its place.
_ONE_AT_A_TIME = threading.Lock()


@dataclass(frozen=True, slots=True)
class Availability:
    """Whether this gateway can inject, and if not, why (shown as is on the page)."""

    ready: bool
    reason: str = ""


@dataclass(frozen=True, slots=True)
class Injection:
    """What was started."""

    site_id: str
    scenario: str
    template: str
    pid: int
    fault_began: datetime


class InjectRefused(Exception):
    """The request cannot be done here; the message says why, for the admin."""


def scenarios_dir() -> Path | None:
    """The simulator's scenario folder, if the simulator is installed."""
    spec = importlib.util.find_spec("firmware_sim")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "scenarios"
    return folder if folder.is_dir() else None


def fault_scenarios() -> dict[str, str]:
    """Scenario name -> its description, for the scenarios with a faulty home."""
    folder = scenarios_dir()
    if folder is None:
        return {}
    out = {}
    # Top level only: demo/ holds the demo's own fleet, not a scenario to try.
    for path in sorted(folder.glob("*.toml")):
        data = read_toml(path, "scenario")
        if any(home.get("fault") for home in data.get("home", [])):
            out[str(data.get("name", path.stem))] = " ".join(
                str(data.get("description", "")).split()
            )
    return out


def _scenario_file(name_or_path: str) -> Path:
    path = Path(name_or_path)
    if path.suffix == ".toml" and path.is_file():
        return path
    folder = scenarios_dir()
    found = [p for p in folder.rglob(f"{name_or_path}.toml")] if folder is not None else []
    if not found:
        raise InjectRefused(f"no scenario named {name_or_path!r}")
    return found[0]


def _fleet(data_dir: Path) -> dict[str, Any] | None:
    """The demo's recorded children (name -> {pid, cmdline}), None outside the demo."""
    try:
        entries: dict[str, Any] = json.loads((data_dir / CHILDREN_FILE).read_text())
    except (OSError, ValueError):
        return None
    return entries if "simulator" in entries else None


def availability(data_dir: Path) -> Availability:
    """Injecting needs the simulator installed and a demo whose simulator runs."""
    if scenarios_dir() is None:
        return Availability(
            False,
            "The simulator (firmware_sim) is not installed with this gateway, so there is "
            "nothing to inject. Install SumpWatch from its source tree to try scenarios.",
        )
    if _fleet(data_dir) is None:
        return Availability(
            False,
            "Scenarios can be injected only in the demo (sumpwatch demo): this gateway "
            "was not started with simulated homes.",
        )
    return Availability(True)


def _option(cmdline: list[str], name: str) -> str | None:
    return cmdline[cmdline.index(name) + 1] if name in cmdline[:-1] else None


def _replace_option(cmdline: list[str], name: str, value: str) -> list[str]:
    out = list(cmdline)
    if name in out[:-1]:
        out[out.index(name) + 1] = value
    else:
        out += [name, value]
    return out


def _hours(duration: str | None) -> float:
    match = _DURATION.match(duration or "")
    return float(match.group(1)) * _UNIT_H[match.group(2)] if match else 0.0


def injected_template(scenario: dict[str, Any], began_h: float) -> dict[str, Any]:
    """The scenario's first faulty home, its faults moved to begin at ``began_h``
    (hours after the run's start), keeping their spacing and lengths."""
    home = next((h for h in scenario.get("home", []) if h.get("fault")), None)
    if home is None:
        raise InjectRefused(f"scenario {scenario.get('name')!r} has no faulty home")
    template = copy.deepcopy(home)
    template.pop("jurisdiction", None)  # the site's own registry entry decides
    shift = began_h - min(float(f.get("start_h", 0.0)) for f in template["fault"])
    for fault in template["fault"]:
        fault["start_h"] = float(fault.get("start_h", 0.0)) + shift
        if fault.get("end_h") is not None:
            fault["end_h"] = float(fault["end_h"]) + shift
    return dict(template)


def fleet_with(
    fleet: dict[str, Any], site_index: int, template: dict[str, Any], sites: int
) -> dict[str, Any]:
    """The fleet's scenario with one site's template replaced. The simulator gives
    site i the template i mod n; each site keeps the one it had."""
    homes = fleet.get("home", [])
    if not homes:
        raise InjectRefused("the demo's scenario has no homes")
    spread = [copy.deepcopy(homes[i % len(homes)]) for i in range(max(sites, site_index + 1))]
    spread[site_index] = template
    return {**fleet, "name": f"{fleet.get('name', 'demo')}-injected", "home": spread}


def _site_ids(sites_file: Path) -> list[str]:
    return [str(s["id"]) for s in read_toml(sites_file, "site registry").get("site", [])]


def _stop(pid: int, cmdline: list[str], timeout: float = 10.0) -> None:
    """SIGTERM the recorded simulator if it is still that process (pids are reused)."""
    try:
        current = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:-1]
    except OSError:
        return
    if [c.decode() for c in current] != cmdline:
        return
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while not _gone(pid) and time.monotonic() < deadline:
        time.sleep(0.05)


def _gone(pid: int) -> bool:
    """Exited: reaped here if it is this process's child (the demo's own simulator
    is), else no longer in /proc or a zombie some other parent will reap."""
    try:
        return os.waitpid(pid, os.WNOHANG)[0] == pid
    except ChildProcessError:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return True
        return stat.rsplit(")", 1)[1].split()[0] == "Z"


def _record(data_dir: Path, children: dict[str, Any], name: str, args: list[str], pid: int) -> None:
    """Keep the demo's record true, so its exit (or a rerun after kill -9) stops this child."""
    children[name] = {"pid": pid, "cmdline": args}
    (data_dir / CHILDREN_FILE).write_text(json.dumps(children))


def inject(data_dir: Path, site_id: str, scenario: str, now: datetime | None = None) -> Injection:
    """Restart the demo's simulator with ``scenario``'s fault at ``site_id``."""
    with _ONE_AT_A_TIME:
        return _inject(data_dir, site_id, scenario, now or datetime.now(UTC))


def _inject(data_dir: Path, site_id: str, scenario: str, now: datetime) -> Injection:
    state = availability(data_dir)
    if not state.ready:
        raise InjectRefused(state.reason)
    # Only the listed scenarios by name: the form offers no path to a file of one's own.
    if scenario not in fault_scenarios():
        raise InjectRefused(f"no scenario with a faulty home is named {scenario!r}")
    children = _fleet(data_dir)
    assert children is not None
    cmdline: list[str] = list(children["simulator"]["cmdline"])
    backfill_h = max(_hours(_option(cmdline, "--backfill")), LEAD / timedelta(hours=1))
    chosen = read_toml(_scenario_file(scenario), "scenario")
    template = injected_template(chosen, backfill_h - LEAD / timedelta(hours=1))
    written = _write_fleet(data_dir, cmdline, site_id, scenario, template)
    args = _replace_option(cmdline, "--scenario", str(written))
    args = _replace_option(args, "--backfill", f"{round(backfill_h * 3600)}s")
    args = _replace_option(args, "--since", now.isoformat())
    _stop(int(children["simulator"]["pid"]), cmdline)
    # The same interpreter and command the demo used: `python -m gateway.cli simulate`.
    args = [sys.executable, *args[1:]]
    proc = subprocess.Popen(args, stdin=subprocess.DEVNULL)
    _record(data_dir, children, "simulator", args, proc.pid)
    return Injection(site_id, scenario, str(template["id"]), proc.pid, now - LEAD)


def _write_fleet(
    data_dir: Path, cmdline: list[str], site_id: str, scenario: str, template: dict[str, Any]
) -> Path:
    """The fleet's scenario with ``template`` at ``site_id``, written to the data dir."""
    ids = _site_ids(Path(_option(cmdline, "--sites") or ""))
    homes = int(_option(cmdline, "--homes") or len(ids))
    if site_id not in ids[:homes]:
        raise InjectRefused(f"site {site_id!r} is not one of the demo's simulated homes")
    fleet_file = _scenario_file(_option(cmdline, "--scenario") or "normal_summer")
    fleet = fleet_with(read_toml(fleet_file, "scenario"), ids.index(site_id), template, homes)
    folder = data_dir / "inject"
    folder.mkdir(exist_ok=True)
    written = folder / f"{site_id}-{scenario}.toml"
    written.write_text(tomli_w.dumps(fleet))
    return written


def stop_injected(data_dir: Path, demo_simulator_pid: int) -> None:
    """On the demo's exit: stop a simulator an injection started in its place."""
    children = _fleet(data_dir)
    if children is None:
        return
    entry = children["simulator"]
    if int(entry["pid"]) != demo_simulator_pid:
        _stop(int(entry["pid"]), list(entry["cmdline"]))
