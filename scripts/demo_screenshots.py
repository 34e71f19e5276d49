#!/usr/bin/env python3
"""Regenerate docs/screenshots/ from a running `sumpwatch demo` once its story has played.

    .venv/bin/python scripts/demo_screenshots.py [--out docs/screenshots]

Starts the demo on a fresh data dir and a free port, waits until the three homes of
its story have their findings (elm-14 sanitary discharge, elm-16 icing risk, oak-3
pump failure or high water; about a minute after the 6 h backfill), then signs in as
each demo account in Debian's Chromium (/usr/bin/chromium, driven by Playwright; no
browser is downloaded) and saves each page full-length. Stops the demo at the end.
Icing needs freezing weather: run it in the heating season, or elm-16 shows OK.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from playwright.async_api import async_playwright

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
#: The demo's accounts (deploy/users.example.toml).
PASSWORDS = {"elm16": "elm16-demo-pass", "edgar-pw": "edgar-demo-pass", "admin": "admin-demo-pass"}
#: What the story shows, by site: any of these rules open there means it has played.
STORY = {
    "elm-14": {"sanitary_discharge"},
    "elm-16": {"icing_risk"},
    "oak-3": {"pump_failure", "high_water"},
}
DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}


@dataclass(frozen=True)
class Shot:
    """One screenshot: who is signed in, which page, how wide, what to wait for."""

    name: str
    user: str | None
    path: str
    ready: str = "main"
    viewport: dict[str, int] | None = None


SHOTS = (
    Shot("login-error", None, "/login"),
    Shot("homeowner-dashboard", "elm16", "/site/elm-16", "body[data-charts-ready='24h']"),
    Shot(
        "homeowner-dashboard-phone", "elm16", "/site/elm-16", "body[data-charts-ready='24h']", PHONE
    ),
    Shot("homeowner-other-site-404", "elm16", "/site/oak-3"),
    Shot("account-api-token", "elm16", "/account"),
    Shot("public-works-console", "edgar-pw", "/console/edgar", "#sites-table"),
    Shot("console-phone", "edgar-pw", "/console/edgar", "main", PHONE),
    Shot("public-works-sanitary", "edgar-pw", "/site/elm-14", "body[data-charts-ready='24h']"),
    Shot("public-works-pump-failure", "admin", "/site/oak-3", "body[data-charts-ready='24h']"),
    Shot("cases-queue", "edgar-pw", "/cases/queue/edgar"),
    Shot("admin-home", "admin", "/"),
    Shot("admin-outbox", "admin", "/admin/outbox"),
    Shot("admin-inject", "admin", "/admin/inject"),
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as response:
            return bool(json.loads(response.read())["status"] == "ok")
    except OSError:
        return False


def story_told(db: Path) -> bool:
    """Each story home has one of its findings open."""
    if not db.exists():
        return False
    try:
        with sqlite3.connect(db) as conn:
            rows = conn.execute(
                "SELECT site_id, rule_id FROM findings WHERE cleared_at IS NULL"
            ).fetchall()
    except sqlite3.OperationalError:
        return False
    return all(any((site, rule) in rows for rule in rules) for site, rules in STORY.items())


def wait_for(what: str, done: Any, proc: subprocess.Popen[bytes], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if proc.poll() is not None:
            sys.exit(f"the demo exited (code {proc.returncode}) before {what}")
        if time.monotonic() > deadline:
            sys.exit(f"gave up after {timeout:.0f} s waiting for {what}")
        time.sleep(1)


async def sign_in(page: Any, base: str, user: str) -> None:
    await page.goto(f"{base}/login")
    await page.fill("input[name=username]", user)
    await page.fill("input[name=password]", PASSWORDS[user])
    await page.click("button[type=submit]")
    await page.wait_for_load_state("domcontentloaded")


async def take(browser: Any, base: str, shot: Shot, out: Path) -> None:
    context = await browser.new_context(viewport=shot.viewport or DESKTOP)
    page = await context.new_page()
    if shot.user is not None:
        await sign_in(page, base, shot.user)
    await page.goto(base + shot.path)
    if shot.name == "login-error":  # what a mistyped password looks like
        await page.fill("input[name=username]", "elm16")
        await page.fill("input[name=password]", "not-the-password")
        await page.click("button[type=submit]")
    if shot.name == "account-api-token":  # a token made for an integration, shown once
        await page.fill("input[placeholder='e.g. village GIS']", "Home Assistant")
        await page.get_by_role("button", name="Create token").click()
        await page.wait_for_selector("#new-token")
    if shot.name == "admin-outbox":  # one e-mail opened: what the homeowner is sent
        rows = page.locator("[data-testid=outbox-rows] tbody tr")
        mail = rows.filter(has_text="sanitary sewer").filter(has_text="email").first
        await mail.locator("summary").click()
    await page.wait_for_selector(shot.ready, timeout=30_000)
    await page.wait_for_timeout(500)  # let the charts' animation settle
    await page.screenshot(path=str(out / f"{shot.name}.png"), full_page=True)
    await context.close()
    print(f"saved {out / shot.name}.png")


async def shoot_all(base: str, out: Path) -> None:
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=["--no-sandbox", "--disable-gpu"]
        )
        try:
            for shot in SHOTS:
                await take(browser, base, shot, out)
        finally:
            await browser.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    parser.add_argument("--timeout", type=float, default=300, help="seconds to wait for the story")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    data = Path(tempfile.mkdtemp(prefix="sumpwatch-screenshots-"))
    port = free_port()
    demo = [
        sys.executable,
        "-m",
        "gateway.cli",
        "demo",
        "--port",
        str(port),
        "--data-dir",
        str(data),
    ]
    proc = subprocess.Popen(demo, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for("the dashboard answers", lambda: healthy(port), proc, 60)
        wait_for(
            "the story's findings", lambda: story_told(data / "sumpwatch.db"), proc, args.timeout
        )
        asyncio.run(shoot_all(f"http://127.0.0.1:{port}", args.out))
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()


if __name__ == "__main__":
    main()
