"""The demo's zero-install fallback broker: amqtt (pure Python, MQTT 3.1.1).

Run as ``python -m gateway.embedded_broker --port N``. Never used when Mosquitto
is installed, and never in production.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal

from amqtt.broker import Broker


async def serve(port: int) -> None:
    """Run an anonymous amqtt broker on 127.0.0.1:port until SIGTERM/SIGINT."""
    config = {
        "listeners": {"default": {"type": "tcp", "bind": f"127.0.0.1:{port}"}},
        "plugins": {"amqtt.plugins.authentication.AnonymousAuthPlugin": {"allow_anonymous": True}},
    }
    broker = Broker(config)
    await broker.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    with contextlib.suppress(Exception):
        await broker.shutdown()


def main() -> None:
    """Entry point."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    asyncio.run(serve(parser.parse_args().port))


if __name__ == "__main__":
    main()
