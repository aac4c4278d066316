"""JAX kernels of the matrix-mechanism pair: ``naive`` losses, ``conditional`` and ``importance`` values.

The arithmetic is the numpy samplers' own (:mod:`epscert.matrix.kernels`,
:mod:`epscert.matrix.values`): those functions take the array namespace and the
special functions as arguments, and here they get ``jax.numpy``, ``jax_backend.log_ndtr``, the
backend's ``ndtri_exp`` and ``JaxSpecial.newton_loop`` (a ``lax.while_loop`` of at most NEWTON_STEPS Newton
steps from above on the convex log S, monotone, stopped once no lane moves by more than NEWTON_TOL; the
numpy path tests each lane on its own).

Stream (SPEC §10, as :mod:`epscert.montecarlo.backends.jax_backend`): the base key of one
direction of one stream is built from :func:`epscert.rng.stream_key_words`; block g of the stream
uses ``fold_in(base, g)``, split into the keys of its draws. The block size
(:func:`epscert.montecarlo.backends.jax_backend.fixed_block_size`) depends on the configuration only (never
on the sample count, the device or the shard layout: a shard draws the blocks its range touches and keeps
its positions, the last block masked), so CPU and GPU, and every shard layout, draw the same numbers, and
one compiled kernel serves every sample count; the ε grid is an argument of the kernels, not a constant.

Precision: float64 throughout. ``naive`` losses are reduced on the device to the exact integer
grid sums of :func:`epscert.montecarlo.backends.jax_backend.grid_halves`. The value estimators
form the *logs* of their values (log space on the device, so XLA's flush of subnormal results cannot
touch them); :func:`value_sums` turns them into IEEE bit patterns without forming a subnormal float
(:func:`epscert.montecarlo.backends.jax_backend.log_value_bits`) and sums Y, Y² and the truncated
min(Y, τ_k) exactly on the device (units 2**-1126, the same integers as the host's RowSums of those
values); :func:`value_blocks` (the fallback, tests, benchmarks) brings the logs to the host instead.
"""

from __future__ import annotations

import functools

import numpy as np

from epscert.matrix import kernels as mk
from epscert.matrix import values as mv
from epscert.matrix.loss_tilt import draw_tuples, remove_tilt_log_values
from epscert.montecarlo.accumulator import DirectionSums
from epscert.montecarlo.backends.jax_backend import (drain_sums, fetched, drain_value_sums, fixed_block_size,
                                                     loss_block_sums, ndtri_exp)
from epscert.montecarlo.backends.jax_backend import log_ndtr as jax_log_ndtr
from epscert.rng import block_ranges
from epscert.matrix.pair import MatrixPairSampler
from epscert.names import Direction, Method


class JaxSpecial:
    """The special functions of :class:`epscert.matrix.values.NumpySpecial`, and the Newton loop, for JAX."""

    log_ndtr = staticmethod(jax_log_ndtr)  # accurate in the far left tail (jax_backend.log_ndtr)

    ndtri_exp = staticmethod(ndtri_exp)

    @staticmethod
    def newton_loop(upper, step, value):
        """value = step(i, value)[0] for i < upper, stopping once step's flag (some lane still moving) is False."""
        import jax
        import jax.numpy as jnp

        def cond(state):
            i, _, moving = state
            return (i < upper) & moving

        def body(state):
            i, v, _ = state
            new, moving = step(i, v)
            return i + 1, new, moving

        return jax.lax.while_loop(cond, body, (0, value, jnp.asarray(True)))[1]


def check_supported(sampler, method: Method) -> None:
    """Raise ValueError (before any work) when there is no matrix kernel for the request."""
    if isinstance(sampler, MatrixPairSampler) and method is Method.NAIVE:
        return
    if isinstance(sampler, mv.MatrixValueSampler) and method.value == sampler.method:
        if sampler.method == "tilted" and sampler.tilt.by_clusters:
            raise ValueError("backend='jax' draws the loss-tilted tuples from tables only; this run's order "
                             f"{sampler.order} is drawn by clusters (epscert.matrix.cluster_tilt): use backend='numpy'")
        if sampler.method == "tilted" and sampler.shift is not None:
            raise ValueError("backend='jax' has no kernel for the REMOVE shift mixture (epscert.matrix.shift_mixture): "
                             "use backend='numpy'")
        return
    raise ValueError(f"backend='jax' has matrix-mechanism kernels for naive, importance, conditional and tilted only, "
                     f"got method={method.value!r} with {type(sampler).__name__}")


