"""Sample sizes chosen for the user: waves of doubling samples until a target relative width.

Wave k (k = 0, 1, ...) draws n_0·2^k fresh samples (stream k, same sampling key), merges
them with all earlier waves, and computes the rows of the n_0·(2^{k+1} - 1) samples so far at
failure probability β_k = β·2^{-(k+1)}. The count after each wave is fixed in advance, so each
wave's bounds are valid at β_k as they stand; the run stops at the first wave whose width
max_ε delta_upper / delta_lower (delta_upper / delta where a method has no lower bound) is
<= 1 + w, or when the next wave would pass the sample budget. The bounds reported are those of
the last wave, and they fail only if some wave's bounds fail: probability <= Σ_k β_k < β
(union bound), whatever the stopping rule looked at.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Callable

from epscert.montecarlo import accumulator as acc_mod
from epscert.montecarlo.shard import ShardTask, plan_shards, run_shard
from epscert.config import CertifyConfig, Method, check_float, check_int
from epscert.results.rows import mc_rows


def relative_width(rows: list[dict]) -> float:
    """max over the reported rows of delta_upper / delta_lower (or / delta without a lower bound)."""
    worst = 1.0
    for r in rows:
        low = r["delta_lower"] if r["delta_lower"] is not None else r["delta"]
        if r["delta_upper"] is None:
            continue
        worst = max(worst, r["delta_upper"] / low if low > 0 else float("inf"))
    return worst


def wave_tasks(config: CertifyConfig, method: Method, k: int, offset: int) -> tuple[CertifyConfig, list[ShardTask]]:
    """Wave ``k``'s configuration (samples so far, β_k = β·2^{-(k+1)}) and its fresh shard tasks.

    Wave k draws config.samples·2^k new samples: stream k (SPEC §10; wave 0 is the stream of a
    plain run), cut into ``config.shards`` shards named from ``offset`` on (the shard count of the
    earlier waves). Streams differ in their spawn keys, so no sample is reused across waves.
    """
    size = config.samples << k
    total = config.samples * ((2 << k) - 1)
    wave = dataclasses.replace(config, samples=total, error_prob=config.error_prob * 2.0 ** -(k + 1))
    tasks = plan_shards(dataclasses.replace(wave, samples=size), method, stream=k)
    return wave, [dataclasses.replace(t, config=wave, shard_index=offset + t.shard_index) for t in tasks]


def run_tasks_here(tasks: list[ShardTask]) -> acc_mod.Accumulator:
    """Run shard tasks in this process and merge them (the API's wave runner)."""
    return acc_mod.merge([run_shard(t) for t in tasks])


def waves_rows(config: CertifyConfig, method: Method, target_rel_width: float, max_samples: int,
               progress: Callable[[str], None] | None = None,
               run_wave: Callable[[int, list[ShardTask]], acc_mod.Accumulator] | None = None) -> list[dict]:
    """Rows of ``method`` from doubling waves (module docstring); config.samples is the first wave.

    ``run_wave(k, tasks)`` returns the merged accumulator of wave k's tasks (default: run them
    here); the Beam CLI passes one that runs each wave as one Beam job. Both give the same rows.
    """
    w = check_float("target_rel_width", target_rel_width, low=0.0, low_open=True)
    budget = check_int("max_samples", max_samples, config.samples)
    start, acc, k, offset = time.perf_counter(), None, 0, 0
    while True:
        wave, tasks = wave_tasks(config, method, k, offset)
        offset += len(tasks)
        part = run_tasks_here(tasks) if run_wave is None else run_wave(k, tasks)
        acc = part if acc is None else acc_mod.merge([acc, part])
        rows = mc_rows(wave, method, acc, time.perf_counter() - start)
        reported = [r for r in rows if r["direction"] == wave.direction.value]
        width = relative_width(reported)
        if progress is not None:
            progress(f"wave {k}: {wave.samples} samples, width {width:.4g} (target {1 + w:.4g})")
        if width <= 1.0 + w or wave.samples + 2 * (config.samples << k) > budget:
            return rows
        k += 1
