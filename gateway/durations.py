"""Durations people type and read: "15 minutes", "90s", "6h", "2 days".

One parser for every command that takes a span (the simulator's ``--duration``,
report windows) and one way to say a span back, so the CLI speaks in words
("15 minutes") rather than seconds or ``0:15:00``.
"""

from __future__ import annotations

import re
from datetime import timedelta

_UNITS: dict[str, float] = {
    "s": 1, "sec": 1, "secs": 1, "second": 1, "seconds": 1,
    "m": 60, "min": 60, "mins": 60, "minute": 60, "minutes": 60,
    "h": 3600, "hr": 3600, "hrs": 3600, "hour": 3600, "hours": 3600,
    "d": 86400, "day": 86400, "days": 86400,
    "w": 604800, "week": 604800, "weeks": 604800,
}  # fmt: skip

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$")

#: What a bare number means (kept from the simulator's first ``--duration``: hours).
BARE_UNIT = "h"


class DurationError(ValueError):
    """Text that is not a duration; the message says what is."""


def parse_duration(text: str, *, bare: str = BARE_UNIT) -> timedelta:
    """``90s``, ``30m``, ``15 minutes``, ``6 h``, ``2 days``; a bare number is ``bare``."""
    match = _DURATION.match(text.lower())
    unit = (match.group(2) or bare) if match else ""
    if match is None or unit not in _UNITS:
        raise DurationError(
            f"not a duration: {text!r} (try 90 seconds, 15 minutes, 6 hours, 2 days)"
        )
    return timedelta(seconds=float(match.group(1)) * _UNITS[unit])


def say_duration(span: timedelta) -> str:
    """A span in words, in its largest whole-ish unit: "15 minutes", "1.5 hours"."""
    seconds = span.total_seconds()
    for name, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if abs(seconds) >= size:
            return _count(seconds / size, name)
    return _count(seconds, "second")


def _count(value: float, name: str) -> str:
    rounded = round(value, 1)
    text = f"{rounded:g}"
    return f"{text} {name}" if rounded == 1 else f"{text} {name}s"
