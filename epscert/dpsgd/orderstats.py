"""Order statistics of i.i.d. Gaussians without drawing them all (Algorithm 6, SPEC §5).

Exponential spacings (Rényi's representation), an exact restatement of Algorithm 6: with
E_1, ..., E_{d+1} i.i.d. standard exponentials and S_k = E_1 + ... + E_k, the vector
(S_1, ..., S_d) / S_{d+1} has the law of the d uniform order statistics, smallest first.
Since 1 - U is uniform too, the k-th LARGEST uniform is Y_k = 1 - S_k / S_{d+1}, jointly in k.
For ranks k_1 < ... < k_R only partial sums are needed, so each rank costs one draw:
S_{k_j} = S_{k_{j-1}} + G_j with G_j ~ Gamma(k_j - k_{j-1}) (a plain exponential for
consecutive ranks) and S_{d+1} = S_{k_R} + Gamma(d + 1 - k_R). (Algorithm 6's Beta ratios
Z_j = Y_j / Y_{j-1} are exactly the ratios of these sums; it costs two gammas per rank.)

Numerics: both tails are carried as ratios of positive sums, never as 1 - (something near 1):
the survival p_k = 1 - Y_k = S_k / S_{d+1} (tiny for the top ranks of T = 10^5 ... 10^7)
and Y_k = (S_{d+1} - S_k) / S_{d+1} from suffix sums. Conditioning every draw on <= b
multiplies the uniforms by c = Φ(b) (Proposition B.4): Y' = c Y, 1 - Y' = (1 - c) + c p.
The Gaussian value is -Φ^{-1}(1 - Y') when 1 - Y' <= Y' and Φ^{-1}(Y') otherwise, so Φ^{-1}
is only evaluated below 1/2, where ``ndtri`` has full relative precision. Rows with
log Φ(b) < ``LOG_TINY`` (c near underflow) use ``ndtri_exp(log c + log Y)`` instead.
The cost is linear in R and independent of d.

This changed the random stream (one draw per rank instead of two gammas): same law.
"""

from __future__ import annotations

import numpy as np
from scipy import special

#: Below this log Φ(b), c = Φ(b) is computed in log space (c Y could lose precision).
LOG_TINY = -600.0


def usable_ranks(ranks: np.ndarray, d: int) -> np.ndarray:
    """The ranks that exist among d draws (k <= d)."""
    return ranks[ranks <= d]


def _spacings(rng: np.random.Generator, ranks: np.ndarray, n: int) -> np.ndarray:
    """(R, n) gaps S_{k_j} - S_{k_{j-1}}: Gamma(k_j - k_{j-1}); runs of unit gaps in one call."""
    gaps = np.diff(ranks, prepend=0)
    out = np.empty((ranks.size, n))
    j = 0
    while j < ranks.size:
        if gaps[j] == 1:
            k = j + 1
            while k < ranks.size and gaps[k] == 1:
                k += 1
            rng.standard_exponential(out=out[j:k])
            j = k
        else:
            out[j] = rng.standard_gamma(float(gaps[j]), n)
            j += 1
    return out


def gaussian_order_stats_by_rank(
    rng: np.random.Generator, ranks: np.ndarray, d: int, n: int, log_cdf_bound: np.ndarray | float = 0.0
) -> np.ndarray:
    """(R, n) array, row j: the k_j-th largest of d i.i.d. N(0,1) draws conditioned on <= b.

    ``log_cdf_bound`` is log Φ(b) (0 for no conditioning), a scalar or one value per sample.
    Rank-major layout: the per-rank loops below run over contiguous rows of n samples.
    """
    r = ranks.size
    if r == 0 or n == 0:
        return np.empty((r, n))
    head = _spacings(rng, ranks, n)
    rest = rng.standard_gamma(float(d + 1 - ranks[-1]), n)
    tail = np.empty((r, n))  # tail[j] = S_{d+1} - S_{k_j} = rest + Σ_{i>j} G_i
    tail[r - 1] = rest
    for j in range(r - 2, -1, -1):
        np.add(tail[j + 1], head[j + 1], out=tail[j])
    for j in range(1, r):  # head[j] = S_{k_j}
        head[j] += head[j - 1]
    inv_total = 1.0 / (head[r - 1] + rest)
    head *= inv_total  # p = 1 - Y, the survival of each uniform order statistic
    tail *= inv_total  # Y
    lc = np.asarray(log_cdf_bound, dtype=np.float64)
    tiny = np.flatnonzero(lc < LOG_TINY) if lc.ndim else np.empty(0, dtype=np.int64)
    y_tiny = tail[:, tiny] if tiny.size else None
    if lc.ndim or lc != 0.0:
        head *= np.exp(lc)  # 1 - Y' = (1 - c) + c p
        head += -np.expm1(lc)
        tail *= np.exp(lc)  # Y' = c Y
    lower = head > tail  # Y' < 1/2: the value lies below the median
    np.minimum(head, tail, out=head)
    v = special.ndtri(head, out=head)
    np.negative(v, out=v, where=~lower)
    if tiny.size:
        v[:, tiny] = special.ndtri_exp(lc[tiny] + np.log(y_tiny))
    return v


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
