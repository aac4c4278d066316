"""Shards: the unit of distributed work. A shard draws its samples and returns sums.

A run of ``config.samples`` samples of one method is one stream (SPEC §10, :mod:`epscert.rng`):
fixed-size blocks of samples, block g drawn from generators keyed by (root seed, configuration
key, stream, direction, g). ``plan_shards`` cuts the stream into contiguous ranges, whole blocks
per shard where there are at least as many blocks as shards; ``run_shard`` draws the blocks its
range touches, block by block (memory bounded by the block size, whatever the sample count), and
keeps its part. Every sample is therefore the same whatever the shard layout, and the sums are
exact integers, so any layout (1 shard or 10^4, any runner, any worker count) merges to the
same accumulator and the same rows; a retried shard returns an identical accumulator.
"""

from __future__ import annotations

import functools

from dataclasses import dataclass
from typing import Callable

import numpy as np

from epscert.bounds.truncated_lcb import LEVELS, truncation_levels
from epscert.montecarlo import accumulator as acc_mod
from epscert.montecarlo.conditional import conditional_sampler
from epscert.montecarlo.exactfloat import UNIT_LOG2
from epscert.montecarlo.samplers.base import BLOCK_ELEMENTS
from epscert.params import EPSILONS_PER_PASS, CertifyConfig, Direction, Method
from epscert.rng import block_generator, block_ranges, stream_key_words
from epscert.montecarlo import backends
from epscert.montecarlo.matrix_loss_tilt import choose_order
from epscert.montecarlo.matrix_values import MatrixValueSampler
from epscert.montecarlo.samplers import loss_sampler, matrix_pair

_DIRECTION_INDEX = {Direction.REMOVE: 0, Direction.ADD: 1}


@dataclass(frozen=True)
class ShardTask:
    """What a worker needs to run one shard (picklable; the Beam job's element).

    The shard is the samples [start, start + samples) of stream ``stream`` (0 for a run, k for
    wave k of :mod:`epscert.results.waves`), which holds ``stream_samples`` samples (default
    start + samples: a shard that is a whole stream). ``shard_index`` only names the shard
    (progress lines); it does not enter the draws.
    """

    config: CertifyConfig
    method: Method
    shard_index: int
    samples: int
    start: int = 0
    stream: int = 0
    stream_samples: int | None = None

    def __post_init__(self) -> None:
        if self.stream_samples is None:
            object.__setattr__(self, "stream_samples", self.start + self.samples)
        if not (self.samples >= 1 and self.start >= 0 and self.stream >= 0
                and self.start + self.samples <= self.stream_samples):
            raise ValueError(f"shard must be a non-empty range of its stream, got start={self.start}, "
                             f"samples={self.samples}, stream={self.stream}, stream_samples={self.stream_samples}")

    @property
    def key(self) -> str:
        """Grouping key of the merged result: one per (configuration, method)."""
        return f"{self.config.config_id}/{self.method.value}"


def plan_shards(config: CertifyConfig, method: Method, shards: int | None = None,
                stream: int = 0) -> list[ShardTask]:
    """Cut stream ``stream`` of ``config.samples`` samples into ``shards`` contiguous shards.

    With B = :func:`stream_block` and ⌈N/B⌉ >= shards blocks, shard i gets the whole blocks
    [⌊i·blocks/shards⌋, ⌊(i+1)·blocks/shards⌋) (sizes within one block of each other, no block
    drawn twice); with fewer blocks than shards, shard i gets samples [⌊iN/shards⌋, ⌊(i+1)N/shards⌋)
    and draws the (few, small) blocks it shares with its neighbours whole. Either way the union
    is the stream, so the merged sums do not depend on ``shards``.
    """
    count = config.shards if shards is None else shards
    n = config.samples
    edges = shard_edges(n, count, stream_block(config, method))
    return [ShardTask(config, method, i, edges[i + 1] - edges[i], edges[i], stream, n) for i in range(count)]


