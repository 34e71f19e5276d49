"""Typer command functions: ``sumpwatch simulate``, ``plot-scenario`` and ``score``.

The gateway CLI mounts them with :func:`mount` only when ``firmware_sim`` is
installed: the product never imports the simulator (issue 13).
"""

from __future__ import annotations

import json
import signal
import threading
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from firmware_sim.engine import HomeSpec, Simulation
from firmware_sim.offline import (
    build_simulation,
    jsonl_line,
    list_scenarios,
    registry_homes,
    sites_toml,
)
from firmware_sim.scenario import ScenarioModel, load_scenario
from gateway import durations
from gateway.contract import DEFAULT_MAX_FUTURE_SKEW_S
from gateway.errors import SumpWatchError
from gateway.registry.models import load_registry

if TYPE_CHECKING:  # paho is imported for live runs only
    from firmware_sim.mqtt import BrokerOptions


def parse_duration(text: str) -> timedelta:
    """``90s``, ``30m``, ``15 minutes``, ``2 days``; a bare number means hours."""
    try:
        return durations.parse_duration(text)
    except durations.DurationError as exc:
        raise typer.BadParameter(str(exc)) from exc


def parse_start(text: str) -> datetime:
    """A date (midnight US Central standard time, like the ordinances' dates) or RFC 3339."""
    try:
        day = date.fromisoformat(text)
    except ValueError:
        pass
    else:
        return datetime(day.year, day.month, day.day, 6, tzinfo=UTC)  # 00:00 CST
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise typer.BadParameter(f"not a date or RFC 3339 time: {text!r}") from exc
    return when if when.tzinfo else when.replace(tzinfo=UTC)


#: The gateway's default ``max_future_skew_s``: newer device times are dead-lettered.
DEFAULT_CLOCK_LIMIT_S = DEFAULT_MAX_FUTURE_SKEW_S


@dataclass(frozen=True)
class Pacing:
    """How a live run paces its device time against the wall clock."""

    speed: float
    backfill: timedelta | None
    clock_limit_s: float
    since: datetime | None = None

    @property
    def lead(self) -> timedelta:
        """History published at once before pacing starts."""
        return self.backfill or timedelta(0)

    def describe(self) -> str:
        return f" after {self.lead} of history" if self.backfill else ""

    def skip_before_s(self, start: datetime | None) -> float:
        """Simulated seconds of history not to send (already stored by an earlier run)."""
        if self.since is None or start is None:
            return 0.0
        return (self.since - start).total_seconds()

    def ahead_s(self, start: datetime, now: datetime, span: timedelta) -> float:
        """How far the last device time runs ahead of the wall clock when it is sent.

        Device time is ``start + t``; message ``t`` leaves at ``now + (t - lead) / speed``
        (at once while ``t < lead``), so the gap grows by ``1 - 1/speed`` per simulated
        second after the lead; an open-ended run faster than real time grows it forever.
        """
        offset = (start - now).total_seconds()
        lead = self.lead.total_seconds()
        if span == timedelta.max:
            if self.speed <= 0 or self.speed > 1:
                return float("inf")
            return offset + lead
        seconds = span.total_seconds()
        paced = max(0.0, seconds - lead)
        sent_after = 0.0 if self.speed <= 0 else paced / self.speed
        return offset + seconds - sent_after

    def check(self, start: datetime, now: datetime, span: timedelta) -> None:
        """Refuse a live run whose device time would pass the gateway's clock limit:
        the gateway dead-letters such messages as ``clock_ahead`` while the broker
        acknowledges them, so the run would look published and store nothing."""
        ahead = self.ahead_s(start, now, span)
        if ahead > self.clock_limit_s:
            how = "ever further" if ahead == float("inf") else f"{ahead:.0f} s"
            raise typer.BadParameter(
                f"--speed {self.speed:g} would run device time {how} ahead of real time, "
                f"past the gateway's {self.clock_limit_s:.0f} s limit (its messages would be "
                "dead-lettered as clock_ahead). Live, use --speed 1 or less, or bound the run "
                "with --duration and an earlier --start; for faster runs use --out."
            )