def _factor(pair, jnp):
    return pair.factor_tuple(jnp)


def width(sampler) -> int:
    """Coordinates a sample costs on the device (the block size is set from it and the stream length)."""
    if isinstance(sampler, mv.MatrixValueSampler) and sampler.method == "conditional":
        return 4 * sampler.lines_per_sample * (sampler.lines.width + 2)
    pair = sampler.pair
    return 4 * pair.bins


def naive_sums(sampler: MatrixPairSampler, direction: Direction, key_words: np.ndarray, samples: int,
               epsilons: tuple[float, ...], progress=None, start: int = 0,
               stream_samples: int | None = None) -> DirectionSums:
    """Exact sums (count, ΣY, ΣY² on the 2**-52 grid) of the naive losses of one direction at positions
    [start, start + samples) of a stream of ``stream_samples`` samples (default start + samples)."""
    n_block = fixed_block_size(width(sampler))
    fn = _naive_compiled(sampler.pair, direction.value, n_block)
    return drain_sums(fn, key_words, epsilons, n_block, start, samples, progress)


def naive_losses(sampler: MatrixPairSampler, direction: Direction, key_words: np.ndarray, block_index: int,
                 n_block: int) -> np.ndarray:
    """The float64 losses of one block, on the host (tests and benchmarks)."""
    import jax

    fn = _naive_loss_fn(sampler.pair, direction.value, n_block)
    with jax.enable_x64(True):
        base = jax.random.wrap_key_data(np.asarray(key_words, dtype=np.uint32), impl="threefry2x32")
        return np.asarray(fn(base, block_index))


@functools.lru_cache(maxsize=16)
def _naive_loss_fn(pair, direction: str, n: int):
    """Keyed by the pair (cached per strategy, b and σ), so every shard reuses the compiled kernel."""
    import jax
    import jax.numpy as jnp

    remove = direction == Direction.REMOVE.value
    with jax.enable_x64(True):
        offsets = jnp.asarray(pair.remove_offsets)
        add_offset = jnp.asarray(pair.add_offset)
        factor = _factor(pair, jnp)

    def losses(base, b):
        k_z, k_i = jax.random.split(jax.random.fold_in(base, b))
        z = jax.random.normal(k_z, (n, pair.bins), dtype=jnp.float64)
        offset = offsets[jax.random.randint(k_i, (n,), 0, pair.bins)] if remove else add_offset
        return mk.naive_losses(jnp, mk.apply_factor(jnp, z, factor), offset, remove)

    return jax.jit(losses)


@functools.lru_cache(maxsize=16)
def _naive_compiled(pair, direction: str, n: int):
    return loss_block_sums(_naive_loss_fn(pair, direction, n), n)


def _tilt_tuples(jax, jnp, key, tables, weights, theta: int, n: int, b: int, rowwise: bool):
    """(n, θ) tuples of the loss-tilted law from the numpy sampler's code (``draw_tuples``: inverse CDF on the
    same tables) with JAX uniforms."""
    uniforms = jax.random.uniform(key, (n, theta), dtype=jnp.float64)
    return draw_tuples(jnp, tables, weights, theta, b, uniforms, rowwise)


def tilt_tuples(sampler: mv.MatrixValueSampler, key, n: int) -> np.ndarray:
    """The kernel's tuple draws on their own (tests: the law against the exact one)."""
    import jax
    import jax.numpy as jnp

    with jax.enable_x64(True):
        tables = [jnp.asarray(t) for t in sampler.tilt.tables]
        weights = jnp.asarray(sampler.tilt.weights if sampler.tilt.weights is not None else np.ones((1, 1)))
        return np.asarray(_tilt_tuples(jax, jnp, key, tables, weights, sampler.order, n, sampler.pair.bins,
                                       sampler.tilt.rowwise))


