"""How unlikely a healthy outlet's streak of cycles without a flowing reading is.

A meter that reads the flow at the sample's instant catches a run shorter than its
interval only when a sample lands while the outlet flows. Whether one does is set by
where the samples fell against the run: the **phase** of the first outlet sample
after the run's start, as a share of the interval. At some phases a healthy outlet
is caught flowing nearly every cycle, at others (the sample just before the water
reaches the outlet, the next one after it stopped) almost never, and the site's own
clean cycles show which (its line lag and run length decide it). A cycle the pit
saw pumped out, with the outlet reporting all along, that shows no flowing reading
at a phase where clean cycles were nearly always caught is evidence of water gone
elsewhere; a streak of them is strong evidence. A full diversion (a hose to a floor
drain or laundry tub) makes every cycle a miss, at every phase.

This is the evidence left where no sample lands surely inside a run after the
line's worst-case fill time (sparse outlets, short runs, long lines).

Phase matters because of **phase lock**: in steady groundwater a pump's period can
sit within a second of a multiple of the node's interval for hours, and its samples
then fall at nearly the same phase cycle after cycle. A clean house whose samples
drift through the phases where its outlet is never caught misses 20-30 cycles in a
row (seen on the smoke sweep's clean-116: 571 s cycles at 30 s sampling); each of
those misses comes at a phase whose clean catch rate is near zero and so weighs
nothing. The catch rate of each phase is taken at its lower confidence bound, and a
streak must also be longer than ``LOCK_FACTOR`` times the longest the clean history
showed.
"""

from __future__ import annotations

import math
from array import array

#: Phase bins over one outlet interval.
BINS = 10
#: Clean cycles caught flowing before any phase's rate is trusted, and the clean
#: cycles a phase bin needs before its own rate counts.
MIN_CAUGHT = 10
MIN_BIN_CYCLES = 5
#: A streak this improbable under health (natural log) is evidence of a dry outlet.
#: Every catch starts a streak: 1,000 sites catching a few hundred cycles a day each
#: start ~10^8 streaks a year, so 1e-9 meets one by chance about once a decade.
LOG_ALPHA = math.log(1e-9)
#: A streak must also be this many times the longest the clean history showed.
LOCK_FACTOR = 2
#: No cycle is ever taken as more sure to be caught than this (a meter drops a
#: reading now and then, and a run may end early).
MAX_CATCH = 0.9
#: Confidence of each phase's lower bound (Wilson score, in sigmas).
RATE_SIGMAS = 2.0


def _counts() -> array[int]:
    return array("I", bytes(4 * BINS))


def wilson_low(caught: int, cycles: int, z: float = RATE_SIGMAS) -> float:
    """Lower confidence bound of a caught share (Wilson score interval)."""
    if cycles <= 0:
        return 0.0
    p = caught / cycles
    centre = p + z * z / (2 * cycles)
    spread = z * math.sqrt(p * (1 - p) / cycles + z * z / (4 * cycles * cycles))
    return max(0.0, (centre - spread) / (1 + z * z / cycles))


class DryStreak:
    """The site's catch rate per phase from clean cycles, and the running streak.

    Cycles are observed as they are judged; their counts join the clean history only
    once the block they belong to calibrates (``learn``), and a streak's misses only
    once a catch has ended it inside clean blocks: a diversion's misses must not
    teach the site that misses are normal (the block an episode starts in can still
    calibrate on the readings before the onset). ``end_block`` drops what was not
    learned, and a streak running through such a block never counts.
    """

    __slots__ = (
        "_caught",
        "_cycles",
        "_learned",
        "_longest",
        "_open_caught",
        "_open_cycles",
        "_open_longest",
        "_streak",
        "_streak_log",
        "_tainted",
        "_trailing",
    )

    def __init__(self) -> None:
        #: Clean history per phase bin: cycles caught flowing, and cycles; the
        #: longest streak of misses a catch ended. Allocated on first use (most
        #: sites' state is small; a village holds thousands).
        self._caught: array[int] | None = None
        self._cycles: array[int] | None = None
        self._longest = 0
        #: The open block's counts up to its last catch and the longest streak a
        #: catch ended in it; the running streak's misses per bin.
        self._open_caught: array[int] | None = None
        self._open_cycles: array[int] | None = None
        self._open_longest = 0
        self._trailing: array[int] | None = None
        self._learned = False
        #: The running streak went through a block that did not calibrate.
        self._tainted = False
        self._streak = 0
        self._streak_log = 0.0

    @property
    def streak(self) -> int:
        """Cycles in a row without a flowing reading."""
        return self._streak

    def catch_rate(self, phase: float) -> float | None:
        """Lower bound of the chance a healthy cycle at this phase (share of the
        interval) is caught flowing; None until the history can say."""
        if self._caught is None or self._cycles is None or sum(self._caught) < MIN_CAUGHT:
            return None
        i = _bin(phase)
        if self._cycles[i] < MIN_BIN_CYCLES:
            return 0.0  # a phase seldom seen: its misses weigh nothing
        return wilson_low(self._caught[i], self._cycles[i])

    def observe(self, caught: bool, phase: float) -> None:
        """One judged cycle: whether a flowing reading came, and the phase of the
        first outlet sample after its start (share of the interval)."""
        i = _bin(phase)
        if caught:
            cycles = self._open_cycles = self._open_cycles or _counts()
            hits = self._open_caught = self._open_caught or _counts()
            if not self._tainted and self._trailing is not None:
                self._open_longest = max(self._open_longest, self._streak)
                for j, n in enumerate(self._trailing):
                    cycles[j] += n
            hits[i] += 1
            cycles[i] += 1
            self.break_streak()
            return
        rate = self.catch_rate(phase)
        self._streak += 1
        trailing = self._trailing = self._trailing or _counts()
        trailing[i] += 1
        if rate is not None:
            # Cycles judged before the history could say add nothing: they cannot
            # count against health.
            self._streak_log += math.log(1.0 - min(MAX_CATCH, rate))

    def break_streak(self) -> None:
        """A cycle whose outlet's silence is no miss (a line not held full answers
        late), or a catch: the streak starts again. Cycles not judged at all (a lost
        outlet report, float chatter) neither count nor break it."""
        self._streak, self._streak_log = 0, 0.0
        self._trailing, self._tainted = None, False

    def learn(self) -> None:
        """The open block was clean: its cycles up to its last catch join the history
        (the running streak's stay open until a catch ends it)."""
        if self._open_cycles is not None and self._open_caught is not None:
            caught = self._caught = self._caught or _counts()
            cycles = self._cycles = self._cycles or _counts()
            for j in range(BINS):
                caught[j] += self._open_caught[j]
                cycles[j] += self._open_cycles[j]
        self._longest = max(self._longest, self._open_longest)
        self._learned = True

    def end_block(self) -> None:
        """The open block was judged: what it did not teach is dropped, and a streak
        running through a block that did not calibrate never joins the history."""
        if not self._learned and self._streak:
            self._tainted = True
        self._open_caught = self._open_cycles = None
        self._open_longest = 0
        self._learned = False

    def improbable(self) -> bool:
        """The running streak is evidence of a dry outlet."""
        if self._streak <= LOCK_FACTOR * self._longest:
            return False
        return self._streak_log <= LOG_ALPHA


def _bin(phase: float) -> int:
    return min(BINS - 1, max(0, int(phase * BINS)))
