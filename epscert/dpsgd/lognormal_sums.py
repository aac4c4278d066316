"""Certified tail probabilities for sums of the lognormal factors W = exp(z/σ − 1/(2σ²)).

z ~ N(0, 1), so E W = 1 and W > x  <=>  z > u(x) = σ(log x + 1/(2σ²)). X_1..X_n are i.i.d.
copies of W. Used by :mod:`epscert.dpsgd.conditional_ucb` for the part of δ that the
Monte Carlo values do not see.

Upper tail of a trimmed sum. Let S' = Σ_i X_i − max_i X_i and X_(2) the second largest. For any
level c0 > 0, on G = {at most one X_i > c0} every X_i but the largest is <= c0, so
S' <= Σ_i min(X_i, c0); and Pr[G^c] <= C(n, 2) p0², p0 = Pr[W > c0] = Φ̄(u(c0))
(union over pairs, independence). So for a statistic V <= ρ S' (ρ >= 1),

    Pr[V > s] <= C(n, 2) p0² + Pr[Σ_i min(X_i, c0) > s/ρ]
              <= C(n, 2) p0² + exp(−λ t + n log M(λ)),   t = s/ρ, any λ > 0,      (1)

with M(λ) = E exp(λ min(W, c0)) (Chernoff). Every (c0, λ) gives a valid bound; the smallest over
a fixed table is taken (a minimum of valid bounds, no confidence level involved).

M(λ) from above (a Riemann sum on the z axis): exp(λ min(W(z), c0)) is non-decreasing in z, so on
each interval (z_{j−1}, z_j] it is at most its value at z_j, and on (u(c0), ∞) it equals e^{λ c0}:

    log M(λ) <= logsumexp_j ( λ W(z_j) + log Pr[z ∈ (z_{j−1}, z_j]] ),   z_N = u(c0),  z_{−1} = −∞.

Excess of a trimmed sum. With the same (c0, λ): (V − t)_+ <= ρ (Σ_i min(X_i, c0) − t')_+ on G,
t' = t/ρ, and (V − t)_+ <= ρ Σ_i X_i on G^c; v_+ <= e^{λ v}/(e λ) (the maximum of
v e^{−λ v} is 1/(e λ)); and E[X_1 1{G^c}] <= A(c0) (n − 1) p0 + C(n − 1, 2) p0² (X_1 above c0 and one
other, or two others, above c0; E W = 1), A(c0) = E[W 1{W > c0}] = Φ̄(u(c0) − 1/σ). So

    E[(V − t)_+] <= ρ M(λ)^n e^{−λ t'} / (e λ) + ρ n (A(c0)(n − 1) p0 + C(n − 1, 2) p0²).     (2)

Lower tail of a sum (ADD): with z truncated to (−∞, b] (b = ∞ allowed) and λ > 0,
Pr_b[Σ_i X_i < r] <= exp(λ r) (E_b e^{−λ W})^n, and e^{−λ W(z)} is non-increasing, so its value at
the left end z_{j−1} bounds it on (z_{j−1}, z_j] (1 on the first interval, from −∞):

    log E_b e^{−λ W} <= logsumexp_j ( −λ W(z_{j−1}) + log Pr[z ∈ (z_{j−1}, z_j]] ) − log Φ(b).

Floating point: interval probabilities are formed in log space from the tail on their own side
of 0 (0 is a grid point), so each has a relative error of a few hundred ulps at most; logsumexp
of terms <= 0 in log M has an absolute error of a few ulps. ``LOG_SLACK`` (added to each
log M, log E e^{−λW} and, times n, to the exponent) covers both with a margin of >10^4; the pair
term is inflated by ``PAIR_SLACK``. Both can only raise the bounds.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from scipy import special

#: Absolute allowance (per log M) for rounding in the interval probabilities and logsumexp.
LOG_SLACK = 1e-11
#: Relative inflation of the pair term C(n, 2) p0².
PAIR_SLACK = 1e-9
#: The smallest positive float: a probability bound that underflows reports this, never 0.
TINY = float(np.finfo(np.float64).tiny)
#: z grid: from Z_LOW (Φ(−40) ~ 1e-350: the first interval's mass is below any term) in STEP_Z.
Z_LOW = -12.0
STEP_Z = 0.002
#: The levels c0 of (1): u(c0) on this z grid (p0 from 0.16 down to ~1e-23).
C0_Z = np.linspace(1.0, 10.0, 37)
#: λ = θ / c0 with θ on this grid (θ = λ c0 is the exponent at the cap).
THETA = np.geomspace(1e-3, 300.0, 72)
#: λ grid of the lower tail, in units of 1/E[W] = 1.
LAMBDA_LOW = np.geomspace(1e-2, 1e7, 91)


def w_of_z(z: np.ndarray, sigma: float) -> np.ndarray:
    """W(z) = exp(z/σ − 1/(2σ²))."""
    return np.exp(z / sigma - 0.5 / sigma**2)


def tail_mean(x, sigma: float):
    """A(x) = E[W 1{W > x}] = Φ̄(u(x) − 1/σ) = Φ̄(σ log x − 1/(2σ)) (x > 0)."""
    return special.ndtr(-(sigma * np.log(x) - 0.5 / sigma))


def u_of_w(x, sigma: float):
    """u(x) = σ(log x + 1/(2σ²)): W > x <=> z > u(x)."""
    return sigma * (np.log(x) + 0.5 / sigma**2)


def _grid(top: float) -> np.ndarray:
    """Grid points Z_LOW < ... < top, with 0 among them when 0 < top."""
    parts = [np.arange(Z_LOW, min(0.0, top), STEP_Z)]
    if top > 0.0:
        parts.append(np.arange(0.0, top, STEP_Z))
    z = np.concatenate(parts + [np.array([top])])
    return np.unique(z)


def _log_interval_probs(z: np.ndarray) -> np.ndarray:
    """log Pr[z ∈ (z_{j−1}, z_j]] for j = 0..len-1 (z_{−1} = −∞), each from its own tail."""
    lo = np.concatenate([[-np.inf], z[:-1]])
    hi = z
    with np.errstate(divide="ignore"):
        below = special.log_ndtr(hi) + np.log(-np.expm1(special.log_ndtr(lo) - special.log_ndtr(hi)))
        above = special.log_ndtr(-lo) + np.log(-np.expm1(special.log_ndtr(-hi) - special.log_ndtr(-lo)))
    return np.where(hi <= 0.0, below, above)


@lru_cache(maxsize=32)
def capped_mgf_table(sigma: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(c0 values, log p0, λ table (|c0|, |θ|), upper bounds on log M(λ) (|c0|, |θ|)) for σ."""
    c0 = w_of_z(C0_Z, sigma)
    log_p0 = special.log_ndtr(-C0_Z)
    lam = THETA[None, :] / c0[:, None]
    log_m = np.empty_like(lam)
    for i, top in enumerate(C0_Z.tolist()):
        z = _grid(top)
        log_p = np.append(_log_interval_probs(z), log_p0[i])  # and the tail (u(c0), ∞)
        w = np.append(np.minimum(w_of_z(z, sigma), c0[i]), c0[i])
        log_m[i] = special.logsumexp(lam[i][:, None] * w[None, :] + log_p[None, :], axis=1)
    return c0, log_p0, lam, log_m + LOG_SLACK


