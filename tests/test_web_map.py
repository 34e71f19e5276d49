"""Issue 19, a real map in the console: Leaflet with tiles from a (local) tile server,
labelled pins coloured by status that follow the console's filters and open the site
from the keyboard, and the offline schematic when no tile loads. Real Chromium; the
tiles come from a server this test runs, so nothing leaves the machine."""

from __future__ import annotations

import struct
import threading
import zlib
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import pytest_asyncio
from playwright.async_api import expect

from gateway.broker import BrokerProcess
from gateway.settings import Settings
from tests.browser_fixtures import LiveApp, _serve, browser_login, free_port

pytestmark = [
    pytest.mark.integration,
    pytest.mark.browser,
    pytest.mark.asyncio(loop_scope="session"),
]

TIMEOUT_MS = 15_000


def _png(rgb: tuple[int, int, int], size: int = 256) -> bytes:
    """A solid-colour PNG tile, written by hand (no imaging library needed)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    row = b"\x00" + bytes(rgb) * size
    header = struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0)
    pixels = zlib.compress(row * size)
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    )


class TileServer:
    """Serves the same tile for every /z/x/y.png and counts what it served."""

    def __init__(self) -> None:
        tile = _png((230, 236, 240))
        self.served = 0
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                parts = self.path.strip("/").split("/")
                if len(parts) != 3 or not parts[2].endswith(".png"):
                    self.send_error(404)
                    return
                owner.served += 1
                self.send_response(200)
                self.send_header("Content-Type", "image/png")
                self.send_header("Content-Length", str(len(tile)))
                self.send_header("Access-Control-Allow-Origin", "*")
                self.end_headers()
                self.wfile.write(tile)

            def log_message(self, *_args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_port}/{{z}}/{{x}}/{{y}}.png"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def tile_server() -> Iterator[TileServer]:
    server = TileServer()
    yield server
    server.close()


@pytest_asyncio.fixture(loop_scope="session")
async def map_app(
    web_settings: Settings, mosquitto: BrokerProcess, tile_server: TileServer
) -> AsyncIterator[LiveApp]:
    settings = web_settings.updated(map={"tile_url": tile_server.url})
    async for live in _serve(settings, mosquitto):
        yield live


@pytest_asyncio.fixture(loop_scope="session")
async def offline_map_app(
    web_settings: Settings, mosquitto: BrokerProcess
) -> AsyncIterator[LiveApp]:
    dead = f"http://127.0.0.1:{free_port()}/{{z}}/{{x}}/{{y}}.png"  # nothing listens there
    async for live in _serve(web_settings.updated(map={"tile_url": dead}), mosquitto):
        yield live


async def _console(page: Any, live: LiveApp) -> None:
    await browser_login(page, live, "edgar-pw")
    assert page.url.endswith("/console/edgar")


async def test_the_console_map_shows_street_tiles_and_a_labelled_pin_per_site(
    map_app: LiveApp, browser_context: Any, tile_server: TileServer
) -> None:
    edgar = [s for s in map_app.runtime.registry.in_jurisdiction("edgar") if s.lat is not None]
    page = await browser_context.new_page()
    await _console(page, map_app)
    await page.wait_for_selector("#street-map[data-tiles-loaded]", timeout=TIMEOUT_MS)
    assert tile_server.served > 0
    pins = page.locator("#street-map .pin")
    await expect(pins).to_have_count(len(edgar))
    labels = await page.locator("#street-map .pin-label").all_inner_texts()
    assert sorted(labels) == sorted(s.name for s in edgar)
    assert await page.is_hidden("#schematic")


async def test_map_pins_follow_the_console_filters(map_app: LiveApp, browser_context: Any) -> None:
    page = await browser_context.new_page()
    await _console(page, map_app)
    await page.wait_for_selector("#street-map[data-tiles-loaded]", timeout=TIMEOUT_MS)
    await page.fill("#filter-text", "oak")
    shown = await page.get_attribute("#sites-table", "data-shown")
    await expect(page.locator("#street-map .pin")).to_have_count(int(shown or 0))
    await expect(page.locator("#street-map")).to_have_attribute("data-pins", shown or "0")


async def test_a_pin_is_reached_with_the_keyboard_and_opens_its_site(
    map_app: LiveApp, browser_context: Any
) -> None:
    page = await browser_context.new_page()
    await _console(page, map_app)
    await page.wait_for_selector("#street-map .pin", timeout=TIMEOUT_MS)
    pin = page.locator("#street-map .pin").first
    site_id = await pin.get_attribute("data-site")
    assert await pin.get_attribute("tabindex") == "0"
    assert "Open the site" in (await pin.get_attribute("aria-label") or "")
    await pin.focus()
    await page.keyboard.press("Enter")
    await page.wait_for_url(f"**/site/{site_id}", timeout=TIMEOUT_MS)


async def test_without_tiles_the_console_falls_back_to_the_offline_schematic(
    offline_map_app: LiveApp, browser_context: Any
) -> None:
    edgar = [s for s in offline_map_app.runtime.registry.in_jurisdiction("edgar")]
    page = await browser_context.new_page()
    await _console(page, offline_map_app)
    await expect(page.locator("[data-testid=map-offline]")).to_be_visible(timeout=TIMEOUT_MS)
    assert await page.is_hidden("#street-map")
    assert await page.get_attribute("#site-map", "data-points") == str(len(edgar))
