"""Delivery channels: each sends one rendered notification and says how it went.

A channel never raises for a delivery failure; it returns a :class:`DeliveryResult`
(``permanent=True`` when retrying cannot help, e.g. a rejected address).
"""

from __future__ import annotations

from typing import Protocol

from alerts.models import DeliveryResult, OutgoingMessage


class Channel(Protocol):
    """The one interface every channel implements."""

    name: str

    async def send(self, message: OutgoingMessage) -> DeliveryResult:
        """Deliver one notification."""
        ...


__all__ = ["Channel", "DeliveryResult", "OutgoingMessage"]
