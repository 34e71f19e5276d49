"""The bridge: publishes discovery configs and per-site state to the broker.

It has its own MQTT connection, whose last will is a retained ``offline`` on
:data:`AVAILABILITY_TOPIC` and whose first message is a retained ``online``: when the
gateway dies, the broker greys every SumpWatch entity in Home Assistant at once.

At each (re)connection it reads the retained configs under the discovery prefix,
clears the ones of ours whose site left the registry (an empty retained message is
Home Assistant's "remove this entity"), and republishes every current site's configs.
State documents are published for the sites that changed, at most every
``interval_s``, so a busy pit does not cost a publish per reading.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Iterable

import aiomqtt

from gateway.domain import FindingChange, FindingEvent, Reading
from gateway.homeassistant.discovery import (
    AVAILABILITY_TOPIC,
    discovery_messages,
    is_ours,
    state_topic,
)
from gateway.homeassistant.state import SiteHaState
from gateway.mqttconn import MqttConnection, MqttWill, aiomqtt_client
from gateway.registry.models import SiteRegistry

log = logging.getLogger(__name__)

#: How long to collect the broker's retained configs after subscribing to them.
RETAINED_SETTLE_S = 1.0
#: Longest the clean stop waits to say "offline" (the last will covers the rest).
STOP_PUBLISH_S = 2.0


def _json(doc: object) -> bytes:
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode()


class HomeAssistantBridge:
    """Home Assistant discovery and state for every site of a registry."""

    def __init__(
        self,
        registry: SiteRegistry,
        *,
        connection: MqttConnection,
        dashboard_url: str,
        prefix: str = "homeassistant",
        interval_s: float = 5.0,
    ) -> None:
        self.registry = registry
        self.prefix = prefix.rstrip("/")
        self.dashboard_url = dashboard_url.rstrip("/")
        self.interval_s = interval_s
        # The will tells Home Assistant the bridge is gone when it vanishes.
        self._connection = connection.replace(
            will=MqttWill(AVAILABILITY_TOPIC, b"offline"), timeout_s=10.0
        )
        self.sites = {s.id: SiteHaState(s.tz, s.pit.area_cm2) for s in registry}
        self._dirty: set[str] = set(self.sites)
        self.published_configs = 0
        self.removed_configs = 0
        self.connected = asyncio.Event()

    # -- inputs (the pipeline's hot path: no I/O) ---------------------------------

    def observe(self, reading: Reading) -> None:
        """A validated reading of any site."""
        state = self.sites.get(reading.site_id)
        if state is not None and state.observe(reading):
            self._dirty.add(reading.site_id)

    async def on_events(self, events: list[FindingEvent]) -> None:
        """A finding sink: a finding opened or cleared switches its problem sensor."""
        for event in events:
            state = self.sites.get(event.finding.site_id)
            if state is None:
                continue
            rule = event.finding.rule_id
            before = rule in state.open_rules
            if event.change is FindingChange.CLEARED:
                state.open_rules.discard(rule)
            else:
                state.open_rules.add(rule)
            if before != (rule in state.open_rules):
                self._dirty.add(event.finding.site_id)

    def restore(self, open_findings: Iterable[tuple[str, str]]) -> None:
        """(site, rule) of the findings open at start."""
        for site_id, rule_id in open_findings:
            if site_id in self.sites:
                self.sites[site_id].open_rules.add(rule_id)

    # -- the loop -----------------------------------------------------------------

    async def run(self, reconnect_max_s: float = 30.0) -> None:
        """Connect, announce, publish; reconnect with backoff until cancelled."""
        delay = 1.0
        while True:
            try:
                await self._session()
            except aiomqtt.MqttError as exc:
                self.connected.clear()
                log.warning("Home Assistant bridge disconnected: %s", exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, reconnect_max_s)

    async def _session(self) -> None:
        async with aiomqtt_client(self._connection) as client:
            try:
                await self._announce(client)
                self.connected.set()
                while True:
                    await self._publish_dirty(client)
                    await asyncio.sleep(self.interval_s)
            finally:
                self.connected.clear()
                # A clean stop says so itself; the will covers a crash.
                # Bounded: a stop must never wait on an unanswered PUBACK.
                with contextlib.suppress(aiomqtt.MqttError):
                    await client.publish(
                        AVAILABILITY_TOPIC, b"offline", qos=1, retain=True, timeout=STOP_PUBLISH_S
                    )

    async def _announce(self, client: aiomqtt.Client) -> None:
        current = {
            topic: config
            for site in self.registry
            for topic, config in discovery_messages(
                site, self.prefix, f"{self.dashboard_url}/site/{site.id}"
            )
        }
        stale = [t for t in await self._retained_configs(client) if t not in current]
        # All in flight at once: one PUBACK round trip each, in turn, took longer than
        # a demo's first minute while the broker absorbed its history backfill.
        await asyncio.gather(
            *(client.publish(topic, b"", qos=1, retain=True) for topic in stale),
            *(
                client.publish(topic, _json(config), qos=1, retain=True)
                for topic, config in current.items()
            ),
        )
        self.removed_configs += len(stale)
        self.published_configs += len(current)
        await client.publish(AVAILABILITY_TOPIC, b"online", qos=1, retain=True)
        self._dirty = set(self.sites)

    async def _retained_configs(self, client: aiomqtt.Client) -> set[str]:
        """Config topics of ours the broker holds now (retained)."""
        pattern = f"{self.prefix}/+/+/config"
        found: set[str] = set()
        await client.subscribe(pattern, qos=1)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(RETAINED_SETTLE_S):
                async for message in client.messages:
                    payload = message.payload
                    if not message.retain or not isinstance(payload, bytes | bytearray):
                        continue
                    try:
                        config = json.loads(payload)
                    except ValueError:
                        continue
                    if is_ours(config):
                        found.add(str(message.topic))
        await client.unsubscribe(pattern)
        return found

    async def _publish_dirty(self, client: aiomqtt.Client) -> None:
        dirty, self._dirty = self._dirty, set()
        for site_id in sorted(dirty):
            doc = self.sites[site_id].document()
            await client.publish(state_topic(site_id), _json(doc), qos=1, retain=True)
