"""Login rate limiting: failed attempts in a sliding window, per key.

The login route counts failures per (address, account) pair, per address and per
account (:class:`LoginLimiter`); once a key has ``max_failures`` in ``window_s`` it
answers 429 with Retry-After until the oldest failure leaves the window. The address
is the socket peer's, or the client a configured trusted proxy names
(``settings.api.trusted_proxies``); a client cannot pick its own. State is in memory:
one gateway process serves the API (docs/architecture.md).
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
    """Failure limits for the login form, each counted on its own key.

    * ``per_pair`` failures of one address on one account: that address may not
      try that account again until the window frees a slot (guessing one password).
    * ``per_address`` failures of one address on any accounts: that address may not
      try any account (spraying). It blocks the address only: a shared address (a
      proxy not declared in ``trusted_proxies``, an office NAT) is the one case
      where other people wait too.
    * ``per_user`` failures on one account from all addresses together: a
      distributed guess of one account is slowed for everyone; high enough that
      one address (which stops at ``per_address``) cannot reach it alone.

    A success clears its own (address, account) pair only: signing in to one's
    own account must not buy a sprayer fresh attempts on others.
    """

    def __init__(
        self,
        per_pair: int = 5,
        per_address: int = 20,
        per_user: int = 100,
        window_s: float = 900.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.pairs = FailureLimiter(per_pair, window_s, clock)
        self.addresses = FailureLimiter(per_address, window_s, clock)
        self.users = FailureLimiter(per_user, window_s, clock)

    @staticmethod
    def _pair(address: str, username: str) -> str:
        return f"{address}\x00{username.lower()}"

    def retry_after(self, address: str, username: str) -> int | None:
        """Seconds to wait before this attempt is allowed, or None."""
        waits = [
            w
            for w in (
                self.pairs.retry_after(self._pair(address, username)),
                self.addresses.retry_after(address),
                self.users.retry_after(username.lower()),
            )
            if w is not None
        ]
        return max(waits) if waits else None

    def failed(self, address: str, username: str) -> None:
        """Count a wrong password or unknown user on all three keys."""
        self.pairs.fail(self._pair(address, username))
        self.addresses.fail(address)
        self.users.fail(username.lower())

    def succeeded(self, address: str, username: str) -> None:
        """Clear this address's failures on this account."""
        self.pairs.reset(self._pair(address, username))
