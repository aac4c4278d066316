"""Gaussian building blocks shared by the samplers: tail-accurate draws and sums.

All conditioned draws are exact in distribution:
- ``normal_below(rng, b, shape)``: N(0, 1) conditioned on z <= b, by rejection while the
  acceptance probability Φ(b) >= 1/2 (at most ``REJECTION_ROUNDS`` rounds), then by
  the inverse CDF z = Φ^{-1}(U Φ(b)) evaluated as ``ndtri_exp(log U + log Φ(b))``.
  An entry drawn by rejection with k tries, falling back to the inverse, still has the
  conditional law: Pr[value in A] = (1-(1-p)^k) P_b(A) + (1-p)^k P_b(A).
- ``max_at_least(rng, c, T, n)``: the maximum of T i.i.d. N(0, 1) conditioned on >= c
  (Algorithm 10 of Balls-and-Bins), through the survival function of the maximum.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

#: Rejection rounds before the remaining entries are drawn by the inverse CDF.
REJECTION_ROUNDS = 3
_LOG_HALF = math.log(0.5)


def log_survival_max(c: float, steps: int) -> float:
    """log Pr[max of `steps` i.i.d. N(0,1) >= c] = log(1 - Φ(c)^T), tail-accurate."""
    log_cdf_max = steps * float(special.log_ndtr(c))
    if log_cdf_max > -1e-10:
        # far tail: T log Φ(c) rounds towards 0. With p = Φ̄(c):
        # s = 1 - (1-p)^T <= -T log1p(-p) <= T p / (1 - p), a relative over-estimate < 1e-10
        # (a larger scale only loosens the UCB: still valid).
        log_sf = float(special.log_ndtr(-c))
        return math.log(steps) + log_sf - math.log1p(-math.exp(log_sf))
    if log_cdf_max > -0.6931471805599453:  # 1 - e^x with x near 0
        return math.log(-math.expm1(log_cdf_max))
    return math.log1p(-math.exp(log_cdf_max))


def uniform_open(rng: np.random.Generator, shape) -> np.ndarray:
    """Uniforms on (0, 1]: never 0, so their logs are finite."""
    return 1.0 - rng.random(shape)


def normal_below(rng: np.random.Generator, bound: np.ndarray | float, shape: tuple[int, int]) -> np.ndarray:
    """N(0,1) draws of shape (n, k) conditioned on z <= bound (scalar or one bound per row)."""
    n, k = shape
    b = np.broadcast_to(np.asarray(bound, dtype=np.float64), (n,))
    z = rng.standard_normal((n, k))
    if k == 0 or n == 0:
        return z
    log_accept = special.log_ndtr(b)
    easy = log_accept >= _LOG_HALF
    if not np.all(easy):  # rows with acceptance < 1/2: inverse CDF for the whole row
        rows = np.flatnonzero(~easy)
        z[rows] = _inverse_below(rng, log_accept[rows, None], (rows.size, k))
    # Flat indices of the rejected entries, in row-major order (np.flatnonzero is ~10x faster
    # than a 2-D np.nonzero); fresh draws are assigned in that order, round after round.
    scalar = np.ndim(bound) == 0  # one bound for all rows: a cheaper compare
    bad = np.flatnonzero(z > b[0] if scalar else z > b[:, None])
    flat = z.reshape(-1)
    bad_b = b[bad // k]
    for _ in range(REJECTION_ROUNDS):
        if bad.size == 0:
            return z
        fresh = rng.standard_normal(bad.size)
        flat[bad] = fresh
        keep = fresh > bad_b
        bad, bad_b = bad[keep], bad_b[keep]
    if bad.size:
        flat[bad] = _inverse_below(rng, log_accept[bad // k], (bad.size,))
    return z


def _inverse_below(rng: np.random.Generator, log_cdf_bound: np.ndarray, shape) -> np.ndarray:
    """Φ^{-1}(U Φ(b)) in log space: exact conditional draws for any bound b."""
    return special.ndtri_exp(np.log(uniform_open(rng, shape)) + log_cdf_bound)


def max_at_least(rng: np.random.Generator, c: float, steps: int, log_s: float, n: int) -> np.ndarray:
    """Max M of `steps` i.i.d. N(0,1) conditioned on M >= c; ``log_s`` = log Pr[M >= c].

    Survival of the max: S(v) = 1 - Φ(v)^T; conditioned, S(M) = U S(c), U ~ U(0, 1].
    So log Φ(M) = log1p(-U s) / T and M = ndtri_exp(log Φ(M)).
    """
    u = uniform_open(rng, n)
    log_cdf = np.log1p(-u * math.exp(log_s)) / steps
    m = special.ndtri_exp(np.maximum(log_cdf, -1e300))
    return np.maximum(m, c)  # guards the last ulp: the law puts no mass below c


def logsumexp_rows(a: np.ndarray, top: np.ndarray | None = None) -> np.ndarray:
    """log Σ_j exp(a[i, j]) for each row, overwriting ``a`` (no scipy overhead).

    ``top`` may pass the row maxima when the caller knows them (saves one pass); any
    finite shift gives the same value, the maximum keeps every exp in [0, 1].
    """
    if top is None:
        top = a.max(axis=1)
    a -= top[:, None]
    np.exp(a, out=a)
    return np.log(a.sum(axis=1)) + top