def dropped_faults(model: ScenarioModel, specs: list[HomeSpec] | None) -> list[str]:
    """Template faults that will never run: the template got no site (too few
    sites or --homes), or the fault names a node its site does not have."""
    if specs is None:
        return []
    used = {spec.model.fault for spec in specs}
    warnings = [
        f"template {t.id!r} got no site, its faults {[f.kind for f in t.fault]} are dropped"
        for t in model.home
        if t.fault and t.fault not in used
    ]
    for spec in specs:
        names = {n.node_id for n in spec.nodes} | {n.kind.value for n in spec.nodes}
        warnings += [
            f"site {spec.site_id!r} has no node {f.node!r}: its {f.kind} fault is dropped"
            for f in spec.model.fault
            if f.node is not None and f.node not in names
        ]
    return warnings


# The options of ``simulate`` that take more than a line to declare.
_ScenarioOpt = Annotated[
    str, typer.Option(help="Scenario name (see --list) or path to a scenario TOML")
]
_StartOpt = Annotated[
    str | None,
    typer.Option(help="Simulated start: 2026-11-15 or RFC 3339 (live default: now)"),
]
_DurationOpt = Annotated[
    str | None,
    typer.Option(help="Simulated span (90s, 30m, 6h, 2d); live default: until stopped"),
]
_SpeedOpt = Annotated[
    float, typer.Option(help="Simulated seconds per real second (0: as fast as possible)")
]
_OutOpt = Annotated[
    Path | None, typer.Option(help="Write messages here (JSONL) instead of to a broker")
]
_CredentialsOpt = Annotated[
    Path | None, typer.Option(help='Per-node logins: TOML ["site/node"] username/password')
]
_BackfillOpt = Annotated[
    str | None,
    typer.Option(help="Live: start this far in the past (6h, 2d) and publish that history first"),
]
_SinceOpt = Annotated[
    str | None,
    typer.Option(help="Live backfill: send no history before this RFC 3339 time"),
]
_ClockLimitOpt = Annotated[
    float,
    typer.Option(help="Live: seconds device time may run ahead of real time (the gateway's)"),
]


def simulate(
    scenario: _ScenarioOpt = "normal_summer",
    homes: Annotated[
        int | None, typer.Option(help="Number of homes (default: the scenario's)")
    ] = None,
    seed: Annotated[int, typer.Option(help="Random seed: same seed, same bytes")] = 1,
    start: _StartOpt = None,
    duration: _DurationOpt = None,
    speed: _SpeedOpt = 1.0,
    out: _OutOpt = None,
    labels: Annotated[Path | None, typer.Option(help="Write the ground-truth labels JSON")] = None,
    sites: Annotated[
        Path | None, typer.Option(help="Simulate the sites of this registry TOML")
    ] = None,
    sites_out: Annotated[
        Path | None, typer.Option(help="Write a site registry for the simulated homes")
    ] = None,
    host: Annotated[str, typer.Option(help="MQTT broker host")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="MQTT broker port")] = 1883,
    username: Annotated[str | None, typer.Option(help="MQTT username (all nodes)")] = None,
    password: Annotated[str | None, typer.Option(help="MQTT password (all nodes)")] = None,
    credentials: _CredentialsOpt = None,
    tls: Annotated[bool, typer.Option(help="Connect with TLS")] = False,
    ca_file: Annotated[Path | None, typer.Option(help="CA certificate for TLS")] = None,
    rate: Annotated[
        float | None, typer.Option(help="Load mode: aggregate messages per second")
    ] = None,
    processes: Annotated[int, typer.Option(help="Load mode: publishing processes")] = 2,
    list_: Annotated[bool, typer.Option("--list", help="List the scenarios and exit")] = False,
    backfill: _BackfillOpt = None,
    since: _SinceOpt = None,
    clock_limit: _ClockLimitOpt = DEFAULT_CLOCK_LIMIT_S,
) -> None:
    """Simulate sump pits, pumps and discharge lines and publish their telemetry.

    Publishes over MQTT (one client per node) unless --out is given, in which
    case messages go to a JSONL file without a broker. With --rate it runs load
    mode instead: --homes homes at a held aggregate rate for --duration (wall time).
    """
    try:
        if list_:
            _list_scenarios()
            return
        opts = _broker_options(host, port, username, password, tls, ca_file, credentials)
        if rate is not None:
            _load(opts, homes or 1000, rate, duration, processes, sites_out)
            return
        pacing = Pacing(
            speed, parse_duration(backfill) if backfill else None, clock_limit,
            parse_start(since) if since else None,
        )  # fmt: skip
        _scenario(
            scenario, homes, seed, start, duration, pacing, out, labels, sites, sites_out, opts
        )
    except SumpWatchError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc


