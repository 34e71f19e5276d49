"""Issue 12 (items 5, 16), the pure parts: the per-node token bucket counts device
time, and the simulator draws new boot ids at every process start."""

from __future__ import annotations

import json
from datetime import timedelta

from firmware_sim.mqtt import BrokerOptions, publish_simulation
from firmware_sim.offline import build_simulation
from gateway.broker import BrokerProcess
from gateway.registry import load_registry
from gateway.validate.admission import Admission
from tests.conftest import DEMO_SITES

REGISTRY = load_registry(DEMO_SITES)  # elm-12/pit: kind pit, every 5 s


def _admitted(admission: Admission, stamps: list[float], node: str = "pit") -> int:
    return sum(admission.admit("elm-12", node, node, ts) is None for ts in stamps)


def test_a_burst_then_factor_times_the_registered_rate_by_device_clock() -> None:
    admission = Admission(REGISTRY, rate_factor=10, burst=100)
    # 1,000 messages stamped within 50 s of device time: 100 + 50 s * 10 / 5 s.
    assert _admitted(admission, [i * 0.05 for i in range(1000)]) == 100 + 100 - 1


def test_a_backlog_stamped_at_the_interval_passes_whatever_its_arrival_speed() -> None:
    admission = Admission(REGISTRY, rate_factor=10, burst=100)
    assert _admitted(admission, [i * 5.0 for i in range(10_000)]) == 10_000


def test_old_timestamps_buy_no_tokens() -> None:
    admission = Admission(REGISTRY, rate_factor=10, burst=100)
    assert _admitted(admission, [1000.0] + [500.0 - i for i in range(500)]) == 100


def test_nodes_have_buckets_of_their_own() -> None:
    admission = Admission(REGISTRY, rate_factor=10, burst=10)
    assert _admitted(admission, [0.0] * 50) == 10
    assert admission.admit("elm-12", "outlet", "discharge", 0.0) is None


def test_a_zero_factor_turns_the_limit_off() -> None:
    admission = Admission(REGISTRY, rate_factor=0, burst=1)
    assert _admitted(admission, [0.0] * 1000) == 1000


def test_the_simulator_draws_new_boot_ids_at_every_process_start(
    mosquitto: BrokerProcess,
) -> None:
    def boots() -> set[str]:
        seen: set[str] = set()

        def record(topic: str, payload: bytes) -> None:
            if topic.endswith("/telemetry"):
                seen.add(json.loads(payload)["boot"])

        sim = build_simulation("normal_summer", homes=1, duration=timedelta(minutes=2), seed=3)
        publish_simulation(
            sim, BrokerOptions(mosquitto.host, mosquitto.port), speed=0, on_message=record
        )
        return seen

    first, second = boots(), boots()  # the same seeded scenario, run twice
    assert len(first) == len(second) == 3  # one boot id per node
    assert first.isdisjoint(second)