def capped_sum_tails(sigma: float, n: int, s: np.ndarray, rho: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """(c0 values, (|s|, |c0|) bounds on Pr[ρ Σ_i min(X_i, c0) > s]) (the Chernoff part of (1))."""
    s = np.asarray(s, dtype=np.float64)
    if not rho >= 1.0:
        raise ValueError(f"rho must be >= 1, got rho={rho}")
    c0, _, lam, log_m = capped_mgf_table(float(sigma))
    t = np.broadcast_to(s[:, None] / rho, (s.size, c0.size))  # (|s|, |c0|)
    expo = -lam[None, :, :] * t[:, :, None] + n * log_m[None, :, :] + n * LOG_SLACK  # (|s|, |c0|, |θ|)
    chern = np.exp(np.minimum(expo.min(axis=2), 0.0))
    return c0, np.where(t > 0.0, chern, 1.0)


def pair_terms(sigma: float, n: int) -> np.ndarray:
    """C(n, 2) p0² per level c0 of the table (inflated by PAIR_SLACK)."""
    _, log_p0, _, _ = capped_mgf_table(float(sigma))
    if n <= 1:
        return np.zeros_like(log_p0)
    log_pairs = math.log(n) + math.log(n - 1) - math.log(2.0) + 2.0 * log_p0
    return np.exp(log_pairs) * (1.0 + PAIR_SLACK)


def trimmed_sum_tail(sigma: float, n: int, s: np.ndarray, rho: float = 1.0,
                     capped: np.ndarray | None = None) -> np.ndarray:
    """Upper bounds on Pr[V > s] (per entry of ``s``) for V <= ρ S' over n factors, by (1);
    ``capped`` is :func:`capped_sum_tails`' matrix for the same arguments, when already at hand.

    n <= 1: S' = 0, so the bound is 0 for s >= 0 (1 below).
    """
    s = np.asarray(s, dtype=np.float64)
    if n <= 1:
        return np.where(s >= 0.0, 0.0, 1.0)
    chern = capped_sum_tails(sigma, n, s, rho)[1] if capped is None else capped
    return np.minimum((pair_terms(sigma, n)[None, :] + chern).min(axis=1), 1.0)


def trimmed_sum_excess(sigma: float, n: int, t: float, rho: float = 1.0) -> float:
    """Upper bound on E[(V − t)_+] for V <= ρ S' over n factors, by (2) (t > 0)."""
    if not rho >= 1.0 or not t > 0.0:
        raise ValueError(f"need rho >= 1 and t > 0, got rho={rho}, t={t}")
    if n <= 1:
        return 0.0
    c0, log_p0, lam, log_m = capped_mgf_table(float(sigma))
    t_cap = np.full(c0.shape, t / rho)
    expo = -lam * t_cap[:, None] + n * log_m + n * LOG_SLACK - 1.0 - np.log(lam)  # (|c0|, |θ|)
    main = rho * np.exp(np.minimum(expo.min(axis=1), 700.0))
    main = np.where(t_cap > 0.0, main, np.inf)
    p0 = np.exp(log_p0)
    a_c0 = tail_mean(c0, sigma)
    rest = rho * n * (a_c0 * (n - 1) * p0 + 0.5 * (n - 1) * (n - 2) * p0 * p0) * (1.0 + PAIR_SLACK)
    return float(np.min(main + rest))


@lru_cache(maxsize=32)
def truncated_laplace_table(sigma: float, bound: float) -> np.ndarray:
    """Upper bounds on log E[e^{−λW} | z <= b] for λ in LAMBDA_LOW (b = ``bound``, may be inf)."""
    top = min(bound, -Z_LOW)
    z = _grid(top)
    log_p = _log_interval_probs(z)
    left = np.concatenate([[0.0], w_of_z(z[:-1], sigma)])  # W at each interval's left end
    if bound > top:  # the tail (top, b]: e^{−λW} <= e^{−λ W(top)}
        log_top, log_b = float(special.log_ndtr(-top)), float(special.log_ndtr(-bound))
        log_p = np.append(log_p, log_top + math.log(-math.expm1(log_b - log_top)))
        left = np.append(left, w_of_z(np.array([top]), sigma))
    log_e = special.logsumexp(-LAMBDA_LOW[:, None] * left[None, :] + log_p[None, :], axis=1)
    return log_e - float(special.log_ndtr(bound)) + LOG_SLACK


def sum_lower_tail(sigma: float, n: int, r: float, bound: float = math.inf) -> float:
    """Upper bound on Pr[Σ_{i<=n} X_i < r] with z truncated to (−∞, ``bound``] (module docstring)."""
    if n <= 0:
        return 1.0 if r > 0.0 else 0.0
    if r <= 0.0:
        return 0.0
    log_e = truncated_laplace_table(float(sigma), float(bound))
    expo = LAMBDA_LOW * r + n * log_e + n * LOG_SLACK
    return float(min(1.0, max(math.exp(min(float(expo.min()), 0.0)), TINY)))
