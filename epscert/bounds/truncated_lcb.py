"""A lower confidence bound for the mean of non-negative values with a loose range.

Setting: Y_1..Y_m i.i.d., 0 <= Y <= B, where the proven range B may exceed the mean by many
orders of magnitude (the conditional estimator: B = T δ_1(ε) against δ ~ 1e-8). A KL–Chernoff
bound at scale B then pays ~ sqrt(p B / m). Truncation removes B from the price:

    for every τ > 0,  E[Y] >= E[min(Y, τ)],  and min(Y, τ) lies in [0, τ],

so the KL–Chernoff lower bound (:func:`epscert.bounds.kl.kl_lcb`) of the truncated mean at scale τ
is a lower bound on E[Y] with failure probability β'. The levels τ_k = B·4^{-k}, k = 0..LEVELS-1,
are fixed before sampling (they depend on B only); each runs at β' = β/LEVELS and the bound
reported is the maximum over k: it fails only if one of the LEVELS bounds fails, probability <= β
(union bound). The level just above the values' bulk gives ~ sqrt(p τ log(LEVELS/β)/m).

Floating point: the sums are of computed values, within a relative ``rel_error`` of the exact
ones; each truncated mean is deflated by that factor before the bound (the bound is increasing
in the mean), so computed-value error can only lower the result.
"""

from __future__ import annotations

import numpy as np

from epscert.bounds.kl import kl_lcbs

#: Number of truncation levels τ_k = B·4^{-k} (down to B·2^{-94} ≈ 5e-29 B).
LEVELS = 48


def truncation_levels(value_range: float) -> np.ndarray:
    """τ_k = B·4^{-k}, k = 0..LEVELS-1 (fixed before sampling: a function of B only)."""
    if not value_range > 0.0:
        raise ValueError(f"value_range must be > 0, got value_range={value_range!r}")
    return value_range * np.exp2(-2.0 * np.arange(LEVELS))


def truncated_lcb(truncated_means: np.ndarray, value_range: float, count: int, error_prob: float,
                  rel_error: float = 0.0) -> float:
    """max_k τ_k · kl_lcb(mean_k / τ_k, m, β/LEVELS), mean_k the mean of min(Y, τ_k); Pr[fail] <= β."""
    means = np.asarray(truncated_means, dtype=np.float64)
    if means.shape != (LEVELS,):
        raise ValueError(f"truncated_means must have {LEVELS} entries, got shape={means.shape}")
    return float(truncated_lcbs(means[None, :], [value_range], count, error_prob, rel_error)[0])


def truncated_lcbs(truncated_means: np.ndarray, value_ranges, count: int, error_prob: float,
                   rel_error: float = 0.0) -> np.ndarray:
    """:func:`truncated_lcb` of each row of ``truncated_means`` (K, LEVELS) with its own range, each at
    ``error_prob``: the same bounds, from one vectorized KL bisection (:func:`epscert.bounds.kl.kl_lcbs`)."""
    means = np.asarray(truncated_means, dtype=np.float64)
    ranges = np.asarray(value_ranges, dtype=np.float64)
    if means.ndim != 2 or means.shape[1] != LEVELS or ranges.shape != (means.shape[0],):
        raise ValueError(f"truncated_means must be (K, {LEVELS}) with K value_ranges, got shape={means.shape} "
                         f"and {ranges.size} value_ranges")
    if not 0.0 < error_prob < 1.0:
        raise ValueError(f"error_prob must be in (0, 1), got error_prob={error_prob}")
    if ranges.size and not np.all(ranges > 0.0):
        raise ValueError(f"value_range must be > 0, got value_range={float(ranges[~(ranges > 0.0)][0])!r}")
    taus = ranges[:, None] * np.exp2(-2.0 * np.arange(LEVELS))  # truncation_levels of each range
    lcbs = kl_lcbs(means * (1.0 - rel_error), count, error_prob / LEVELS, scale=taus)
    return np.maximum(lcbs.max(axis=1, initial=0.0), 0.0)
