"""Login rate limiting: failed attempts in a sliding window, per key.

The login route counts failures per client address and per username; once either
key has ``max_failures`` in ``window_s`` it answers 429 with Retry-After until the
oldest failure leaves the window. A success clears the username's count. State is
in memory: one gateway process serves the API (docs/architecture.md).
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable


class FailureLimiter:
    """Counts failures per key in a sliding window."""

    def __init__(
        self,
        max_failures: int,
        window_s: float,
        clock: Callable[[], float] = time.monotonic,
        max_keys: int = 100_000,
    ) -> None:
        self.max_failures = max_failures
        self.window_s = window_s
        self._clock = clock
        self._max_keys = max_keys
        self._failures: dict[str, deque[float]] = {}

    def _live(self, key: str, now: float) -> deque[float] | None:
        times = self._failures.get(key)
        if times is None:
            return None
        while times and times[0] <= now - self.window_s:
            times.popleft()
        if not times:
            del self._failures[key]
            return None
        return times

    def retry_after(self, key: str) -> int | None:
        """Seconds until the key may try again, or None if it may now."""
        now = self._clock()
        times = self._live(key, now)
        if times is None or len(times) < self.max_failures:
            return None
        return max(1, math.ceil(times[0] + self.window_s - now))

    def fail(self, key: str) -> None:
        """Record a failed attempt."""
        now = self._clock()
        if len(self._failures) >= self._max_keys:
            # Bounded memory under a spray of random usernames: drop expired keys.
            for stale in [k for k in self._failures if self._live(k, now) is None]:
                self._failures.pop(stale, None)
        self._failures.setdefault(key, deque()).append(now)

    def reset(self, key: str) -> None:
        """Forget a key's failures (after a successful login)."""
        self._failures.pop(key, None)


class LoginLimiter:
    """Per-address and per-username failure limits for the login form."""

    def __init__(
        self,
        per_user: int = 5,
        per_address: int = 20,
        window_s: float = 900.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.users = FailureLimiter(per_user, window_s, clock)
        self.addresses = FailureLimiter(per_address, window_s, clock)

    def retry_after(self, address: str, username: str) -> int | None:
        """Seconds to wait before this attempt is allowed, or None."""
        waits = [
            w
            for w in (
                self.addresses.retry_after(address),
                self.users.retry_after(username.lower()),
            )
            if w is not None
        ]
        return max(waits) if waits else None

    def failed(self, address: str, username: str) -> None:
        """Count a wrong password or unknown user."""
        self.addresses.fail(address)
        self.users.fail(username.lower())

    def succeeded(self, username: str) -> None:
        """Clear the username's failures."""
        self.users.reset(username.lower())
