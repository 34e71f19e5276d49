"""Apprise URLs (SMS gateways, Slack, Teams, ntfy, ...): the project writes none of them."""

from __future__ import annotations

import apprise

from alerts.models import DeliveryResult, OutgoingMessage

_TYPES = {
    "info": apprise.NotifyType.INFO,
    "warning": apprise.NotifyType.WARNING,
    "critical": apprise.NotifyType.FAILURE,
}


def redact(url: str) -> str:
    """An Apprise URL without its tokens (for logs and the API): ``scheme://…``."""
    scheme, sep, _ = url.partition("://")
    return f"{scheme}://…" if sep else "…"


class AppriseChannel:
    """Sends one notification to one Apprise URL (its recipient)."""

    name = "apprise"

    async def send(self, message: OutgoingMessage) -> DeliveryResult:
        """Notify; an URL Apprise cannot parse is a permanent failure."""
        app = apprise.Apprise()
        if not app.add(message.recipient):
            return DeliveryResult(False, "Apprise cannot use this URL", permanent=True)
        ok = await app.async_notify(
            body=message.text,
            title=message.subject,
            notify_type=_TYPES.get(message.severity.value, apprise.NotifyType.INFO),
            body_format=apprise.NotifyFormat.TEXT,
        )
        if ok:
            return DeliveryResult(True, f"delivered to {redact(message.recipient)}")
        return DeliveryResult(False, f"Apprise could not notify {redact(message.recipient)}")
