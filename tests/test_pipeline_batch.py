"""The pipeline hands the detectors a socket read's readings at once, in arrival order,
and never lets a later status or refused message overtake a waiting reading; the finding
events queued meanwhile reach the sinks together, in order."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from gateway.domain import FindingChange, FindingEvent, RawMessage, Reading
from gateway.metrics import Metrics
from gateway.pipeline import Pipeline
from gateway.rules.sequences import engine_for, make_site
from gateway.validate import Validator

NOW = datetime.now(UTC).replace(microsecond=0)
SITE = make_site("elm-12")


class _Writer:
    """Takes what the pipeline stores (nothing is committed in these tests)."""

    pending = 0

    def add(self, item: object, token: object = None) -> None:
        pass

    async def flush(self) -> None:
        pass


class _Spy:
    """The engine, recording each batch it is handed and the order of its inputs."""

    def __init__(self) -> None:
        self.engine = engine_for(SITE)
        self.calls: list[tuple[str, int]] = []

    def on_readings(self, readings: Sequence[Reading]) -> list[Any]:
        self.calls.append(("readings", len(readings)))
        return self.engine.on_readings(readings)

    def on_reading(self, reading: Reading) -> list[Any]:
        raise AssertionError("the pipeline batches")

    def on_status(self, status: Any) -> list[Any]:
        self.calls.append(("status", 1))
        return self.engine.on_status(status)

    def tick(self, now: datetime) -> list[Any]:
        return self.engine.tick(now)

    def on_heard(self, site_id: str, node_id: str, received_at: datetime) -> list[Any]:
        self.calls.append(("heard", 1))
        return self.engine.on_heard(site_id, node_id, received_at)


def _pit(seq: int, level_cm: float = 20.0) -> RawMessage:
    payload = {
        "v": 1,
        "site_id": SITE.id,
        "node_id": "pit",
        "ts": (NOW + timedelta(seconds=seq)).isoformat().replace("+00:00", "Z"),
        "seq": seq,
        "boot": "b1",
        "kind": "pit",
        "readings": {"level_cm": level_cm, "pump_on": False},
    }
    topic = f"sumpwatch/v1/{SITE.id}/pit/telemetry"
    return RawMessage(topic, json.dumps(payload).encode(), NOW + timedelta(seconds=seq))


def _pipeline(spy: _Spy) -> Pipeline:
    return Pipeline(Validator(), _Writer(), Metrics(), detectors=spy)  # type: ignore[arg-type]


def test_the_readings_of_one_socket_read_reach_the_detectors_as_one_batch() -> None:
    async def run() -> list[tuple[str, int]]:
        spy = _Spy()
        pipeline = _pipeline(spy)
        for seq in range(5):  # one event-loop callback: one socket read's worth
            pipeline.handle(_pit(seq))
        assert spy.calls == []  # judged once the read is parsed
        await asyncio.sleep(0)
        return spy.calls

    assert asyncio.run(run()) == [("readings", 5)]


def test_a_status_after_readings_is_judged_after_them() -> None:
    async def run() -> tuple[list[tuple[str, int]], set[str]]:
        spy = _Spy()
        pipeline = _pipeline(spy)
        pipeline.handle(_pit(0))
        pipeline.handle(_pit(1))
        status = RawMessage(f"sumpwatch/v1/{SITE.id}/pit/status", b"offline", NOW)
        pipeline.handle(status)
        await asyncio.sleep(0)
        return spy.calls, spy.engine._monitor(SITE.id).state.offline  # type: ignore[union-attr]

    calls, offline = asyncio.run(run())
    assert calls == [("readings", 2), ("status", 1)]
    assert offline == {"pit"}  # the readings did not mark it online after the status


def test_a_refused_message_after_readings_is_heard_after_them() -> None:
    async def run() -> list[tuple[str, int]]:
        spy = _Spy()
        pipeline = _pipeline(spy)
        pipeline.handle(_pit(0))
        pipeline.handle(RawMessage(f"sumpwatch/v1/{SITE.id}/pit/telemetry", b"{", NOW))
        await asyncio.sleep(0)
        return spy.calls

    assert asyncio.run(run()) == [("readings", 1), ("heard", 1)]


def test_draining_judges_the_readings_still_waiting() -> None:
    async def run() -> list[tuple[str, int]]:
        spy = _Spy()
        pipeline = _pipeline(spy)
        pipeline.handle(_pit(0))
        await pipeline.drain()  # stopping before the loop's next turn
        return spy.calls

    assert asyncio.run(run()) == [("readings", 1)]


class _GatedSink:
    """A finding sink busy with its first call until the test opens the gate."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.calls: list[list[tuple[FindingChange, str]]] = []

    async def __call__(self, events: list[FindingEvent]) -> None:
        self.calls.append([(e.change, e.finding.rule_id) for e in events])
        await self.gate.wait()


def test_finding_events_queued_while_the_sinks_are_busy_reach_them_in_one_call() -> None:
    async def run() -> list[list[tuple[FindingChange, str]]]:
        sink = _GatedSink()
        pipeline = Pipeline(
            Validator(),
            _Writer(),  # type: ignore[arg-type]
            Metrics(),
            detectors=engine_for(SITE),
            sinks=[sink],
        )
        task = asyncio.create_task(pipeline.run_sinks())
        seq = 0
        # Three socket reads, each judged on its own turn: high water opens, clears
        # (two samples well below the mark) and opens again.
        for level in (60.0, 20.0, 60.0):
            for _ in range(2):
                pipeline.handle(_pit(seq, level))
                seq += 1
            await asyncio.sleep(0)
            await asyncio.sleep(0)
        sink.gate.set()
        for _ in range(5):
            await asyncio.sleep(0)
        task.cancel()
        return sink.calls

    opened, cleared = (FindingChange.OPENED, "high_water"), (FindingChange.CLEARED, "high_water")
    assert asyncio.run(run()) == [[opened], [cleared, opened]]
