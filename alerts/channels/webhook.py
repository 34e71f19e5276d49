"""Webhook: a JSON POST signed with HMAC-SHA256.

Headers (see docs/alerts.md):
- ``X-SumpWatch-Timestamp``: Unix seconds when signed;
- ``X-SumpWatch-Signature``: ``sha256=<hex>`` of HMAC-SHA256(secret, ``<timestamp>.<raw body>``);
  the timestamp is in the signed material so a captured request cannot be replayed
  later: receivers refuse timestamps older than a few minutes;
- ``X-SumpWatch-Delivery`` and ``Idempotency-Key``: the notification id, the same on
  every retry, so receivers can drop duplicates.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Callable, Mapping

import httpx

from alerts.config import WebhookConfig
from alerts.models import DeliveryResult, OutgoingMessage

SIGNATURE_HEADER = "X-SumpWatch-Signature"
TIMESTAMP_HEADER = "X-SumpWatch-Timestamp"
DELIVERY_HEADER = "X-SumpWatch-Delivery"


def sign(secret: bytes, timestamp: str, body: bytes) -> str:
    """The signature header value for a body signed at ``timestamp``."""
    digest = hmac.new(secret, timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()
    return f"sha256={digest}"


def verify(
    secret: bytes,
    headers: Mapping[str, str],
    body: bytes,
    *,
    tolerance_s: float = 300,
    now: Callable[[], float] = time.time,
) -> bool:
    """What a receiver does: check the signature and that the timestamp is recent."""
    lowered = {k.lower(): v for k, v in headers.items()}
    stamp = lowered.get(TIMESTAMP_HEADER.lower(), "")
    given = lowered.get(SIGNATURE_HEADER.lower(), "")
    try:
        age = abs(now() - int(stamp))
    except ValueError:
        return False
    return age <= tolerance_s and hmac.compare_digest(sign(secret, stamp, body), given)


class WebhookChannel:
    """POSTs the notification's JSON payload to the recipient URL."""

    name = "webhook"

    def __init__(self, config: WebhookConfig, client: httpx.AsyncClient | None = None) -> None:
        self._config = config
        self._client = client

    async def send(self, message: OutgoingMessage) -> DeliveryResult:
        """POST once; 2xx is delivered, 4xx (but 408/429) permanent, the rest retried."""
        if self._config.secret is None:
            return DeliveryResult(False, "webhook secret not configured", permanent=True)
        secret = self._config.secret.get_secret_value().encode()
        body = json.dumps(message.payload, separators=(",", ":"), sort_keys=True).encode()
        stamp = str(int(time.time()))
        headers = {
            "Content-Type": "application/json",
            "User-Agent": "SumpWatch-Alerts/1",
            TIMESTAMP_HEADER: stamp,
            SIGNATURE_HEADER: sign(secret, stamp, body),
            DELIVERY_HEADER: message.notification_id,
            "Idempotency-Key": message.notification_id,
        }
        try:
            if self._client is not None:
                response = await self._client.post(message.recipient, content=body, headers=headers)
            else:
                async with httpx.AsyncClient(timeout=self._config.timeout_s) as client:
                    response = await client.post(message.recipient, content=body, headers=headers)
        except httpx.HTTPError as exc:
            return DeliveryResult(False, f"HTTP error: {exc!r}")
        code = response.status_code
        if 200 <= code < 300:
            return DeliveryResult(True, f"HTTP {code}")
        permanent = 400 <= code < 500 and code not in (408, 425, 429)
        return DeliveryResult(False, f"HTTP {code}: {response.text[:200]}", permanent=permanent)
