"""A deterministic upper bound at one participation: comonotone inside independent blocks (Balls-and-Bins).

Notation of :mod:`epscert.matrix.bracket`: under Q, g ~ N(0, G) in R^b, W_k = e^{g_k - v_k/2} (v_k = G_kk),
S = (1/b) Σ_k W_k, and δ_remove(ε) = E_Q[(S - e^ε)_+], δ_add(ε) = E_Q[(1 - e^ε S)_+]: each is E[φ(S)] for a
convex φ. The comonotone bound there treats all b modes as one (no amplification); this one keeps J independent
blocks and treats each block as one mode. Where G is banded in the natural order (one participation: G_jk = 0
for |j - k| > h), with J dividing b and blocks of m = b/J >= h + 1 consecutive bins:

1. **A block-diagonal G'' ⪰ G** (the construction of :mod:`epscert.matrix.add_decoupled`, step 2). With the
   banded Cholesky factor G = Σ_j l_j l_jᵀ (l_j on rows [j, j + h], so it meets at most two blocks), a column
   that crosses an edge is l = a + c and l lᵀ ⪯ α a aᵀ + β c cᵀ whenever α, β > 1 and (α - 1)(β - 1) >= 1
   (the difference is [(α-1) aaᵀ + (β-1) ccᵀ - acᵀ - caᵀ], PSD by the 2 x 2 Gram test). Here α = 1 + η,
   β = 1 + (1/η)(1 + 4u) (u = 2^-53) with η = (||c||/||a||)^p, p from ``SPLIT_POWERS`` (the smallest result
   is kept; each p gives a valid G''). Summing over the columns of the computed factor L,
   L Lᵀ ⪯ G'_L = blockdiag(..) exactly; L Lᵀ = Ĝ + ΔG with Ĝ the computed G0/σ² (|Ĝ - G| <= 4u |G|
   entrywise: σ², its inverse, the product; so G ⪯ Ĝ + 4u ||G||_∞ I) and
   ||ΔG||_2 <= ||ΔG||_∞ <= γ_{h+2} max_r (|L||L|ᵀ 1)_r (Higham, Accuracy and Stability, Thm 10.3: inner
   products of at most h + 1 terms). So G ⪯ G'' = G'_L + τ I, τ the sum of those
   two allowances, and G'' is block-diagonal: under it the blocks are independent.
2. **A mean-preserving spread** (:mod:`epscert.matrix.add_decoupled`, step 1): G ⪯ G'' gives
   E[φ(S)] <= E[φ(S'')] for every convex φ, S'' the same mean under N(0, G'').
3. **Each block is at most one mode (Jensen).** Block i's mean S_i = (1/m) Σ_{k in i} W''_k satisfies
   φ(S_i) <= (1/m) Σ_k φ(W''_k) pointwise, so E φ(S_i) <= (1/m) Σ_k E φ(W''_k) <= E φ(Y) with Y lognormal of
   mean 1 and log-variance v' >= max_k G''_kk (a lognormal of mean 1 grows in the convex order with its
   log-variance: it is the smaller one times an independent mean-1 lognormal factor). With the blocks independent,
   S'' = (1/J) Σ_i S_i is below (1/J) Σ_i Y_i in the convex order (one block at a time, the others fixed).
4. **That is Balls-and-Bins.** (1/J) Σ_i Y_i with Y_i independent lognormals of log-variance v' is S of the
   one-epoch Balls-and-Bins pair with T = J steps at σ_eff = 1/√v' (:mod:`epscert.matrix.pair`, reductions), so
   for both directions and every ε, δ(G; ε) <= δ_BnB(T = J, σ_eff; ε) <= the upper side of its certified PLD
   bracket (:mod:`epscert.allocation`).

v' is the largest computed diagonal of G'_L, raised by 2 γ_{2h+5} relative (each is a sum of at most 2h + 1
terms l² and (ρ - 1) l², three roundings each), plus τ, then by 4 ulps; σ_eff = 1/√v' is lowered by 4 ulps (a
smaller σ_eff only raises δ_BnB). J is the largest divisor of b with b/J >= h + 1 (more blocks, more
amplification; v' barely depends on J). Nothing here is sampled. The bound is tight only when the modes inside a
block are nearly comonotone (many bands, strong correlation): at n = b = 10^4 with 64 bands, σ = 2, it certifies
ε(10⁻⁶) <= 0.934 (125 blocks of 80, v' = 1.9 v, 3 CPU s), where the sampled REMOVE side gave 2.747 in 497 CPU s;
at n = b = 2000 with 16 bands, σ = 1.2, it gives 3.5 against the sampled 0.461 (``python -m
benchmarks.matrix_block_bound``).
"""

from __future__ import annotations

import functools
import math

import numpy as np
from scipy import linalg

from epscert.allocation.bracket import MAX_EPSILON, bracket_for
from epscert.matrix.add_decoupled import UNIT_ROUNDOFF, banded_factor, crossing_columns, gamma_n, scaled_norm
from epscert.support import BRACKET_MIN_SIGMA

#: η = (||c||/||a||)^p for each p here; the smallest v' is kept (p = 0: η = 1, every crossing entry doubled)
SPLIT_POWERS = (0.0, 0.25, 0.5, 0.75, 1.0)
#: Most steps of the Balls-and-Bins bracket (its own limit is 10^6; its cost grows with log T only)
MAX_BLOCKS = 1_000_000


