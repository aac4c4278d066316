"""Gram matrix of the Balls-and-Bins modes of a banded Toeplitz strategy, without forming C.

C_{t,u} = c[t - u] for 0 <= t - u < p (p = len(c)), n x n. The mode of bin j is
m_j = Σ_{t ∈ T_j} C e_t with T_j = {t < n : t ≡ j (mod b)}; C e_t is c placed at rows t..t+p-1
and cut at row n. For two participation times t <= t' = t + Δ (Δ < p) the columns overlap on
rows t'..min(t + p, n) - 1, so

    <C e_t, C e_t'> = Σ_{r < len} c[Δ + r] c[r],   len = min(p - Δ, n - t'),

a prefix of the lag-Δ autocorrelation of c. Summing over all pairs (t, t') with |t - t'| < p:

    G0_jk = Σ_{t ∈ T_j, t' ∈ T_k, |t - t'| < p} <C e_t, C e_t'>.

There are about 2 n p such pairs: O(n p) work and O(b²) memory, whatever n.
"""

from __future__ import annotations

import numpy as np


def toeplitz_gram(c_col: np.ndarray, iterations: int, cycle_length: int) -> np.ndarray:
    """G0 (b x b, symmetric, non-negative) for c = ``c_col``, n = ``iterations``, b = ``cycle_length``."""
    c = np.asarray(c_col, dtype=np.float64)
    n, b = int(iterations), int(cycle_length)
    c = c[: n]
    nz = np.flatnonzero(c)
    p = int(nz[-1]) + 1
    c = c[:p]
    t = np.arange(n)
    keys, weights = [], []  # per lag: the cells (t mod b, t' mod b) and their inner products, lag-major
    for lag in range(min(p, n)):
        prefix = np.concatenate(([0.0], np.cumsum(c[lag:] * c[: p - lag])))  # prefix[len] = Σ_{r<len}
        first = t[: n - lag]  # t, with t' = t + lag < n
        weights.append(prefix[np.minimum(p - lag, n - (first + lag))])
        keys.append((first % b) * b + (first + lag) % b)
    same = np.bincount(keys[0], weights=weights[0], minlength=b * b).reshape(b, b)  # lag 0: each time with itself
    if len(keys) == 1:
        return same
    # lag > 0: (t, t + lag), counted once here and once transposed; one pass over the b x b cells for all
    # lags (one per lag was O(p b²): 30 CPU s at b = 10^4, p = 64). bincount adds each cell's values in
    # input order, so a cell reached by one lag only (every cell when 2p <= b) gets the sum it had per lag;
    # a cell reached by several lags (2p > b) gets the same terms summed in another order (rounding only).
    forward = np.bincount(np.concatenate(keys[1:]), weights=np.concatenate(weights[1:]), minlength=b * b)
    forward = forward.reshape(b, b)
    return same + forward + forward.T
