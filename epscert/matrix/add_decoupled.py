"""A certified upper bound on the matrix mechanism's δ_add when G is banded: decoupled blocks and Chernoff.

Notation of :mod:`epscert.matrix.values`: under Q, g ~ N(0, G), x_k = g_k - G_kk/2, S = (1/b) Σ_k e^{x_k} = e^L,
K = e^ε and δ_add(ε) = E_Q[(1 - K S)_+]. At one participation (b = n) the ADD estimators' proven range is the
probability of the Jensen event S >= e^{mean x}, about 1 for ε below mean(G_kk)/2 (issue 33), so their upper
bound stays near log(1/β)/N however small δ_add is. This bound has no range of that kind. Four steps:

1. **A mean-preserving spread (Loewner).** If G ⪯ G' and g' = g + h with h ~ N(0, G' - G) independent of g, then
   x'_k = g'_k - G'_kk/2 has e^{x'_k} = e^{x_k} e^{h_k - (G'-G)_kk/2}, whose conditional mean given g is e^{x_k}.
   So S' = (1/b) Σ_k e^{x'_k} has E[S' | g] = S and, s ↦ (1 - K s)_+ being convex, Jensen's inequality gives
   δ_add(G) = E[(1 - K S)_+] <= E[(1 - K S')_+] = δ_add(G').

2. **A block-diagonal G' ⪰ G.** Let G be banded in the natural order (G_jk = 0 for |j - k| > h) and cut the
   bins into J contiguous blocks of at least h + 1 bins. The banded Cholesky factor G = L Lᵀ has columns l_j
   supported on [j, j + h], so G = Σ_j l_j l_jᵀ and each l_j meets at most two blocks. For a column that
   meets two, l = a + c (its parts in the left and the right block), and for η > 0
   (√η a - c/√η)(√η a - c/√η)ᵀ ⪰ 0 gives l lᵀ ⪯ (1 + η) a aᵀ + (1 + 1/η) c cᵀ; η = ||c||/||a||. Summing,
   G ⪯ G' = blockdiag(G'_1, .., G'_J) with G'_i = G_ii + Σ (η or 1/η) (the part in block i)(its transpose) over
   the columns that cross block i's edges. Under G' the blocks are independent.
   Rounding: the computed factor satisfies L Lᵀ = G + ΔG with |ΔG| <= γ_{h+3} |L| |L|ᵀ (Higham, Accuracy and
   Stability, Thm 10.3, inner products of at most h + 1 terms: γ_{h+2} there, and one rounding more because LAPACK
   scales a column by the computed reciprocal of its pivot instead of dividing); starting the blocks from G_ii
   rather than (L Lᵀ)_ii costs blockdiag(ΔG_ii) - ΔG, at most 2 ||ΔG||_∞; each entry of a block is G_jk plus at most 2h
   rounded terms (γ_{2h+3} of its row's absolute sum); the computed 1/η is raised by 4 ulps so that the two
   factors' product stays >= 1; and the sampling factor of each block has its own ΔB, bounded like ΔG. Every
   block is given τ I more, τ at least 2 ||ΔG||_∞ + ||ΔB||_∞ + the forming error (:func:`decoupled_blocks`
   checks this after the factorisation and refactors with a larger τ if not): the law actually sampled,
   blockdiag(L_i L_iᵀ), is then ⪰ G exactly, and step 1 applies to it (a larger G' only spreads S' further).

3. **Chernoff, exactly.** For λ > 0, (1 - K s)_+ <= A(λ, ε) e^{-λ s} on s >= 0 with A = 1 for λ <= K and
   A = (K/λ) e^{λ/K - 1} for λ > K (the largest value of (1 - K s) e^{λ s} on [0, 1/K]). With T_i the sum of
   e^{x'_k} over block i (independent blocks),

       δ_add(ε) <= A(λ, ε) E[e^{-λ S'}] = A(λ, ε) Π_i M_i(λ),    M_i(λ) = E[exp(-(λ/b) T_i)].

4. **Each M_i from its own draws.** N draws of block i (its own dense Cholesky factor; N the run's sample
   count, capped by ``MAX_FLOPS``) give values
   exp(-(λ/b) T_i) in [0, 1]; U_i(λ) = min(KL–Chernoff, empirical Bernstein), each at β'/2, with
   β' = β / (J |Λ|) over the blocks and the grid Λ of λ (Bonferroni). Rounding: every computed value is
   within an absolute :func:`value_slack` (about 10⁻¹³ here) of the exact one at its draw, and the sums of the
   values within a relative ``FLOAT_REL``; the mean is raised (and, for the variance, lowered) by both.
   With probability >= 1 - β every U_i(λ) >= M_i(λ) at once, and then for every ε at once

       δ_add(ε) <= min_{λ ∈ Λ} A(λ, ε) Π_i U_i(λ)    (:meth:`DecoupledAddBound.upper`),

   non-increasing in ε (A is). The draws come from the user's seed through their own stream
   (:func:`epscert.rng.stream_generator` with ``STREAM_KEY`` and the block index).

What it costs in tightness (n = b = 2000, 16 bands, σ = 1.2, 20 blocks, 10^5 draws, one core, 5 CPU s):
δ_add(0.454) is about 2.2·10⁻⁸; steps 1–3 at the sample means give 1.5·10⁻⁷ and the certified bound is
2.8·10⁻⁷, where the Jensen range kept the ADD estimators' UCB near 6·10⁻⁵ (``benchmarks/matrix_add_side.py``
prints these and measures the other routes).
"""