def natural_half_width(g0: np.ndarray) -> int:
    """The largest d with a nonzero entry on G0's d-th sub-diagonal (natural order, no cyclic wrap)."""
    b = g0.shape[0]
    for d in range(b - 1, 0, -1):
        if np.any(np.diagonal(g0, -d) != 0.0) or np.any(np.diagonal(g0, d) != 0.0):
            return d
    return 0


def block_count(bins: int, h: int) -> int:
    """The largest divisor J >= 2 of b with b/J >= h + 1 (at most ``MAX_BLOCKS``); 0 if there is none."""
    for size in range(h + 1, bins // 2 + 1):
        if bins % size == 0 and bins // size <= MAX_BLOCKS:
            return bins // size
    return 0


def block_variance(band: np.ndarray, blocks: int, powers=SPLIT_POWERS) -> float:
    """v' of step 1, the smallest over the split powers p, from G's band (band[d, k] = G_{k+d, k}, d = 0..h)."""
    h, b = band.shape[0] - 1, band.shape[1]
    lower, delta_g = banded_factor(band)  # lower[d, j] = L[j + d, j]; ||ΔG||_∞ <= delta_g
    base = np.zeros(b)  # diag(L Lᵀ)
    for d in range(h + 1):
        base[d:] += lower[d, : b - d] ** 2
    size = b // blocks
    # (rows on the left, their l², rows on the right, their l², ||c||/||a||) of every column crossing an edge
    crossing = [(rows_a, a**2, rows_c, c**2, scaled_norm(c) / scaled_norm(a))
                for _, _, rows_a, a, rows_c, c in crossing_columns(lower, np.arange(0, b + 1, size))]
    best = math.inf
    for power in powers:
        diag = base.copy()
        for rows_a, a2, rows_c, c2, ratio in crossing:
            eta = ratio**power
            diag[rows_a] += eta * a2  # α - 1 = η
            # β - 1 = (1/η)(1 + 4u), so that (α - 1)(β - 1) >= 1 after the roundings of η and 1/η
            diag[rows_c] += (1.0 / eta) * (1.0 + 4.0 * UNIT_ROUNDOFF) * c2
        best = min(best, float(np.max(diag)))
    rows_abs = np.zeros(b)  # the row sums of |Ĝ|: entries G_{k,k-d} and G_{k,k+d}
    for d in range(h + 1):
        rows_abs[d:] += np.abs(band[d, : b - d])
        if d:
            rows_abs[: b - d] += np.abs(band[d, : b - d])
    # Ĝ = G0 · (1/σ²) rounded: within 4u of G entrywise (σ², its inverse, the product): G ⪯ Ĝ + 4u ||G||_∞ I
    tau = delta_g + 4.0 * UNIT_ROUNDOFF * float(np.max(rows_abs)) * (1.0 + gamma_n(2 * h + 6))
    # each diagonal entry is a sum of at most 2h + 1 terms (h + 1 squares, at most h added splits), three
    # roundings each: the exact one is at most the computed one times 1 + 2 γ_{2h+5}
    return (best * (1.0 + 2.0 * gamma_n(2 * h + 5)) + tau) * (1.0 + 4.0 * UNIT_ROUNDOFF)


@functools.lru_cache(maxsize=8)
def block_law(gram, sigma: float) -> tuple[int, float] | None:
    """(J, σ_eff) of the dominating Balls-and-Bins pair (module docstring), or None where the bound does not
    apply: G not banded in the natural order with room for two blocks of h + 1 bins and J | b, or σ_eff below
    the bracket's ``BRACKET_MIN_SIGMA``."""
    g0 = gram.g0
    b = g0.shape[0]
    h = natural_half_width(g0)
    blocks = block_count(b, h)
    if blocks < 2:
        return None
    scale = 1.0 / (float(sigma) * float(sigma))
    band = np.zeros((h + 1, b))
    for d in range(h + 1):
        band[d, : b - d] = np.diagonal(g0, -d) * scale
    try:
        v_prime = block_variance(band, blocks)
    except linalg.LinAlgError:  # G singular to working precision: no banded factor, no bound
        return None
    if not math.isfinite(v_prime):  # a split factor overflowed (parts 10^308 apart in size): no bound
        return None
    sigma_eff = (1.0 / math.sqrt(v_prime)) * (1.0 - 4.0 * UNIT_ROUNDOFF)
    if sigma_eff < BRACKET_MIN_SIGMA:
        return None
    return blocks, sigma_eff


def block_upper(gram, sigma: float, direction: str, epsilons) -> np.ndarray | None:
    """Upper bounds on δ(ε) for ``direction`` ('add', 'remove' or 'both'), or None where the bound does not apply.
    Above the bracket's largest ε it returns its value there (δ is non-increasing in ε)."""
    law = block_law(gram, float(sigma))
    if law is None:
        return None
    blocks, sigma_eff = law
    eps = np.minimum(np.asarray(epsilons, dtype=np.float64), MAX_EPSILON)
    return bracket_for(sigma_eff, blocks, 1).delta_side(eps, direction, "upper")