def value_blocks(sampler: mv.MatrixValueSampler, direction: Direction, key_words: np.ndarray, samples: int,
                 epsilons: tuple[float, ...], start: int = 0, stream_samples: int | None = None):
    """Yield (|ε|, n) float64 value arrays on the host, block by block: the values at positions
    [start, start + samples) of the stream (the engine's fallback, tests and the benchmarks' kernel column;
    certificates take :func:`value_sums`, which sums on the device)."""
    import jax

    n_block = fixed_block_size(width(sampler))
    fn = _value_jit(_value_fn(*_kernel_key(sampler, direction, n_block)))
    with jax.enable_x64(True):
        base = jax.random.wrap_key_data(np.asarray(key_words, dtype=np.uint32), impl="threefry2x32")
        eps = jax.numpy.asarray(epsilons, dtype=jax.numpy.float64)
        for _, lo, hi, logs in fetched(block_ranges(n_block, start, samples), lambda b, lo, hi: fn(base, b, eps)):
            with np.errstate(under="ignore"):
                yield np.exp(np.asarray(logs)[:, lo:hi])


def value_sums(sampler: mv.MatrixValueSampler, direction: Direction, key_words: np.ndarray, samples: int,
               epsilons: tuple[float, ...], ranges, levels: int, progress=None, start: int = 0) -> DirectionSums:
    """Exact value sums (Y, Y², the truncated sums at τ_k = B·4^{-k}) of one direction at positions
    [start, start + samples) of the stream, summed on the device
    (:func:`epscert.montecarlo.backends.jax_backend.drain_value_sums`): only the histograms reach the host."""
    n_block = fixed_block_size(width(sampler))
    fn = _value_fn(*_kernel_key(sampler, direction, n_block))
    return drain_value_sums(fn, key_words, tuple(float(e) for e in epsilons), ranges, levels, n_block, start, samples,
                            progress)


def block_kernel(sampler, direction: Direction):
    """(n, jit(base key, block index, ε grid)) of one block: the naive losses (n,) or the value estimator's
    log-values (|ε|, n), nothing summed (benchmarks: the device's own rate)."""
    n_block = fixed_block_size(width(sampler))
    if isinstance(sampler, MatrixPairSampler):
        loss = _naive_loss_fn(sampler.pair, direction.value, n_block)
        return n_block, lambda base, b, eps: loss(base, b)
    return n_block, _value_jit(_value_fn(*_kernel_key(sampler, direction, n_block)))


def _kernel_key(sampler: mv.MatrixValueSampler, direction: Direction, n_block: int) -> tuple:
    """What changes a value kernel: the pair, the method, the direction, the block size, the tilt order and,
    for the importance estimator only (its thresholds and truncation), ε0 = min of the grid. The grid itself
    is an argument of the kernel, so a new grid of the same length (same ε0 for importance) compiles nothing."""
    eps0 = sampler.eps0 if sampler.method == "importance" else 0.0
    return sampler.pair, sampler.method, eps0, direction.value, n_block, getattr(sampler, "order", None)


@functools.lru_cache(maxsize=16)
def _value_jit(fn):
    import jax

    return jax.jit(fn)