from __future__ import annotations

import functools
import hashlib
import math

import numpy as np
from scipy import linalg

from epscert.bounds.empirical_bernstein import eb_ucb
from epscert.bounds.kl import kl_ucb
from epscert.matrix.kernels import FLOAT_REL
from epscert.rng import stream_generator

#: Most blocks: fewer blocks means a smaller mean per block (a larger range against it), more blocks more
#: Bonferroni shares and more inflated edges; 20 suits δ from 1e-6 to 1e-10 at b in the thousands.
MAX_BLOCKS = 20
#: The Chernoff parameters λ (one UCB per block and λ).
LAMBDAS = 2.0 ** (np.arange(0, 25) / 2.0)
#: The stream of the block draws: rng.stream_generator(seed, STREAM_KEY, block).
STREAM_KEY = int.from_bytes(hashlib.sha256(b"epscert.matrix.add_decoupled").digest()[:8], "big")
#: Flops of one bound's block draws (N b ℓ for N draws of blocks of ℓ bins): N is the run's sample count, capped
#: so that the draws stay near 8e11 flops (about 50 CPU s; b = 10^4 with blocks of 500: up to 160 000 draws, which take
#: ε(10⁻⁶) to 0.21 at n = b = 10^4, 64 bands, σ = 2, from 0.235 at 20 000 draws and 0.22 at 40 000; ε(10⁻⁸) 0.286 →
#: 0.265, ε(10⁻¹⁰) 0.341 → 0.313 from 40 000), but not below MIN_SAMPLES. Below b ≈ 10^4 the run's 10^5 samples
#: stay under the cap. Any N keeps the bound valid; fewer draws only loosen the per-block UCBs.
MAX_FLOPS = 8e11
#: The cap where the block-law ADD bound (:class:`epscert.matrix.block_law.BlockLawAddBound`) stands beside this one
#: (:func:`epscert.results.rows.matrix_value_rows`): there this one is the fallback, and the other is the tighter at
#: n = b = 10^4, 64 bands, σ = 2 (ε_add(10⁻⁶) 0.184, against this one's 0.2095 with the run's 10^5 draws per block
#: under MAX_FLOPS and 0.2200 with 40 000 under this cap, at its β of 0.01/8: 52 against 24.5 CPU s on one core of
#: the 2-core machine of 2026-11-29 20:10 UTC), so the fewer draws leave the answer as it is.
FALLBACK_FLOPS = 2e11
MIN_SAMPLES = 20_000
#: Rows of one block draw (memory: CHUNK x block length float64).
CHUNK = 8192
UNIT_ROUNDOFF = 2.0**-53


