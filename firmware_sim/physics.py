"""Hydraulics and heat: pump curves, the discharge line's system curve, freezing.

Units inside the simulator: level in cm above the pit floor, volumes in litres,
flows in L/min, heads in metres of water, pressures in kPa, temperatures in °C.
Sources of every default are listed in ``docs/simulator.md``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

G = 9.81  # m/s²
#: kPa per metre of water column (rho * g / 1000 for water at ~10 °C).
KPA_PER_M = 9.807
#: Latent heat of fusion of water, kJ/kg.
LATENT_FUSION_KJ_PER_KG = 334.0
#: Specific heat of water, kJ/(kg K).
CP_WATER_KJ_PER_KG_K = 4.18
#: Hazen-Williams roughness coefficient of PVC pipe.
HAZEN_WILLIAMS_C_PVC = 150.0
LPM_PER_GPM = 3.785411784
M_PER_FT = 0.3048


@dataclass(frozen=True, slots=True)
class PumpCurve:
    """A centrifugal pump's head-flow curve, ``H(Q) = H0 * (1 - (Q / Qmax)**2)``.

    The parabola through the shut-off head and one catalogue point is the usual
    first approximation of a single-stage centrifugal pump curve.
    """

    shutoff_head_m: float
    max_flow_lpm: float
    rated_current_a: float

    @classmethod
    def through(
        cls, shutoff_head_ft: float, flow_gpm: float, at_head_ft: float, current_a: float
    ) -> PumpCurve:
        """The parabola through ``(0, shutoff)`` and one catalogue point ``(flow, head)``."""
        fraction = 1.0 - at_head_ft / shutoff_head_ft
        q_max = flow_gpm * LPM_PER_GPM / math.sqrt(fraction)
        return cls(shutoff_head_ft * M_PER_FT, q_max, current_a)

    def head(self, flow_lpm: float) -> float:
        """Head (m) the pump develops at a flow."""
        return max(0.0, self.shutoff_head_m * (1.0 - (flow_lpm / self.max_flow_lpm) ** 2))

    def flow_at(self, head_m: float) -> float:
        """Flow (L/min) the pump delivers against a head; 0 at or above shut-off."""
        if head_m >= self.shutoff_head_m:
            return 0.0
        return self.max_flow_lpm * math.sqrt(1.0 - max(head_m, 0.0) / self.shutoff_head_m)

    def current(self, flow_lpm: float, *, dry: bool = False) -> float:
        """Motor current (A): a centrifugal pump draws least power at shut-off."""
        if dry:
            return 0.55 * self.rated_current_a
        share = min(flow_lpm / (0.7 * self.max_flow_lpm), 1.2)
        return self.rated_current_a * (0.78 + 0.22 * share)


#: 1/3 hp submersible sump pump: ~40 gpm at 10 ft, shut-off ~22 ft, ~6 A at 115 V.
PRIMARY_PUMP = PumpCurve.through(22.0, 40.0, 10.0, 6.0)
#: 12 V DC battery backup pump: ~1100 gph (18 gpm) at 10 ft, shut-off ~17 ft.
BACKUP_PUMP = PumpCurve.through(17.0, 18.0, 10.0, 18.0)


@dataclass(frozen=True, slots=True)
class Pipe:
    """A run of pipe for Hazen-Williams friction plus minor losses."""

    inside_diameter_m: float
    length_m: float
    minor_loss_k: float
    c: float = HAZEN_WILLIAMS_C_PVC

    @property
    def area_m2(self) -> float:
        """Bore cross-section."""
        return math.pi * self.inside_diameter_m**2 / 4

    @property
    def volume_l(self) -> float:
        """Water the run holds when full."""
        return self.area_m2 * self.length_m * 1000.0

    def loss_m(self, flow_lpm: float) -> float:
        """Friction (Hazen-Williams, SI form) plus minor losses (K v²/2g), metres."""
        if flow_lpm <= 0:
            return 0.0
        q = flow_lpm / 60000.0  # m³/s
        # float ** float is typed Any (it may be complex); these bases are positive.
        friction = float(
            10.67 * self.length_m * q**1.852 / (self.c**1.852 * self.inside_diameter_m**4.87)
        )
        velocity = q / self.area_m2
        return friction + self.minor_loss_k * velocity**2 / (2 * G)


def operating_point(
    pumps: tuple[PumpCurve, ...], static_head_m: float, pipe: Pipe
) -> tuple[float, float]:
    """Flow (L/min) and pump head (m) where pumps in parallel meet the system curve.

    Parallel pumps share one head; the total flow is the sum of each pump's
    flow at that head. Bisection on the head: the system needs a head that rises
    with flow, the pumps deliver a flow that falls with head.
    """
    top = max(p.shutoff_head_m for p in pumps)
    if static_head_m >= top:
        return 0.0, static_head_m
    lo, hi = max(static_head_m, 0.0), top
    for _ in range(40):
        mid = (lo + hi) / 2
        flow = sum(p.flow_at(mid) for p in pumps)
        if static_head_m + pipe.loss_m(flow) > mid:
            lo = mid
        else:
            hi = mid
    head = (lo + hi) / 2
    return sum(p.flow_at(head) for p in pumps), head


def newton_step(temp_c: float, ambient_c: float, dt_s: float, tau_s: float) -> float:
    """Exact step of Newton cooling ``dT/dt = (ambient - T) / tau`` over ``dt``."""
    return ambient_c + (temp_c - ambient_c) * math.exp(-dt_s / tau_s)


def branch_flow(head_m: float, static_head_m: float, pipe: Pipe) -> float:
    """Flow (L/min) through a branch whose far end sits ``static_head_m`` above the
    reference, when the head at its start is ``head_m`` (0 if that cannot lift it)."""
    if head_m <= static_head_m:
        return 0.0
    lo, hi = 0.0, 4000.0
    for _ in range(36):
        mid = (lo + hi) / 2
        if pipe.loss_m(mid) < head_m - static_head_m:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def split_operating_point(
    pumps: tuple[PumpCurve, ...],
    main: tuple[float, Pipe],
    branch: tuple[float, Pipe],
) -> tuple[float, float, float]:
    """Total flow, head and the branch's flow when a tee splits the pumps' discharge.

    Both legs start at the tee with the same head (friction before the tee is
    folded into the legs): each carries the flow its static lift and friction
    allow, and the pumps meet their sum. ``main`` and ``branch`` are
    ``(static head m, pipe)`` relative to the pit's water surface.
    """
    top = max(p.shutoff_head_m for p in pumps)
    lo, hi = 0.0, top
    for _ in range(40):
        mid = (lo + hi) / 2
        legs = branch_flow(mid, *main) + branch_flow(mid, *branch)
        if legs < sum(p.flow_at(mid) for p in pumps):
            lo = mid
        else:
            hi = mid
    head = (lo + hi) / 2
    return sum(p.flow_at(head) for p in pumps), head, branch_flow(head, *branch)