def _broker_options(
    host: str,
    port: int,
    username: str | None,
    password: str | None,
    tls: bool,
    ca_file: Path | None,
    credentials: Path | None,
) -> BrokerOptions:
    """The simulator's MQTT options (imported here: paho is for live runs only)."""
    from firmware_sim.mqtt import BrokerOptions, load_credentials

    logins = load_credentials(credentials) if credentials else {}
    return BrokerOptions(host, port, username, password, tls, ca_file, logins)


def _list_scenarios() -> None:
    """``--list``: each scenario with the first sentence of its description."""
    for name in list_scenarios():
        text = " ".join(load_scenario(name).description.split())
        typer.echo(f"{name}: {text.split('. ')[0].rstrip('.')}")


def _load(
    opts: Any, homes: int, rate: float, duration: str | None, processes: int, sites_out: Path | None
) -> None:
    from firmware_sim.mqtt import load_sites_toml, run_load

    if sites_out is not None:
        sites_out.write_text(load_sites_toml(homes))
    seconds = parse_duration(duration).total_seconds() if duration else 60.0
    result = run_load(opts.host, opts.port, homes, rate, seconds, processes, opts)
    typer.echo(
        f"load: target {result.target_rate:.0f} msg/s, achieved {result.achieved_rate:.0f} msg/s "
        f"({result.acked}/{result.sent} acknowledged in {result.duration_s:.1f} s, "
        f"{result.processes} processes, {result.homes} homes)"
    )


def _scenario(
    scenario: str,
    homes: int | None,
    seed: int,
    start: str | None,
    duration: str | None,
    pacing: Pacing,
    out: Path | None,
    labels: Path | None,
    sites: Path | None,
    sites_out: Path | None,
    opts: BrokerOptions,
) -> None:
    model = load_scenario(scenario)
    specs = registry_homes(load_registry(sites), model) if sites is not None else None
    if specs is not None and homes is not None:
        specs = specs[:homes]  # the first N sites of the registry
    live = out is None
    if pacing.backfill is not None and (not live or start):
        raise typer.BadParameter("--backfill is for live runs that start now (no --out, --start)")
    # On the minute: the engine renders device times from the start's minute (its
    # seconds would be dropped, putting device time up to a minute behind the clock).
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    when = parse_start(start) if start else (now - pacing.lead if live else None)
    if duration:
        span: timedelta | None = parse_duration(duration)
    else:
        span = timedelta.max if live else None
    if live:
        assert when is not None and span is not None
        pacing.check(when, now, span)
    for warning in dropped_faults(model, specs):
        typer.echo(f"warning: {warning}", err=True)
    sim = build_simulation(
        model, homes=homes, seed=seed, start=when, duration=span, home_specs=specs
    )
    if sites_out is not None:
        sites_out.write_text(sites_toml(sim))
    if out is None:
        _publish_live(sim, model.name, opts, pacing, None if start else now, when)
    else:
        _write_jsonl(sim, out)
    if labels is not None:
        labels.write_text(json.dumps(sim.labels(), indent=2) + "\n")


def _publish_live(
    sim: Simulation,
    name: str,
    opts: BrokerOptions,
    pacing: Pacing,
    due: datetime | None,
    when: datetime | None,
) -> None:
    """Publish over MQTT, paced, until done or Ctrl-C; ``due``: history is due by then."""
    from firmware_sim.mqtt import publish_simulation

    stop = threading.Event()
    previous = signal.signal(signal.SIGINT, lambda *_: stop.set())
    try:
        typer.echo(
            f"publishing {name}: {len(sim.homes)} homes to {opts.host}:{opts.port} "
            f"at {pacing.speed}x{pacing.describe()} (Ctrl-C to stop)"
        )
        stats = publish_simulation(
            sim,
            opts,
            speed=pacing.speed,
            stop=stop,
            lead_s=pacing.lead.total_seconds(),
            due_at=None if due is None else due.timestamp(),
            skip_before_s=pacing.skip_before_s(when),
        )
    finally:
        signal.signal(signal.SIGINT, previous)
    typer.echo(
        f"published {stats.published} messages, {stats.simulated_s / 3600:.2f} simulated h "
        f"in {stats.wall_s:.1f} s"
    )


def _write_jsonl(sim: Simulation, out: Path) -> None:
    count = 0
    with out.open("w", encoding="utf-8") as sink:
        for msg in sim.messages():
            sink.write(jsonl_line(msg.topic, msg.payload))
            count += 1
    typer.echo(f"wrote {count} messages to {out}")


