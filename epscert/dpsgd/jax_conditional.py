"""JAX kernels of the conditional estimator (``conditional``, ``conditional_order_stats``).

The device draws the T - 1 conditioning coordinates of each sample (or their order
statistics) and reduces them to the two per-sample float64 numbers the conditional value
needs: log R = log Σ_{t<T} W_t and, for REMOVE, log M = log max_{t<T} W_t (for the
order-statistics variant, the bounds on R of :mod:`epscert.dpsgd.conditional`). These
(2, n) arrays come back to the host, where :meth:`ConditionalSampler.values` (the same code the
numpy backend runs) turns them into the values Y(ε), and the shard sums Y, Y² and min(Y, τ_k)
exactly with :func:`epscert.montecarlo.exactfloat.float_sum_rows` (units 2**-1126).

Why the values and exact sums are formed on the host, not on the device: (1) XLA flushes
subnormal results to zero (measured on CPU: exp(-740) = 0 and (4.5e-157)**2 = 0 under jit),
and the conditional values reach 1e-300 and below, their squares lower still; computing Y,
Y² and min(Y, τ_k) on the device would change them (down, for Y² and the truncated sums of
the LCB, which is not safe for either bound) and leave the sums of the numpy path; on the host
they are the numpy path's IEEE float64 operations on the same inputs. (2) An exact device sum
in units 2**-1126 means scattering int64 halves of the mantissas into ~2200 exponent bins per
row (|ε|·(2 + LEVELS) rows): possible, but a poor fit for the device and a second copy of
the value formulas. The log-sums themselves are safe to form on the device: logsumexp is
shifted by the row maximum, so the sum is >= 1 and a flushed term (< 2**-1022 relative to it)
changes it by less than T·2**-1022 relative, far below one ulp of log R.

Stream: as :mod:`epscert.montecarlo.backends.jax_backend` (block g of the stream: ``fold_in(base, g)``,
then ``fold_in(·, 0)``, the one epoch), block size ``block_size(width, stream samples)``; a shard
keeps the positions of the touched blocks that fall in its range. ADD draws
each coordinate conditioned on <= b by the inverse CDF Φ^{-1}(U Φ(b)) (exact in law, no
rejection); configurations with log Φ(b) < LOG_TINY are refused (:func:`check_supported`).
"""

from __future__ import annotations

import functools

import numpy as np

from epscert.montecarlo.backends.jax_backend import block_size, fetched
from epscert.dpsgd.jax_orderstats import check_bounds, order_values
from epscert.montecarlo.backends.jax_backend import ndtri_exp
from epscert.dpsgd.conditional import ConditionalSampler
from epscert.dpsgd.orderstats import lower_tail_weights, upper_tail_weights
from epscert.names import Direction, Method
from epscert.rng import block_ranges


def check_supported(sampler: ConditionalSampler, method: Method | None = None) -> None:
    """Raise ValueError (before any work) where the ADD conditioning bound is out of range, or ``method``
    (when given) is not a conditional one."""
    if method is not None and not method.is_conditional:
        raise ValueError(f"backend='jax' runs the conditional sampler for conditional methods only, got "
                         f"method={method.value!r}")
    if sampler.steps > 1:
        check_bounds(sampler.log_phi_b, "conditional ADD")


def kernel_spec(sampler: ConditionalSampler, direction: Direction) -> tuple:
    """Hashable (direction, d, order_stats, constants) that fixes a compiled kernel."""
    check_supported(sampler)
    d = sampler.steps - 1
    inv_sigma, half = 1.0 / sampler.sigma, 0.5 / sampler.sigma**2
    if not sampler.order_stats:
        return (direction.value, d, False, (inv_sigma, half, float(sampler.b_add), float(sampler.log_phi_b)))
    remove = direction is Direction.REMOVE
    ranks = sampler.ranks if remove else sampler.add_ranks
    log_w = upper_tail_weights(ranks, d) if remove else lower_tail_weights(ranks)
    return (direction.value, d, True, (inv_sigma, half, float(sampler.log_phi_b), tuple(int(k) for k in ranks),
                                       tuple(float(w) for w in log_w)))


def blocks(sampler: ConditionalSampler, direction: Direction, key_words: np.ndarray, samples: int,
           start: int = 0, stream_samples: int | None = None):
    """Yield (log R, log M or None) host float64 arrays, block by block: the values at positions
    [start, start + samples) of a stream of ``stream_samples`` samples (default start + samples);
    the parts of the touched blocks outside that range are cut off here."""
    import jax

    spec = kernel_spec(sampler, direction)
    n_block = block_size(sampler.width(), start + samples if stream_samples is None else stream_samples)
    fn = _compiled(spec, n_block)
    ranges = block_ranges(n_block, start, samples)
    with jax.enable_x64(True):
        base = jax.random.wrap_key_data(np.asarray(key_words, dtype=np.uint32), impl="threefry2x32")
        for _, lo, hi, out in fetched(ranges, lambda b, lo, hi: fn(base, b)):
            out = np.asarray(out)[:, lo:hi]
            yield out[0], (out[1] if direction is Direction.REMOVE else None)


@functools.lru_cache(maxsize=32)
def _compiled(spec: tuple, n: int):
    """jit(base key, block index) -> (2, n): log R and log M (log M = log R for ADD, unused)."""
    import jax
    import jax.numpy as jnp
    from jax.scipy.special import logsumexp

    direction, d, order_stats, consts = spec
    remove = direction == Direction.REMOVE.value

    def plain(key):
        inv_sigma, half, b_add, log_phi_b = consts
        if remove:
            a = jax.random.normal(key, (n, d), dtype=jnp.float64) * inv_sigma
            return logsumexp(a, axis=1) - half, jnp.max(a, axis=1) - half
        u = 1.0 - jax.random.uniform(key, (n, d), dtype=jnp.float64)  # (0, 1]: finite logs
        z = jnp.minimum(ndtri_exp(jnp.log(u) + log_phi_b), b_add)  # the law has no mass above b
        log_r = logsumexp(z * inv_sigma, axis=1) - half
        return log_r, log_r

    def ranked(key):
        inv_sigma, half, log_phi_b, ranks, log_w = consts
        v = order_values(tuple(jax.random.split(key, 3)), ranks, d, n, None if remove else log_phi_b) * inv_sigma
        log_r = logsumexp(v + jnp.asarray(log_w)[:, None], axis=0) - half
        return log_r, (v[0] - half if remove else log_r)

    def block(base, b):
        if d == 0:  # T = 1: nothing to condition on, R = M = 0
            return jnp.full((2, n), -jnp.inf, jnp.float64)
        key = jax.random.fold_in(jax.random.fold_in(base, b), 0)
        return jnp.stack((ranked if order_stats else plain)(key))

    return jax.jit(block)


def shard_block(sampler, method: Method, directions, samples: int) -> int:
    """The engine's protocol: samples per device block of a stream of ``samples`` samples."""
    return block_size(sampler.width(), samples)


def shard_value_blocks(sampler, method: Method, direction: Direction, key_words: np.ndarray, samples: int,
                       epsilons: tuple[float, ...], start: int = 0, stream_samples: int | None = None):
    """The engine's protocol: log-sums drawn on the device (:func:`blocks`), turned into values per ε
    on the host by the sampler (``sampler.values``)."""
    for log_r, log_m in blocks(sampler, direction, key_words, samples, start, stream_samples):
        yield sampler.values(direction, log_r, log_m, epsilons)
