"""JAX order-statistic kernels: Balls-and-Bins ``order_stats`` and ``importance_order_stats``.

Split out of :mod:`epscert.montecarlo.backends.jax_backend` (which dispatches to them, with
the same key scheme, blocks and exact grid sums); JAX is imported lazily inside the functions.

:func:`order_values` is the one JAX copy of Algorithm 6 as exponential spacings
(:mod:`epscert.dpsgd.orderstats`), with the conditioning of every draw on <= b
(Proposition B.4: Y' = c Y, 1 - Y' = (1 - c) + c p, c = Φ(b)); with log c = 0 it computes
bit for bit the unconditioned values (exp(0) = 1, -expm1(0) = -0), so the ``order_stats``
stream is that of the unconditioned kernel. The numpy sampler's extra branch for
log Φ(b) < LOG_TINY (c near underflow) is not needed: :func:`check_bounds` refuses such
configurations before any work (the same bound as the JAX importance kernel).
"""

from __future__ import annotations

import math

import numpy as np

from epscert.dpsgd.orderstats import LOG_TINY
from epscert.montecarlo.backends.jax_backend import log_ndtr, ndtri_exp
from epscert.names import Direction



def check_bounds(log_cdf_bound: float, what: str) -> None:
    """Refuse (ValueError) a conditioning bound with log Φ(b) < LOG_TINY: c = Φ(b) would leave
    the range where c·Y and ``ndtri`` keep their relative precision (see the module docstring)."""
    if not log_cdf_bound >= LOG_TINY:
        raise ValueError(f"backend='jax' needs log Phi(b) >= {LOG_TINY} for {what}, got log Phi(b)="
                         f"{log_cdf_bound!r}; use backend='numpy'")


def order_values(keys, ranks: tuple[int, ...], d: int, n: int, log_cdf=None):
    """(R, n) array, row j: the k_j-th largest of d i.i.d. N(0, 1) draws conditioned on <= b.

    ``keys`` = (k_gap, k_rest, k_wide); ``log_cdf`` is log Φ(b) (None: no conditioning; a
    scalar or one value per sample). S_{k_j} = Σ_{i<=j} G_i, G_i ~ Gamma(k_i - k_{i-1}),
    S_{d+1} = S_{k_R} + Gamma(d + 1 - k_R); survival p = S_{k_j}/S_{d+1} and
    Y = (S_{d+1} - S_{k_j})/S_{d+1} are ratios of positive sums (no 1 - x near 1), and
    Φ^{-1} is only evaluated below 1/2.
    """
    import jax
    import jax.numpy as jnp
    from jax.scipy.special import ndtri

    r = len(ranks)
    if r == 0:
        return jnp.zeros((0, n), jnp.float64)
    k_gap, k_rest, k_wide = keys
    gap_values = np.diff(np.asarray(ranks, dtype=np.float64), prepend=0.0)
    wide = np.flatnonzero(gap_values > 1)  # rows that need a Gamma(gap); unit gaps are exponentials
    g = jax.random.exponential(k_gap, (r, n), dtype=jnp.float64)  # Gamma(1)
    if wide.size:
        shapes = jnp.broadcast_to(jnp.asarray(gap_values[wide])[:, None], (wide.size, n))
        g = g.at[wide].set(jax.random.gamma(k_wide, shapes, dtype=jnp.float64))
    rest = jax.random.gamma(k_rest, float(d + 1 - ranks[-1]), (n,), dtype=jnp.float64)
    head = jnp.cumsum(g, axis=0)  # S_{k_j}
    suffix = jnp.flip(jnp.cumsum(jnp.flip(g, 0), axis=0), 0)  # Σ_{i>=j} G_i
    # S_{d+1} - S_{k_j} = rest + Σ_{i>j} G_i: suffix sums shifted by one, no subtraction
    tail = rest[None, :] + jnp.concatenate([suffix[1:], jnp.zeros((1, n), jnp.float64)], axis=0)
    total = head[-1] + rest
    p, y = head / total, tail / total
    if log_cdf is not None:
        lc = jnp.asarray(log_cdf, jnp.float64)
        c = jnp.exp(lc)
        p, y = -jnp.expm1(lc) + c * p, c * y  # 1 - Y' = (1 - c) + c p, Y' = c Y
    low = jnp.minimum(p, y)
    return jnp.where(p > y, ndtri(low), -ndtri(low))


