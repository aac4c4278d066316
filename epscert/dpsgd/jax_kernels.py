"""DP-SGD's JAX kernels: Balls-and-Bins (naive, importance, order_stats, importance_order_stats),
shuffle, Poisson (naive); the order-statistic kernels live in :mod:`.jax_orderstats`. The engine's
JAX part (device, block shapes, exact grid sums) is :mod:`epscert.montecarlo.backends.jax_backend`;
the loss samplers of this room name this module in ``jax_kernels_module`` (the engine's protocol).

Imported lazily (``import epscert`` never loads JAX); the stream (keys, blocks, masked shards) and the
exact grid sums of every block are the engine's (:mod:`epscert.montecarlo.backends.jax_backend`,
whose docstring states them and their precision). Losses are float64 throughout.

Balls-and-Bins kernels (SPEC §2, §4; the numpy originals are in
:mod:`epscert.dpsgd.balls_and_bins`, constants are taken from that sampler);
the shuffle and Poisson kernels mirror their samplers' ``draw`` (docstrings below):
- naive: x/σ² = z/σ + e_1/σ², ℓ = ±(logsumexp(x/σ²) - log T - 1/(2σ²)).
- importance REMOVE: M = max of T conditioned on M >= C by the survival inverse
  (log Φ(M) = log1p(-U s)/T), placed at coordinate 1 with probability 1/T, else at 2; the
  other coordinates N(0, 1) conditioned on <= M by the inverse CDF Φ^{-1}(U Φ(M)).
- importance ADD: every coordinate conditioned on <= C by the same inverse CDF.
The inverse CDF is exact in distribution for every bound (no rejection, which a fixed-shape
kernel cannot do); ``ndtri_exp`` evaluates it through the survival branch above log Φ = -log 2.
- order_stats, importance_order_stats: :mod:`epscert.dpsgd.jax_orderstats`.
"""


from __future__ import annotations

import functools
import math

import numpy as np

from epscert.dpsgd.balls_and_bins import BallsAndBinsSampler
from epscert.dpsgd.jax_orderstats import check_bounds, importance_order_stats_kernel, order_stats_kernel
from epscert.dpsgd.orderstats import lower_tail_weights, upper_tail_weights, usable_ranks
from epscert.dpsgd.poisson_pair import PoissonPairSampler
from epscert.dpsgd.shuffle_pair import ShufflePairSampler
from epscert.montecarlo.accumulator import DirectionSums
from epscert.montecarlo.backends.jax_backend import block_size, drain_sums, log_ndtr, loss_block_sums, ndtri_exp
from epscert.names import Direction, Method

METHODS = (Method.NAIVE, Method.IMPORTANCE)


def check_supported(sampler: object, method: Method) -> None:
    """Raise ValueError (before any work) when this backend has no kernel for the request."""
    if isinstance(sampler, BallsAndBinsSampler) and method is Method.ORDER_STATS:
        return
    if isinstance(sampler, BallsAndBinsSampler) and method is Method.IMPORTANCE_ORDER_STATS:
        check_bounds(_log_ndtr_host(sampler.b_add), "importance_order_stats ADD")
        check_bounds(_log_ndtr_host(sampler.b_remove), "importance_order_stats REMOVE (M >= C)")
        return
    if isinstance(sampler, BallsAndBinsSampler) and method in METHODS:
        if method is Method.IMPORTANCE:
            check_bounds(_log_ndtr_host(sampler.b_add), "importance ADD")
        return
    if isinstance(sampler, (ShufflePairSampler, PoissonPairSampler)) and method is Method.NAIVE:
        return
    raise ValueError(f"backend='jax' has kernels for Balls-and-Bins/deterministic naive and importance, "
                     f"Balls-and-Bins order_stats and importance_order_stats, shuffle and Poisson naive only, got method={method.value!r} with {type(sampler).__name__}")


