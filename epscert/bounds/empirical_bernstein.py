"""Empirical Bernstein upper confidence bound for the mean of i.i.d. values in [0, s].

Maurer & Pontil, "Empirical Bernstein bounds and sample variance penalization" (COLT 2009),
Theorem 4: for m >= 2 i.i.d. values X_i in [0, 1] with sample variance
V_m = (1/(m(m-1))) Σ_{i<j} (X_i - X_j)² (the unbiased one) and β in (0, 1),

    Pr[ E X > X̄ + sqrt(2 V_m log(2/β) / m) + 7 log(2/β) / (3 (m - 1)) ] <= β.

Scaling by s gives, for values in [0, s] with sample variance V (in the values' units),

    UCB = X̄ + sqrt(2 V log(2/β) / m) + 7 s log(2/β) / (3 (m - 1)).

The bound is increasing in X̄ and in V, so any upper bounds on them (a mean inflated for
rounding, a variance bounded from sums that dominate the true ones) keep it valid. Unlike the
KL–Chernoff bound (:mod:`epscert.bounds.kl`), its price for a loose range s is only the last term,
~ s/m, not ~ sqrt(s·mean/m): it is the bound for values whose spread is far below their range.
The result is inflated by ``EB_SAFETY`` (relative) so that evaluation error can only loosen it,
and capped at s (E X <= s always).
"""

from __future__ import annotations

import math

#: Relative inflation of the returned bound (covers the few roundings of the formula).
EB_SAFETY = 1e-12


def eb_ucb(mean: float, variance: float, count: int, error_prob: float, scale: float = 1.0) -> float:
    """Maurer–Pontil UCB for the mean of ``count`` i.i.d. values in [0, ``scale``].

    ``mean`` is (an upper bound on) their empirical mean and ``variance`` (an upper bound on) their
    unbiased sample variance. Returns u with Pr[true mean > u] <= ``error_prob``; ``scale`` when
    ``count`` < 2 (no variance estimate).
    """
    if count < 1:
        raise ValueError(f"count must be >= 1, got count={count}")
    if not 0.0 < error_prob < 1.0:
        raise ValueError(f"error_prob must be in (0, 1), got error_prob={error_prob}")
    if not scale > 0.0:
        return 0.0
    if count < 2:
        return scale
    log_term = math.log(2.0 / error_prob)
    spread = math.sqrt(2.0 * max(variance, 0.0) * log_term / count)
    bound = max(mean, 0.0) + spread + 7.0 * scale * log_term / (3.0 * (count - 1))
    return min(scale, bound * (1.0 + EB_SAFETY))