def order_stats_kernel(method: str, direction: str, width: int, n: int, consts: tuple):
    """Order statistics (Algorithm 6 as exponential spacings, SPEC §5; as orderstats.py, no conditioning).

    REMOVE (d = T - 1): L <= logsumexp(x_1/σ², v_j/σ + log w_j) - offset, w_j = k_{j+1} - k_j.
    ADD (d = T, rank T included): ℓ = offset - logsumexp(v_j/σ + log(k_j - k_{j-1})) >= the true ℓ.
    """
    import jax
    import jax.numpy as jnp
    from jax.scipy.special import logsumexp

    inv_sigma, inv_var, offset, d, ranks, log_w = consts
    log_w = jnp.asarray(log_w)[:, None]

    def order_stats(key):
        k_gap, k_rest, k_one, k_wide = jax.random.split(key, 4)
        terms = order_values((k_gap, k_rest, k_wide), ranks, d, n) * inv_sigma + log_w
        if direction == Direction.REMOVE.value:
            a1 = jax.random.normal(k_one, (1, n), dtype=jnp.float64) * inv_sigma + inv_var
            return logsumexp(jnp.concatenate([a1, terms], axis=0), axis=0) - offset
        return offset - logsumexp(terms, axis=0)
    return order_stats


def importance_order_stats_kernel(method: str, direction: str, width: int, n: int, consts: tuple):
    """Importance + order statistics (Appendix B.3, SPEC §6; as BallsAndBinsSampler._combined_*).

    REMOVE: M = the max conditioned on >= C (survival inverse, as the importance kernel), at
    coordinate 1 with probability 1/T. At 1: x_1/σ² = M/σ + 1/σ², and ranks of the other
    d = T - 1 coordinates conditioned on <= M bound their sum from above. At 2: x_1/σ² =
    y_1/σ + 1/σ² with y_1 ~ N(0, 1) conditioned on <= M, the term M/σ, and ranks of the
    other d = T - 2 coordinates conditioned on <= M. A fixed-shape kernel computes both
    branches for every sample (independent keys) and keeps the one ``first`` selects: each
    sample's loss has exactly the numpy sampler's law.
    ADD: ranks (with T) of the T coordinates conditioned on <= C_add, lower weights, as order_stats ADD.
    """
    import jax
    import jax.numpy as jnp
    from jax.scipy.special import logsumexp

    inv_sigma, inv_var, offset, steps = consts[:4]
    if direction == Direction.ADD.value:
        log_cdf_b, ranks, log_w = consts[4:]
        log_w = jnp.asarray(log_w)[:, None]

        def combined_add(key):
            keys = jax.random.split(key, 3)
            terms = order_values(tuple(keys), ranks, steps, n, log_cdf_b) * inv_sigma + log_w
            return offset - logsumexp(terms, axis=0)
        return combined_add

    b_remove, log_s, ranks1, log_w1, ranks2, log_w2 = consts[4:]
    s = math.exp(log_s)
    log_w1, log_w2 = jnp.asarray(log_w1)[:, None], jnp.asarray(log_w2)[:, None]

    def open_uniform(key, shape):
        return 1.0 - jax.random.uniform(key, shape, dtype=jnp.float64)  # (0, 1]: finite logs

    def combined_remove(key):
        k_max, k_pos, k_y1, *k_os = jax.random.split(key, 9)
        log_cdf_m = jnp.log1p(-open_uniform(k_max, (n,)) * s) / steps
        m = jnp.maximum(ndtri_exp(jnp.maximum(log_cdf_m, -1e300)), b_remove)
        lc = log_ndtr(m)
        first = jax.random.uniform(k_pos, (n,), dtype=jnp.float64) < 1.0 / steps
        # max at coordinate 1: d = T - 1 others below M
        terms1 = order_values(tuple(k_os[:3]), ranks1, steps - 1, n, lc) * inv_sigma + log_w1
        a_max = m * inv_sigma + inv_var
        at_one = logsumexp(jnp.concatenate([a_max[None, :], terms1], axis=0), axis=0)
        # max at coordinate 2: x_1 = 1 + y_1 with y_1 <= M, then d = T - 2 others below M
        y1 = jnp.minimum(ndtri_exp(jnp.log(open_uniform(k_y1, (n,))) + lc), m)
        terms2 = order_values(tuple(k_os[3:6]), ranks2, steps - 2, n, lc) * inv_sigma + log_w2
        singles = jnp.stack([y1 * inv_sigma + inv_var, m * inv_sigma])
        at_two = logsumexp(jnp.concatenate([singles, terms2], axis=0), axis=0)
        return jnp.where(first, at_one, at_two) - offset
    return combined_remove