def kernel_spec(sampler: object, method: Method, direction: Direction) -> tuple:
    """Hashable (kind, method, direction, T, epochs, constants) that fixes a compiled kernel."""
    check_supported(sampler, method)
    if isinstance(sampler, ShufflePairSampler):
        return ("shuffle", method.value, direction.value, int(sampler.steps), int(sampler.epochs),
                (float(sampler.sigma),))
    if isinstance(sampler, PoissonPairSampler):
        return ("poisson", method.value, direction.value, int(sampler.total_steps), 1,
                (float(sampler.sigma), float(sampler.q), float(sampler.log_q), float(sampler.log_1mq)))
    if method is Method.ORDER_STATS:
        remove = direction is Direction.REMOVE
        d = sampler.steps - 1 if remove else sampler.steps
        ranks = usable_ranks(sampler.ranks, d) if remove else sampler.add_ranks
        log_w = upper_tail_weights(ranks, d) if remove else lower_tail_weights(ranks)
        return ("order_stats", method.value, direction.value, int(ranks.size) + 1, int(sampler.epochs),
                (float(sampler.inv_sigma), float(sampler.inv_var), float(sampler.offset), int(d),
                 tuple(int(k) for k in ranks), tuple(float(w) for w in log_w)))
    if method is Method.IMPORTANCE_ORDER_STATS:
        head = (float(sampler.inv_sigma), float(sampler.inv_var), float(sampler.offset), int(sampler.steps))
        if direction is Direction.ADD:
            ranks = sampler.add_ranks
            return ("importance_order_stats", method.value, direction.value, int(ranks.size) + 1, 1,
                    head + (_log_ndtr_host(sampler.b_add), tuple(int(k) for k in ranks),
                            tuple(float(w) for w in lower_tail_weights(ranks))))
        parts = ()
        for d in (sampler.steps - 1, sampler.steps - 2):  # the max at coordinate 1, at coordinate 2
            ranks = usable_ranks(sampler.ranks, d)
            parts += (tuple(int(k) for k in ranks), tuple(float(w) for w in upper_tail_weights(ranks, d)))
        return ("importance_order_stats", method.value, direction.value, 2 * int(sampler.ranks.size) + 4, 1,
                head + (float(sampler.b_remove), float(sampler.log_scale(direction))) + parts)
    return ("balls_and_bins", method.value, direction.value, int(sampler.steps), int(sampler.epochs),
            (float(sampler.inv_sigma), float(sampler.inv_var), float(sampler.offset),
             float(sampler.b_remove), float(sampler.b_add), float(sampler.log_scale(direction))))


def _log_ndtr_host(b: float) -> float:
    from scipy import special

    return float(special.log_ndtr(b))


def direction_sums(sampler: BallsAndBinsSampler, method: Method, direction: Direction, key_words: np.ndarray,
                   samples: int, epsilons: tuple[float, ...], progress=None, start: int = 0,
                   stream_samples: int | None = None) -> DirectionSums:
    """Exact sums (count, ΣY, ΣY² on the 2**-52 grid) of the losses of one direction at positions
    [start, start + samples) of a stream of ``stream_samples`` samples (default: start + samples)."""
    spec = kernel_spec(sampler, method, direction)
    n_block = block_size(spec[3], start + samples if stream_samples is None else stream_samples)
    return drain_sums(_compiled(spec, n_block), key_words, epsilons, n_block, start, samples, progress)


def losses(sampler: BallsAndBinsSampler, method: Method, direction: Direction, key_words: np.ndarray,
           block_index: int, n_block: int) -> np.ndarray:
    """The float64 losses of one block, copied to the host (tests and benchmarks only)."""
    import jax

    fn = _loss_fn(kernel_spec(sampler, method, direction), n_block)
    with jax.enable_x64(True):
        base = jax.random.wrap_key_data(np.asarray(key_words, dtype=np.uint32), impl="threefry2x32")
        return np.asarray(fn(base, block_index))


@functools.lru_cache(maxsize=64)
def _loss_fn(spec: tuple, n: int):
    """jit(base key, block index) -> (n,) losses summed over the epochs."""
    import jax

    kind, method, direction, steps, epochs, consts = spec
    make = {"balls_and_bins": _kernel, "shuffle": _shuffle_kernel, "poisson": _poisson_kernel,
            "order_stats": order_stats_kernel, "importance_order_stats": importance_order_stats_kernel}[kind]
    kernel = make(method, direction, steps, n, consts)

    def block_losses(base, b):
        kb = jax.random.fold_in(base, b)
        if epochs == 1:
            return kernel(jax.random.fold_in(kb, 0))
        return jax.lax.fori_loop(0, epochs, lambda e, tot: tot + kernel(jax.random.fold_in(kb, e)),
                                 jax.numpy.zeros((n,), jax.numpy.float64))

    return jax.jit(block_losses)


@functools.lru_cache(maxsize=64)
def _compiled(spec: tuple, n: int):
    """The block reduction (:func:`~epscert.montecarlo.backends.jax_backend.loss_block_sums`) of a kernel."""
    return loss_block_sums(_loss_fn(spec, n), n)


