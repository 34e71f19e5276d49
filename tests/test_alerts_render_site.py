"""An alert message names the property once: the address only adds what the name
does not say (issue 20.9's "no repeated address", in the messages too)."""

from __future__ import annotations

from datetime import UTC, datetime

from alerts.render import render
from gateway.registry.models import NodeConfig, SiteConfig
from tests.test_alerts_policy import _alert, _note


def _site(name: str, address: str) -> SiteConfig:
    return SiteConfig(
        id="elm-12", name=name, address=address, jurisdiction="edgar",
        nodes=(NodeConfig(id="pit", kind="pit"),),
    )  # fmt: skip


def test_a_message_does_not_repeat_an_address_that_starts_with_the_sites_name() -> None:
    msg = render(
        _alert(), _note(), _site("12 Elm St", "12 Elm St, Edgar, WI"), now=datetime.now(UTC)
    )
    assert "Site: 12 Elm St, Edgar, WI" in msg.text
    assert "12 Elm St, 12 Elm St" not in msg.text


def test_a_message_gives_the_address_after_a_name_that_is_not_it() -> None:
    msg = render(_alert(), _note(), _site("The Smiths", "3 Oak Ave"), now=datetime.now(UTC))
    assert "Site: The Smiths, 3 Oak Ave" in msg.text
