"""Issue 18.5, the combined proof: real processes on this machine stand in for hosts.

One Mosquitto, one PostgreSQL (the suite's throwaway cluster), one influxd shared by
the gateways, a real SMTP server (aiosmtpd), three ``sumpwatch gateway --no-api``
processes (shards 0 and 1, and a ``--standby``; each its own data dir) and two
``sumpwatch api`` web servers. A small fleet publishes in three phases: before;
during, when the gateway of shard 0 is killed with SIGKILL a third of the way into
the stream; and after the standby has taken its shard. Then:

- the standby holds shard 0 within ``TAKEOVER_BOUND_S`` of the kill;
- stored == published for every site (counted in influxd);
- each high-water e-mail arrives once at the SMTP server, and no e-mail twice;
- the report schedule (a job under an advisory lock) runs on one gateway at a time:
  the killed gateway held it and wrote the reports due today; exactly one survivor
  takes the job over after the kill, and every report file in the shared folder was
  written by one gateway only. Every gateway's schedule has one extra cut
  (``reports.extra_cuts``) that falls due about a second after the kill, while the job
  has no holder: its reports are written once, after the kill, by the survivor;
- the standby's takeover time is printed to the lease and to its gateway subscribed,
  its detectors warmed up from influxd (the warm-up's own figures too).
- both web servers serve the same alerts.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import tomllib
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zlib import crc32

import pytest
import tomli_w

from gateway.broker import BrokerProcess, free_port
from gateway.contract import telemetry_topic
from tests.conftest import DEMO_SITES
from tests.gateway_process import wait_http
from tests.influx_fixture import InfluxServer
from tests.mqtt_helpers import pit_payload, publish
from tests.test_alerts_delivery import KeepMessages, smtp_server

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SHARDS = 2
#: Two sites per shard; the first of each raises high water in one phase.
SITES = {0: ("elm-14", "oak-5"), 1: ("elm-12", "oak-3")}
PER_PHASE = 20  # readings per site and phase
#: A killed process's sockets close, so PostgreSQL ends its session and frees the
#: shard's lock at once; a host that vanishes silently loses it when the server ends
#: the idle session (15 s). The standby tries every 2 s, then starts its gateway.
TAKEOVER_BOUND_S = 20.0
CLIENT_ID = "proof"
STEP = timedelta(seconds=0.25)
#: The extra report cut is this far after the cluster's settings are made: later than
#: the processes' start and the first phase on a slow machine; the kill waits for it.
REPORT_LEAD = timedelta(seconds=45)
#: The kill comes this long before the extra report falls due.
KILL_BEFORE_DUE_S = 1.5
FORMATS = 2  # the schedule's default formats (pdf, csv)


@dataclass
class Proc:
    """One ``sumpwatch`` process and its log."""

    name: str
    proc: subprocess.Popen[bytes]
    log: Path

    def text(self) -> str:
        return self.log.read_text(errors="replace")


def _wait(check: Callable[[], bool], timeout: float, what: str, *logs: Proc) -> float:
    """Poll ``check`` until it holds; the seconds it took."""
    start = time.monotonic()
    while not check():
        if time.monotonic() - start > timeout:
            tails = "\n".join(f"--- {p.name}\n{p.text()[-2500:]}" for p in logs)
            pytest.fail(f"{what} not within {timeout:.0f} s\n{tails}")
        time.sleep(0.2)
    return time.monotonic() - start


def _registry(path: Path) -> Path:
    """The demo registry cut to the four sites, pit nodes only, reporting every minute
    (so no node counts as silent while its shard has no gateway)."""
    for shard, pair in SITES.items():  # shards split sites by crc32(site_id) % shards
        assert {crc32(site.encode()) % SHARDS for site in pair} == {shard}
    demo = tomllib.loads(DEMO_SITES.read_text())
    wanted = {site for pair in SITES.values() for site in pair}
    sites = [s for s in demo["site"] if s["id"] in wanted]
    for site in sites:
        site["nodes"] = [{"id": "pit", "kind": "pit", "interval_s": 60}]
    path.write_text(tomli_w.dumps({"site": sites}))
    return path


def _alert_routing(path: Path, smtp_port: int) -> Path:
    path.write_text(
        tomli_w.dumps(
            {
                "poll_interval_s": 0.2,
                "mqtt": {"enabled": False},
                "smtp": {
                    "host": "127.0.0.1",
                    "port": smtp_port,
                    "security": "none",
                    "sender": "SumpWatch <alerts@sumpwatch.test>",
                },
            }
        )
    )
    return path


def _phase(
    seq0: int, high_water: set[str], after: datetime
) -> tuple[list[tuple[str, bytes]], datetime]:
    """``PER_PHASE`` readings per site, a quarter second apart, ending now and all
    later than ``after`` (a reading older than its node's last is late and not judged);
    the ``high_water`` sites at 62 cm (alarm mark 55 cm), the others at 20 cm. Also
    the time of the phase's last reading."""
    base = max(datetime.now(UTC) - PER_PHASE * STEP, after + STEP)
    messages = []
    for i in range(PER_PHASE):  # in time order: a reading of every site, then the next
        for site in (s for pair in SITES.values() for s in pair):
            level = 62.0 if site in high_water else 20.0
            payload = pit_payload(site, "pit", seq0 + i, ts=base + i * STEP, level_cm=level)
            messages.append((telemetry_topic(site, "pit"), json.dumps(payload).encode()))
    return messages, base + (PER_PHASE - 1) * STEP


def _stored(influx: InfluxServer, database: str) -> dict[str, int]:
    """Readings per site in influxd (distinct points: a redelivery overwrites)."""
    result: Any = influx.query(database, "SELECT count(level_cm) FROM pit GROUP BY site_id")
    series = result["results"][0].get("series", [])
    return {s["tags"]["site_id"]: int(s["values"][0][1]) for s in series}


def _get_json(port: int, path: str) -> Any:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as response:
        return json.load(response)


def _high_water_mail(smtp: KeepMessages) -> Counter[str]:
    return Counter(str(m["To"]) for m in smtp.messages if "high water" in m["Subject"].lower())


def _settle(check: Callable[[], bool], timeout: float) -> None:
    """Poll ``check`` for at most ``timeout`` seconds; either outcome is fine."""
    deadline = time.monotonic() + timeout
    while not check() and time.monotonic() < deadline:
        time.sleep(0.2)


def _to(site: str) -> str:
    """The homeowner's address as the registry gives it."""
    return f"Owner of {_NAMES[site]} <owner-{site}@example.org>"


_NAMES = {s["id"]: s["name"] for s in tomllib.loads(DEMO_SITES.read_text())["site"]}


def _written(proc: Proc) -> int:
    """Report files the gateway logged as written."""
    total = 0
    for line in proc.text().splitlines():
        if "scheduled winter report file(s)" in line:
            total += int(line.split("wrote ", 1)[1].split()[0])
    return total


def _job_takers(*procs: Proc) -> int:
    """Gateways that took the report schedule's lock."""
    return sum("runs job report-schedule" in p.text() for p in procs)


@dataclass(frozen=True)
class ReportCut:
    """The extra report cut of every gateway's schedule, due just after the kill."""

    at: datetime
    folder: Path  # the shared report folder

    def expected(self, sites_file: Path) -> int:
        """Its files: each format of the village reports and of each site's."""
        sites = tomllib.loads(sites_file.read_text())["site"]
        return FORMATS * (len({s["jurisdiction"] for s in sites}) + len(sites))

    def files(self) -> list[Path]:
        stamp = f"through-{self.at:%Y-%m-%dT%H%M%SZ}"
        return [p for p in self.folder.rglob(f"{stamp}/*") if p.is_file()]

    def wait_written(self, sites_file: Path, *logs: Proc) -> int:
        """Wait for all its files; how many they are."""
        expected = self.expected(sites_file)
        _wait(lambda: len(self.files()) >= expected, 60, "the cut's reports", *logs)
        return expected

    def wait_for_the_kill(self) -> None:
        """Sleep until the stream must start for its kill to come just before the cut."""
        lead_s = (self.at - datetime.now(UTC)).total_seconds() - KILL_BEFORE_DUE_S - 0.5
        assert lead_s > 0, f"the processes took {-lead_s:.0f} s too long: raise REPORT_LEAD"
        time.sleep(lead_s)


def _warm_up(proc: Proc) -> str:
    """The gateway's last warm-up line (what it relearned and how long it took)."""
    lines = [line for line in proc.text().splitlines() if "warm-up:" in line]
    return lines[-1].split("warm-up:", 1)[1].strip() if lines else ""


def _kill(proc: Proc) -> float:
    """SIGKILL, as a host losing power; when it was dead (monotonic clock)."""
    proc.proc.send_signal(signal.SIGKILL)
    proc.proc.wait(10)
    return time.monotonic()


def _stopped(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@dataclass
class Cluster:
    """The processes standing in for hosts, started under ``stack`` (stopped with it)."""

    tmp_path: Path
    stack: ExitStack
    common: dict[str, str]  # what gateways and web servers share
    gateway: dict[str, str]  # what the gateways add

    def start(self, name: str, args: list[str], env: dict[str, str]) -> Proc:
        full = {k: v for k, v in os.environ.items() if not k.startswith("SUMPWATCH_")}
        full.update(env, SUMPWATCH_DATA_DIR=str(self.tmp_path / name))
        log = self.tmp_path / f"{name}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "gateway.cli", *args],
                env=full,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.tmp_path,  # no developer's .env is read
            )
        self.stack.callback(_stopped, proc)
        return Proc(name, proc, log)

    def shard_gateway(self, shard: int) -> Proc:
        env = {**self.common, **self.gateway, "SUMPWATCH_MQTT__SHARD": str(shard)}
        gw = self.start(f"gw{shard}", ["gateway", "--no-api"], env)
        _wait(lambda: "subscribed" in gw.text().lower(), 30, f"{gw.name} up", gw)
        return gw

    def standby(self) -> Proc:
        env = {**self.common, **self.gateway}
        return self.start("standby", ["gateway", "--no-api", "--standby"], env)

    def web_server(self, name: str) -> tuple[Proc, int]:
        port = free_port()
        web = self.start(name, ["api"], {**self.common, "SUMPWATCH_API__PORT": str(port)})
        wait_http(web.proc, port, web.log)
        return web, port


@dataclass
class Fleet:
    """The simulated sites: publishes a phase and counts what it published per site."""

    broker: BrokerProcess
    published: Counter[str] = field(default_factory=Counter)
    last: datetime = field(default_factory=lambda: datetime.now(UTC) - timedelta(hours=1))

    sent_rounds: int = 0  # of the phase being streamed

    def send(self, seq0: int, high_water: str, *, pace_s: float = 0.0) -> None:
        """One phase; with ``pace_s``, one round (a reading per site) at a time."""
        messages, self.last = _phase(seq0, {high_water}, self.last)
        per_round = len(messages) // PER_PHASE
        rounds = [messages[i : i + per_round] for i in range(0, len(messages), per_round)]
        self.sent_rounds = 0
        for chunk in rounds if pace_s else [messages]:
            publish(self.broker.host, self.broker.port, chunk, client_id=f"fleet-{seq0}")
            self.published.update(topic.split("/")[2] for topic, _ in chunk)
            self.sent_rounds += len(chunk) // per_round
            time.sleep(pace_s)

    def stream(self, seq0: int, high_water: str) -> threading.Thread:
        """The phase published in the background, a round every 50 ms."""
        kwargs = {"pace_s": 0.05}
        thread = threading.Thread(target=self.send, args=(seq0, high_water), kwargs=kwargs)
        thread.start()
        return thread


@dataclass(frozen=True)
class Kill:
    """When shard 0's holder was killed, and how the standby took over."""

    at_round: int  # of the stream
    wall: float  # time.time() at the kill
    due_after_s: float  # the extra report cut, after the kill
    takeover_s: float  # to the standby's lease
    ready_s: float  # to its gateway subscribed, detectors warmed up


def _kill_during_the_stream(fleet: Fleet, holder: Proc, standby: Proc, cut: ReportCut) -> Kill:
    """Stream a phase (a high water on shard 1) and SIGKILL ``holder`` a third of the
    way in, just before ``cut`` falls due; wait for the standby to take over."""
    cut.wait_for_the_kill()
    streaming = fleet.stream(1000, SITES[1][0])
    _wait(lambda: fleet.sent_rounds >= PER_PHASE // 3, 10, "streaming", holder)
    killed, at_round = _kill(holder), fleet.sent_rounds
    wall = time.time()
    streaming.join(30)
    _wait(lambda: "shard 0: lease taken" in standby.text(), 60, "takeover", standby)
    takeover_s = time.monotonic() - killed
    _wait(lambda: "warm-up:" in standby.text(), 60, "warm-up", standby)
    _wait(lambda: "subscribed" in standby.text().lower(), 60, "subscribed", standby)
    ready_s = time.monotonic() - killed
    return Kill(at_round, wall, cut.at.timestamp() - wall, takeover_s, ready_s)


def _assert_written_once_after(kill: Kill, files: list[Path], expected: int, why: str) -> None:
    """The extra report fell due after the kill and was written once, after it (so by
    a survivor: the killed gateway cannot have)."""
    assert kill.due_after_s > 0, why
    assert len(files) == expected, why
    assert min(p.stat().st_mtime for p in files) > kill.wall, why


@pytest.fixture
def smtp() -> Iterator[tuple[int, KeepMessages]]:
    port = free_port()
    with smtp_server(port) as handler:
        yield port, handler


def _settings(
    tmp_path: Path,
    broker: BrokerProcess,
    influx: InfluxServer,
    database: str,
    pg_url: str,
    smtp_port: int,
    report_cut: datetime,
) -> tuple[dict[str, str], dict[str, str]]:
    """The settings every process shares, and those the gateways add: one shard count
    and client-id prefix, the SMTP server, one report folder (a shared volume)."""
    common = {
        "SUMPWATCH_SITES_FILE": str(_registry(tmp_path / "sites.toml")),
        "SUMPWATCH_MQTT__HOST": broker.host,
        "SUMPWATCH_MQTT__PORT": str(broker.port),
        "SUMPWATCH_STORE__STATE_URL": pg_url,
        "SUMPWATCH_STORE__BACKEND": "influxdb",
        "SUMPWATCH_INFLUX__URL": influx.url,
        "SUMPWATCH_INFLUX__DATABASE": database,
        "SUMPWATCH_VALIDATION__RATE_LIMIT_FACTOR": "0",
        "SUMPWATCH_API__AUTH_ENABLED": "false",
    }
    gateway = {
        "SUMPWATCH_MQTT__CLIENT_ID": CLIENT_ID,
        "SUMPWATCH_MQTT__SHARDS": str(SHARDS),
        "SUMPWATCH_ALERTS__FILE": str(_alert_routing(tmp_path / "alerts.toml", smtp_port)),
        "SUMPWATCH_REPORTS__DIR": str(tmp_path / "reports"),
        "SUMPWATCH_REPORTS__SCHEDULE": "true",
        # One extra report, due at its cut (no settle), looked for every second.
        "SUMPWATCH_REPORTS__EXTRA_CUTS": json.dumps([report_cut.isoformat()]),
        "SUMPWATCH_REPORTS__SETTLE_S": "0",
        "SUMPWATCH_REPORTS__CHECK_S": "1",
    }
    return common, gateway


def test_three_gateways_two_web_servers_survive_a_killed_shard_holder(
    tmp_path: Path,
    mosquitto: BrokerProcess,
    influxd: InfluxServer,
    influx_database: str,
    pg_url: str,
    smtp: tuple[int, KeepMessages],
) -> None:
    started = time.monotonic()
    smtp_port, mail = smtp
    cut = ReportCut((datetime.now(UTC) + REPORT_LEAD).replace(microsecond=0), tmp_path / "reports")
    common, gateway = _settings(
        tmp_path, mosquitto, influxd, influx_database, pg_url, smtp_port, cut.at
    )
    fleet = Fleet(mosquitto)

    def all_stored() -> bool:
        return _stored(influxd, influx_database) == fleet.published

    with ExitStack() as stack:
        cluster = Cluster(tmp_path, stack, common, gateway)
        # Shard 0's gateway starts first, so it holds the report schedule's lock too,
        # and its first pass writes whatever report is due (out of season: none).
        gw0 = cluster.shard_gateway(0)
        _wait(lambda: "runs job report-schedule" in gw0.text(), 30, "gw0 report job", gw0)
        gw1 = cluster.shard_gateway(1)
        standby = cluster.standby()
        web_a, port_a = cluster.web_server("web-a")
        web_b, port_b = cluster.web_server("web-b")
        gateways = (gw0, gw1, standby)
        _settle(lambda: _written(gw0) > 0, 15)

        # Before: a high water on shard 0, mailed by its gateway.
        fleet.send(0, SITES[0][0])
        _wait(all_stored, 30, "stored before", *gateways)
        _wait(lambda: _high_water_mail(mail)[_to(SITES[0][0])] == 1, 30, "first mail", gw0)

        # During: the fleet streams (a high water on shard 1, mailed by its gateway);
        # a third of the way in, shard 0's gateway is killed. What it had received but
        # not acknowledged is redelivered; the rest the broker queues for its session.
        # The stream starts so that the kill comes just before the extra report's cut.
        kill = _kill_during_the_stream(fleet, gw0, standby, cut)
        drained_s = _wait(all_stored, 30, "drained", *gateways)
        # After: the standby, now shard 0's gateway, mails a high water there.
        fleet.send(2000, SITES[0][1])
        _wait(all_stored, 30, "stored after", *gateways)
        high = {_to(SITES[0][0]), _to(SITES[1][0]), _to(SITES[0][1])}
        _wait(lambda: set(_high_water_mail(mail)) == high, 30, f"mails {high}", *gateways)
        # The report job: the survivors try its lock every 10 s.
        _wait(lambda: _job_takers(gw1, standby) >= 1, 25, "report job taken", gw1, standby)
        expected = cut.wait_written(tmp_path / "sites.toml", gw1, standby)
        time.sleep(2)  # a late duplicate (an e-mail, a second taker) would show by now

        stored = _stored(influxd, influx_database)
        views = [_get_json(port, "/alerts") for port in (port_a, port_b)]
        takers = [p.name for p in (gw1, standby) if _job_takers(p)]
        files = [p for p in (tmp_path / "reports").rglob("*") if p.is_file()]
        written = sum(_written(g) for g in gateways)
        at_cut = cut.files()
        for proc in (gw1, standby, web_a, web_b):
            assert proc.proc.poll() is None, f"{proc.name} died:\n{proc.text()[-3000:]}"

    mails = Counter((str(m["To"]), str(m["Subject"])) for m in mail.messages)
    figures = (
        f"SIGKILL after {kill.at_round} of {PER_PHASE} rounds of the stream; "
        f"takeover {kill.takeover_s:.1f} s after it (bound {TAKEOVER_BOUND_S:.0f} s), "
        f"warmed up and subscribed {kill.ready_s:.1f} s after it "
        f"(warm-up: {_warm_up(standby)}); extra report due {kill.due_after_s:.1f} s after "
        f"the kill, {len(at_cut)} files (expected {expected}); "
        f"queue drained {drained_s:.1f} s later; published {fleet.published.total()}, "
        f"stored {sum(stored.values())} {dict(sorted(stored.items()))}; "
        f"e-mails {len(mail.messages)} ({_high_water_mail(mail).total()} high water); "
        f"alerts on each web server {len(views[0])}; report files {len(files)}, written "
        f"{written}; report job taken over by {takers}; wall {time.monotonic() - started:.0f} s"
    )
    print(figures)
    assert kill.takeover_s < TAKEOVER_BOUND_S, figures
    assert stored == fleet.published, figures
    assert _high_water_mail(mail) == dict.fromkeys(high, 1), figures
    assert [m for m, n in mails.items() if n > 1] == [], figures
    assert len(mail.messages) == len(views[0]), figures  # one e-mail per alert
    assert len(takers) == 1, figures
    assert written == len(files), figures
    _assert_written_once_after(kill, at_cut, expected, figures)
    assert views[0] == views[1], figures
    raised = {(a["site_id"], a["rule_id"]) for a in views[0]}
    assert {(site, "high_water") for site in (SITES[0][0], SITES[1][0], SITES[0][1])} <= raised
