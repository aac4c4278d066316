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
   ||ΔG||_2 <= ||ΔG||_∞ <= γ_{h+3} max_r (|L||L|ᵀ 1)_r (Higham, Accuracy and Stability, Thm 10.3: inner
   products of at most h + 1 terms, and one rounding more for LAPACK's reciprocal pivot). So G ⪯ G'' = G'_L + τ I,
   τ the sum of those two allowances, and G'' is block-diagonal: under it the blocks are independent.
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

1'. **A second G'': the cross blocks split along their singular vectors** (:func:`svd_split_diagonal`). Between
   adjacent blocks the only nonzero part of G is an h x h corner K = U Σ Vᵀ; adding U Σ Uᵀ and V Σ Vᵀ to the two
   sides' diagonal blocks dominates it ([U; -V] Σ [U; -V]ᵀ ⪰ 0), with the least total trace of any such split
   (2 ||K||_*, where the column split pays Σ_j (η ||a_j||² + ||c_j||²/η) >= 2 Σ_j ||a_j|| ||c_j|| >= 2 ||K||_*).
   It needs no factor of G (so no positive definiteness), and its rounding is bounded a posteriori (the
   function's docstring).
3'. **Sharper: each block is at most a mixture of modes.** The same Jensen step without the largest diagonal:
   E φ(S_i) <= (1/m) Σ_{k in i} E φ(W''_k) = E φ(Y_i), Y_i the equal-weight mixture of the lognormals of mean 1
   and log-variances v''_k over the block's sites (a lognormal with its log-variance drawn, the draw public).
   Sorting each block's v''_k, the mixture of the largest i-th values over the blocks, v*_(i), dominates every
   block's (couple the i-th components: each LN(v_(i)) ⪯_cx LN(v*_(i)), and a mixture of ordered pairs with the
   same weights keeps the order). Runs of consecutive order statistics may share their largest value (it only
   raises them), which keeps at most ``MIXTURE_GROUPS`` components. With the blocks independent,
   S'' ⪯_cx (1/J) Σ_i Y*_i with Y*_i i.i.d. copies of that one mixture.
4'. **That is Balls-and-Bins with a random public noise per step** (:mod:`epscert.allocation.mixture`), J steps,
   σ_k = 1/√v*_k, certified by the same convex-order chains as the plain bracket. For one G'' it is never above
   step 4's (the mixture is ⪯_cx its largest component), and it is used in its place: every G'' (step 1 with any
   split power p, or step 1') gives a valid bound, and the smallest over step 1' and ``MIXTURE_POWERS`` is kept,
   ε by ε.

Each site's diagonal v''_k is its computed diagonal of G'_L, raised by 2 γ_{2h+5} relative (each is a sum of at
most 2h + 1 terms l² and (ρ - 1) l², three roundings each), plus τ, then by 4 ulps (:func:`split_diagonals`);
v' (step 3) is their largest; σ_eff = 1/√v' and each σ_k are lowered by 4 ulps (a smaller σ only raises δ). J is
the largest divisor of b with b/J >= h + 1 (more blocks, more amplification; v' barely depends on J). Nothing
here is sampled. The bound is tight only when the modes inside a block are nearly comonotone (many bands, strong
correlation): at n = b = 10^4 with 64 bands, σ = 2, the mixture bound on the singular-vector split certifies
ε(10⁻⁶) <= 0.563 (125 blocks of 80; on the column split 0.658; step 4 alone, v' = 1.9 v, gave 0.934; the sampled
REMOVE side 2.747 in 497 CPU s); at n = b = 2000 with 16 bands, σ = 1.2, it gives 2.8 against the sampled 0.461
(``python -m benchmarks.matrix_block_bound``). The mixture's tail is the loose part: :mod:`epscert.matrix.block_law`
uses the block mean's own law instead (sampled, its far tail from exact moments), for REMOVE.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from scipy import linalg

from epscert.allocation.bracket import MAX_EPSILON
from epscert.allocation.mixture import mixture_bracket_for
from epscert.matrix.add_decoupled import UNIT_ROUNDOFF, banded_factor, crossing_columns, gamma_n, scaled_norm
from epscert.support import BRACKET_MIN_SIGMA

#: η = (||c||/||a||)^p for each p here; the smallest v' is kept (p = 0: η = 1, every crossing entry doubled)
SPLIT_POWERS = (0.0, 0.25, 0.5, 0.75, 1.0)
#: Most steps of the Balls-and-Bins bracket (its own limit is 10^6; its cost grows with log T only)
MAX_BLOCKS = 1_000_000
#: Most components of the per-site mixture (step 3'): runs of consecutive order statistics beyond it share one
#: (their largest) variance
MIXTURE_GROUPS = 64
#: The column-split powers tried for the mixture bound (the two that won at the sizes measured; each is sound)
MIXTURE_POWERS = (0.5, 0.75)


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


def split_diagonals(band: np.ndarray, blocks: int, powers=SPLIT_POWERS) -> list[np.ndarray]:
    """For each split power p, upper bounds on the diagonal of G'' (step 1), site by site, from G's band
    (band[d, k] = G_{k+d, k}, d = 0..h): the computed diagonal of G'_L raised by 2 γ_{2h+5} relative, plus τ,
    then by 4 ulps (module docstring). Done on G divided by a power of two near its largest entry (exact but for
    subnormal results, covered by :func:`rounding_shift`'s absolute term), the result multiplied back.
    Squares below the normal range can still be lost where a factor entry is 2^-511 of the largest; they are
    at most (2h + 1) · 2^-1022 per entry, added."""
    unit, scale = unit_band(band)
    if scale != 1.0:
        return [diag * scale + 2.0**-1074 for diag in split_diagonals(unit, blocks, powers)]
    h, b = band.shape[0] - 1, band.shape[1]
    lower, delta_g = banded_factor(band)  # lower[d, j] = L[j + d, j]; ||ΔG||_∞ <= delta_g
    base = np.zeros(b)  # diag(L Lᵀ)
    for d in range(h + 1):
        base[d:] += lower[d, : b - d] ** 2
    size = b // blocks
    # (rows on the left, their l², rows on the right, their l², ||c||/||a||) of every column crossing an edge
    crossing = [(rows_a, a**2, rows_c, c**2, scaled_norm(c) / scaled_norm(a))
                for _, _, rows_a, a, rows_c, c in crossing_columns(lower, np.arange(0, b + 1, size))]
    tau = delta_g + rounding_shift(band)  # L Lᵀ = Ĝ + ΔG and G ⪯ Ĝ + τ_0 I
    out = []
    for power in powers:
        diag = base.copy()
        factor = 1.0  # the largest multiplier of a square (1, η or (1/η)(1 + 4u))
        for rows_a, a2, rows_c, c2, ratio in crossing:
            eta = ratio**power
            diag[rows_a] += eta * a2  # α - 1 = η
            # β - 1 = (1/η)(1 + 4u), so that (α - 1)(β - 1) >= 1 after the roundings of η and 1/η
            inverse = (1.0 / eta) * (1.0 + 4.0 * UNIT_ROUNDOFF)
            diag[rows_c] += inverse * c2
            factor = max(factor, eta, inverse)
        # each diagonal entry is a sum of at most 2h + 1 terms (h + 1 squares, at most h added splits), three
        # roundings each: the exact one is at most the computed one times 1 + 2 γ_{2h+5}; a square below the
        # normal range is off by less than 2^-1022 (times its multiplier)
        lost = (2 * h + 1) * 2.0**-1022 * factor
        out.append(((diag + lost) * (1.0 + 2.0 * gamma_n(2 * h + 5)) + tau) * (1.0 + 4.0 * UNIT_ROUNDOFF))
    return out


def unit_band(band: np.ndarray) -> tuple[np.ndarray, float]:
    """(band / s, s) with s the power of two just above G's largest entry: the entries lie in [-1, 1], exact but
    for subnormal results (within 2^-1075; :func:`rounding_shift` covers them), so that no square of a factor
    entry underflows at any σ. A diagonal bound u for band / s gives u·s (+ 2^-1074 for a subnormal product)."""
    top = float(np.max(np.abs(band)))
    if not (math.isfinite(top) and top > 0.0):
        raise linalg.LinAlgError("G is zero or not finite: no split")
    scale = math.ldexp(1.0, math.frexp(top)[1])
    return band / scale, scale


def rounding_shift(band: np.ndarray) -> float:
    """τ_0 with G ⪯ Ĝ + τ_0 I: Ĝ = G0 · (1/σ²) rounded is within 4u of G entrywise (σ², its inverse, the
    product), so ||Ĝ - G||_2 <= ||Ĝ - G||_∞ <= 4u max_r Σ_c |G_rc| (the row sums formed from |Ĝ| and rounded up)."""
    h, b = band.shape[0] - 1, band.shape[1]
    rows_abs = np.zeros(b)  # the row sums of |Ĝ|: entries G_{k,k-d} and G_{k,k+d}
    for d in range(h + 1):
        rows_abs[d:] += np.abs(band[d, : b - d])
        if d:
            rows_abs[: b - d] += np.abs(band[d, : b - d])
    # a subnormal entry of Ĝ is off by at most 2^-1075 instead: (2h + 1) such entries per row at most
    return 4.0 * UNIT_ROUNDOFF * float(np.max(rows_abs)) * (1.0 + gamma_n(2 * h + 6)) + (2 * h + 1) * 2.0**-1074


def edge_splits(unit: np.ndarray, size: int):
    """For every block edge e (blocks of ``size`` bins) of the band ``unit`` (entries in [-1, 1], :func:`unit_band`):
    (e, U, σ's, Vᵀ, r) with U Σ Vᵀ the computed SVD of the cross block K = G[e-h:e, e:e+h] and r >= ||R||_2 for its
    exact remainder R = K - U Σ Vᵀ (:func:`svd_split_diagonal` derives the bound). Raises ``linalg.LinAlgError``
    where an SVD is not finite."""
    h, b = unit.shape[0] - 1, unit.shape[1]
    rows, cols = np.tril_indices(h)
    for e in range(size, b, size):
        corner = np.zeros((h, h))  # corner[i, j] = G[e - h + i, e + j], nonzero for j <= i (d = h + j - i <= h)
        corner[rows, cols] = unit[h + cols - rows, e - h + rows]
        u_mat, sing, vt = np.linalg.svd(corner)
        if not (np.all(np.isfinite(u_mat)) and np.all(np.isfinite(sing)) and np.all(np.isfinite(vt))):
            raise linalg.LinAlgError("the SVD of a cross block is not finite")
        spread = (np.abs(u_mat) * sing) @ np.abs(vt)
        bound = ((1.0 + UNIT_ROUNDOFF) * np.abs((u_mat * sing) @ vt - corner) + gamma_n(h + 1) * spread
                 + (h + 2) * 2.0**-1074) * (1.0 + gamma_n(h + 4))
        # ||R||_F formed scaled (squares of entries below 2^-511 of the largest may be lost: at most h² · 2^-1022)
        big = float(np.max(bound)) if bound.size else 0.0
        frob = big * (float(np.sqrt(np.sum((bound / big) ** 2))) + h * 2.0**-511) if big > 0.0 else 0.0
        yield e, u_mat, sing, vt, frob * (1.0 + gamma_n(h * h + 4))


def svd_split_diagonal(band: np.ndarray, blocks: int) -> np.ndarray:
    """Upper bounds on the diagonal of a second block-diagonal G'' ⪰ G, site by site (step 1'): each edge's
    cross block split along its singular vectors instead of the factor's columns.

    Blocks of m >= h + 1 bins: between adjacent blocks A | B (edge e) the only nonzero part of G is the corner
    K = G[e-h:e, e:e+h], and blocks further apart do not meet. With K = U Σ Vᵀ + R (the computed SVD, R its
    exact remainder), [[U Σ Uᵀ, -U Σ Vᵀ], [-V Σ Uᵀ, V Σ Vᵀ]] = [U; -V] Σ [U; -V]ᵀ ⪰ 0 for any U, V and Σ >= 0, so
    the corner's two off-diagonal blocks are ⪯ diag(U Σ Uᵀ, V Σ Vᵀ) + ||R||_2 I on the edge's 2h sites. Summed over
    the edges, G ⪯ Ĝ + τ_0 I ⪯ G'' with G'' block-diagonal: Ĝ's diagonal blocks plus U Σ Uᵀ on the last h sites of
    A and V Σ Vᵀ on the first h of B, plus (τ_0 + Σ_edges ||R_e||_2) I (each site lies in at most two edges'
    windows; the largest ||R_e|| bound is taken twice for all). Only the diagonal of G'' is needed (steps 3'-4').

    Rounding: |R| <= (1 + u)|fl(fl(UΣVᵀ) - K)| + γ_{h+1} |U| Σ |Vᵀ| + (h + 2)·2^-1074 entrywise (each entry of UΣVᵀ
    is an inner product of h terms, scaled once; the last term covers underflow), its Frobenius norm rounded up
    bounds ||R||_2; each diagonal entry Σ_i U_ki² σ_i (h terms, two roundings each, h - 1 sums) and the sums with
    Ĝ_kk (at most two more) are raised by γ_{2h+4}, then τ_0 + 2 max_e ||R_e||, then 4 ulps. All of it is done on
    Ĝ divided by a power of two near its largest entry (exact but for subnormal results, whose error and the
    squares lost to underflow are added as absolute terms), so no scale of σ underflows a term. With the blocks as in
    step 1 this G'' is a mean-preserving spread for both directions (step 2), and steps 3'-4' apply unchanged.
    Raises ``linalg.LinAlgError`` where an SVD does not converge or is not finite (no bound from it).
    """
    h, b = band.shape[0] - 1, band.shape[1]
    unit, scale = unit_band(band)
    extra = np.zeros(b)
    remainder = 0.0
    for e, u_mat, sing, vt, frob in edge_splits(unit, b // blocks):
        remainder = max(remainder, frob)
        # a square below 2^-1022 may be lost or subnormal: at most h · 2^-1022 · max σ_i per diagonal entry
        lost = h * 2.0**-1022 * (float(np.max(sing)) if sing.size else 0.0)
        extra[e - h: e] += (u_mat * u_mat) @ sing + lost
        extra[e: e + h] += (vt * vt).T @ sing + lost
    # the scaled band's own rounding (subnormal entries only) is inside rounding_shift's absolute term
    shift = rounding_shift(unit) + 2.0 * remainder
    diag = ((unit[0] + extra) * (1.0 + gamma_n(2 * h + 4)) + shift) * (1.0 + 4.0 * UNIT_ROUNDOFF)
    # back to G's scale: exact for normal results; a subnormal one rounds by at most 2^-1075
    return diag * scale + 2.0**-1074


def block_variance(band: np.ndarray, blocks: int, powers=SPLIT_POWERS) -> float:
    """v' of step 3, the smallest over the split powers p of the largest diagonal of G'' (:func:`split_diagonals`).
    With :func:`block_law`, the one-lognormal bound of step 4: not what the product uses (steps 3'-4' are never
    above it), kept as the benchmark's and the tests' point of comparison."""
    return min(float(np.max(diag)) for diag in split_diagonals(band, blocks, powers))


def site_mixture(diag: np.ndarray, blocks: int, groups: int = MIXTURE_GROUPS) -> tuple[np.ndarray, np.ndarray]:
    """(variances, weights) of the one mixture that dominates every block's (step 3'): the diagonal sorted inside
    each block, the largest i-th value over the blocks, then at most ``groups`` runs of consecutive order
    statistics, each at its largest value with weight (its count)/m."""
    size = diag.size // blocks
    profile = np.sort(diag.reshape(blocks, size), axis=1).max(axis=0)  # ascending
    cuts = np.unique(np.linspace(0, size, min(groups, size) + 1).round().astype(int))
    variances = np.array([profile[hi - 1] for hi in cuts[1:]])
    weights = np.diff(cuts) / size
    return variances, weights


def band_and_blocks(gram, sigma: float) -> tuple[np.ndarray | None, int]:
    """(G's band, J), or (None, 0) where G is not banded in the natural order with room for two blocks of h + 1
    bins and J | b."""
    g0 = gram.g0
    b = g0.shape[0]
    h = natural_half_width(g0)
    blocks = block_count(b, h)
    if blocks < 2:
        return None, 0
    scale = 1.0 / (float(sigma) * float(sigma))
    band = np.zeros((h + 1, b))
    for d in range(h + 1):
        band[d, : b - d] = np.diagonal(g0, -d) * scale
    return band, blocks


@functools.lru_cache(maxsize=8)
def block_law(gram, sigma: float) -> tuple[int, float] | None:
    """(J, σ_eff) of the dominating Balls-and-Bins pair (module docstring), or None where the bound does not
    apply: G not banded in the natural order with room for two blocks of h + 1 bins and J | b, or σ_eff below
    the bracket's ``BRACKET_MIN_SIGMA``."""
    band, blocks = band_and_blocks(gram, sigma)
    if band is None:
        return None
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


@functools.lru_cache(maxsize=8)
def block_mixtures(gram, sigma: float) -> tuple[int, tuple] | None:
    """(J, ((split, σ's, weights), ...)) of the dominating mixtures (step 3'), one for each G'' tried: the
    singular-vector split (split "svd", step 1') and the column splits of ``MIXTURE_POWERS`` (split p); None where
    the bound does not apply (as :func:`block_law`) or no split gives one. Each σ_k = 1/√v_k is lowered by 4 ulps
    (a smaller σ only raises δ)."""
    band, blocks = band_and_blocks(gram, sigma)
    if band is None:
        return None
    candidates = []
    try:
        candidates.append(("svd", svd_split_diagonal(band, blocks)))
    except linalg.LinAlgError:  # an SVD did not converge: that split gives no bound
        pass
    try:
        candidates.extend(zip(MIXTURE_POWERS, split_diagonals(band, blocks, MIXTURE_POWERS)))
    except linalg.LinAlgError:  # G singular to working precision: no banded factor, no column split
        pass
    out = []
    for split, diag in candidates:
        if not np.all(np.isfinite(diag)):  # a split overflowed: no bound from it
            continue
        variances, weights = site_mixture(diag, blocks)
        with np.errstate(divide="ignore"):
            sigmas = (1.0 / np.sqrt(variances)) * (1.0 - 4.0 * UNIT_ROUNDOFF)
        if not np.all(np.isfinite(sigmas)) or np.min(sigmas) < BRACKET_MIN_SIGMA:
            continue
        out.append((split, tuple(float(x) for x in sigmas), tuple(float(w) for w in weights)))
    return (blocks, tuple(out)) if out else None


def block_upper(gram, sigma: float, direction: str, epsilons) -> np.ndarray | None:
    """Upper bounds on δ(ε) for ``direction`` ('add', 'remove' or 'both'), or None where the bound does not apply:
    the smallest over the splits of the mixture brackets (step 4'). Above the bracket's largest ε it returns
    its value there (δ is non-increasing in ε)."""
    laws = block_mixtures(gram, float(sigma))
    if laws is None:
        return None
    blocks, mixtures = laws
    eps = np.minimum(np.asarray(epsilons, dtype=np.float64), MAX_EPSILON)
    bounds = []
    for _, sigmas, weights in mixtures:
        try:
            bracket = mixture_bracket_for(sigmas, weights, blocks)
        except ValueError:  # noise levels too far apart for one grid (tails.mixture_cells): no bound from it
            continue
        bounds.append(bracket.delta_side(eps, direction, "upper"))
    return np.minimum.reduce(bounds) if bounds else None
