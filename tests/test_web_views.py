"""The pages' view-model logic without a browser: units, wording and judgements."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from gateway.contract import NodeKind
from gateway.domain import Reading
from gateway.registry import load_registry
from gateway.settings import REPO_DIR
from gateway.web import views
from gateway.web.series import live_points
from gateway.web.sources import ago, local_time
from gateway.web.units import convert, fmt

SITE = load_registry(REPO_DIR / "deploy" / "sites.example.toml").require("elm-16")
T0 = datetime(2026, 1, 10, 18, 0, tzinfo=UTC)  # noon in Edgar (CST)


def _pit(seconds: float, level: float, pump_on: bool, node: str = "pit") -> Reading:
    ts = T0 + timedelta(seconds=seconds)
    return Reading(
        "elm-16",
        node,
        NodeKind.PIT,
        ts,
        int(seconds),
        "b",
        {"level_cm": level, "pump_on": pump_on},
        ts,
    )


def _outlet(flow: float, pipe_c: float) -> Reading:
    values = {"flow_lpm": flow, "pressure_kpa": 5.0, "pipe_temp_c": pipe_c}
    return Reading("elm-16", "outlet", NodeKind.DISCHARGE, T0, 0, "b", values, T0)


def test_us_customary_is_the_default_and_metric_is_exact() -> None:
    assert fmt("level", 25.4, "us") == "10.0 in"
    assert fmt("flow", 37.85411784, "us") == "10.0 gpm"
    assert fmt("pressure", 68.94757293, "us") == "10.0 psi"
    assert fmt("temperature", 0.0, "us") == "32°F"
    assert fmt("volume", 378.5411784, "us") == "100 gal"
    assert fmt("temperature", -3.25, "metric") == "-3.2°C"
    assert fmt("distance", 10, "metric") == "3.0 m"
    assert fmt("level", None, "us") == "—"
    assert fmt("pressure", -0.01, "us") == "0.0 psi"  # no "-0.0" from sensor noise
    assert convert("flow", 10.0, "metric") == 10.0


def test_times_are_shown_in_the_sites_time_zone() -> None:
    assert local_time(T0, SITE, T0) == "12:00 PM CST"
    assert local_time(T0 - timedelta(days=1), SITE, T0) == "Jan 9, 12:00 PM CST"
    summer = datetime(2026, 7, 1, 17, 5, tzinfo=UTC)
    assert local_time(summer, SITE) == "Jul 1, 12:05 PM CDT"
    assert ago(T0 - timedelta(minutes=5), T0) == "5 min ago"


def test_the_last_cycle_is_the_last_off_to_on_run() -> None:
    rows = [_pit(0, 30, False), _pit(10, 41, True), _pit(70, 25, True), _pit(80, 17, False)]
    text = views._last_cycle(rows, SITE, T0 + timedelta(minutes=3))
    assert text.startswith("12:00 PM CST, ran 1 min 10 s")
    running = views._last_cycle(rows[:3], SITE, T0 + timedelta(minutes=3))
    assert running == "Running since 12:00 PM CST"
    assert "No pump run" in views._last_cycle([_pit(0, 20, False)], SITE, T0)


def test_the_discharge_line_reads_flowing_idle_or_frozen() -> None:
    assert views._discharge(_outlet(30.0, 4.0), None, [], "us")[0] == "flowing"
    assert views._discharge(_outlet(0.0, 4.0), _pit(0, 40, False), [], "us")[0] == "idle"
    # The pump runs, nothing reaches the outlet and the pipe is below freezing.
    state, text = views._discharge(_outlet(0.0, -2.0), _pit(0, 40, True), [], "us")
    assert state == "frozen" and "Possibly" in text
    assert views._discharge(None, None, [], "us")[0] == "unknown"


def test_the_status_says_high_water_or_silence_before_anything_else() -> None:
    now = T0 + timedelta(seconds=5)
    latest = {"pit": _pit(0, 60, True)}
    assert views._status(SITE, latest, [], [], now, 6.0).headline == "High water in the pit"
    quiet = views._status(SITE, {"pit": _pit(0, 20, False)}, [], [], now + timedelta(hours=1), 6.0)
    assert quiet.state == "problem" and "not reporting" in quiet.headline
    assert views._status(SITE, {}, [], [], now, 6.0).state == "unknown"
    assert views._status(SITE, {"pit": _pit(0, 20, False)}, [], [], now, 6.0).state == "ok"


def test_live_points_convert_numbers_and_skip_booleans() -> None:
    points = live_points([_pit(0, 25.4, True)], "us")
    assert points == {"level_cm": [(int(T0.timestamp() * 1000), 10.0)]}
