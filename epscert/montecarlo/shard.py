"""Shards: the unit of distributed work. A shard draws its samples and returns sums.

A run of ``config.samples`` samples of one method is one stream (SPEC §10, :mod:`epscert.rng`):
fixed-size blocks of samples, block g drawn from generators keyed by (root seed, configuration
key, stream, direction, g). ``plan_shards`` cuts the stream into contiguous ranges, whole blocks
per shard where there are at least as many blocks as shards; ``run_shard`` draws the blocks its
range touches, block by block (memory bounded by the block size, whatever the sample count), and
keeps its part. Every sample is therefore the same whatever the shard layout, and the sums are
exact integers, so any layout (1 shard or 10^4, any runner, any worker count) merges to the
same accumulator and the same rows; a retried shard returns an identical accumulator.

The shard knows no mechanism: the configuration hands it the sampler object
(``config.mc_sampler(method)``, the protocol of :mod:`epscert.montecarlo`), and the sampler names its
JAX kernels (``sampler.jax_kernels_module``). ``config`` is read by attribute only (samples, epsilons, seed,
direction, backend, shards, ``sampling_key``); this module imports no configuration class.
"""

from __future__ import annotations

import functools

from dataclasses import dataclass
from typing import Callable

import numpy as np

from epscert.bounds.truncated_lcb import LEVELS, truncation_levels
from epscert.montecarlo import accumulator as acc_mod
from epscert.montecarlo import backends
from epscert.montecarlo.exactfloat import UNIT_LOG2, levels_share_mantissa
from epscert.montecarlo.protocol import BLOCK_ELEMENTS
from epscert.names import EPSILONS_PER_PASS, Direction, Method
from epscert.rng import block_generator, block_ranges, stream_key_words

_DIRECTION_INDEX = {Direction.REMOVE: 0, Direction.ADD: 1}


@dataclass(frozen=True)
class ShardTask:
    """What a worker needs to run one shard (picklable; the Beam job's element).

    The shard is the samples [start, start + samples) of stream ``stream`` (0 for a run, k for
    wave k of :mod:`epscert.results.waves`), which holds ``stream_samples`` samples (default
    start + samples: a shard that is a whole stream). ``shard_index`` only names the shard
    (progress lines); it does not enter the draws.
    """

    config: object  # an epscert.config.CertifyConfig, read by attribute
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


