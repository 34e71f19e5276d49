"""What alerting needs to know of a site, as protocols.

The alerts stage depends on these shapes, not on the registry package: the
gateway's :class:`gateway.registry.models.SiteRegistry` satisfies :class:`Sites`
(the composition root hands it in), and a test can hand in anything that has them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol
from zoneinfo import ZoneInfo


class ContactView(Protocol):
    """A homeowner contact: where and how to reach them."""

    @property
    def name(self) -> str: ...
    @property
    def email(self) -> str | None: ...
    @property
    def webhook_url(self) -> str | None: ...
    @property
    def apprise_urls(self) -> tuple[str, ...]: ...
    @property
    def channels(self) -> tuple[str, ...]: ...
    @property
    def quiet_hours(self) -> tuple[int, int] | None: ...
    @property
    def units(self) -> str: ...


class SiteView(Protocol):
    """A monitored site as alert messages and routing see it."""

    @property
    def name(self) -> str: ...
    @property
    def address(self) -> str: ...
    @property
    def jurisdiction(self) -> str: ...
    @property
    def tz(self) -> ZoneInfo: ...
    @property
    def contacts(self) -> Sequence[ContactView]: ...


class Sites(Protocol):
    """Look a site up by id (None: not registered)."""

    def get(self, site_id: str) -> SiteView | None: ...
