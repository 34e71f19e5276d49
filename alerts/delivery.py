"""The delivery loop: due notifications out of the outbox, through their channels.

At-least-once: a row is marked ``sending`` (and an attempt recorded) before the
channel is called and ``sent`` after. A crash in between leaves it ``sending``;
:meth:`Delivery.recover` puts it back to ``pending`` and it is sent again. Failures
retry with exponential backoff and jitter up to the retry policy's attempts.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime

from alerts import outbox
from alerts.channels import Channel
from alerts.config import AlertsConfig
from alerts.models import Alert, DeliveryResult, Notification
from alerts.policy import backoff_delay
from alerts.render import render, site_state
from alerts.sites import Sites
from gateway.errors import NotFound
from gateway.state.database import Connection, Database

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Claimed:
    """A notification taken for sending, with what rendering it needs."""

    notification: Notification
    attempt_id: int
    alert: Alert
    site_alerts: tuple[Alert, ...]


class Delivery:
    """Claims due notifications, sends them concurrently, records each outcome."""

    def __init__(
        self,
        db: Database,
        sites: Sites,
        config: AlertsConfig,
        channels: Mapping[str, Channel],
        clock: Callable[[], datetime],
        ordinances: Mapping[str, str] | None = None,
        *,
        owner: str = "gateway",
    ) -> None:
        self.db = db
        #: Who claims (the gateway's client id): a gateway restarted with the same id
        #: takes its own interrupted claims back at once, not after their lease.
        self.owner = owner
        self.sites = sites
        self.config = config
        self.channels = channels
        self._clock = clock
        self.ordinances: Mapping[str, str] = ordinances or {}
        self._in_flight: set[str] = set()

    @property
    def _shared(self) -> bool:
        """True when other gateways may claim from the same outbox (PostgreSQL)."""
        return self.db.dialect == "postgresql"

    async def recover(self) -> int:
        """At start: requeue deliveries a crash left in ``sending``; returns how many.
        With a shared outbox only this gateway's own and those whose claim ran out:
        the rest are in flight at another gateway."""
        now, shared = self._clock(), self._shared
        owner = self.owner if shared else None
        return await self.db.write(
            lambda conn: outbox.recover_interrupted(conn, now, owner=owner, skip_locked=shared)
        )

    async def _recover_expired(self) -> None:
        """A dead gateway's claims, once they have run out (shared outbox only)."""
        now = self._clock()
        await self.db.write(
            lambda conn: outbox.recover_interrupted(conn, now, owner="", skip_locked=True)
        )

    async def close(self) -> None:
        """Put deliveries cut short by cancellation back in the queue."""
        if not self._in_flight:
            return
        ids, self._in_flight = list(self._in_flight), set()
        now = self._clock()
        await self.db.write(lambda conn: outbox.requeue(conn, ids, now))

    async def run_once(self) -> int:
        """Send what is due now. Returns the sends made."""
        now = self._clock()
        if self._shared:
            await self._recover_expired()
        claimed = await self.db.write(lambda conn: self._claim(conn, now))
        if not claimed:
            return 0
        limit = asyncio.Semaphore(self.config.max_concurrent_sends)

        async def deliver(item: Claimed) -> None:
            async with limit:
                result = await self._send(item)
            await self.db.write(lambda conn: self._record(conn, item, result))
            self._in_flight.discard(item.notification.id)

        await asyncio.gather(*(deliver(c) for c in claimed))
        return len(claimed)

    def _claim(self, conn: Connection, now: datetime) -> list[Claimed]:
        taken = outbox.claim(
            conn,
            now,
            self.config.max_concurrent_sends * 4,
            skip_locked=self._shared,
            owner=self.owner,
        )
        site_cache: dict[str, tuple[Alert, ...]] = {}
        claimed = []
        for n, attempt_id in taken:
            alert = outbox.get_alert(conn, n.alert_id)
            if alert is None:
                raise NotFound(f"no alert with id {n.alert_id!r}")
            if n.channel == "mqtt" and n.site_id not in site_cache:
                site_cache[n.site_id] = tuple(outbox.site_alerts(conn, n.site_id))
            claimed.append(Claimed(n, attempt_id, alert, site_cache.get(n.site_id, ())))
            self._in_flight.add(n.id)
        return claimed

    async def _send(self, item: Claimed) -> DeliveryResult:
        n = item.notification
        channel = self.channels.get(n.channel)
        if channel is None:
            return DeliveryResult(False, f"channel {n.channel!r} is not configured", permanent=True)
        now = self._clock()
        message = render(
            item.alert,
            n,
            self.sites.get(n.site_id),
            public_url=self.config.public_url,
            now=now,
            ordinances=self.ordinances,
        )
        if n.channel == "mqtt":
            message = replace(message, payload=site_state(n.site_id, item.site_alerts, now))
        try:
            async with asyncio.timeout(self.config.send_timeout_s):
                return await channel.send(message)
        except TimeoutError:
            return DeliveryResult(False, f"timed out after {self.config.send_timeout_s:g} s")
        except Exception as exc:
            # A channel bug must not kill the loop; it is recorded and retried.
            log.exception("alerts: channel %s raised", n.channel)
            return DeliveryResult(False, f"channel error: {exc!r}")

    def _record(self, conn: Connection, item: Claimed, result: DeliveryResult) -> None:
        now = self._clock()
        n = item.notification
        give_up = result.permanent or n.attempts >= self.config.retry.max_attempts
        retry_at = None if give_up else now + backoff_delay(n.attempts, self.config.retry)
        outbox.record_attempt(
            conn, n.id, item.attempt_id, ok=result.ok, detail=result.detail, now=now,
            retry_at=retry_at,
        )  # fmt: skip