def plan_shards(config, method: Method, shards: int | None = None,
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


def stream_block(config, method: Method) -> int:
    """Samples per block of the stream that :func:`run_shard` draws for (config, method) in this process.

    numpy: the sampler's block (the conditional estimator's capped by its truncated sums' array);
    JAX: the largest of the directions' power-of-two blocks (the others divide it). Used to align
    shard edges to blocks; the draws never depend on it through the layout.
    """
    sampler = config.mc_sampler(method)
    # 'jax' without resolve: the block sizes are plain Python, so a launcher without JAX can plan for workers with it
    if config.backend != "jax" and backends.resolve(config.backend, sampler, method) != "jax":
        return conditional_block(sampler, len(config.epsilons)) if sampler.draws_values else sampler.block_size()
    return backends.kernels_of(sampler).shard_block(sampler, method, config.direction.parts(), config.samples)


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
    sampler = config.mc_sampler(method)
    if sampler.draws_values:
        return run_value_shard(task, progress, sampler)
    key = config.sampling_key(method)
    block = sampler.block_size()
    directions = config.direction.parts()
    acc = acc_mod.create(directions, len(config.epsilons))
    backend = backends.resolve(config.backend, sampler, method)
    tag, kernels = backends.NUMPY_TAG, None
    if backend == "jax":
        kernels = backends.jax_kernels_of(sampler, method)
        tag = backends.jax_tag()
    for direction in directions:
        if sampler.log_scale(direction) < LOG_NEGLIGIBLE:  # event of probability < 1e-304: δ <= s = 0.0
            acc = acc_mod.merge([acc, acc_mod.Accumulator(((direction, _zeros(task.samples, config)),))])
            continue
        if backend == "jax":  # a dense grid in passes of EPSILONS_PER_PASS (the same samples each pass)
            words = stream_key_words(config.seed, key, task.stream, _DIRECTION_INDEX[direction])
            sums_of = functools.partial(kernels.shard_loss_sums, sampler, method)
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


def _numpy_blocks(task: ShardTask, key: int, direction: Direction, block: int):
    """(generator of block g, n_g drawn, lo, hi kept) for every block the shard touches."""
    for g, lo, hi in block_ranges(block, task.start, task.samples):
        n = min(block, task.stream_samples - g * block)
        yield block_generator(task.config.seed, key, task.stream, _DIRECTION_INDEX[direction], g), n, lo, hi


#: Truncated values (|ε|·LEVELS rows) folded into the exact sums per call. Cost only: the sums are exact
#: integers, so how the values are grouped into calls never changes them. Each call of
#: :meth:`~epscert.montecarlo.exactfloat.RowSums.add` pays O(rows x 2200 exponents) besides its values, so
#: the small blocks of a wide pair (32 samples at b = 2000) are gathered first: folded per block, that
#: fixed cost was 20-30% of a b = 2000 run (issue 33).
FOLD_ELEMENTS = 2**21


def run_value_shard(task: ShardTask, progress: Callable[[int], None] | None = None,
                    sampler=None) -> acc_mod.Accumulator:
    """Value shard (conditional and other value estimators): per direction and ε, exact Σ Y, Σ Y² and the
    truncated sums Σ min(Y, τ_k) of :mod:`epscert.bounds.truncated_lcb` (``extra``, ε-major), same
    stream and blocks as :func:`run_shard` (numpy block size :func:`conditional_block`). On JAX the kernels'
    ``shard_value_sums`` sums on the device where the levels τ_k share B's stored bits (B >= 2**-928: the
    exact histogram of :func:`epscert.montecarlo.exactfloat.fold_ieee_histogram`); else the values come to
    the host (``shard_value_blocks``) and are summed here, with the same integers either way."""
    config, method = task.config, task.method
    sampler = config.mc_sampler(method) if sampler is None else sampler
    key = config.sampling_key(method)
    n_eps = len(config.epsilons)
    block = conditional_block(sampler, n_eps)
    fold_cols = max(1, FOLD_ELEMENTS // (n_eps * LEVELS))
    directions = config.direction.parts()
    acc = acc_mod.create(directions, n_eps, UNIT_LOG2, n_eps * LEVELS)
    backend = backends.resolve(config.backend, sampler, method)
    tag, kernels = backends.NUMPY_TAG, None
    if backend == "jax":
        kernels = backends.jax_kernels_of(sampler, method)
        tag = backends.jax_tag()
    for direction in directions:
        ranges = sampler.value_range(direction, config.epsilons)
        taus = np.stack([truncation_levels(float(b)) for b in ranges])[:, :, None]  # (|ε|, LEVELS, 1)
        sums = acc_mod.ValueSums(n_eps, n_eps * LEVELS).truncated_at(taus[:, :, 0])  # exact; integers once per direction
        pending: list[np.ndarray] = []

        def fold(y, last=False):
            """Fold ``y`` once FOLD_ELEMENTS worth of values are pending (``last``: whatever is pending)."""
            if y is not None and y.shape[1]:
                pending.append(y)
            held = sum(p.shape[1] for p in pending)
            if not pending or (held < fold_cols and not last):
                return
            y = pending[0] if len(pending) == 1 else np.concatenate(pending, axis=1)
            pending.clear()
            for start in range(0, y.shape[1], fold_cols):  # host temporaries bounded by FOLD_ELEMENTS
                part = y[:, start:start + fold_cols]
                sums.add_truncated(part)  # the sums of min(part, τ) at every level
                if progress is not None:
                    progress(part.shape[1])

        if backend == "jax" and hasattr(kernels, "shard_value_sums") and levels_share_mantissa(ranges, LEVELS):
            # drawn and summed on the device: only per-exponent counts reach the host (the same integers)
            words = stream_key_words(config.seed, key, task.stream, _DIRECTION_INDEX[direction])
            block_sums = kernels.shard_value_sums(sampler, method, direction, words, task.samples, config.epsilons,
                                                  ranges, LEVELS, progress, task.start, task.stream_samples)
            acc = acc_mod.merge([acc, acc_mod.Accumulator(((direction, block_sums),))])
            continue
        if backend == "jax":  # drawn on the device, exact sums on the host
            words = stream_key_words(config.seed, key, task.stream, _DIRECTION_INDEX[direction])
            for y in kernels.shard_value_blocks(sampler, method, direction, words, task.samples, config.epsilons,
                                                task.start, task.stream_samples):
                fold(y)
        else:
            for rng, n, lo, hi in _numpy_blocks(task, key, direction, block):
                values = sampler.draw(rng, n, direction, config.epsilons)
                fold(values if (lo, hi) == (0, n) else values[:, lo:hi])
        fold(None, last=True)
        acc = sums.fold_into(acc, direction)
    return acc_mod.tagged(acc, tag)


#: Below this log-probability the importance event is treated as empty (s underflows).
LOG_NEGLIGIBLE = -700.0


def _zeros(count: int, config) -> acc_mod.DirectionSums:
    n = len(config.epsilons)
    return acc_mod.DirectionSums(count, (0,) * n, (0,) * n)
