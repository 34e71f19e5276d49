"""Sensor silence: a node sent nothing for ``silence_factor`` x its interval, or its
retained status says offline. About *arrival* (the arrival clock: wall clock live,
data time in replay), not device time."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, ClassVar

from gateway.domain import Severity
from gateway.rules.detectors.base import (
    INACTIVE,
    Arrival,
    Event,
    RuleInfo,
    SiteState,
    Stream,
    Verdict,
    iso,
)


class SensorSilenceDetector:
    """Which nodes of the site are silent or offline."""

    rule_id: ClassVar[str] = "sensor_silent"
    info: ClassVar[RuleInfo] = RuleInfo(
        "sensor_silent",
        "A sensor has stopped reporting",
        "Check the sensor's power, batteries and Wi-Fi. Until it reports again we "
        "cannot watch this part of the sump.",
    )
    streams: ClassVar[frozenset[Stream]] = frozenset({Stream.STATUS, Stream.TICK})

    def __init__(self, state: SiteState) -> None:
        self.active = False

    def restore(self) -> None:
        """Continue a finding restored from the store."""
        self.active = True

    def feed(self, event: Event, state: SiteState) -> Verdict | None:
        """Judge at the arrival clock; a message arriving only matters while open."""
        if not isinstance(event, Arrival):
            return None
        if event.kind == "heard" and not self.active:
            return None
        verdict = self.judge(event, state)
        self.active = verdict.active
        return verdict

    @staticmethod
    def judge(event: Arrival, state: SiteState) -> Verdict:
        now, factor = event.now, state.ctx.silence_factor
        if state.watch_from is None:
            state.watch_from = now
        silent: list[dict[str, Any]] = []
        for node in state.ctx.site.nodes:
            heard = state.last_heard.get(node.id)
            limit = timedelta(seconds=node.interval_s * factor)
            since = heard or state.watch_from
            if node.id in state.offline or now - since > limit:
                silent.append(
                    {
                        "node_id": node.id,
                        "kind": node.kind.value,
                        "status": "offline" if node.id in state.offline else "silent",
                        "last_heard": iso(heard),
                        "interval_s": node.interval_s,
                        "silent_for_s": int((now - since).total_seconds()),
                    }
                )
        if not silent:
            return INACTIVE
        return Verdict(
            True,
            Severity.WARNING,
            "offline" if any(n["status"] == "offline" for n in silent) else "silent",
            {"nodes": silent, "silence_factor": factor},
        )