@functools.lru_cache(maxsize=16)
def _value_fn(pair, method: str, eps0: float, direction: str, n: int, order: int | None = None):
    """(base key, block index, ε grid) -> (|ε|, n) logs of the values of one block (traceable, not jitted: the
    callers jit it with or without the device sums). Cached per configuration, so the compiled kernels are too;
    the ε grid is an argument, so a new grid of the same length compiles nothing."""
    import jax
    import jax.numpy as jnp

    sampler = mv.MatrixValueSampler(pair, method, eps0, order=order)
    b = pair.bins
    sp = JaxSpecial
    with jax.enable_x64(True):
        factor = _factor(pair, jnp)
        half = jnp.asarray(pair.half_diag)
        g_rows = jnp.asarray(pair.g)
        d_mean = jnp.asarray(sampler.d_mean)
        d_groups = tuple(jnp.asarray(x) for x in sampler.d_groups)
        if sampler.method == "conditional":
            lines = sampler.lines
            consts = (jnp.asarray(lines.idx), jnp.asarray(lines.d), jnp.asarray(lines.mask),
                      jnp.asarray(lines.self_or_near), jnp.asarray(lines.v))
        elif sampler.method == "tilted":
            tilt_tables = [jnp.asarray(t) for t in sampler.tilt.tables]
            tilt_weights = jnp.asarray(sampler.tilt.weights if sampler.tilt.weights is not None else np.ones((1, 1)))
        else:
            kriging = jnp.asarray(sampler.kriging)
            thresholds = jnp.asarray(sampler.thresholds)
            log_p = jnp.asarray(sampler.log_p)
            cum_p = jnp.asarray(sampler.cum_p)

    def top_k(x):
        return jax.lax.top_k(x, sampler.lines.top)

    def values(base, blk, eps):
        k_z, k_a, k_b = jax.random.split(jax.random.fold_in(base, blk), 3)
        z = jax.random.normal(k_z, (n, b), dtype=jnp.float64)
        g = mk.apply_factor(jnp, z, factor)
        if direction == Direction.ADD.value:
            if sampler.method in ("conditional", "tilted"):
                return mv.add_line_log_values(jnp, sp, g, d_mean, half, sampler.var_u, pair.log_bins, eps, d_groups)
            u = 1.0 - jax.random.uniform(k_a, (n,), dtype=jnp.float64)
            return mv.add_importance_log_values(jnp, sp, g, u, d_mean, half, sampler.var_u, sampler.add_log_prob,
                                                eps, -sampler.eps0 + 0.5 * sampler.vbar)
        if sampler.method == "tilted":
            tuples = _tilt_tuples(jax, jnp, k_a, tilt_tables, tilt_weights, sampler.order, n, b, sampler.tilt.rowwise)
            return remove_tilt_log_values(jnp, g, tuples, g_rows, half, sampler.tilt.log_z, sampler.order, eps)
        if sampler.method == "conditional":
            offset = jax.random.randint(k_a, (n,), 0, b)
            chosen = mv.stratified_lines(offset, b, sampler.lines_per_sample, jnp)
            return mv.remove_line_log_values(jnp, sp, g, chosen, consts, half, [pair.log_bins + e for e in eps],
                                             top_k)
        # the numpy sampler's inverse CDF on the same normalised cumulative sums (matrix_values.value_slack)
        flat = jnp.minimum(jnp.searchsorted(cum_p, jax.random.uniform(k_a, (n,), dtype=jnp.float64), side="right"),
                           cum_p.size - 1)
        comp, mode = flat // b, flat % b
        u = 1.0 - jax.random.uniform(k_b, (n,), dtype=jnp.float64)
        return mv.remove_importance_log_values(jnp, sp, g, comp, mode, u, g_rows, kriging, thresholds,
                                               log_p[comp, mode], half, sampler.log_m, eps)

    return values


def shard_block(sampler, method: Method, directions, samples: int) -> int:
    """The engine's protocol: samples per device block (:func:`fixed_block_size`: independent of ``samples``)."""
    return fixed_block_size(width(sampler))


def shard_loss_sums(sampler, method: Method, direction: Direction, key_words: np.ndarray, samples: int,
                    epsilons: tuple[float, ...], progress=None, start: int = 0,
                    stream_samples: int | None = None) -> DirectionSums:
    """The engine's protocol: exact sums of one direction's naive losses (:func:`naive_sums`)."""
    return naive_sums(sampler, direction, key_words, samples, epsilons, progress, start, stream_samples)


def shard_value_blocks(sampler, method: Method, direction: Direction, key_words: np.ndarray, samples: int,
                       epsilons: tuple[float, ...], start: int = 0, stream_samples: int | None = None):
    """The engine's protocol: the host value arrays of one direction (:func:`value_blocks`)."""
    return value_blocks(sampler, direction, key_words, samples, epsilons, start, stream_samples)


def shard_value_sums(sampler, method: Method, direction: Direction, key_words: np.ndarray, samples: int,
                     epsilons: tuple[float, ...], ranges, levels: int, progress=None, start: int = 0,
                     stream_samples: int | None = None) -> DirectionSums:
    """The engine's protocol: exact value sums of one direction, summed on the device (:func:`value_sums`)."""
    return value_sums(sampler, direction, key_words, samples, epsilons, ranges, levels, progress, start)