def shard_edges(samples: int, shards: int, block: int) -> list[int]:
    """Edges 0 = e_0 < e_1 < ... < e_shards = samples of the layout of :func:`plan_shards`."""
    if not (1 <= shards <= samples and block >= 1):
        raise ValueError(f"shards must be in [1, samples] and block >= 1, got shards={shards}, samples={samples}, "
                         f"block={block}")
    blocks = -(-samples // block)
    if shards <= blocks:
        return [min(i * blocks // shards * block, samples) for i in range(shards + 1)]
    return [i * samples // shards for i in range(shards + 1)]


def stream_block(config: CertifyConfig, method: Method) -> int:
    """Samples per block of the stream that :func:`run_shard` draws for (config, method) in this process.

    numpy: the sampler's block (the conditional estimator's capped by its truncated sums' array);
    JAX: the largest of the directions' power-of-two blocks (the others divide it). Used to align
    shard edges to blocks; the draws never depend on it through the layout.
    """
    values = uses_values(config, method)
    sampler = value_sampler(config, method) if values else loss_sampler(config, method)
    # 'jax' without resolve: the block sizes are plain Python, so a launcher without JAX can plan for workers with it
    if config.backend != "jax" and backends.resolve(config.backend, sampler, method) != "jax":
        return conditional_block(sampler, len(config.epsilons)) if values else sampler.block_size()
    from epscert.montecarlo.backends import jax_backend, jax_matrix

    if config.strategy is not None:
        return jax_backend.block_size(jax_matrix.width(sampler), config.samples)
    if method.is_conditional:
        return jax_backend.block_size(sampler.width(), config.samples)
    return max(jax_backend.block_size(jax_backend.kernel_spec(sampler, method, d)[3], config.samples)
               for d in config.direction.parts())


def conditional_block(sampler, n_eps: int) -> int:
    """numpy block of the conditional estimator: the sampler's, capped so the (|ε|·LEVELS, block)
    array of truncated sums stays within BLOCK_ELEMENTS."""
    return max(1, min(sampler.block_size(), BLOCK_ELEMENTS // (n_eps * LEVELS)))


def run_shard(task: ShardTask, progress: Callable[[int], None] | None = None) -> acc_mod.Accumulator:
    """Draw the shard's ``task.samples`` samples per direction and fold them into an accumulator.

    Block g of the stream (samples [g·B, g·B + n_g), n_g = min(B, stream_samples - g·B)) is
    drawn whole from ``block_generator(seed, key, stream, direction, g)``; the shard keeps the
    positions in its range. ``progress(n)`` is called after every block with the samples kept.
    """
    config, method = task.config, task.method
    if uses_values(config, method):
        return run_conditional_shard(task, progress)
    sampler = loss_sampler(config, method)
    key = config.sampling_key(method)
    block = sampler.block_size()
    directions = config.direction.parts()
    acc = acc_mod.create(directions, len(config.epsilons))
    backend = backends.resolve(config.backend, sampler, method)
    if backend == "jax":
        from epscert.montecarlo.backends import jax_backend, jax_matrix

        (jax_matrix if config.strategy is not None else jax_backend).check_supported(sampler, method)
        tag = f"jax:{jax_backend.device_name()}"
    else:
        tag = backends.NUMPY_TAG
    for direction in directions:
        if sampler.log_scale(direction) < LOG_NEGLIGIBLE:  # event of probability < 1e-304: δ <= s = 0.0
            acc = acc_mod.merge([acc, acc_mod.Accumulator(((direction, _zeros(task.samples, config)),))])
            continue
        if backend == "jax":  # a dense grid in passes of EPSILONS_PER_PASS (the same samples each pass)
            words = stream_key_words(config.seed, key, task.stream, _DIRECTION_INDEX[direction])
            if config.strategy is not None:
                sums_of = functools.partial(jax_matrix.naive_sums, sampler)
            else:
                sums_of = functools.partial(jax_backend.direction_sums, sampler, method)
            parts = [sums_of(direction, words, task.samples, config.epsilons[i:i + EPSILONS_PER_PASS],
                             progress if i == 0 else None, task.start, task.stream_samples)
                     for i in range(0, len(config.epsilons), EPSILONS_PER_PASS)]
            sums = acc_mod.DirectionSums(task.samples, sum((p.sum_y for p in parts), ()),
                                         sum((p.sum_y2 for p in parts), ()))
            acc = acc_mod.merge([acc, acc_mod.Accumulator(((direction, sums),))])
            continue
        for rng, n, lo, hi in _numpy_blocks(task, key, direction, block):
            losses = sampler.draw(rng, n, direction)
            acc = acc_mod.add(acc, direction, losses if (lo, hi) == (0, n) else losses[lo:hi], config.epsilons)
            if progress is not None:
                progress(hi - lo)
    return acc_mod.tagged(acc, tag)


def uses_values(config: CertifyConfig, method: Method) -> bool:
    """Whether ``method`` draws values per ε (conditional estimators, the matrix mechanism's importance
    estimator) rather than losses."""
    return method.is_conditional or (config.strategy is not None and method in (Method.IMPORTANCE, Method.TILTED))


def value_sampler(config: CertifyConfig, method: Method):
    """The value sampler of a validated config: :class:`~epscert.montecarlo.conditional.ConditionalSampler`
    for Balls-and-Bins, :class:`~epscert.montecarlo.matrix_values.MatrixValueSampler` for a strategy."""
    if config.strategy is not None:
        pair = matrix_pair(config)
        order = choose_order(pair, config.epsilons) if method is Method.TILTED else None
        return MatrixValueSampler(pair, method.value, min(config.epsilons), order=order)
    return conditional_sampler(config, method)


def _numpy_blocks(task: ShardTask, key: int, direction: Direction, block: int):
    """(generator of block g, n_g drawn, lo, hi kept) for every block the shard touches."""
    for g, lo, hi in block_ranges(block, task.start, task.samples):
        n = min(block, task.stream_samples - g * block)
        yield block_generator(task.config.seed, key, task.stream, _DIRECTION_INDEX[direction], g), n, lo, hi


def run_conditional_shard(task: ShardTask, progress: Callable[[int], None] | None = None) -> acc_mod.Accumulator:
    """Conditional Monte Carlo shard: per direction and ε, exact Σ Y, Σ Y² and the truncated sums
    Σ min(Y, τ_k) of :mod:`epscert.bounds.truncated_lcb` (``extra``, ε-major), same stream and
    blocks as :func:`run_shard` (block size :func:`conditional_block`)."""
    config, method = task.config, task.method
    sampler = value_sampler(config, method)
    key = config.sampling_key(method)
    n_eps = len(config.epsilons)
    block = conditional_block(sampler, n_eps)
    directions = config.direction.parts()
    acc = acc_mod.create(directions, n_eps, UNIT_LOG2, n_eps * LEVELS)
    backend = backends.resolve(config.backend, sampler, method)
    if backend == "jax":
        from epscert.montecarlo.backends import jax_backend, jax_conditional, jax_matrix

        if config.strategy is not None:
            jax_matrix.check_supported(sampler, method)
        else:
            jax_conditional.check_supported(sampler)
        tag = f"jax:{jax_backend.device_name()}"
    else:
        tag = backends.NUMPY_TAG
    for direction in directions:
        ranges = sampler.value_range(direction, config.epsilons)
        taus = np.stack([truncation_levels(float(b)) for b in ranges])[:, :, None]  # (|ε|, LEVELS, 1)
        sums = acc_mod.ValueSums(n_eps, n_eps * LEVELS)  # exact, turned into integers once per direction

        def fold(y):
            for start in range(0, y.shape[1], block):  # host temporaries bounded by the numpy block
                part = y[:, start:start + block]
                sums.add(part, np.minimum(part[:, None, :], taus).reshape(n_eps * LEVELS, part.shape[1]))
                if progress is not None:
                    progress(part.shape[1])

        if backend == "jax" and config.strategy is not None:  # log-values on the device, exact sums on the host
            words = stream_key_words(config.seed, key, task.stream, _DIRECTION_INDEX[direction])
            for y in jax_matrix.value_blocks(sampler, direction, words, task.samples, config.epsilons, task.start,
                                             task.stream_samples):
                fold(y)
        elif backend == "jax":  # log-sums drawn on the device, values and exact sums on the host
            words = stream_key_words(config.seed, key, task.stream, _DIRECTION_INDEX[direction])
            for log_r, log_m in jax_conditional.blocks(sampler, direction, words, task.samples, task.start,
                                                       task.stream_samples):
                fold(sampler.values(direction, log_r, log_m, config.epsilons))
        else:
            for rng, n, lo, hi in _numpy_blocks(task, key, direction, block):
                values = sampler.draw(rng, n, direction, config.epsilons)
                fold(values if (lo, hi) == (0, n) else values[:, lo:hi])
        acc = sums.fold_into(acc, direction)
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


def estimated_seconds(config: CertifyConfig, method: Method, samples: int | None = None) -> float:
    """Rough single-core time to draw ``samples`` samples of ``method`` (both directions)."""
    sampler = value_sampler(config, method) if uses_values(config, method) else loss_sampler(config, method)
    n = config.samples if samples is None else samples
    cycles = 1 if config.strategy is not None else config.epochs  # a matrix sampler's width covers every cycle
    per_sample = sampler.width() * cycles * len(config.direction.parts())
    if method.uses_order_stats:
        per_sample *= ORDER_STATS_RANK_FACTOR
    return n * per_sample * SECONDS_PER_COORDINATE
