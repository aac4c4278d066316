"""Certified upper confidence bounds for the conditional estimator (issue 13, item 2).

Notation of :mod:`epscert.dpsgd.conditional`: under Q, δ = s·E[Y] with the conditional value Y
of a sample; K = e^ε; R and M the sum and maximum of the T − 1 conditioning factors W_t;
A(x) = E[W 1{W > x}] = Φ̄(σ log x − 1/(2σ)); B(ε) the proven range of Y.

REMOVE. Y = E[(W + R − TK)_+ 1{W > M}] (W a fresh factor). Put S' = R − M (the T − 2 smaller
factors) and g = TK − S'. For g > 0 (the cap; ``tests/soundness/test_conditional_remove_cap.py``):

    Y <= Ycap(g) = max(A(g/2), 2 A(g)).                                                    (C)

(c = TK − R = g − M. If c >= 0, max(c, M) >= (c + M)/2 = g/2 and W − c <= W, so Y <= A(g/2).
If c < 0, M > g and on {W > M}, W − c = W + M − g < 2W, so Y <= 2 A(M) <= 2 A(g).) (C) uses only
R >= M >= 0, so it holds as well for the raised values of the order-statistics variant, with its
raised sum R̂ >= R in place of R and Ŝ' = R̂ − M.

Levels. For the truncation levels τ_k = B·4^{−k} of :mod:`epscert.bounds.truncated_lcb` (fixed
before sampling), g_k is the smallest g with Ycap(g) <= τ_k (closed form below) and
s*_k = TK − g_k. On {S' <= s*_k}, g >= g_k and Y <= τ_k, so Y = min(Y, τ_k) there and

    E[Y] <= E[min(Y, τ_k)] + E[Y 1{S' > s*_k}].                                            (L)

The second term is bounded without sampling (a Stieltjes sum on a grid s*_k <= s_0 < ... < s_m < TK,
over the pieces (s_i, s_{i+1}] where Y <= min(B, Ycap(TK − s_{i+1})), and (s_m, ∞) where Y <= B):

    E[Y 1{S' > s*_k}] <= Σ_i min(B, Ycap(TK − s_{i+1})) P̄(s_i) + far =: tail_k,

    far = min(B P̄(s_m), 2 P̄(s_m) + E[(S' − TK)_+]),

since also Y <= E[(W + M) 1{W > M}] + (S' − TK)_+ Pr[W > M] <= 2 A(M) + (S' − TK)_+ <= 2 + (S' − TK)_+
((a + b)_+ <= a + b_+ for a = W + M >= 0; A <= E W = 1), and E[(S' − TK)_+] is bounded by
:func:`epscert.dpsgd.lognormal_sums.trimmed_sum_excess`,

with P̄(s) >= Pr[S' > s] from :func:`epscert.dpsgd.lognormal_sums.trimmed_sum_tail` (for the
order-statistics variant, Ŝ' <= ρ S' with ρ of :func:`order_stats_domination`). Starting the grid at a point s_0 <= s*_k
only raises the sum. The first term of (L) is a mean of values in [0, τ_k]: at each level two
bounds, KL–Chernoff (:func:`epscert.bounds.kl.kl_ucb`) and empirical Bernstein
(:func:`epscert.bounds.empirical_bernstein.eb_ucb`), each at β/(2·LEVELS). Level 0 is τ_0 = B
(tail 0: the proven-range bound). The reported UCB is the minimum over the 2·LEVELS bounds, so
it fails only if one of them fails: probability <= β (union bound). The sample variance of
min(Y, τ) is bounded with Σ min(Y, τ)² <= Σ Y² (stored); both bounds increase in the mean and
the variance, so these upper bounds keep them valid.

Split on M. For a level m > 0 (m on the c0 table of :mod:`epscert.dpsgd.lognormal_sums`):
on {M < m} every conditioning factor is below m, so S' <= Σ_t min(W_t, m) (and Ŝ' <= ρ S'),
bounded by the Chernoff part P_m(s) of (1) with no pair term; on {M >= m},
Y <= 2 A(m) + (S' − TK)_+ Φ̄(u(m)) (the bound above, A and Φ̄∘u decreasing). So the tail is also

    Σ_i min(B, Ycap(TK − s_{i+1})) P_m(s_i) + B P_m(s_m)
      + min(tail_k, 2 A(m) min(P̄(s_0), Pr[M >= m]) + Φ̄(u(m)) E[(S' − TK)_+]),

with Pr[M >= m] = 1 − Φ(u(m))^{T−1}; tail_k is the smallest of these over m and the unsplit sum
(each is an upper bound on the same expectation).

ADD. Y' = Y_add / Φ(b) <= 1 and Y' = 0 unless R < T/K, so δ_add <= s·Pr_b[R < T/K]
(:func:`epscert.dpsgd.lognormal_sums.sum_lower_tail`, no sampling: holds surely). With KL
and empirical Bernstein on the values (β/2 each), the ADD UCB is the minimum of the three.

Floating point: computed values are within a relative ``rel_error`` of the exact ones (the
module docstring of :mod:`epscert.dpsgd.conditional`), so exact sums are at most the
computed ones over (1 − r) (squares over (1 − r)²) and at least (1 − r) times them; each bound uses
the side that raises it. Ycap is inflated by ``CAP_REL`` and g_k by ``CAP_REL`` (A is
decreasing: a larger g_k keeps Ycap(g_k) <= τ_k).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

from epscert.bounds.empirical_bernstein import eb_ucb
from epscert.bounds.kl import kl_ucb
from epscert.bounds.truncated_lcb import LEVELS, truncation_levels
from epscert.dpsgd.lognormal_sums import (
    capped_sum_tails, sum_lower_tail, tail_mean, trimmed_sum_excess, trimmed_sum_tail, u_of_w,
)

#: Relative inflation of Ycap and of the level thresholds g_k (A is computed to ~1e-15).
CAP_REL = 1e-9
#: Points of the Stieltjes grid in g = TK − s (geometric from TK down to TK·G_FLOOR).
GRID_POINTS = 400
G_FLOOR = 1e-9
#: Y <= FAR_Y·1 + (S' − TK)_+ everywhere (the far piece of the tail, module docstring).
FAR_Y = 2.0
#: The smallest level threshold (for τ >= 2 = sup Ycap every g > 0 qualifies).
G_TINY = 1e-300


def remove_cap(g: np.ndarray, sigma: float) -> np.ndarray:
    """Ycap(g) = max(A(g/2), 2 A(g)) of (C), inflated by CAP_REL; inf for g <= 0."""
    g = np.asarray(g, dtype=np.float64)
    safe = np.where(g > 0.0, g, 1.0)
    cap = np.maximum(tail_mean(safe / 2.0, sigma), 2.0 * tail_mean(safe, sigma)) * (1.0 + CAP_REL)
    return np.where(g > 0.0, cap, np.inf)


def level_threshold(tau: float, sigma: float) -> float:
    """g_k: a g with Ycap(g) <= τ. A(x) <= t  <=>  x >= x(t) = exp((Φ̄^{-1}(t) + 1/(2σ))/σ), so
    g >= max(2 x(τ), x(τ/2)) suffices; the value is inflated by CAP_REL and checked."""
    def x_of(t: float) -> float:
        if t >= 1.0:  # A <= E W = 1 <= t everywhere
            return 0.0
        q = -float(special.ndtri_exp(math.log(t)))  # Φ̄^{-1}(t)
        return math.exp((q + 0.5 / sigma) / sigma)

    if not tau > 0.0:
        raise ValueError(f"tau must be > 0, got tau={tau!r}")
    g = max(max(2.0 * x_of(tau), x_of(tau / 2.0)) * (1.0 + CAP_REL), G_TINY)
    while float(remove_cap(np.array([g]), sigma)[0]) > tau:  # never expected; keeps the claim true
        g *= 1.0 + 1e3 * CAP_REL
    return g


def order_stats_domination(ranks: np.ndarray | None, d: int) -> float:
    """ρ with Ŝ' <= ρ S' for the raised sum of the order-statistics variant; 1 for the plain one.

    Ŝ' = Σ_{j>=2} w_j W_(k_j) with w_j = k_{j+1} − k_j (k_{R+1} = d + 1) needs k_2 = 2 (else the
    group of M carries copies of M into Ŝ'; inf is returned and no level is used). Over the
    non-increasing W_(2) >= ... >= W_(d), Abel summation gives Σ_i c_i W_(i) <= ρ Σ_i W_(i) whenever
    every partial sum of the weights, Σ_{i<=k} c_i, is at most ρ (k − 1); the partial sums of Ŝ'
    peak at the ranks k_J, so ρ = max_{J>=2} (k_{J+1} − 2)/(k_J − 1).
    """
    if ranks is None:
        return 1.0
    k = np.asarray(ranks, dtype=np.float64)
    if d <= 1:
        return 1.0
    if k.size < 2 or k[0] != 1 or k[1] != 2:
        return math.inf
    nxt = np.append(k[1:], d + 1)
    return max(1.0, float(np.max((nxt[1:] - 2.0) / (k[1:] - 1.0))))


def remove_tails(sigma: float, steps: int, epsilon: float, value_range: float,
                 rho: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """(τ_k, tail_k) for k = 0..LEVELS-1 (module docstring); tail_0 = 0 (τ_0 = B), and every
    tail_k = B when ρ is infinite (no usable domination of the raised sum)."""
    taus = truncation_levels(value_range)
    if not math.isfinite(rho):
        tails = np.full(LEVELS, value_range)
        tails[0] = 0.0
        return taus, tails
    tk = steps * math.exp(epsilon)
    n = steps - 1
    g = tk * np.geomspace(1.0, G_FLOOR, GRID_POINTS)  # decreasing g, increasing s
    s = tk - g
    c0, capped = capped_sum_tails(sigma, n, s, rho) if n >= 2 else (None, None)
    p_bar = trimmed_sum_tail(sigma, n, s, rho, capped)
    y_next = np.minimum(value_range, remove_cap(g[1:], sigma))  # Y bound on (s_i, s_{i+1}]
    excess = trimmed_sum_excess(sigma, n, tk, rho) if n >= 2 else 0.0
    far = min(value_range * p_bar[-1], FAR_Y * p_bar[-1] + excess)  # (s_m, ∞)
    suffix = _suffix(y_next * p_bar[:-1]) + far  # suffix[i]: the pieces from s_i on
    if n >= 2:  # the split on M (module docstring), per level m = c0
        below = _suffix(y_next[:, None] * capped[:-1]) + value_range * capped[-1][None, :]
        log_phi = special.log_ndtr(u_of_w(c0, sigma))
        max_above = -np.expm1(n * log_phi)  # Pr[M >= m]
        a_m = FAR_Y * tail_mean(c0, sigma)
        excess_m = special.ndtr(-u_of_w(c0, sigma)) * excess
    tails = np.empty(LEVELS)
    tails[0] = 0.0
    for k in range(1, LEVELS):
        if not taus[k] > 0.0:  # the level underflowed (a range near the smallest normal): unused
            tails[k] = math.inf
            continue
        gk = level_threshold(float(taus[k]), sigma)
        if gk > g[0]:  # s*_k < 0: the level bounds nothing without sampling
            tails[k] = value_range
            continue
        start = max(int(np.searchsorted(-g, -gk, side="left")) - 1, 0)  # s_start <= s*_k
        tails[k] = float(suffix[start])
        if n >= 2:
            above = np.minimum(tails[k], a_m * np.minimum(p_bar[start], max_above) + excess_m)
            tails[k] = min(tails[k], float(np.min(below[start] + above)))
    return taus, tails


def _suffix(pieces: np.ndarray) -> np.ndarray:
    """suffix[i] = Σ_{j >= i} pieces[j] along axis 0, with a final 0 row (length + 1)."""
    out = np.cumsum(pieces[::-1], axis=0)[::-1]
    return np.concatenate([out, np.zeros((1,) + out.shape[1:])], axis=0)


def remove_ucb(count: int, truncated_means: np.ndarray, mean_sq: float, taus: np.ndarray,
               tails: np.ndarray, error_prob: float, rel_error: float) -> tuple[float, int]:
    """min over levels k and the two bounds of UCB_k + tail_k (module docstring); (bound, level)."""
    beta = error_prob / (2 * LEVELS)
    up = 1.0 / (1.0 - rel_error)
    sum_sq = mean_sq * count * up**2  # >= Σ min(Y, τ)² for every τ
    best, level = math.inf, 0
    for k in range(LEVELS):
        if not math.isfinite(tails[k]) or tails[k] >= best:
            continue
        m_hi = truncated_means[k] * up
        m_lo = truncated_means[k] * (1.0 - rel_error)
        var = max(sum_sq - count * m_lo * m_lo, 0.0) / (count - 1) if count > 1 else math.inf
        ucb = min(kl_ucb(m_hi, count, beta, scale=float(taus[k])),
                  eb_ucb(m_hi, var, count, beta, scale=float(taus[k])))
        if ucb + tails[k] < best:
            best, level = ucb + tails[k], k
    return best, level


def add_ucb(count: int, mean: float, mean_sq: float, scale: float, sigma: float, steps: int,
            epsilon: float, bound: float, error_prob: float, rel_error: float) -> float:
    """min(KL, empirical Bernstein (β/2 each) at scale s, s·Pr_b[R < T/K]) for ADD (docstring)."""
    up = 1.0 / (1.0 - rel_error)
    m_hi, m_lo = mean * up, mean * (1.0 - rel_error)
    var = max(mean_sq * count * up**2 - count * m_lo * m_lo, 0.0) / (count - 1) if count > 1 else math.inf
    sampled = scale * min(kl_ucb(m_hi, count, error_prob / 2.0), eb_ucb(m_hi, var, count, error_prob / 2.0))
    analytic = scale * sum_lower_tail(sigma, steps - 1, steps * math.exp(-epsilon), bound)
    return min(sampled, analytic, 1.0)