def half_width(g: np.ndarray) -> int:
    """Largest |j - k| of a nonzero G_jk (natural order, no cyclic wrap)."""
    j, k = np.nonzero(g)
    return int(np.max(np.abs(j - k))) if j.size else 0


def block_edges(bins: int, width: int) -> np.ndarray | None:
    """Edges of J = min(MAX_BLOCKS, b // (h + 1)) near-equal blocks, each of >= h + 1 bins; None when J < 2."""
    count = min(MAX_BLOCKS, bins // (width + 1))
    if count < 2:
        return None
    return np.linspace(0, bins, count + 1).round().astype(int)


@functools.lru_cache(maxsize=8)
def pair_edges(pair) -> np.ndarray | None:
    """The block edges of a pair's G, or None where the bound does not apply (G not banded in the natural
    order with room for two blocks: several participations wrap the band around)."""
    g = np.asarray(pair.g)
    return block_edges(g.shape[0], half_width(g))


def gamma_n(m: int) -> float:
    """Higham's γ_m = m u / (1 - m u), u the unit roundoff."""
    return m * UNIT_ROUNDOFF / (1.0 - m * UNIT_ROUNDOFF)


def banded_factor(band: np.ndarray) -> tuple[np.ndarray, float]:
    """(lower, e): G's banded Cholesky factor from its band (band[d, k] = G_{k+d, k}, d = 0..h), as
    lower[d, j] = L[j + d, j], and e >= ||ΔG||_∞ for L Lᵀ = G + ΔG (module docstring, step 2: Higham's
    γ_{h+3} |L||L|ᵀ, formed with |L|ᵀ 1 first, the column sums of |L|)."""
    h, b = band.shape[0] - 1, band.shape[1]
    lower = linalg.cholesky_banded(band, lower=True)
    col_sums = np.abs(lower).sum(axis=0)
    row_bound = np.zeros(b)
    for d in range(h + 1):
        row_bound[d:] += np.abs(lower[d, : b - d]) * col_sums[: b - d]
    return lower, gamma_n(h + 3) * float(np.max(row_bound)) * (1.0 + 4.0 * (h + 2) * UNIT_ROUNDOFF)


def scaled_norm(x: np.ndarray) -> float:
    """||x||_2 formed as max|x| · ||x / max|x||| (no underflow to 0 for a nonzero x with tiny entries)."""
    top = float(np.max(np.abs(x)))
    return top * float(np.sqrt(np.sum((x / top) ** 2))) if top > 0.0 else 0.0


def crossing_columns(lower: np.ndarray, edges):
    """For every inner block edge (index i: between blocks i and i + 1) and every factor column j crossing it
    (j < edge <= j + h): (i, edge, rows of its part a in block i, a, rows of its part c in block i + 1, c),
    rows absolute; columns with a zero part are left out (nothing to split)."""
    h, b = lower.shape[0] - 1, lower.shape[1]
    for i, edge in enumerate(edges[1:-1]):
        for j in range(max(edge - h, 0), edge):
            rows = j + np.arange(h + 1)
            keep = rows < b
            col, rows = lower[:, j][keep], rows[keep]
            left = rows < edge
            a, c = col[left], col[~left]
            if np.any(a != 0.0) and np.any(c != 0.0):
                yield i, edge, rows[left], a, rows[~left], c


def decoupled_blocks(g: np.ndarray, edges: np.ndarray) -> list[np.ndarray]:
    """The lower Cholesky factors of G'_i + τ I for the blocks of ``edges`` (module docstring, step 2)."""
    b = g.shape[0]
    h = half_width(g)
    band = np.zeros((h + 1, b))
    for d in range(h + 1):
        band[d, : b - d] = np.diagonal(g, -d)
    lower, delta_g = banded_factor(band)
    blocks = [g[lo:hi, lo:hi].copy() for lo, hi in zip(edges[:-1], edges[1:])]
    sizes = [np.abs(block) for block in blocks]  # |G_ii| + Σ |added terms|: what the forming error scales with
    for i, edge, rows_a, a, rows_c, c in crossing_columns(lower, edges):
        ia, ic = rows_a - edges[i], rows_c - edge
        eta = scaled_norm(c) / scaled_norm(a)
        # the two factors' product must be >= 1 (η · 1/η): the second is raised past the rounding of both
        inverse = (1.0 / eta) * (1.0 + 4.0 * UNIT_ROUNDOFF)
        for target, idx, part, ratio in ((i, ia, a, eta), (i + 1, ic, c, inverse)):
            term = ratio * np.outer(part, part)
            blocks[target][np.ix_(idx, idx)] += term
            sizes[target][np.ix_(idx, idx)] += np.abs(term)
    out = []
    for block, size_of in zip(blocks, sizes):
        size = block.shape[0]
        # each entry is G_jk plus at most 2h added terms (h per edge; a block shorter than 2h gets both edges'),
        # each rounded once (the outer product) before it is added
        forming = gamma_n(2 * h + 3) * float(np.max(size_of.sum(axis=1)))
        # a first guess at the factor's own error (checked below, and raised until it is covered)
        tau = 2.0 * delta_g + forming + gamma_n(size + 2) * 4.0 * float(np.max(size_of.sum(axis=1)))
        while True:
            shifted = block + tau * np.eye(size)
            factor = linalg.cholesky(shifted, lower=True)
            absf = np.abs(factor)
            delta_b = gamma_n(size + 2) * float(np.max(absf @ absf.sum(axis=0))) * (1.0 + 4.0 * size * UNIT_ROUNDOFF)
            if tau >= 2.0 * delta_g + forming + delta_b:
                break
            tau = 2.0 * (2.0 * delta_g + forming + delta_b)
        out.append(factor)
    return out


def value_slack(size: int, z_max: float, reach: float, offset_max: float) -> float:
    """An absolute bound on |computed - exact| of every value exp(-(λ/b) T) of one chunk of draws.

    Each x_k = Σ_j L_kj z_j - offset_k is within γ_{ℓ+2} (max|z| max_k Σ_j |L_kj| + max offset) =: e_x of its
    exact value (a dot product of ℓ terms and one subtraction); e^{x_k} and the sum of ℓ of them put T within
    a relative r = e^{e_x} - 1 + γ_{ℓ+2}, and y = (λ/b) T within r + 2u. Then |e^{-ŷ} - e^{-y}| <= (r + 2u) y e^{-y}
    (1 + o(1)) + u e^{-y} <= (r + 2u)/e + u, the largest of y e^{-y} being 1/e; doubled for the o(1) terms.
    """
    e_x = gamma_n(size + 2) * (z_max * reach + offset_max)
    r = math.expm1(e_x) + gamma_n(size + 2)
    return 2.0 * ((r + 2.0 * UNIT_ROUNDOFF) / math.e + UNIT_ROUNDOFF)


def chernoff_log_factor(eps: float) -> np.ndarray:
    """log A(λ, ε) over ``LAMBDAS`` (module docstring, step 3)."""
    k = math.exp(eps)
    lam = LAMBDAS
    return np.where(lam > k, np.log(k / np.maximum(lam, k)) + lam / k - 1.0, 0.0)


class DecoupledAddBound:
    """The UCBs U_i(λ) of one pair, sample count, seed and β (module docstring); :meth:`upper` bounds δ_add."""

    def __init__(self, pair, samples: int, seed: int, error_prob: float, max_flops: float = MAX_FLOPS) -> None:
        g = np.asarray(pair.g, dtype=float)
        edges = pair_edges(pair)
        if edges is None:
            raise ValueError("the decoupled ADD bound needs a Gram matrix banded in the natural order with at least "
                             f"two blocks of h + 1 bins (b = {g.shape[0]}, h = {half_width(g)})")
        if samples < 2:
            raise ValueError(f"samples must be >= 2, got samples={samples}")
        self.blocks = len(edges) - 1
        width = int(np.max(np.diff(edges)))
        samples = min(int(samples), max(MIN_SAMPLES, int(max_flops / (g.shape[0] * width))))
        self.samples = samples
        share = error_prob / (self.blocks * len(LAMBDAS))
        b = g.shape[0]
        log_u = np.zeros(len(LAMBDAS))
        log_means = np.zeros(len(LAMBDAS))
        for i, factor in enumerate(decoupled_blocks(g, edges)):
            rng = stream_generator(seed, STREAM_KEY, i)
            size = factor.shape[0]
            offset = 0.5 * (factor * factor).sum(axis=1)  # the sampled law's own variances
            reach = float(np.max(np.abs(factor).sum(axis=1)))
            first = np.zeros(len(LAMBDAS))
            second = np.zeros(len(LAMBDAS))
            slack = 0.0
            for start in range(0, samples, CHUNK):
                rows = min(CHUNK, samples - start)
                z = rng.standard_normal((rows, size))
                x = z @ factor.T - offset
                vals = np.exp(-np.outer(np.exp(x).sum(axis=1), LAMBDAS / b))
                first += vals.sum(axis=0)
                second += (vals * vals).sum(axis=0)
                slack = max(slack, value_slack(size, float(np.max(np.abs(z))), reach, float(np.max(offset))))
            for k in range(len(LAMBDAS)):
                # raised (lowered) means and a raised second moment: the bounds increase in the mean and variance
                mean = min(1.0, first[k] / samples * (1.0 + FLOAT_REL) + slack)
                low = max(first[k] / samples * (1.0 - FLOAT_REL) - slack, 0.0)
                top = second[k] / samples * (1.0 + FLOAT_REL) ** 2 + 2.0 * slack + slack * slack
                var = max(top - low * low, 0.0) * samples / (samples - 1)
                ucb = min(kl_ucb(mean, samples, share / 2.0), eb_ucb(mean, var, samples, share / 2.0), 1.0)
                log_u[k] += math.log(ucb) if ucb > 0.0 else -math.inf
                log_means[k] += math.log(first[k] / samples) if first[k] > 0.0 else -math.inf
        self.log_ucbs = log_u
        #: Σ_i log of the sample means (not a bound: what steps 1-3 give at the estimates, for benchmarks)
        self.log_means = log_means

    def upper(self, epsilons) -> np.ndarray:
        """min over λ of A(λ, ε) Π_i U_i(λ), per ε >= 0, capped at 1 (module docstring, step 4); raised by a
        relative 1e-12 for the rounding of the exponent's sum and of exp."""
        eps = np.asarray(epsilons, dtype=float)
        if np.any(~(eps >= 0.0)):
            raise ValueError(f"epsilons must be >= 0 (and not NaN), got {eps[~(eps >= 0.0)][0]!r}")
        # ε = inf: δ_add = E[(1 - ∞ S)_+] = 0, S > 0 almost surely
        logs = [-math.inf if math.isinf(e) else min(0.0, float(np.min(chernoff_log_factor(e) + self.log_ucbs)))
                for e in eps]
        return np.minimum(1.0, np.exp(logs) * (1.0 + 1e-12))


@functools.lru_cache(maxsize=8)
def add_bound(pair, samples: int, seed: int, error_prob: float,
              max_flops: float = MAX_FLOPS) -> DecoupledAddBound | None:
    """The (cached) bound of one pair, sample count, seed, β and flop cap (the passes of one ε search on the same
    seed reuse it), or None where it does not apply (:func:`pair_edges`) or G is singular (no Cholesky factor: the
    ADD rows then keep the line's bound alone)."""
    if pair_edges(pair) is None:
        return None
    try:
        return DecoupledAddBound(pair, samples, seed, error_prob, max_flops)
    except linalg.LinAlgError:
        return None
