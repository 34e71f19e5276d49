"""Weather: outdoor air temperature, precipitation, snowpack and frozen ground.

One :class:`Weather` serves every home of a scenario (they are neighbours); each
home adds a small microclimate offset. Everything is drawn from a seeded RNG
and generated lazily one simulated day at a time, so an open-ended live run and
a bounded offline run of the same seed agree on the days they share.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

#: Seasonal normal (°C) by day of year: a sinusoid fitted to NOAA 1991-2020 monthly
#: normals for Wausau, WI (January mean about -11 °C, July mean about +21 °C).
NORMAL_MEAN_C = 5.0
NORMAL_AMPLITUDE_C = 16.0
COLDEST_DAY_OF_YEAR = 20
#: Half of the normal day/night range (~10 °C in a Wisconsin winter).
DIURNAL_HALF_RANGE_C = 5.0
#: Local standard time offset used for the day/night cycle (US Central).
LOCAL_OFFSET_H = -6.0
#: Degree-day snowmelt factor, mm of water per °C per day above 0 °C.
DEGREE_DAY_MELT_MM = 3.0
#: Frost index (°C·day) at which the ground counts as continuously frozen
#: (Molnau & Bissell 1983 give 56-83; the upper end).
FROZEN_GROUND_INDEX = 83.0
#: Daily decay coefficient A of the frozen ground index.
FROST_DECAY_PER_DAY = 0.97
#: Snow insulation coefficient K (per cm of snow depth, times 0.4) for snow cover.
FROST_SNOW_K = 0.5
#: Settled snowpack: mm of water per cm of snow depth (density ~0.25).
SNOW_DENSITY = 2.5
#: Infiltration left to the drain tile when the ground is frozen solid.
FROZEN_INFILTRATION = 0.12
#: Soil temperature at lateral depth (~1.2 m): annual mean, amplitude, lag.
SOIL_MEAN_C = 8.0
SOIL_AMPLITUDE_C = 6.0
SOIL_LAG_DAYS = 45.0


@dataclass(frozen=True, slots=True)
class WeatherEvent:
    """A scheduled departure from the random weather.

    ``kind`` is ``rain`` (``mm_per_h`` of precipitation; snow if it is cold),
    ``cold_snap`` / ``warm_spell`` (``delta_c`` added to the air temperature) or
    ``dry`` (no random precipitation).
    """

    kind: str
    start_h: float
    hours: float
    mm_per_h: float = 0.0
    delta_c: float = 0.0

    def active(self, hours: float) -> bool:
        """True while the event is in force ``hours`` after the scenario start."""
        return self.start_h <= hours < self.start_h + self.hours


@dataclass(frozen=True, slots=True)
class WeatherConfig:
    """How a scenario's weather departs from the seasonal normal."""

    offset_c: float = 0.0
    anomaly_sigma_c: float = 3.0
    anomaly_tau_h: float = 36.0
    diurnal_half_range_c: float = DIURNAL_HALF_RANGE_C
    storms_per_day: float | None = None  # None: seasonal default
    storm_mean_mm: float | None = None
    random_storms: bool = True
    initial_snow_mm: float = 0.0  # snow water equivalent
    initial_frost_index: float | None = None  # None: estimated from the season
    events: tuple[WeatherEvent, ...] = ()


def seasonal_normal_c(when: datetime) -> float:
    """The climatological mean air temperature for the day of year."""
    doy = when.timetuple().tm_yday + when.hour / 24
    return NORMAL_MEAN_C - NORMAL_AMPLITUDE_C * math.cos(
        2 * math.pi * (doy - COLDEST_DAY_OF_YEAR) / 365.25
    )


def soil_temp_c(when: datetime) -> float:
    """Soil temperature at lateral depth: the seasonal wave, damped and delayed."""
    doy = when.timetuple().tm_yday
    return SOIL_MEAN_C - SOIL_AMPLITUDE_C * math.cos(
        2 * math.pi * (doy - COLDEST_DAY_OF_YEAR - SOIL_LAG_DAYS) / 365.25
    )


def diurnal_c(when: datetime, half_range: float) -> float:
    """Day/night swing: coldest near 06:00, warmest near 15:00 local time (a sinusoid)."""
    hour = (when.hour + when.minute / 60 + LOCAL_OFFSET_H) % 24
    # A cosine peaking at 15:00; its trough at 03:00 is close enough to dawn.
    return half_range * math.cos(2 * math.pi * (hour - 15.0) / 24)


@dataclass(slots=True)
class _Storm:
    start: datetime
    end: datetime
    mm_per_h: float


