"""Cube-set lower bounds for one epoch of Balls-and-Bins and shuffling (SPEC §7, Eqs. 6–7).

For a test set A, D_{e^ε}(P||Q) >= P(A) - e^ε Q(A). With the statistic
M(w) = max_t w_t, the cube sets E_C = {M >= C} and their complements give, for a
pair whose special coordinate has mean μ_P under P and μ_Q under Q (all other
coordinates N(0, σ²)) and F_μ(C) = Φ((C - μ)/σ) Φ(C/σ)^{T-1} = Pr[M < C]:

    REMOVE:  δ(ε) >= max_C [1 - F_{μP}(C)] - e^ε [1 - F_{μQ}(C)]
    ADD:     δ(ε) >= max_C F_{μQ}(C) - e^ε F_{μP}(C)

Balls-and-Bins: (μP, μQ) = (1, 0) (Eq. 6). Shuffle: (2, 1) (Eq. 7). Any C gives a
valid bound, so the maximisation is a dense grid followed by a bounded Brent refinement
around the best grid point, keeping whichever is larger: never a fixed 0.01 grid.

Outward value (issue 12). The bound is valid for any C, so the reported value is the objective
at the best C found, re-evaluated with an outward margin (:func:`cube_outward`): with u = 2^-53
and log_ndtr accurate to K = 64 ulp, log Pr[M < C] has absolute error <= ζ_F = K·u·(|log Φ((C-μ)/σ)|
+ (T-1)|log Φ(C/σ)|) + 2u·|log Pr[M < C]|; the complement log(1 - e^x) amplifies it by at most
e^x/(1 - e^x); the value e^{log a}(1 - e^{ε + log b - log a}) is then lowered by
e^{-ζ_a}, by ζ_a + ζ_b + 2u(|ε| + |log a| + |log b|) in the exponent, and by 16u for exp/expm1.
A candidate that is not positive after the margin (float noise) reports 0.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import optimize, special

from epscert.names import Direction

#: Grid points for the first pass of the maximisation over C.
GRID_POINTS = 2001
#: Brent tolerance on C.
BRENT_XTOL = 1e-10
#: log-probabilities below this are treated as underflow in the cube objective.
LOG_TRUSTED = -700.0

PAIR_MEANS = {"balls_and_bins": (1.0, 0.0), "shuffle": (2.0, 1.0)}


def log1mexp(x: np.ndarray) -> np.ndarray:
    """log(1 - e^x) for x <= 0, accurate everywhere."""
    x = np.minimum(x, 0.0)
    with np.errstate(divide="ignore"):
        return np.where(x > -math.log(2.0), np.log(-np.expm1(x)), np.log1p(-np.exp(x)))


def log_cdf_max(c: np.ndarray, mean: float, sigma: float, steps: int) -> np.ndarray:
    """log Pr[M < C] with one coordinate N(mean, σ²) and T - 1 coordinates N(0, σ²)."""
    return special.log_ndtr((c - mean) / sigma) + (steps - 1) * special.log_ndtr(c / sigma)


def cube_objective(c: np.ndarray, eps: float, sigma: float, steps: int,
                   means: tuple[float, float], direction: Direction) -> np.ndarray:
    """P(A) - e^ε Q(A) for the cube set at threshold(s) c, in log space (may be negative)."""
    c = np.asarray(c, dtype=np.float64)
    lp = log_cdf_max(c, means[0], sigma, steps)
    lq = log_cdf_max(c, means[1], sigma, steps)
    if direction is Direction.REMOVE:
        log_a, log_b = log1mexp(lp), log1mexp(lq)  # P(M >= C), Q(M >= C)
    else:
        log_a, log_b = lq, lp  # Q(M < C), P(M < C)
    with np.errstate(invalid="ignore", over="ignore"):
        diff = eps + log_b - log_a
        out = np.exp(log_a) * -np.expm1(np.minimum(diff, 0.0))
        out = np.where(diff >= 0.0, -np.exp(np.minimum(log_b + eps, 700.0)) + np.exp(log_a), out)
    # below e^-700 a probability is underflow, not a value: an underflowed Q(A) = 0 would let
    # P(A) alone pose as a lower bound (the far tail of a tiny δ)
    trusted = (log_a > LOG_TRUSTED) & (log_b > LOG_TRUSTED)
    return np.where(np.isfinite(out) & trusted, out, -np.inf)


#: Assumed accuracy of scipy.special.log_ndtr (ulp, relative) and the final exp/expm1 allowance.
LOG_NDTR_ULP = 64.0
UNIT_ROUNDOFF = 2.0**-53


def log_cdf_error(c, mean: float, sigma: float, steps: int, value):
    """Absolute error bound of :func:`log_cdf_max` at c (module docstring); arrays allowed."""
    c = np.asarray(c, dtype=np.float64)
    terms = np.abs(special.log_ndtr((c - mean) / sigma)) + (steps - 1) * np.abs(special.log_ndtr(c / sigma))
    return LOG_NDTR_ULP * UNIT_ROUNDOFF * terms + 2.0 * UNIT_ROUNDOFF * np.abs(value)


def cube_outward(c: float, eps: float, sigma: float, steps: int,
                 means: tuple[float, float], direction: Direction) -> float:
    """The cube bound at threshold c, lowered by its floating-point margin; 0 if not positive."""
    lp = float(log_cdf_max(np.asarray(c), means[0], sigma, steps))
    lq = float(log_cdf_max(np.asarray(c), means[1], sigma, steps))
    ep = float(log_cdf_error(c, means[0], sigma, steps, lp))
    eq = float(log_cdf_error(c, means[1], sigma, steps, lq))
    if direction is Direction.REMOVE:
        def comp(x, err):  # log(1 - e^x) and its error
            hi = min(x + err, 0.0)
            if hi >= 0.0:
                return -math.inf, math.inf
            val = float(log1mexp(np.asarray(x)))
            amp = math.exp(hi) / -math.expm1(hi)
            return val, amp * err + 2.0 * UNIT_ROUNDOFF * abs(val)
        (log_a, za), (log_b, zb) = comp(lp, ep), comp(lq, eq)
    else:
        (log_a, za), (log_b, zb) = (lq, eq), (lp, ep)
    if not (math.isfinite(log_a) and math.isfinite(za)) or log_a < LOG_TRUSTED or log_b < LOG_TRUSTED:
        return 0.0
    z = eps + log_b - log_a + za + zb + 2.0 * UNIT_ROUNDOFF * (abs(eps) + abs(log_a) + abs(log_b))
    if z >= 0.0:
        return 0.0
    return max(0.0, math.exp(log_a - za) * -math.expm1(z) * (1.0 - 16.0 * UNIT_ROUNDOFF))


def c_search_range(eps: float, sigma: float, steps: int) -> tuple[float, float]:
    """Interval of cube thresholds C searched for the maximum (covers the top order statistics
    and the ε-dependent importance threshold of SPEC §4 with a wide margin)."""
    spread = sigma * (math.sqrt(2.0 * math.log(steps + 1.0)) + 12.0)
    return -spread - 3.0, spread + 3.0 + sigma**2 * (abs(eps) + math.log(steps + 1.0))


def cube_lower_bound(sigma: float, steps: int, epsilons, pair: str, direction: Direction) -> np.ndarray:
    """max over C of the cube bound, per ε (BOTH: the max of the two directions)."""
    if direction is Direction.BOTH:
        return np.maximum(cube_lower_bound(sigma, steps, epsilons, pair, Direction.REMOVE),
                          cube_lower_bound(sigma, steps, epsilons, pair, Direction.ADD))
    means = PAIR_MEANS[pair]
    out = []
    for eps in np.atleast_1d(np.asarray(epsilons, dtype=np.float64)):
        lo, hi = c_search_range(float(eps), sigma, steps)
        grid = np.linspace(lo, hi, GRID_POINTS)
        vals = cube_objective(grid, float(eps), sigma, steps, means, direction)
        k = int(np.argmax(vals))
        best, best_c = float(vals[k]), float(grid[k])
        a, b = grid[max(k - 1, 0)], grid[min(k + 1, grid.size - 1)]
        if b > a:
            res = optimize.minimize_scalar(
                lambda c: -max(float(cube_objective(np.asarray(c), float(eps), sigma, steps, means, direction)),
                               -1.0),  # finite for Brent; the maximum is >= 0 whenever it matters
                bounds=(a, b), method="bounded", options={"xatol": BRENT_XTOL},
            )
            if -float(res.fun) > best:
                best, best_c = -float(res.fun), float(res.x)
        out.append(cube_outward(best_c, float(eps), sigma, steps, means, direction) if best > 0.0 else 0.0)
    return np.asarray(out)