def plot(
    scenario: Annotated[
        list[str] | None, typer.Argument(help="Scenarios to plot (default: all)")
    ] = None,
    out_dir: Annotated[Path, typer.Option(help="Folder for the PNGs")] = Path("docs/img/scenarios"),
    seed: Annotated[int, typer.Option(help="Random seed")] = 1,
    site: Annotated[
        str | None, typer.Option(help="Home to plot (default: the first with a fault)")
    ] = None,
) -> None:
    """Plot level, pump, flow, pressure and temperatures of one home per scenario (PNG)."""
    from firmware_sim.plot import plot_scenario

    try:
        for name in scenario or list_scenarios():
            path = plot_scenario(name, out_dir / f"{name}.png", seed=seed, site_id=site)
            typer.echo(str(path))
    except SumpWatchError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc


def score(
    scenario: Annotated[
        list[str] | None, typer.Option("--scenario", help="Only these (repeatable)")
    ] = None,
    seed: Annotated[int, typer.Option(help="Simulator seed")] = 1,
    packs: Annotated[
        Path | None, typer.Option("--packs", help="Extra folder of rule packs (*.toml)")
    ] = None,
    silence_factor: Annotated[float, typer.Option(help="As the gateway's setting")] = 6.0,
    details: Annotated[bool, typer.Option(help="List false positives and misses")] = False,
    workers: Annotated[int, typer.Option(help="Scenarios run in parallel processes")] = 2,
    sweep: Annotated[
        bool, typer.Option("--sweep", help="Score the varied-house sweep instead (issue 14)")
    ] = False,
    replicas: Annotated[int, typer.Option(help="Sweep: copies of each case family")] = 2,
    clean_weeks: Annotated[int, typer.Option(help="Sweep: clean site-weeks")] = 200,
    markdown: Annotated[
        Path | None, typer.Option(help="Sweep: also write the tables as Markdown here")
    ] = None,
    only: Annotated[
        list[str] | None,
        typer.Option(
            "--only",
            help="Sweep: only these cases, by family (clean, diversion...), case name "
            "or site id (s291); repeatable",
        ),
    ] = None,
    change_reports: Annotated[
        bool,
        typer.Option(
            "--change-reports/--interval-reports",
            help="Sweep: pit nodes also report each pump start and stop (the default), "
            "or report on their interval only, like the shipped ESPHome pit node",
        ),
    ] = True,
    mean_flow: Annotated[
        bool,
        typer.Option(
            # The first name is the one that sets True: "--mean-flow/--instant-flow".
            "--mean-flow/--instant-flow",
            help="Sweep: outlet meters report the mean flow since their last report, "
            "like the pulse counter of the shipped ESPHome outlet node, or the flow at "
            "the sample's instant (the default)",
        ),
    ] = False,
) -> None:
    """Run the simulator's scenarios (or, with --sweep, the varied-house sweep) offline,
    replay them through the detectors and compare with the ground-truth labels:
    precision, recall and median delay per detector (and per sweep dimension)."""
    from rich.console import Console

    from firmware_sim import report
    from firmware_sim.scoring import score_scenarios, score_sweep
    from firmware_sim.sweep import (
        build_sweep,
        interval_reports_only,
        mean_flow_readings,
        select_cases,
    )

    console = Console()
    try:
        if sweep:
            cases = select_cases(
                build_sweep(seed, replicas=replicas, clean_weeks=clean_weeks), only
            )
            if not change_reports:
                cases = interval_reports_only(cases)
            if mean_flow:
                cases = mean_flow_readings(cases)
            result = score_sweep(
                cases,
                packs_dir=packs,
                silence_factor=silence_factor,
                workers=workers,
                progress=lambda i, n: console.print(f"[dim]{i}/{n}[/dim]") if i % 25 == 0 else None,
            )
            report.print_sweep(console, result, details=details)
            if markdown is not None:
                markdown.write_text(report.markdown_report(result))
            return
        names = scenario or list_scenarios()
        scored = score_scenarios(
            names,
            packs_dir=packs,
            seed=seed,
            workers=workers,
            silence_factor=silence_factor,
            progress=lambda n: console.print(f"[dim]scenario {n}[/dim]"),
        )
    except SumpWatchError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    report.print_scenarios(console, scored, details=details)


def mount(app: typer.Typer) -> None:
    """Add the simulator's commands to the ``sumpwatch`` command line."""
    app.command("simulate")(simulate)
    app.command("plot-scenario")(plot)
    app.command("score")(score)
