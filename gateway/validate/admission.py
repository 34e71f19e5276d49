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

from gateway.registry import SiteRegistry

#: Sample interval assumed for a node missing from the registry (open enrolment).
UNREGISTERED_INTERVAL_S = 10.0


class _Node:
    """One node's registered kind (None: any), its rate, and its token bucket: the
    tokens left and the device time they were last refilled at (None: not yet)."""

    __slots__ = ("burst", "clock", "kind", "rate_per_s", "tokens")

    def __init__(self, kind: str | None, rate_per_s: float, burst: float) -> None:
        self.kind = kind
        self.rate_per_s = rate_per_s
        self.burst = burst
        self.clock: float | None = None
        self.tokens = burst


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
        self._factor = rate_factor
        self._burst = burst
        self._sites = {site.id for site in registry}
        # One dict lookup per message finds both the node's policy and its bucket.
        self._nodes = {
            (site.id, node.id): _Node(node.kind, rate_factor / node.interval_s, burst)
            for site in registry
            for node in site.nodes
        }

    def enrolled(self, site_id: str, node_id: str) -> str | None:
        """``unknown_site`` / ``unknown_node`` unless enrolled (or enrolment is open)."""
        if self._open or (site_id, node_id) in self._nodes:
            return None
        return "unknown_node" if site_id in self._sites else "unknown_site"

    def admit(self, site_id: str, node_id: str, kind: str, ts: float) -> str | None:
        """``kind_mismatch`` or ``rate_limited`` for a telemetry message, else None."""
        node = self._nodes.get((site_id, node_id))
        if node is None:
            if not self._open:
                return "unknown_node" if site_id in self._sites else "unknown_site"
            # Open enrolment: a stranger gets a bucket of its own, any kind.
            node = self._nodes[site_id, node_id] = _Node(
                None, self._factor / UNREGISTERED_INTERVAL_S, self._burst
            )
        elif kind != node.kind and node.kind is not None:
            return "kind_mismatch"
        if not self._limit:
            return None
        clock = node.clock
        if clock is None or ts > clock:
            if clock is not None:
                tokens = node.tokens + (ts - clock) * node.rate_per_s
                node.tokens = tokens if tokens < node.burst else node.burst
            node.clock = ts
        if node.tokens < 1.0:
            return "rate_limited"
        node.tokens -= 1.0
        return None
