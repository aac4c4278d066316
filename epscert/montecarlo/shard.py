"""Shards: the unit of distributed work. A shard draws its samples and returns sums.

``plan_shards`` splits a method's sample budget into a fixed layout; ``run_shard``
draws one shard's samples block by block (memory bounded by the block size, whatever
the sample count) from generators that depend only on (root seed, configuration key,
shard index) (SPEC §10), and returns an :class:`~epscert.montecarlo.accumulator.Accumulator`.
A retried shard returns an identical accumulator.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from epscert.bounds.truncated_lcb import LEVELS, truncation_levels
from epscert.montecarlo import accumulator as acc_mod
from epscert.montecarlo.conditional import conditional_sampler
from epscert.montecarlo.exactfloat import UNIT_LOG2
from epscert.montecarlo.samplers.base import BLOCK_ELEMENTS
from epscert.params import EPSILONS_PER_PASS, CertifyConfig, Direction, Method
from epscert.rng import shard_generator, shard_key_words
from epscert.montecarlo import backends
from epscert.montecarlo.samplers import loss_sampler

_DIRECTION_INDEX = {Direction.REMOVE: 0, Direction.ADD: 1}


@dataclass(frozen=True)
class ShardTask:
    """What a worker needs to run one shard (picklable; the Beam job's element)."""

    config: CertifyConfig
    method: Method
    shard_index: int
    samples: int

    @property
    def key(self) -> str:
        """Grouping key of the merged result: one per (configuration, method)."""
        return f"{self.config.config_id}/{self.method.value}"


def plan_shards(config: CertifyConfig, method: Method, shards: int | None = None) -> list[ShardTask]:
    """Split ``config.samples`` into ``shards`` near-equal shards (the first ones get the remainder)."""
    count = config.shards if shards is None else shards
    base, extra = divmod(config.samples, count)
    return [ShardTask(config, method, i, base + (1 if i < extra else 0)) for i in range(count)]


def run_shard(task: ShardTask, progress: Callable[[int], None] | None = None) -> acc_mod.Accumulator:
    """Draw ``task.samples`` samples per direction and fold them into an accumulator.

    ``progress(n)`` is called after every block with the number of samples just done.
    """
    config, method = task.config, task.method
    if method.is_conditional:
        return run_conditional_shard(task, progress)
    sampler = loss_sampler(config, method)
    key = config.sampling_key(method)
    block = sampler.block_size()
    directions = config.direction.parts()
    acc = acc_mod.create(directions, len(config.epsilons))
    backend = backends.resolve(config.backend, sampler, method)
    if backend == "jax":
        from epscert.montecarlo.backends import jax_backend

        jax_backend.check_supported(sampler, method)
        tag = f"jax:{jax_backend.device_name()}"
    else:
        tag = backends.NUMPY_TAG
    for direction in directions:
        if sampler.log_scale(direction) < LOG_NEGLIGIBLE:  # event of probability < 1e-304: δ <= s = 0.0
            acc = acc_mod.merge([acc, acc_mod.Accumulator(((direction, _zeros(task.samples, config)),))])
            continue
        if backend == "jax":  # a dense grid in passes of EPSILONS_PER_PASS (the same samples each pass)
            words = shard_key_words(config.seed, key, task.shard_index, _DIRECTION_INDEX[direction])
            parts = [jax_backend.direction_sums(sampler, method, direction, words, task.samples,
                                                config.epsilons[i:i + EPSILONS_PER_PASS], progress if i == 0 else None)
                     for i in range(0, len(config.epsilons), EPSILONS_PER_PASS)]
            sums = acc_mod.DirectionSums(task.samples, sum((p.sum_y for p in parts), ()),
                                         sum((p.sum_y2 for p in parts), ()))
            acc = acc_mod.merge([acc, acc_mod.Accumulator(((direction, sums),))])
            continue
        for b, start in enumerate(range(0, task.samples, block)):
            n = min(block, task.samples - start)
            rng = shard_generator(config.seed, key, task.shard_index, _DIRECTION_INDEX[direction], b)
            losses = sampler.draw(rng, n, direction)
            acc = acc_mod.add(acc, direction, losses, config.epsilons)
            if progress is not None:
                progress(n)
    return acc_mod.tagged(acc, tag)


def run_conditional_shard(task: ShardTask, progress: Callable[[int], None] | None = None) -> acc_mod.Accumulator:
    """Conditional Monte Carlo shard: per direction and ε, exact Σ Y, Σ Y² and the truncated sums
    Σ min(Y, τ_k) of :mod:`epscert.bounds.truncated_lcb` (``extra``, ε-major), same seeding as
    :func:`run_shard`."""
    config, method = task.config, task.method
    sampler = conditional_sampler(config, method)
    key = config.sampling_key(method)
    n_eps = len(config.epsilons)
    block = max(1, min(sampler.block_size(), BLOCK_ELEMENTS // (n_eps * LEVELS)))  # the extra sums' array
    directions = config.direction.parts()
    acc = acc_mod.create(directions, n_eps, UNIT_LOG2, n_eps * LEVELS)
    backend = backends.resolve(config.backend, sampler, method)
    if backend == "jax":
        from epscert.montecarlo.backends import jax_backend, jax_conditional

        jax_conditional.check_supported(sampler)
        tag = f"jax:{jax_backend.device_name()}"
    else:
        tag = backends.NUMPY_TAG
    for direction in directions:
        ranges = sampler.value_range(direction, config.epsilons)
        taus = np.stack([truncation_levels(float(b)) for b in ranges])[:, :, None]  # (|ε|, LEVELS, 1)

        def fold(acc, y):
            for start in range(0, y.shape[1], block):  # host temporaries bounded by the numpy block
                part = y[:, start:start + block]
                extra = np.minimum(part[:, None, :], taus).reshape(n_eps * LEVELS, part.shape[1])
                acc = acc_mod.add_values(acc, direction, part, extra)
                if progress is not None:
                    progress(part.shape[1])
            return acc

        if backend == "jax":  # log-sums drawn on the device, values and exact sums on the host
            words = shard_key_words(config.seed, key, task.shard_index, _DIRECTION_INDEX[direction])
            for log_r, log_m in jax_conditional.blocks(sampler, direction, words, task.samples):
                acc = fold(acc, sampler.values(direction, log_r, log_m, config.epsilons))
            continue
        for b, start in enumerate(range(0, task.samples, block)):
            n = min(block, task.samples - start)
            rng = shard_generator(config.seed, key, task.shard_index, _DIRECTION_INDEX[direction], b)
            acc = fold(acc, sampler.draw(rng, n, direction, config.epsilons))
    return acc_mod.tagged(acc, tag)


#: Below this log-probability the importance event is treated as empty (s underflows).
LOG_NEGLIGIBLE = -700.0


def _zeros(count: int, config: CertifyConfig) -> acc_mod.DirectionSums:
    n = len(config.epsilons)
    return acc_mod.DirectionSums(count, (0,) * n, (0,) * n)


#: Cost of one sampled coordinate (normal draw + exp + bookkeeping), in seconds: measured by
#: benchmarks/run.py at 1.1e-8 on a quiet core and 2.4e-8 with both cores busy.
SECONDS_PER_COORDINATE = 1.5e-8
#: One order-statistic rank costs about this many coordinates (one gamma/exponential + ndtri).
ORDER_STATS_RANK_FACTOR = 3
#: Auto-sizing aims at shards of about this many seconds on one core (5–60 s is the target band).
TARGET_SHARD_SECONDS = 20.0
MAX_AUTO_SHARDS = 10_000


def estimated_seconds(config: CertifyConfig, method: Method, samples: int | None = None) -> float:
    """Rough single-core time to draw ``samples`` samples of ``method`` (both directions)."""
    sampler = conditional_sampler(config, method) if method.is_conditional else loss_sampler(config, method)
    n = config.samples if samples is None else samples
    per_sample = sampler.width() * config.epochs * len(config.direction.parts())
    if method.uses_order_stats:
        per_sample *= ORDER_STATS_RANK_FACTOR
    return n * per_sample * SECONDS_PER_COORDINATE


def auto_shards(config: CertifyConfig, method: Method) -> int:
    """Shard count so that each shard takes about TARGET_SHARD_SECONDS on one core."""
    want = round(estimated_seconds(config, method) / TARGET_SHARD_SECONDS)
    return int(min(max(1, want), MAX_AUTO_SHARDS, config.samples))
