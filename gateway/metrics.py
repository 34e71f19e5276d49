"""Prometheus metrics for one gateway instance.

Counters on the hot path are plain integers (an increment is one bytecode) that a
custom collector reads at scrape time; histograms are observed once per batch.
Each app gets its own registry, so tests can run several side by side.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector


class Metrics(Collector):
    """The gateway's counters and histograms."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.received = 0
        self.stored = 0
        self.duplicates = 0
        #: Late readings (behind their node's newest) stored but not judged.
        self.not_evaluated = 0
        self.status_messages = 0
        self.findings_events = 0
        self.rejected: Counter[str] = Counter()
        self.store_errors = 0
        self.pending = 0
        self.broker_connected = False
        self.extra_gauges: dict[str, float] = {}
        self.batch_seconds = Histogram(
            "sumpwatch_batch_write_seconds",
            "Time to write one batch to the store",
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
            registry=self.registry,
        )
        self.batch_size = Histogram(
            "sumpwatch_batch_size",
            "Messages per batch",
            buckets=(1, 10, 50, 100, 500, 1000, 2500, 5000, 10000),
            registry=self.registry,
        )
        self.stored_lag = Histogram(
            "sumpwatch_received_to_stored_seconds",
            "From arrival at the gateway to committed in the store",
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
            registry=self.registry,
        )
        self.registry.register(self)

    def collect(self) -> Iterator[Metric]:
        """Expose the integer counters."""
        yield CounterMetricFamily(
            "sumpwatch_messages_received", "MQTT messages received", value=self.received
        )
        yield CounterMetricFamily(
            "sumpwatch_readings_stored", "Readings newly written to the store", value=self.stored
        )
        yield CounterMetricFamily(
            "sumpwatch_readings_duplicate",
            "Readings already stored (QoS 1 redeliveries)",
            value=self.duplicates,
        )
        yield CounterMetricFamily(
            "sumpwatch_readings_not_evaluated",
            "Readings that arrived behind their node's newest: stored, not judged",
            value=self.not_evaluated,
        )
        yield CounterMetricFamily(
            "sumpwatch_status_messages", "Node availability messages", value=self.status_messages
        )
        yield CounterMetricFamily(
            "sumpwatch_store_errors", "Failed batch writes (retried)", value=self.store_errors
        )
        yield CounterMetricFamily(
            "sumpwatch_finding_events",
            "Findings opened, updated or cleared",
            value=self.findings_events,
        )
        rejected = CounterMetricFamily(
            "sumpwatch_messages_rejected",
            "Messages sent to the dead-letter store",
            labels=["reason"],
        )
        for reason, count in sorted(self.rejected.items()):
            rejected.add_metric([reason], count)
        yield rejected
        yield GaugeMetricFamily(
            "sumpwatch_pending_messages", "Messages waiting to be written", value=self.pending
        )
        yield GaugeMetricFamily(
            "sumpwatch_broker_connected",
            "1 when connected to the broker",
            value=1.0 if self.broker_connected else 0.0,
        )
        for name, value in sorted(self.extra_gauges.items()):
            yield GaugeMetricFamily(f"sumpwatch_{name}", name.replace("_", " "), value=value)

    def render(self) -> bytes:
        """The Prometheus text exposition."""
        return generate_latest(self.registry)
