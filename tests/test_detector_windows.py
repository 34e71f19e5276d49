"""Issue 17 target 2: a detector's window costs next to nothing until it holds an item,
and behaves as the ``collections.deque`` it stands for."""

from __future__ import annotations

import random
import sys
import tracemalloc
from collections import deque
from collections.abc import Callable
from typing import Any

import pytest

from gateway.rules.detectors.lazy import LazyDeque
from gateway.rules.engine import SiteMonitor
from gateway.rules.pack import load_packs
from gateway.rules.sequences import make_site


def _outcome(fn: Callable[..., Any], *args: Any) -> tuple[str, Any]:
    """What ``fn(*args)`` returned, or the type and message of what it raised."""
    try:
        return ("ok", fn(*args))
    except (IndexError, ValueError) as e:
        return (type(e).__name__, str(e))


def _step(d: Any, op: int, value: int) -> Any:
    """One of the operations the detectors use, and what it observes."""
    if op == 0:
        return d.append(value)
    if op == 1:
        return d.extend(range(value % 4))  # 0-3 items, an empty extend among them
    if op == 2:
        return d.popleft()
    if op == 3:
        return d[0]
    if op == 4:
        return d[-1]
    if op == 5:
        return d[value % 5 - 2]
    if op == 6 and value < 5:  # now and then: a gap empties the short-cycling window
        return d.clear()
    return (len(d), bool(d), list(d), sorted(d), d.maxlen)


@pytest.mark.parametrize("maxlen", [None, 0, 1, 3, 9])
def test_random_operations_give_what_a_deque_gives(maxlen: int | None) -> None:
    rng = random.Random(maxlen or 17)
    lazy: LazyDeque[int] = LazyDeque(maxlen=maxlen)
    real: deque[int] = deque(maxlen=maxlen)
    for _ in range(2000):
        op, value = rng.randrange(8), rng.randrange(100)
        assert _outcome(_step, lazy, op, value) == _outcome(_step, real, op, value)
        assert list(lazy) == list(real)


def test_an_empty_window_raises_as_an_empty_deque_does() -> None:
    lazy: LazyDeque[float] = LazyDeque(maxlen=5)
    real: deque[float] = deque(maxlen=5)
    assert _outcome(lazy.popleft) == _outcome(real.popleft)
    assert _outcome(lambda: lazy[0]) == _outcome(lambda: real[0])
    assert _outcome(lambda: LazyDeque(maxlen=-1)) == _outcome(lambda: deque(maxlen=-1))


def test_maxlen_keeps_only_the_newest_items() -> None:
    lazy: LazyDeque[int] = LazyDeque(maxlen=3)
    for i in range(10):
        lazy.append(i)
    lazy.extend([10, 11])
    assert list(lazy) == [9, 10, 11]
    assert len(lazy) == 3
    assert lazy.maxlen == 3


def test_an_unused_window_is_a_tenth_of_an_empty_deque() -> None:
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        windows = [LazyDeque[float](maxlen=15) for _ in range(1000)]
        per_window = (tracemalloc.get_traced_memory()[0] - before) / len(windows)
    finally:
        tracemalloc.stop()
    assert per_window < sys.getsizeof(deque()) / 10


def test_an_empty_extend_leaves_the_window_small_and_an_item_makes_its_deque() -> None:
    lazy: LazyDeque[float] = LazyDeque(maxlen=15)
    lazy.extend([])
    assert lazy._d is None
    lazy.extend([1.0])
    assert isinstance(lazy._d, deque)
    assert lazy._d.maxlen == 15


def _deques_in(obj: object) -> list[str]:
    """Names of the ``collections.deque`` attributes of ``obj``."""
    slots = [s for c in type(obj).__mro__ for s in getattr(c, "__slots__", ())]
    names = [*getattr(obj, "__dict__", {}), *slots]
    return [n for n in names if isinstance(getattr(obj, n, None), deque)]


def test_a_new_site_monitor_has_no_deque_before_its_first_reading() -> None:
    site = make_site()
    monitor = SiteMonitor(site, load_packs().get(site.jurisdiction), 6.0)
    parts = [monitor.state.cycles, monitor.state.outlet, *monitor.detectors().values()]
    assert {type(p).__name__: _deques_in(p) for p in parts} == {type(p).__name__: [] for p in parts}


def test_a_new_site_monitor_takes_under_10_kb() -> None:
    site = make_site()
    pack = load_packs().get(site.jurisdiction)
    SiteMonitor(site, pack, 6.0)  # the first one builds the shared, per-process parts
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        monitors = [SiteMonitor(site, pack, 6.0) for _ in range(20)]
        per_monitor = (tracemalloc.get_traced_memory()[0] - before) / len(monitors)
    finally:
        tracemalloc.stop()
    assert per_monitor < 10_000  # 28 kB while its ~31 windows were deques
