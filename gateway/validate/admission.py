"""Admission: is this node enrolled, is it what it says it is, is it within its rate?

The broker's ACL already ties a login to its own topics; admission adds what the
broker cannot know: the site registry. Every check is a dict lookup or a little
arithmetic on one node's token bucket, so it costs the ingest fast path O(1).

The rate limit is a token bucket per node that refills with the node's *device*
clock (``ts``), not with the time a message arrives. Why: a node's legitimate
backlog (the broker's queue after a gateway outage, a node's own offline buffer)
arrives all at once but its timestamps are spaced by the node's interval, so it
refills the bucket as it goes and passes; a flood is many messages for little
device time and runs dry. The validator refuses timestamps ahead of the gateway
clock (``clock_ahead``), so a node cannot buy tokens from the future; it can
back-fill its own past at most once, ``rate`` per second, within ``max_age_s``.
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.registry import SiteRegistry

#: Sample interval assumed for a node missing from the registry (open enrolment).
UNREGISTERED_INTERVAL_S = 10.0


@dataclass(frozen=True, slots=True)
class NodePolicy:
    """What one node may send: its registered kind (None: any) and its rate."""

    kind: str | None
    rate_per_s: float
    burst: float


class _Bucket:
    """One node's tokens and the device time they were last refilled at."""

    __slots__ = ("clock", "tokens")

    def __init__(self, clock: float, tokens: float) -> None:
        self.clock = clock
        self.tokens = tokens


class Admission:
    """Registry and rate checks for telemetry; returns a dead-letter reason or None."""

    def __init__(
        self,
        registry: SiteRegistry,
        *,
        open_enrolment: bool = False,
        rate_factor: float = 10.0,
        burst: float = 600.0,
    ) -> None:
        self._open = open_enrolment
        self._limit = rate_factor > 0
        self._sites = {site.id for site in registry}
        self._policies = {
            (site.id, node.id): NodePolicy(node.kind, rate_factor / node.interval_s, burst)
            for site in registry
            for node in site.nodes
        }
        self._stranger = NodePolicy(None, rate_factor / UNREGISTERED_INTERVAL_S, burst)
        self._buckets: dict[tuple[str, str], _Bucket] = {}

    def enrolled(self, site_id: str, node_id: str) -> str | None:
        """``unknown_site`` / ``unknown_node`` unless enrolled (or enrolment is open)."""
        if self._open or (site_id, node_id) in self._policies:
            return None
        return "unknown_node" if site_id in self._sites else "unknown_site"

    def admit(self, site_id: str, node_id: str, kind: str, ts: float) -> str | None:
        """``kind_mismatch`` or ``rate_limited`` for a telemetry message, else None."""
        key = (site_id, node_id)
        policy = self._policies.get(key)
        if policy is None:
            if not self._open:
                return "unknown_node" if site_id in self._sites else "unknown_site"
            policy = self._stranger
        elif kind != policy.kind:
            return "kind_mismatch"
        if not self._limit:
            return None
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = _Bucket(ts, policy.burst)
        elif ts > bucket.clock:
            bucket.tokens = min(
                policy.burst, bucket.tokens + (ts - bucket.clock) * policy.rate_per_s
            )
            bucket.clock = ts
        if bucket.tokens < 1.0:
            return "rate_limited"
        bucket.tokens -= 1.0
        return None
