"""A detector's window that costs next to nothing until something is put in it.

Every registered site has a monitor, and a monitor's detectors keep about thirty
windows (recent fill rates, outlet samples, calibration blocks...). CPython gives each
``collections.deque`` a 64-slot block when it is made, so an empty deque is 760 bytes;
most of a site's windows stay empty for long (an outlet node that sends nothing, a pump
that has not cycled enough yet, a site never heard from), which made them most of the
per-site memory (issue 17 target 2). :class:`LazyDeque` holds ``None`` (~56 bytes in
all) until its first item, then a real deque with the same ``maxlen`` for good.

It offers only what the detectors use of a deque (``append``, ``extend``,
``popleft``, ``len``, truth, iteration, indexing, ``maxlen``), with the same results
and the same errors, so no detector's arithmetic changes.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator
from typing import Generic, TypeVar

T = TypeVar("T")


class LazyDeque(Generic[T]):
    """A ``deque(maxlen=maxlen)`` made on the first item put in it."""

    __slots__ = ("_d", "_maxlen")

    def __init__(self, maxlen: int | None = None) -> None:
        if maxlen is not None and maxlen < 0:
            raise ValueError("maxlen must be non-negative")  # as deque, now, not later
        self._maxlen = maxlen
        self._d: deque[T] | None = None

    @property
    def maxlen(self) -> int | None:
        return self._maxlen

    def append(self, item: T) -> None:
        d = self._d
        if d is None:
            d = self._d = deque(maxlen=self._maxlen)
        d.append(item)

    def extend(self, items: Iterable[T]) -> None:
        if self._d is not None:
            self._d.extend(items)
            return
        d = deque(items, self._maxlen)
        if d:  # nothing came: stay small
            self._d = d

    def popleft(self) -> T:
        if self._d is None:
            raise IndexError("pop from an empty deque")
        return self._d.popleft()

    def clear(self) -> None:
        self._d = None  # small again: a cleared window is an unused one

    def __len__(self) -> int:
        return 0 if self._d is None else len(self._d)

    def __bool__(self) -> bool:
        return self._d is not None and len(self._d) > 0

    def __iter__(self) -> Iterator[T]:
        return iter(()) if self._d is None else iter(self._d)

    def __getitem__(self, index: int) -> T:
        if self._d is None:
            raise IndexError("deque index out of range")
        return self._d[index]

    def __repr__(self) -> str:
        items = [] if self._d is None else list(self._d)
        tail = "" if self._maxlen is None else f", maxlen={self._maxlen}"
        return f"LazyDeque({items!r}{tail})"
