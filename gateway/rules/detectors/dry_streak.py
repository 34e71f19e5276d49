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
#: A phase bin with fewer clean cycles pools with this many neighbours either side
#: at most (a tenth of the interval each): a site with a few hours of history has
#: seen 3-7 cycles a bin, and a full diversion's streak found no phase it could
#: weigh (randomised houses 1 and 2: 90 cycles without water, no finding).
POOL_BINS = 2
#: A streak this improbable under health (natural log) is evidence of a dry outlet.
#: Every catch starts a streak: 1,000 sites catching a few hundred cycles a day each
#: start ~10^8 streaks a year, so 1e-9 meets one by chance about once a decade.
LOG_ALPHA = math.log(1e-9)
#: A streak this improbable under health is already evidence enough that it never
#: joins the history, whatever comes of it (a clean site's streaks stay far above).
TAINT_LOG = LOG_ALPHA / 2
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
    """The site's catch rate per phase from its cycles, and the running streak.

    Cycles are observed as they are judged. A caught cycle joins the history at once,
    with the misses of the streak it ends: a hose or tee that leaves some water for
    the outlet does not change whether a sample taken while it flows reads flowing,
    so only a streak's misses can carry a diversion, and they wait for the catch
    that ends them. A streak that became evidence on its way (``TAINT_LOG``) or ran
    through a block that looked diverted (``taint``) is a diversion's, and never
    joins the history: it must not teach the site that such streaks are normal.
    (Until the twelfth round the history learned only from blocks that calibrated
    the outlet/pit ratio; a sparse site closes few blocks, and one with a few hours
    of history had too few cycles to weigh any miss.)
    """

    __slots__ = (
        "_caught",
        "_cycles",
        "_longest",
        "_streak",
        "_streak_log",
        "_tainted",
        "_trailing",
    )

    def __init__(self) -> None:
        #: History per phase bin: cycles caught flowing, and cycles; the longest
        #: streak of misses a catch ended. Allocated on first use (most sites'
        #: state is small; a village holds thousands).
        self._caught: array[int] | None = None
        self._cycles: array[int] | None = None
        self._longest = 0
        #: The running streak's misses per bin, and whether it is a diversion's.
        self._trailing: array[int] | None = None
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
        caught, cycles = self._caught[i], self._cycles[i]
        if cycles >= MIN_BIN_CYCLES:
            return wilson_low(caught, cycles)
        # A phase seldom seen borrows from its neighbours (the outlet flows over a
        # window of the run, so nearby phases are caught alike), never beyond
        # POOL_BINS either side, and never above the share its own cycles showed:
        # a phase whose few cycles all missed stays worthless as evidence.
        for width in range(1, POOL_BINS + 1):
            lo, hi = max(0, i - width), min(BINS, i + width + 1)
            pooled = sum(self._cycles[lo:hi])
            if pooled >= MIN_BIN_CYCLES:
                rate = wilson_low(sum(self._caught[lo:hi]), pooled)
                return min(rate, caught / cycles) if cycles else rate
        return 0.0  # a phase seldom seen: its misses weigh nothing

    def observe(self, caught: bool, phase: float) -> None:
        """One judged cycle: whether a flowing reading came, and the phase of the
        first outlet sample after its start (share of the interval)."""
        i = _bin(phase)
        if caught:
            hits = self._caught = self._caught or _counts()
            cycles = self._cycles = self._cycles or _counts()
            if not self._tainted and self._trailing is not None:
                self._longest = max(self._longest, self._streak)
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
            if self._streak_log <= TAINT_LOG:
                self._tainted = True

    def break_streak(self) -> None:
        """A cycle whose outlet's silence is no miss (a line that emptied answers
        late), or a catch: the streak starts again. Cycles not judged at all (a lost
        outlet report, float chatter) neither count nor break it."""
        self._streak, self._streak_log = 0, 0.0
        self._trailing, self._tainted = None, False

    def taint(self) -> None:
        """The running streak went through a block that looked diverted: its misses
        never join the history."""
        if self._streak:
            self._tainted = True

    def improbable(self) -> bool:
        """The running streak is evidence of a dry outlet."""
        if self._streak <= LOCK_FACTOR * self._longest:
            return False
        return self._streak_log <= LOG_ALPHA


def _bin(phase: float) -> int:
    return min(BINS - 1, max(0, int(phase * BINS)))
