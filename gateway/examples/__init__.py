"""Example files the defaults point at, shipped as package data so an installed wheel
runs outside a checkout. In the checkout they are links to ``deploy/``, the one copy
a deployment edits; the wheel build copies their contents.
"""

from pathlib import Path

EXAMPLES_DIR = Path(__file__).resolve().parent
#: The demo registry (12 homes): the default ``sites_file``.
EXAMPLE_SITES = EXAMPLES_DIR / "sites.example.toml"
#: The demo accounts ``sumpwatch demo`` creates.
EXAMPLE_USERS = EXAMPLES_DIR / "users.example.toml"
#: The Mosquitto configuration ``sumpwatch broker`` starts from.
MOSQUITTO_CONF = EXAMPLES_DIR / "mosquitto.conf"
