"""Issue 20.1: the admin's "inject a scenario into site X", in a real `sumpwatch demo`
driven by Chromium, and how the scenario file it writes keeps every other home's."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import expect

from gateway.broker import free_port
from gateway.web.inject import fleet_with, injected_template

DEMO_ADMIN = ("admin", "admin-demo-pass")  # deploy/users.example.toml


def test_the_injected_home_takes_the_scenarios_faulty_template_with_its_faults_moved() -> None:
    scenario = {
        "name": "s",
        "home": [
            {"id": "healthy"},
            {
                "id": "bad",
                "jurisdiction": "edgar",
                "fault": [
                    {"kind": "node_offline", "start_h": 3.0, "end_h": 5.0},
                    {"kind": "pump_dead", "start_h": 4.0},
                ],
            },
        ],
    }
    template = injected_template(scenario, began_h=0.75)
    assert template["id"] == "bad" and "jurisdiction" not in template
    assert [(f["start_h"], f.get("end_h")) for f in template["fault"]] == [
        (0.75, 2.75),
        (1.75, None),
    ]
    fleet = {"name": "demo", "weather": {"offset_c": -4.0}, "home": [{"id": "a"}, {"id": "b"}]}
    injected = fleet_with(fleet, 2, template, sites=4)
    # Site i plays template i mod n: every other site keeps the one it had.
    assert [h["id"] for h in injected["home"]] == ["a", "b", "bad", "b"]
    assert injected["weather"] == fleet["weather"]


def _healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as response:
            return bool(json.loads(response.read())["status"] == "ok")
    except OSError:
        return False


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    """A small demo (four homes, no history) on a free port."""
    port = free_port()
    data = tmp_path / "demo"
    cmd = [
        sys.executable,
        "-m",
        "gateway.cli",
        "demo",
        "--port",
        str(port),
        "--data-dir",
        str(data),
    ]
    proc = subprocess.Popen(
        [*cmd, "--homes", "4", "--backfill", "0"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while not _healthy(port):
            assert proc.poll() is None and time.monotonic() < deadline, "the demo did not start"
            time.sleep(0.3)
        yield port, data
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _alive(pid: int) -> bool:
    try:
        return "Z" not in Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[:1]
    except OSError:
        return False


@pytest.mark.integration
@pytest.mark.browser
@pytest.mark.asyncio(loop_scope="session")
async def test_the_admin_injects_a_scenario_into_a_demo_home_and_its_finding_appears(
    demo: tuple[int, Path], browser_context: Any
) -> None:
    port, data = demo
    base = f"http://127.0.0.1:{port}"
    before = json.loads((data / "demo-children.json").read_text())["simulator"]["pid"]
    page = await browser_context.new_page()
    await page.goto(f"{base}/login?next=/admin/inject")
    await page.fill("input[name=username]", DEMO_ADMIN[0])
    await page.fill("input[name=password]", DEMO_ADMIN[1])
    await page.click("button[type=submit]")
    await page.select_option("[data-testid=inject-site]", "elm-14")
    await page.select_option("[data-testid=inject-scenario]", "sensor_offline")
    await page.click("[data-testid=inject]")
    await expect(page.locator("[data-testid=injected]")).to_contain_text(
        "Injected sensor_offline into elm-14"
    )
    # The scenario's first faulty home: its pit node lost power (begun 15 min ago).
    await page.goto(f"{base}/site/elm-14")
    await expect(page.locator(".alert[data-rule='sensor_silent']")).to_contain_text(
        "Not reporting: the pit sensor", timeout=120_000
    )
    # The simulator was replaced, not doubled: the demo's own one is gone.
    children = json.loads((data / "demo-children.json").read_text())
    assert children["simulator"]["pid"] != before and not _alive(before)
    assert "--since" in children["simulator"]["cmdline"]


def test_without_the_simulator_installed_the_injector_says_so_plainly(tmp_path: Path) -> None:
    # A gateway installed without firmware_sim: Python's own way of making a package
    # unimportable (None in sys.modules), in a fresh interpreter.
    probe = (
        "import sys; from pathlib import Path; sys.modules['firmware_sim'] = None; "
        "from gateway.web.inject import availability, fault_scenarios; "
        f"a = availability(Path({str(tmp_path)!r})); "
        "print(a.ready, fault_scenarios(), a.reason)"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.startswith("False {} The simulator (firmware_sim) is not installed")
