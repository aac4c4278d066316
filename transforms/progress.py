"""Progress of the sampling stage, reported from inside the shard DoFn.

Two modes, chosen by the pipeline for the runner it launches:

* ``eta``: one in-process worker (Beam's FnApiRunner, ``in_memory`` with one worker) sees every
  block of every shard, so it prints the fraction of samples done and an ETA on stderr.
* ``shards``: several workers each see only their own shards; every finished shard prints
  one line (which shard, how many samples, how long).

The exact count across all workers is the Beam counter ``epscert:samples_done``.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

from epscert.montecarlo.shard import ShardTask
from epscert.progress import eta_line

MODES = ("eta", "shards", "off")
#: Minimum seconds between two ETA lines (the last line, at 100 %, is always printed).
ETA_INTERVAL_SECONDS = 2.0


class ProgressReporter:
    """Prints progress lines to ``stream`` (stderr by default); picklable, so it travels with the DoFn.

    ``total_samples`` counts samples per direction, the unit ``run_shard``'s callback reports.
    """

    def __init__(self, mode: str, total_samples: int, stream: TextIO | None = None,
                 interval: float = ETA_INTERVAL_SECONDS) -> None:
        if mode not in MODES:
            raise ValueError(f"progress mode must be one of {', '.join(MODES)}, got mode={mode!r}")
        self.mode = mode
        self.total_samples = max(1, int(total_samples))
        self.interval = interval
        self._stream = stream
        self._done = 0
        self._start: float | None = None
        self._last_print = -float("inf")

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_stream"] = None  # streams do not pickle; the worker's stderr is used there
        return state

    def _write(self, line: str) -> None:
        stream = self._stream if self._stream is not None else sys.stderr
        print(line, file=stream, flush=True)

    def samples(self, count: int) -> None:
        """Record ``count`` more samples; in ``eta`` mode print a line at most every ``interval`` s."""
        if self.mode != "eta":
            return
        now = time.monotonic()
        if self._start is None:
            self._start = now
        self._done += count
        finished = self._done >= self.total_samples
        if not finished and now - self._last_print < self.interval:
            return
        self._last_print = now
        elapsed = now - self._start
        self._write(eta_line("sampling", self._done, self.total_samples, "samples", elapsed))

    def shard_done(self, task: ShardTask, seconds: float) -> None:
        """In ``shards`` mode, one line per finished shard."""
        if self.mode != "shards":
            return
        self._write(f"epscert: shard {task.shard_index + 1}/{task.config.shards} of {task.key} done "
                    f"({task.samples} samples per direction, {seconds:.1f} s)")