def _kernel(method: str, direction: str, steps: int, n: int, consts: tuple):
    """key -> (n,) directional losses of one epoch (pure JAX, traced under jit)."""
    import jax
    import jax.numpy as jnp
    from jax.scipy.special import logsumexp

    inv_sigma, inv_var, offset, b_remove, b_add, log_s = consts
    first_col = (jnp.arange(steps) == 0)[None, :]
    sign = 1.0 if direction == Direction.REMOVE.value else -1.0

    def finish(z):
        a = z * inv_sigma
        if direction == Direction.REMOVE.value:
            a = a + jnp.where(first_col, inv_var, 0.0)
        return sign * (logsumexp(a, axis=1) - offset)

    def open_uniform(key, shape):
        return 1.0 - jax.random.uniform(key, shape, dtype=jnp.float64)  # (0, 1]: finite logs

    if method == Method.NAIVE.value:
        return lambda key: finish(jax.random.normal(key, (n, steps), dtype=jnp.float64))

    if direction == Direction.ADD.value:
        log_cdf_b = float(_log_ndtr_host(b_add))

        def importance_add(key):
            z = ndtri_exp(jnp.log(open_uniform(key, (n, steps))) + log_cdf_b)
            return finish(jnp.minimum(z, b_add))  # the law has no mass above b; guards the last ulp
        return importance_add

    s = math.exp(log_s)

    def importance_remove(key):
        k_max, k_pos, k_rest = jax.random.split(key, 3)
        log_cdf_m = jnp.log1p(-open_uniform(k_max, (n,)) * s) / steps
        m = jnp.maximum(ndtri_exp(jnp.maximum(log_cdf_m, -1e300)), b_remove)
        first = jax.random.uniform(k_pos, (n,), dtype=jnp.float64) < 1.0 / steps
        col = jnp.where(first | (steps == 1), 0, 1)
        z = ndtri_exp(jnp.log(open_uniform(k_rest, (n, steps))) + log_ndtr(m)[:, None])
        z = jnp.minimum(z, m[:, None])
        z = jnp.where(jnp.arange(steps)[None, :] == col[:, None], m[:, None], z)
        return finish(z)
    return importance_remove


def _shuffle_kernel(method: str, direction: str, steps: int, n: int, consts: tuple):
    """Shuffle pair (SPEC §2): L_S(x) = logsumexp((2x-2)/σ²) - logsumexp((2x-1)/(2σ²));
    REMOVE x = 2e_1 + σz, ADD x = e_1 + σz and -L_S (as ShufflePairSampler)."""
    import jax
    import jax.numpy as jnp
    from jax.scipy.special import logsumexp

    (sigma,) = consts
    var = sigma * sigma
    shift = 2.0 if direction == Direction.REMOVE.value else 1.0
    sign = 1.0 if direction == Direction.REMOVE.value else -1.0
    first_col = (jnp.arange(steps) == 0)[None, :]

    def shuffle(key):
        x = sigma * jax.random.normal(key, (n, steps), dtype=jnp.float64) + jnp.where(first_col, shift, 0.0)
        return sign * (logsumexp((2.0 * x - 2.0) / var, axis=1) - logsumexp((2.0 * x - 1.0) / (2.0 * var), axis=1))
    return shuffle


def _poisson_kernel(method: str, direction: str, steps: int, n: int, consts: tuple):
    """Poisson pair (SPEC §2) over the T·E steps: ℓ = Σ log(1 - q + q e^{(2w-1)/(2σ²)});
    REMOVE w ~ (1-q)N(0,σ²) + qN(1,σ²), ADD w ~ N(0,σ²) and -ℓ (as PoissonPairSampler)."""
    import jax
    import jax.numpy as jnp

    sigma, q, log_q, log_1mq = consts

    def poisson(key):
        k_w, k_b = jax.random.split(key)
        w = sigma * jax.random.normal(k_w, (n, steps), dtype=jnp.float64)
        if direction == Direction.REMOVE.value:
            w = w + (jax.random.uniform(k_b, (n, steps), dtype=jnp.float64) < q)
        loss = jnp.sum(jnp.logaddexp(log_1mq, w / (sigma * sigma) + log_q - 0.5 / (sigma * sigma)), axis=1)
        return loss if direction == Direction.REMOVE.value else -loss
    return poisson


def shard_block(sampler, method: Method, directions, samples: int) -> int:
    """The engine's protocol: samples per device block of a stream of ``samples`` samples (the largest of
    the directions' power-of-two blocks; the others divide it)."""
    return max(block_size(kernel_spec(sampler, method, d)[3], samples) for d in directions)


def shard_loss_sums(sampler, method: Method, direction: Direction, key_words: np.ndarray, samples: int,
                    epsilons: tuple[float, ...], progress=None, start: int = 0,
                    stream_samples: int | None = None) -> DirectionSums:
    """The engine's protocol: exact sums of one direction's losses (:func:`direction_sums`)."""
    return direction_sums(sampler, method, direction, key_words, samples, epsilons, progress, start, stream_samples)