@dataclass(slots=True)
class Weather:
    """Shared weather state, advanced step by step with :meth:`advance`."""

    config: WeatherConfig
    seed: int
    start: datetime
    air_c: float = 0.0
    precip_mm_per_h: float = 0.0
    snow_mm: float = 0.0  # snowpack water equivalent
    frost_index: float = 0.0  # °C·day of freezing, decaying with thaw
    recharge_mm_per_h: float = 0.0  # rain + melt reaching the soil
    infiltration: float = 1.0  # share of recharge the (possibly frozen) ground takes
    soil_c: float = 8.0
    _anomaly: float = 0.0
    _rng: random.Random = field(init=False)
    _storm_days: dict[int, list[_Storm]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._rng = random.Random(f"weather-{self.seed}")
        self._anomaly = self._rng.gauss(0.0, self.config.anomaly_sigma_c)
        self.snow_mm = self.config.initial_snow_mm
        if self.config.initial_frost_index is not None:
            self.frost_index = self.config.initial_frost_index
        else:
            # Roughly the freezing degree-days accumulated so far this winter.
            normal = seasonal_normal_c(self.start)
            self.frost_index = max(0.0, -normal) * 25.0
        self._update(self.start, 0.0)

    def hours_since_start(self, when: datetime) -> float:
        """Scenario hours elapsed at ``when``."""
        return (when - self.start).total_seconds() / 3600.0

    def _storms(self, day: int) -> list[_Storm]:
        storms = self._storm_days.get(day)
        if storms is None:
            storms = self._draw_storms(day)
            self._storm_days[day] = storms
            self._storm_days.pop(day - 3, None)
        return storms

    def _draw_storms(self, day: int) -> list[_Storm]:
        cfg = self.config
        if not cfg.random_storms:
            return []
        rng = random.Random(f"storms-{self.seed}-{day}")
        day_start = self.start + timedelta(days=day)
        warm = seasonal_normal_c(day_start) > 2.0
        rate = cfg.storms_per_day if cfg.storms_per_day is not None else (0.3 if warm else 0.2)
        mean_mm = cfg.storm_mean_mm if cfg.storm_mean_mm is not None else (9.0 if warm else 4.0)
        storms: list[_Storm] = []
        t = rng.expovariate(rate) if rate > 0 else 2.0
        while t < 1.0:
            hours = max(0.5, rng.expovariate(1 / 4.0))
            depth = rng.expovariate(1 / mean_mm)
            begin = day_start + timedelta(days=t)
            storms.append(_Storm(begin, begin + timedelta(hours=hours), depth / hours))
            t += rng.expovariate(rate)
        return storms

    def _update(self, when: datetime, dt_s: float) -> None:
        cfg = self.config
        hours = self.hours_since_start(when)
        if dt_s > 0:
            # Ornstein-Uhlenbeck anomaly: synoptic warm and cold spells lasting days.
            tau = cfg.anomaly_tau_h * 3600
            decay = math.exp(-dt_s / tau)
            noise = cfg.anomaly_sigma_c * math.sqrt(1 - decay * decay)
            self._anomaly = self._anomaly * decay + self._rng.gauss(0.0, noise)
        delta = sum(
            e.delta_c
            for e in cfg.events
            if e.kind in ("cold_snap", "warm_spell") and e.active(hours)
        )
        self.air_c = (
            seasonal_normal_c(when)
            + diurnal_c(when, cfg.diurnal_half_range_c)
            + self._anomaly
            + cfg.offset_c
            + delta
        )
        dry = any(e.kind == "dry" and e.active(hours) for e in cfg.events)
        precip = sum(e.mm_per_h for e in cfg.events if e.kind == "rain" and e.active(hours))
        if not dry:
            day = int((when - self.start).total_seconds() // 86400)
            for d in (day - 1, day):
                if d >= 0:
                    precip += sum(s.mm_per_h for s in self._storms(d) if s.start <= when < s.end)
        self.precip_mm_per_h = precip
        self.soil_c = soil_temp_c(when)
        dt_day = dt_s / 86400.0
        rain = precip if self.air_c > 1.0 else 0.0
        self.snow_mm += (precip - rain) * dt_s / 3600.0
        melt = 0.0
        if self.air_c > 0 and self.snow_mm > 0:
            melt = min(self.snow_mm, DEGREE_DAY_MELT_MM * self.air_c * dt_day)
            self.snow_mm -= melt
        # Continuous frozen ground index (Molnau & Bissell 1983): decays 3 %/day,
        # grows with degree-days of frost, damped by the snow's insulation.
        depth_cm = self.snow_mm / SNOW_DENSITY
        insulation = math.exp(-0.4 * FROST_SNOW_K * depth_cm)
        decayed = self.frost_index * FROST_DECAY_PER_DAY**dt_day
        self.frost_index = max(0.0, decayed - self.air_c * dt_day * insulation)
        frozen_share = min(1.0, self.frost_index / FROZEN_GROUND_INDEX)
        self.infiltration = 1.0 - (1.0 - FROZEN_INFILTRATION) * frozen_share
        self.recharge_mm_per_h = rain + (melt * 3600.0 / dt_s if dt_s > 0 else 0.0)

    def advance(self, when: datetime, dt_s: float) -> None:
        """Move the weather to ``when``, ``dt_s`` seconds after its last state."""
        self._update(when, dt_s)


def parse_time(value: str | datetime) -> datetime:
    """An aware UTC datetime from RFC 3339 text or a datetime (naive = UTC)."""
    when = datetime.fromisoformat(value) if isinstance(value, str) else value
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.astimezone(UTC)
