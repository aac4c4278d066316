"""Progress of long computations: one update type, one line format, one throttling meter.

``certify`` and ``sweep`` (the Beam progress reporter in ``transforms/progress.py``),
``calibrate``, ``Accountant.get_epsilon`` and ``compare`` all print the same line::

    epscert: sampling  45.0% (450000/1000000 samples), 3.1 s elapsed, ETA 4 s

The API takes a ``progress=`` callback that receives :class:`ProgressUpdate` objects
(``None``: silent); the command line prints ``update.line`` to stderr.
"""

from __future__ import annotations

import dataclasses
import math
import sys
import time
from typing import Callable

#: Minimum seconds between two reported updates (the last one, at 100 %, is always reported).
INTERVAL_SECONDS = 2.0


def eta_line(stage: str, done: int, total: int, unit: str, elapsed: float) -> str:
    """The progress line: stage, percent done, counts, elapsed seconds and ETA (linear extrapolation)."""
    fraction = min(1.0, done / total) if total > 0 else 1.0
    eta = elapsed * (1.0 - fraction) / fraction if fraction > 0 else math.nan
    eta_text = "?" if math.isnan(eta) else f"{eta:.0f}"
    return (f"epscert: {stage} {100 * fraction:5.1f}% ({done}/{total} {unit}), "
            f"{elapsed:.1f} s elapsed, ETA {eta_text} s")


@dataclasses.dataclass(frozen=True)
class ProgressUpdate:
    """Where one stage of a computation stands."""

    stage: str
    done: int
    total: int
    unit: str
    elapsed: float

    @property
    def fraction(self) -> float:
        return min(1.0, self.done / self.total) if self.total > 0 else 1.0

    @property
    def eta(self) -> float:
        """Seconds left by linear extrapolation (nan before any work is done)."""
        f = self.fraction
        return self.elapsed * (1.0 - f) / f if f > 0 else math.nan

    @property
    def line(self) -> str:
        return eta_line(self.stage, self.done, self.total, self.unit, self.elapsed)


Callback = Callable[[ProgressUpdate], None]


def print_to_stderr(update: ProgressUpdate) -> None:
    """The command line's callback: the update's line on stderr."""
    print(update.line, file=sys.stderr, flush=True)


class ProgressMeter:
    """Counts work of one stage and hands a :class:`ProgressUpdate` to ``callback``.

    At most one update every ``interval`` seconds, and always one when the count reaches
    ``total``. ``meter.add`` has the ``progress(n)`` shape that ``run_shard`` calls.
    """

    def __init__(self, callback: Callback | None, total: int, stage: str, unit: str = "samples",
                 interval: float = INTERVAL_SECONDS, clock: Callable[[], float] = time.monotonic) -> None:
        self.callback = callback
        self.total = max(1, int(total))
        self.stage = stage
        self.unit = unit
        self.interval = interval
        self.clock = clock
        self.done = 0
        self.start = clock()
        self.last = -math.inf

    def add(self, count: int) -> None:
        self.done += int(count)
        if self.callback is None:
            return
        now = self.clock()
        if self.done < self.total and now - self.last < self.interval:
            return
        self.last = now
        self.callback(ProgressUpdate(self.stage, self.done, self.total, self.unit, now - self.start))


class WorkPlan:
    """Progress of work made of steps of unequal, estimated cost, in phases.

    The fraction shown is (units done) / (units done + units still expected). Each phase starts with an
    expected cost; a finished step's cost is taken off its phase's expectation, and a phase that runs
    past its expectation is assumed to need one more step like its last (never "almost done" while work
    remains); :meth:`close` drops what a finished phase still expected. The fraction never steps back:
    when the estimate of what remains grows, it is raised no faster than the work done. The ETA is the
    linear extrapolation of :class:`ProgressMeter`, honest when the units are proportional to time.
    """

    SCALE = 10  # units are counted in tenths

    def __init__(self, callback: Callback | None, expected: dict[str, float], unit: str = "work units") -> None:
        self.expected = dict(expected)
        self.meter = ProgressMeter(callback, self._units(sum(self.expected.values())), "", unit=unit, interval=0.0)

    def _units(self, value: float) -> int:
        return max(1, int(round(value * self.SCALE)))

    def step(self, phase: str, cost: float, stage: str) -> None:
        """One step of ``phase`` costing ``cost`` is done; ``stage`` says what it was."""
        left = self.expected.get(phase, 0.0) - cost
        self.expected[phase] = left if left > -1e-9 else cost  # past the plan: one more such step expected
        self._report(self._units(cost), stage)

    def close(self, phase: str) -> None:
        """``phase`` is over: what it still expected is dropped."""
        self.expected[phase] = 0.0

    def finish(self, stage: str) -> None:
        """All work is done: report 100%."""
        self.expected = {k: 0.0 for k in self.expected}
        self.meter.total = self.meter.done
        self.meter.stage = stage
        self.meter.add(0)

    def _report(self, units: int, stage: str) -> None:
        meter = self.meter
        before = meter.done / meter.total if meter.total else 0.0
        total = meter.done + units + sum(self._units(v) for v in self.expected.values() if v > 0)
        if before > 0:  # the estimate of what remains never grows faster than the work done: no step back
            total = min(total, int((meter.done + units) / before))
        meter.total = max(total, meter.done + units)
        meter.stage = stage
        meter.add(units)
