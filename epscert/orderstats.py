"""Order statistics of i.i.d. Gaussians without drawing them all (Algorithm 6, SPEC §5).

For d i.i.d. U(0,1) and ranks 1 <= k_1 < ... < k_R <= d (k-th LARGEST), the
uniform order statistics are Y_1 ~ Beta(d - k_1 + 1, k_1) and
Y_{j+1} = Y_j Z_{j+1}, Z_{j+1} ~ Beta(d - k_{j+1} + 1, k_{j+1} - k_j), independent
(Theorem B.5). We carry log Y: with Beta(a, b) = G_a / (G_a + G_b) for independent
gammas, log Z = -log1p(G_b / G_a), accurate when Z is next to 1 (the top ranks of
T = 10^5 ... 10^7 draws). Conditioning every draw on <= b multiplies the uniforms by
Φ(b) (Proposition B.4): log Y += log Φ(b). The Gaussian values are Φ^{-1}(Y),
evaluated as ``ndtri_exp(log Y)``. The cost is linear in R and independent of d.
"""

from __future__ import annotations

import numpy as np
from scipy import special


def usable_ranks(ranks: np.ndarray, d: int) -> np.ndarray:
    """The ranks that exist among d draws (k <= d)."""
    return ranks[ranks <= d]


def gaussian_order_stats(
    rng: np.random.Generator, ranks: np.ndarray, d: int, n: int, log_cdf_bound: np.ndarray | float = 0.0
) -> np.ndarray:
    """(n, R) array: the k_j-th largest of d i.i.d. N(0,1) draws conditioned on <= b.

    ``log_cdf_bound`` is log Φ(b) (0 for no conditioning), a scalar or one value per row.
    """
    if ranks.size == 0 or n == 0:
        return np.empty((n, ranks.size))
    gaps = np.diff(ranks, prepend=0).astype(np.float64)  # k_1, k_2 - k_1, ...
    tops = (d - ranks + 1).astype(np.float64)  # d - k_j + 1
    g_b = rng.standard_gamma(np.broadcast_to(gaps, (n, ranks.size)))
    g_a = rng.standard_gamma(np.broadcast_to(tops, (n, ranks.size)))
    log_y = np.cumsum(-np.log1p(g_b / g_a), axis=1)
    log_y += np.asarray(log_cdf_bound, dtype=np.float64).reshape(-1, 1) if np.ndim(log_cdf_bound) else log_cdf_bound
    return special.ndtri_exp(log_y)


def upper_tail_weights(ranks: np.ndarray, d: int) -> np.ndarray:
    """log w_j, w_j = k_{j+1} - k_j with k_{R+1} = d + 1: the v_j-dominated counts (REMOVE bound).

    Σ_{i=1}^{d} e^{x_(i)} <= Σ_j w_j e^{v_j} because ranks k_j .. k_{j+1}-1 are all <= v_j.
    """
    if ranks.size == 0:
        return np.empty(0)
    nxt = np.append(ranks[1:], d + 1)
    return np.log((nxt - ranks).astype(np.float64))


def lower_tail_weights(ranks: np.ndarray) -> np.ndarray:
    """log (k_j - k_{j-1}), k_0 = 0 (ADD bound): ranks k_{j-1}+1 .. k_j are all >= v_j.

    Σ_{i=1}^{d} e^{x_(i)} >= Σ_j (k_j - k_{j-1}) e^{v_j} (ranks below k_R are dropped).
    """
    return np.log(np.diff(ranks, prepend=0).astype(np.float64))
