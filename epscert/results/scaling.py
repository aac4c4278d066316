"""How many shards ``--shards auto`` cuts, and the wall time a Monte Carlo job is expected to take.

Wall-time model (docs/scaling.md checks it against measurements). A job of S equal shards whose
samples take t_1 seconds on one core, on W workers (one core each):

    T(W, S) = t_start + ⌈S/W⌉ · (t_1/S + c_shard) + (⌈S/W⌉ + min(S, W)) · c_merge

- t_start: the runner's start-up (process or VM start, job submission, pipeline construction);
- ⌈S/W⌉ · t_1/S: sampling, in rounds of W shards at a time;
- ⌈S/W⌉ · c_shard: the fixed cost of each shard (scheduling, pickling, bundle set-up);
- merge: Beam lifts the combiner, so each worker merges its own shards' exact sums and the last
  step merges at most min(S, W) partial sums (c_merge per accumulator).

The shard count only moves work between the second and third terms and the balance of the rounds:
the samples, hence the rows, are the same for every S (:mod:`epscert.montecarlo.shard`). So
:func:`auto_shards` is free to size the layout for the workers: several shards per worker (for
balance, and so a retried shard costs little), but none below MIN_SHARD_SECONDS of one core (the
per-shard cost stays a small fraction), none above TARGET_SHARD_SECONDS when there is more work than
that, a multiple of W where it can, and never more shards than blocks of the stream.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from epscert.config import CertifyConfig, Method
from epscert.config.samplers import estimated_seconds
from epscert.montecarlo.shard import stream_block

#: A shard of more than this many seconds of one core is split further (a retry loses at most this).
TARGET_SHARD_SECONDS = 20.0
#: Shards of fewer seconds than this are not cut for balance: SHARD_OVERHEAD_SECONDS / MIN_SHARD_SECONDS
#: bounds the per-shard cost as a fraction of the sampling.
MIN_SHARD_SECONDS = 2.0
#: Shards per worker when the work allows it (a straggler or a retry then holds back 1/4 of a round).
SHARDS_PER_WORKER = 4
MAX_AUTO_SHARDS = 10_000

#: Planning constants, from ``python -m benchmarks.parallel`` on the 2-core development machine
#: (docs/scaling.md), rounded up so that a loaded machine is covered (they only size shards and
#: print estimates; no number depends on them). Wall seconds added per shard: fitted 0.3 ms and
#: -1.5 ms (noise) in two runs; 30 ms here.
SHARD_OVERHEAD_SECONDS = 0.03
#: Seconds per accumulator merged: 10.9 µs measured for loss sums (33.7 µs for the conditional
#: estimator's larger accumulators); 30 µs here.
MERGE_SECONDS = 3e-5
#: Start-up of the local runners (a one-shard job minus its sampling): measured 0.44–0.48 s in
#: memory and 2.76–3.49 s for two multi_processing workers.
STARTUP_SECONDS = {"in_memory": 0.5, "multi_processing": 3.5}


def auto_count(seconds: float, workers: int) -> int:
    """Shard count for ``seconds`` of one-core sampling on ``workers`` workers (module docstring).

    count = max(⌈seconds / TARGET⌉, min(SHARDS_PER_WORKER·W, ⌊seconds / MIN⌋), 1); when it is at least
    W it becomes a multiple of W (equal rounds): rounded up if the shards stay >= MIN seconds, else down.
    """
    if not seconds >= 0 or not workers >= 1:
        raise ValueError(f"auto_count needs seconds >= 0 and workers >= 1, got seconds={seconds}, workers={workers}")
    by_size = math.ceil(seconds / TARGET_SHARD_SECONDS)
    by_workers = min(SHARDS_PER_WORKER * workers, math.floor(seconds / MIN_SHARD_SECONDS))
    count = max(1, by_size, by_workers)
    if count >= workers and count % workers:
        up = count + workers - count % workers
        count = up if seconds / up >= MIN_SHARD_SECONDS else count - count % workers
    return count


def auto_shards(config: CertifyConfig, method: Method, workers: int = 1) -> int:
    """:func:`auto_count` of the method's estimated one-core seconds, capped by the stream's block
    count (no block drawn twice), MAX_AUTO_SHARDS and the sample count."""
    count = auto_count(estimated_seconds(config, method), workers)
    blocks = -(-config.samples // stream_block(config, method))
    return int(max(1, min(count, blocks, MAX_AUTO_SHARDS, config.samples)))


@dataclass(frozen=True)
class WallTime:
    """The terms of the wall-time model (seconds); ``total`` is their sum."""

    startup: float
    sampling: float
    shard_overhead: float
    merge: float

    @property
    def total(self) -> float:
        return self.startup + self.sampling + self.shard_overhead + self.merge

    def dominant(self) -> str:
        terms = {"start-up": self.startup, "sampling": self.sampling, "shard overhead": self.shard_overhead,
                 "merge": self.merge}
        return max(terms, key=terms.get)


def wall_time(one_core_seconds: float, shards: int, workers: int, startup: float = 0.0,
              shard_overhead: float = SHARD_OVERHEAD_SECONDS, merge: float = MERGE_SECONDS) -> WallTime:
    """T(W, S) of the module docstring for equal shards: rounds = ⌈S/W⌉."""
    if shards < 1 or workers < 1:
        raise ValueError(f"wall_time needs shards >= 1 and workers >= 1, got shards={shards}, workers={workers}")
    rounds = -(-shards // workers)
    return WallTime(startup, rounds * one_core_seconds / shards, rounds * shard_overhead,
                    (rounds + min(shards, workers)) * merge)


def certificate_wall_time(samples: float, rate_per_core: float, workers: int, startup: float,
                          shard_overhead: float = SHARD_OVERHEAD_SECONDS,
                          merge: float = MERGE_SECONDS) -> tuple[int, WallTime]:
    """(shards, T) for ``samples`` samples at ``rate_per_core`` samples per second on one core,
    with the shard count :func:`auto_count` picks for ``workers`` (capped at MAX_AUTO_SHARDS)."""
    if not rate_per_core > 0 or not samples > 0:
        raise ValueError(f"certificate_wall_time needs samples > 0 and rate_per_core > 0, got samples={samples}, "
                         f"rate_per_core={rate_per_core}")
    seconds = samples / rate_per_core
    shards = min(auto_count(seconds, workers), MAX_AUTO_SHARDS)
    return shards, wall_time(seconds, shards, workers, startup, shard_overhead, merge)


def scaling_table(samples: float, rate_per_core: float, workers=(10, 100, 1000), startup: float = 0.0,
                  shard_overhead: float = SHARD_OVERHEAD_SECONDS, merge: float = MERGE_SECONDS) -> list[dict]:
    """One row per worker count: shards, the model's terms, total, parallel efficiency t_1 / (W·T)
    (start-up included) and the dominant term."""
    rows = []
    for w in workers:
        shards, t = certificate_wall_time(samples, rate_per_core, w, startup, shard_overhead, merge)
        one_core = samples / rate_per_core
        rows.append({"workers": w, "shards": shards, "startup": t.startup, "sampling": t.sampling,
                     "shard_overhead": t.shard_overhead, "merge": t.merge, "total": t.total,
                     "efficiency": one_core / (w * t.total), "dominant": t.dominant()})
    return rows
