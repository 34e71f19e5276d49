"""The detectors the engine runs, in dispatch order. Adding a rule: write its module
(rule id, ``info``, streams, ``feed``, ``restore``, thresholds), list its class here,
add its pack entries and its tests. The catalog and the rule ids derive from this."""

from __future__ import annotations

from gateway.rules.detectors.base import Detector, SiteState
from gateway.rules.detectors.pump import (
    ContinuousRunDetector,
    HighWaterDetector,
    ShortCyclingDetector,
)
from gateway.rules.detectors.pump_failure import PumpFailureDetector
from gateway.rules.detectors.sanitary import SanitaryDischargeDetector
from gateway.rules.detectors.silence import SensorSilenceDetector
from gateway.rules.detectors.weather import FrozenLineDetector, IcingRiskDetector

DETECTORS: tuple[type[Detector], ...] = (
    SanitaryDischargeDetector,
    IcingRiskDetector,
    FrozenLineDetector,
    HighWaterDetector,
    ContinuousRunDetector,
    ShortCyclingDetector,
    SensorSilenceDetector,
    PumpFailureDetector,
)


def build(state: SiteState) -> tuple[Detector, ...]:
    """One instance of every detector for a site."""
    return tuple(cls(state) for cls in DETECTORS)
