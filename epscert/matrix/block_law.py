"""A certified upper bound on δ_remove at one participation from the law of one block's mean: sampled, its far tail
from exact moments.

Notation of :mod:`epscert.matrix.block_bound`: under Q, g ~ N(0, G) in R^b, W_k = e^{g_k - v_k/2}, S = (1/b) Σ_k W_k
and δ_remove(ε) = E_Q[(S - e^ε)_+]. That module puts each block's mean below a mixture of its sites' lognormals
(Jensen), whose tail is far heavier than the block mean's: at n = b = 10^4 with 64 bands, σ = 2, its stop-loss at 8
is 600 times the block mean's (``python -m benchmarks.matrix_block_law``). Here the block mean's own law is used.
G banded in the natural order (G_jk = 0 for |j - k| > h), formed where G's natural blocks
(:func:`~epscert.matrix.block_bound.block_count`: the most blocks with b/J >= h + 1) have ``MIN_SIZE`` to ``MAX_SIZE``
bins; the law's own J >= 2 blocks of m = b/J >= h + 1 consecutive bins are larger where b allows
(:func:`law_block_count`, at most ``LAW_MAX_SIZE`` = 200 bins: fewer edges to inflate in step 1; any such J is
sound):

1. **Independent blocks.** The singular-vector split (:func:`~epscert.matrix.block_bound.svd_split_diagonal`, step
   1' there, formed here as whole m x m blocks): with K_e = U Σ Vᵀ + R_e each edge's cross block,
   G ⪯ blockdiag(B_1, .., B_J) + a I, B_i = Ĝ_ii + U Σ Uᵀ (its right edge's, on its last h sites) + V Σ Vᵀ (its left
   edge's, on its first h), and a = τ_0 + 2 max_e ||R_e||_2 + the forming error of the B_i (each entry a sum of at
   most three terms, the products inner products of h terms: γ_{h+3} of the sum of their absolute values, its
   largest row sum bounding the 2-norm). A larger covariance is a mean-preserving spread of S
   (:mod:`epscert.matrix.add_decoupled`, step 1), so δ_remove(G) <= δ_remove of the independent blocks.
2. **One covariance above every block.** C = B_r + (a + s) I, r the middle block, s >= λ_max(B_i - B_r) for every i
   (certified a posteriori by a Cholesky factorisation of t I - (B_i - B_r) and its backward error,
   :func:`certified_top`, raised by u times the difference's largest absolute row sum for forming it; 0 where the
   two are equal). Every block's mean S_i is then ⪯_cx S_C, the mean of m lognormal factors under N(0, C).
3. **The law drawn.** F = chol(C + τ I) with F Fᵀ ⪰ C checked (``τ`` raised until it covers F's own backward error,
   as in :func:`~epscert.matrix.add_decoupled.decoupled_blocks`); S_F, the block mean under N(0, F Fᵀ), is ⪰_cx S_C.
4. **Its survival function, bounded** (the draws in :mod:`epscert.matrix.block_draws`). N draws of S_F, half of
   them plain and half tilted at order 4 and power a (each kind its own stream of the user's seed; all plain where no
   grid point takes tilted ones), and κ >= E[M_a^4]/ρ (below; M_a = (1/m) Σ_k W_k^a). At each of the K grid points
   s_j, one UCB at β/(2K) (Bonferroni; the other half of β goes to the LCBs of step 5*); which one is fixed before
   any draw (:func:`tilt_plan`: a from (1, 1.5) by the
   exact moments, the tilted values' range κ/s_j^{4a} below the plain ones' 1; all plain where the tuple law cannot
   be formed):
   - plain: the KL–Chernoff UCB of the count of plain computed means above s_j/(1 + r) (r bounds the relative
     error of a computed mean, so every exact mean above s_j is counted: the count is at least that of the exact
     indicators, which are i.i.d., and the UCB increases in it);
   - tilted: z = g + a u_t, g ~ N(0, I), u_t = w_{k_1} + .. + w_{k_4} (w_k = F's row k, x = F z, x_k = w_kᵀz), the
     tuple t = (k_1, .., k_4) from a law π' (:class:`~epscert.matrix.block_draws.TupleLaw`). The density of
     N(a u_t, I) against N(0, I) is exp(a u_tᵀz - a²|u_t|²/2) = W_t^a e^{-γ_t}, W_t^a = Π_i W_{k_i}^a (as
     a u_tᵀz = a Σ_i x_{k_i}), γ_t = a² c_t + (a² - a)/2 Σ_i v_{k_i}, c_t = Σ_{i<j} Σ_{k_i k_j} (Σ = F Fᵀ, v its
     diagonal; |u_t|² = Σ_i v_{k_i} + 2 c_t), and E[W_t^a] = e^{γ_t}: so with Z = Σ_t e^{γ_t} = m^4 E[M_a^4], the
     mixture with weights π_t = e^{γ_t}/Z has density Σ_t W_t^a / Z = M_a^4/E[M_a^4] against the plain law, and
     π'_t >= ρ π_t for every t gives dq'/dp = Σ_t π'_t W_t^a e^{-γ_t} >= ρ M_a^4/E[M_a^4]. Then
     P(S_F > s) = E_q'[1{S > s} dp/dq'], with 1{S > s} dp/dq' <= 1{S > s} κ/M_a^4 <= κ/s^{4a} as M_a >= S^a (the
     power mean, a >= 1): exact values i.i.d. in [0, κ/s^{4a}], the KL–Chernoff UCB at that scale of a computed mean
     at least theirs (:func:`~epscert.matrix.block_draws.tilted_survival_ucbs`). At a = 1 this is the order-4 tilt
     S^4 p/E[S^4]. Under q' the tail is heavier by M_a^4, so the floor falls like s^{-4a}: at n = b = 10^4, 64 bands,
     σ = 2 (blocks of 200, a = 1.5) ε_remove(10⁻¹⁰) <= 0.292, where a = 1 gave 0.574 from the same draws' budget
     (with blocks of 80 and a = 1: 0.317; the order-1 tilt of an earlier version, x ~ (1/m) Σ_k N(Σ e_k, Σ), 0.866).
   And P(S > s) <= E[S_F^p]/s^p (Markov) with E[S_F^p], p = 2..4, computed exactly (:func:`block_moments`) from
   F Fᵀ's entries raised by their rounding bound (every moment increases in every entry). P_j, the smallest of
   these and 1, made non-increasing from the left (a survival function is), holds for every j at once with
   probability >= 1 - β/2; so do the LCBs L_j of step 4' (at β/(2K) each), and both at once with probability
   >= 1 - β.
5. **A law above it.** Y takes s_j with mass P_{j-1} - P_j (P_0 = 1), j <= K, and beyond the last point c = s_K its
   survival is min(P_K, M̄(s)), M̄(s) = (1 + 20u) min_p E[S_F^p]/s^p, at least the computed Markov bound
   (:func:`tail_integral`), so P_K <= M̄(c) and the survival function is right-continuous at c. Then
   P(Y > s) = P_j >= P(S_F > s) on [s_j, s_{j+1}) and min(P_K, M̄(s)) >= P(S_F > s) from c on, so S_F <=_st Y
   and S_F ⪯_icx Y (E Y is a little above 1). The masses are rounded up, so the measure used has total mass a
   little above 1 and at least Y's mass at every atom: every expectation of a non-negative function below is at
   least Y's. For δ_remove, s ↦ (s - e^ε)_+ is increasing and
   convex, so replacing the independent block means one at a time, δ_remove(G) <= E[((1/J) Σ_i Y_i - e^ε)_+] with
   Y_i i.i.d. copies of Y. (Not δ_add: a decreasing convex function needs equal means.)
5*. **A tighter law with the mean** (:mod:`epscert.matrix.laws_from_bounds`, which gives the argument). E[S_F] = 1
   exactly, so π(t) = E(S_F - t)_+ = 1 - ∫_0^t P(S_F > s) ds is also at most 1 - ∫_0^t of the LCBs' law (below);
   Y* takes the greatest convex minorant of the smaller bound as its stop-loss on [0, c], Y's law beyond c, checked
   at the hull's vertices in floating point (Y stands where the check fails): S_F ⪯_icx Y*, never looser than Y.
6. **That mean, bracketed.** The upper chain of :mod:`epscert.allocation.epoch` from the base law Y·1{Y <= c}
   (exact atoms; masses rounded up), J steps, and the cap of :mod:`epscert.allocation.tails` with E[Y] in place of
   1: E[Y 1{Y > c}] + (J - 1) E[Y] P(Y > c), with P(Y > c) = P_K and E[Y 1{Y > c}] = c P_K + ∫_c^∞ min(P_K, M̄(s)) ds
   (:func:`tail_integral`); Y* in place of Y where its check passes (the same cap: its law beyond c is Y's).

**ADD from the same plain draws** (:class:`BlockLawAddBound`). δ_add(ε) = E_Q[(1 - e^ε S)_+] and s ↦ (1 - e^ε s)_+
is convex and decreasing. Steps 1-3 are mean-preserving spreads, so they hold for it as for δ_remove; then:

4'. At each grid point s_j a KL lower confidence bound on P(S_F > s_j), at β/(2K) (Bonferroni), from the count of
    plain computed means above s_j (1 + r)(1 + 8u) (each such mean is an exact one above s_j, so the count is at
    most the exact indicators' count, and the LCB increases in it); L_j, their running maximum from the right,
    still lies below P(S_F > s_j) (a survival function is non-increasing), for every j at once with probability
    >= 1 - β/2; plain UCBs as in step 4 (no tilted draws) take the other half.
5'. **A law below it.** Y_low takes 0 with mass 1 - L_1, s_j with mass L_j - L_{j+1} (L_{K+1} = 0). Then
    P(Y_low > s) = L_{j+1} <= P(S_F > s_{j+1}) <= P(S_F > s) on [s_j, s_{j+1}) (L_1 below s_1, 0 from c on), so
    Y_low <=_st S_F: for a function decreasing in each block's mean, E over S_F is at most E over Y_low, and no
    equality of means is needed. With the masses rounded up (as in step 5), replacing the independent block means
    one at a time (convex order, then stochastic order), δ_add(G) <= E[(1 - e^ε (1/J) Σ_i Y_low,i)_+].
5'*. **The same with the mean.** Y*_add takes the greatest convex minorant of the smaller of ∫_0^t (1 - L) and
    t - 1 + π_U(t) as its ψ(t) = E(t - Y*_add)_+ (checked likewise; Y_low stands where it fails): S_F ⪯_dcx Y*_add.
6'. The same upper chain, from the whole law of Y*_add or Y_low (no mass above c: no cap term).

The plain draws are shared with the REMOVE bound of the same run; each bound holds at its own β, and the union bound
needs no independence. The bound is formed only where it can help (:func:`applies`, deterministic: the moments of
order <= 4 must put the tail beyond c below 10^-5).

Every step but 4 is deterministic; 4 holds with probability >= 1 - β. At n = b = 10^4, 64 bands, σ = 2 (50 blocks
of 200, 10^7 draws, about 95 CPU s on one core) it certifies ε_remove <= 0.1871 / 0.2373 / 0.2847 at 10⁻⁶ / 10⁻⁸ /
10⁻¹⁰ (β = 0.0025; Y from 3.2·10⁶ draws: 0.191 / 0.241 / 0.292; the mixture bound: 0.563 / 1.042 / 1.649, blocks of
80 at a = 1: 0.198 / 0.251 / 0.317) and ε_add <= 0.1838 / 0.2314 / 0.2716 at β/4 (the decoupled Chernoff bound of
:mod:`epscert.matrix.add_decoupled`: 0.21 / 0.265 / 0.313 in 50 CPU s; ``python -m benchmarks.matrix_block_law``).
The route's limit, the empirical law of one block with no error terms, is 0.187 / 0.237 / 0.281 at blocks of 200
(0.194 / 0.246 / 0.290 at 80), against a truth of about 0.181 at 10⁻⁶ (:mod:`epscert.matrix.shift_mixture`): what is
left is mostly the split into independent blocks.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from scipy import linalg

from epscert.allocation.bracket import AllocationBracket
from epscert.allocation.epoch import ChainLaw, mean_of_steps
from epscert.allocation.cells import CellLaw
from epscert.matrix.add_decoupled import UNIT_ROUNDOFF, gamma_n
from epscert.matrix.block_bound import band_and_blocks, rounding_shift, unit_band, edge_splits
from epscert.matrix.block_draws import (TILT_ORDER, TILT_POWER, TupleLaw, draw_means, draw_tilted, log_weights,
                                        tilted_survival_ucbs)
from epscert.matrix.laws_from_bounds import (mean_one_add_law, mean_one_remove_law, plain_lower, plain_upper,
                                             survival_upper)
from epscert.names import Direction
from epscert.support import BRACKET_MIN_SIGMA

#: The bound is formed where G's natural blocks (:func:`~epscert.matrix.block_bound.block_count`, b/J >= h + 1)
#: have MIN_SIZE to MAX_SIZE bins. Below, a block's mean is too close to one site's lognormal (n = b = 2000, 16 bands,
#: σ = 1.2, blocks of 20: ε(10⁻⁶) <= 1.34, 0.461 from the REMOVE values); above (wide bands) it was not measured
MAX_SIZE = 96
MIN_SIZE = 32
#: The law's own blocks (:func:`law_block_count`): the largest divisor m of b with m at least the natural block,
#: at most LAW_MAX_SIZE and b/m >= LAW_MIN_BLOCKS. Larger blocks inflate fewer edges (the route's limit at
#: n = b = 10^4, 64 bands, σ = 2: ε(10⁻⁶) ≈ 0.195 at blocks of 80, 0.187 at 200, 0.186 at 400), but cost m² per draw
#: and m^4 for the tuple law, and few blocks lean on one block's far tail (blocks of 1000: 0.256)
LAW_MAX_SIZE = 200
LAW_MIN_BLOCKS = 4
#: The point of the far tail at which the tilt's power is chosen (:func:`tilt_plan`): near where one block's mean
#: binds at 10⁻¹⁰ at n = b = 10^4 (blocks of 200: the mean of 50 blocks at e^0.29 needs one at about 16)
TILT_REFERENCE = 16.0
#: Moments used for the far tail and to decide whether the bound is formed. The fifth and sixth (an earlier version)
#: cost m^5 and m^6/3 flops; beside the tilted draws they hardly moved the bound at blocks of 80 (ε(10⁻⁸) <= 0.250
#: with them, 0.251 without; the same at 10⁻⁶ and 0.317 against 0.318 at 10⁻¹⁰)
MOMENTS = (2, 3, 4)
#: The bound is formed only where c · min_{p <= 4} E[S_F^p]/c^p, the moments' floor under the cap's c · P(Y > c),
#: is at most this (:func:`applies`): above every δ the tool certifies (1e-5 down), so nothing is lost there
TAIL_CEILING = 1e-5
#: Draws of one block per sample of the run, and their bounds (N m² flops: 5.12e11, 10^7 draws at m = 200, about
#: 95 CPU s). At n = b = 10^4 with Y*: ε_remove(10⁻⁶ / 10⁻⁸ / 10⁻¹⁰) <= 0.1871 / 0.2373 / 0.2847, where the earlier
#: cap of 1.28e11 gave 0.1876 / 0.2381 / 0.2894 in 40 CPU s (the upper side at 10⁻⁶ decides the 5% there)
DRAWS_PER_SAMPLE = 100
MIN_DRAWS = 100_000
MAX_FLOPS = 5.12e11
#: Relative allowance of a computed moment: positive terms, each with at most 4m + 32 roundings (exp of a raised
#: entry, products of at most 6 factors, inner products of m terms), summed over at most 10^6 terms (p <= 4: m² per
#: inner sum, m(m + 1)/2 pairs): γ_{10^6 + 4m + 32} is below 1.2e-10 for m <= LAW_MAX_SIZE
MOMENT_REL = 1e-9


def survival_grid() -> np.ndarray:
    """s_1 < ... < s_K: steps of 0.0005 to 4, of 0.02 to 40, then 200 log-spaced points to 10^4 (= c)."""
    return np.concatenate([np.arange(1, 8001) * 0.0005, 4.0 + np.arange(1, 1801) * 0.02,
                           np.exp(np.linspace(math.log(40.0), math.log(1e4), 201)[1:])])


def split_blocks(band: np.ndarray, blocks: int) -> tuple[list[np.ndarray], float]:
    """([B_1, .., B_J], a) of step 1, on G's scale: G ⪯ blockdiag(B_i) + a I. Formed on G divided by a power of two
    near its largest entry (:func:`~epscert.matrix.block_bound.unit_band`); a includes the absolute allowances
    for subnormal entries there."""
    unit, scale = unit_band(band)
    h, b = unit.shape[0] - 1, unit.shape[1]
    size = b // blocks
    dense = np.zeros((size * blocks, size))  # block i's rows i*size.., its columns 0..size-1
    for d in range(h + 1):  # Ĝ's diagonal blocks from the band
        for i in range(blocks):
            lo = i * size
            part = unit[d, lo: lo + size - d]
            idx = np.arange(size - d)
            dense[lo + idx + d, idx] = part
            dense[lo + idx, idx + d] = part
    sizes = np.abs(dense)
    remainder = 0.0
    for e, u_mat, sing, vt, frob in edge_splits(unit, size):
        remainder = max(remainder, frob)
        left, right = e // size - 1, e // size  # the edge's two blocks
        add_u = (u_mat * sing) @ u_mat.T
        add_v = (vt.T * sing) @ vt
        dense[left * size + size - h: left * size + size, size - h:] += add_u
        dense[right * size: right * size + h, :h] += add_v
        sizes[left * size + size - h: left * size + size, size - h:] += (np.abs(u_mat) * sing) @ np.abs(u_mat).T
        sizes[right * size: right * size + h, :h] += (np.abs(vt).T * sing) @ np.abs(vt)
    # each entry: Ĝ_jk plus at most two products (inner products of h terms, one scaling each) and two sums
    forming = gamma_n(h + 3) * float(np.max(sizes.sum(axis=1))) + (2 * h + 4) * 2.0**-1074
    shift = (rounding_shift(unit) + 2.0 * remainder + forming) * (1.0 + 8.0 * UNIT_ROUNDOFF)
    # each block made exactly symmetric from its lower triangle (every entry one of the computed ones, so within the
    # forming allowance of the exact entry): the eigenvalue, Cholesky and moment steps then read one matrix
    out = []
    for i in range(blocks):
        part = dense[i * size: (i + 1) * size]
        out.append((np.tril(part) + np.tril(part, -1).T) * scale)
    # back to G's scale: exact for normal results; a subnormal one rounds by at most 2^-1075 (m per row)
    return out, shift * scale + size * 2.0**-1074


def certified_top(diff: np.ndarray) -> float:
    """t' >= λ_max(diff) for a symmetric, finite ``diff``, certified a posteriori (the computed eigenvalues are only a
    start).

    Formed on D = diff / 2^e, the power of two that puts its largest entry in [1/2, 1) (exact but for entries that
    become subnormal, each off by at most 2^-1075: m 2^-1075 on the 2-norm, added). With t above the computed
    largest eigenvalue, M = fl(t I - D) differs from t I - D on the diagonal only, by E with |E_kk| <= u |M_kk|. If
    the Cholesky factorisation of M runs to completion, its computed factor L has L Lᵀ = M + ΔM with
    |ΔM| <= γ_{m+2} |L||L|ᵀ entrywise (Higham, Thm 10.3, with one rounding more for LAPACK's reciprocal pivot), so
    t I - D = L Lᵀ - ΔM - E ⪰ -(||ΔM||_2 + ||E||_2) I, and λ_max(D) <= t + γ_{m+2} || |L||L|ᵀ ||_∞ + u max|M_kk|
    (the ∞-norm of a symmetric matrix bounds its 2-norm; fl(|L||L|ᵀ) is raised by 4 m u for its own rounding and
    by m² 2^-1074 for products lost to underflow). t is raised until the factorisation succeeds. The sum is rounded
    up by 4 ulps of its magnitude (so a negative result also moves up), then scaled back by 2^e and raised by
    2^-1074 (exact but for a subnormal result). Returns 0 for a zero ``diff``; raises ``ValueError`` for a
    non-finite one.
    """
    if not np.all(np.isfinite(diff)):
        raise ValueError("certified_top needs a finite matrix")
    size = diff.shape[0]
    top_entry = float(np.max(np.abs(diff)))
    if top_entry == 0.0:
        return 0.0
    exponent = math.frexp(top_entry)[1]
    unit = np.ldexp(diff, -exponent)
    scale = float(np.max(np.abs(unit).sum(axis=1)))  # >= 1/2
    margin = 4.0 * gamma_n(size + 2) * scale
    top = float(np.linalg.eigvalsh(unit)[-1])
    while True:
        t = top + margin
        shifted = t * np.eye(size) - unit
        try:
            factor = linalg.cholesky(shifted, lower=True)
        except linalg.LinAlgError:
            margin *= 2.0
            continue
        absf = np.abs(factor)
        backward = (gamma_n(size + 2) * float(np.max(absf @ absf.sum(axis=0))) * (1.0 + 4.0 * size * UNIT_ROUNDOFF)
                    + size * size * 2.0**-1074)
        errors = backward + UNIT_ROUNDOFF * float(np.max(np.abs(np.diag(shifted)))) + size * 2.0**-1075
        total = t + errors * (1.0 + 4.0 * UNIT_ROUNDOFF)
        total = total + 4.0 * UNIT_ROUNDOFF * abs(total)
        return math.ldexp(total, exponent) + 2.0**-1074


def dominating_covariance(parts: list[np.ndarray], shift: float) -> np.ndarray:
    """C of step 2: the middle block plus (shift + s) I, s above every λ_max(B_i - B_r) (:func:`certified_top` of the
    computed difference, plus u times its largest absolute row sum for the subtraction's own rounding)."""
    ref = parts[len(parts) // 2]
    size = ref.shape[0]
    extra = 0.0
    for part in parts:
        diff = part - ref
        if not np.any(diff):
            continue
        extra = max(extra, max(certified_top(diff), 0.0)
                    + UNIT_ROUNDOFF * float(np.max(np.abs(diff).sum(axis=1))) * (1.0 + gamma_n(size + 2)))
    # the sums on the diagonal round by at most u of the result: 2u of the largest diagonal entry more
    top = float(np.max(np.abs(np.diag(ref))))
    return ref + (shift + extra + 2.0 * UNIT_ROUNDOFF * top) * (1.0 + 4.0 * UNIT_ROUNDOFF) * np.eye(size)


def dominating_factor(cov: np.ndarray) -> np.ndarray:
    """F lower triangular with F Fᵀ ⪰ cov (step 3): the Cholesky factor of cov + τ I, τ at least the factor's
    backward error γ_{m+2} || |F| |F|ᵀ ||_∞ (Higham, Thm 10.3, one rounding more for LAPACK's reciprocal pivot;
    plus m² 2^-1074 for products lost to underflow), raised until it is (τ starts at 2^-1000 at least, so doubling
    always moves it)."""
    size = cov.shape[0]
    scale = float(np.max(np.abs(cov).sum(axis=1)))
    tau = max(4.0 * gamma_n(size + 2) * scale, 2.0**-1000)
    while True:
        factor = linalg.cholesky(cov + tau * np.eye(size), lower=True)
        absf = np.abs(factor)
        backward = (gamma_n(size + 2) * float(np.max(absf @ absf.sum(axis=0))) * (1.0 + 4.0 * size * UNIT_ROUNDOFF)
                    + size * size * 2.0**-1074)
        # the shifted matrix's own rounding (one sum per diagonal entry): u of its largest diagonal entry
        if tau >= backward + UNIT_ROUNDOFF * (float(np.max(np.diag(cov))) + tau):
            return factor
        tau *= 2.0


def raised_covariance(factor: np.ndarray) -> np.ndarray:
    """F Fᵀ entrywise raised by its rounding bound: every entry >= the exact one."""
    absf = np.abs(factor)
    # fl(F Fᵀ) is within γ_m |F||F|ᵀ of the exact entries, fl(|F||F|ᵀ) within γ_m of its own, and the sum rounds by
    # u of a value at most |F||F|ᵀ: 2 γ_{m+2} fl(|F||F|ᵀ) covers all three
    return factor @ factor.T + 2.0 * gamma_n(factor.shape[0] + 2) * (absf @ absf.T)


def block_moments(cov: np.ndarray, orders=MOMENTS) -> dict[int, float]:
    """E[S^p] for p in ``orders`` (a subset of 2, 3, 4), S = (1/m) Σ_k exp(x_k - cov_kk/2), x ~ N(0, cov), raised by
    ``MOMENT_REL``: E[S^p] = m^{-p} Σ_{k ∈ [m]^p} Π_{i<j} E_{k_i k_j}, E = exp(cov) entrywise (raised by 4 ulps),
    p = 3 grouped by sorted triples (their multiplicity times E_{a1a2} E_{a1a3} E_{a2a3}), p = 4 by sorted pairs
    (f = E_{a1,:} ∘ E_{a2,:}, their multiplicity times E_{a1a2} fᵀ E f). All terms are positive (module constant
    ``MOMENT_REL``); one that overflows is +inf, still an upper bound."""
    if not set(orders) <= set(MOMENTS):
        raise ValueError(f"block_moments gives the orders {MOMENTS}, got {tuple(orders)}")
    with np.errstate(over="ignore", invalid="ignore"):
        out = _raw_moments(cov, tuple(orders))
    # a sum of positive terms that overflowed somewhere (inf, or nan from inf times an underflowed 0) is +inf
    return {p: (math.inf if math.isnan(out[p]) else out[p] * (1.0 + MOMENT_REL)) for p in orders}


def _raw_moments(cov: np.ndarray, orders: tuple[int, ...]) -> dict[int, float]:
    m = cov.shape[0]
    e = np.exp(cov) * (1.0 + 4.0 * UNIT_ROUNDOFF)
    out = {2: float(e.sum()) / m**2}
    if 4 in orders:
        i, j = np.triu_indices(m)
        pair_mult = np.where(i == j, 1.0, 2.0)
        f2 = e[i] * e[j]
        out[4] = float(np.dot(pair_mult * e[i, j], np.einsum("ak,kl,al->a", f2, e, f2))) / m**4
    if 3 in orders:
        third = 0.0
        for a1 in range(m):  # sorted triples a1 <= a2 <= a3, one a1 at a time (m³/6 of them in all)
            a2, a3 = np.triu_indices(m - a1)
            a2, a3 = a2 + a1, a3 + a1
            distinct = 1 + (a1 != a2) + (a2 != a3)
            mult = np.where(distinct == 3, 6.0, np.where(distinct == 2, 3.0, 1.0))
            third += float(np.dot(mult, e[a1, a2] * e[a1, a3] * e[a2, a3]))
        out[3] = third / m**3
    return out


def markov(s: np.ndarray, moments: dict[int, float]) -> np.ndarray:
    """min_p E[S^p]/s^p, rounded up (a product and a power: 4 ulps more than the quotient's rounding); a quotient
    that overflows is +inf, still an upper bound."""
    with np.errstate(over="ignore"):
        return np.min([mp / s**p for p, mp in moments.items()], axis=0) * (1.0 + (4 + max(moments)) * UNIT_ROUNDOFF)


class _BlockLawBracket(AllocationBracket):
    """The upper chain of step 6 (REMOVE: J copies of Y·1{Y <= c} and the cap terms of Y) or 6' (ADD: J copies of
    Y_low, which has no mass above c, so its cap is 0); only that direction's upper side is given."""

    def __init__(self, law: CellLaw, sigma: float, steps: int, part: Direction, cap: float):
        super().__init__(sigma, steps, 1)  # settings (cells, shape) from the block's largest variance; T = J
        self._base = law
        self._part = part
        self.caps = {"remove": cap, "add": cap}  # the other direction is refused (_side)

    def law(self, chain: str) -> ChainLaw:
        if chain != "upper":
            raise ValueError("the block law gives an upper chain only")
        st = self.settings
        base = ChainLaw(self._base, 0.0, 0.0)  # Y (Y_low) is defined by these atoms and masses: no allowance
        return mean_of_steps(base, self.steps, "upper", cells=st["cells"], tau=st["tau"], shape=st["shape"])

    def _side(self, eps, part, side):
        if part is not self._part or side != "upper":
            raise ValueError(f"the block law bounds δ_{self._part.value} from above only")
        return super()._side(eps, part, side)


def _checked_law(pair, samples: int, error_prob: float):
    if samples < 1:
        raise ValueError(f"samples must be >= 1, got samples={samples}")
    if not (0.0 < error_prob < 1.0):
        raise ValueError(f"error_prob must be in (0, 1), got error_prob={error_prob}")
    if not fits(pair):
        raise ValueError("the block-law bound needs G banded in the natural order with J >= 2 blocks of "
                         f"{MIN_SIZE} to {MAX_SIZE} bins (b = {pair.bins})")
    law = dominating_law(pair)
    if law is None:
        raise ValueError("the block-law bound needs a factor of the dominating covariance (none was found)")
    return law


def total_draws(samples: int, size: int) -> int:
    """N of step 4: ``DRAWS_PER_SAMPLE`` per sample, within [MIN_DRAWS, MAX_FLOPS/m²] (not below MIN_DRAWS)."""
    return int(min(max(MIN_DRAWS, DRAWS_PER_SAMPLE * int(samples)), max(MIN_DRAWS, MAX_FLOPS / size**2)))


def plain_count(draws: int, tilted: np.ndarray) -> int:
    """The plain draws of step 4: half of N where some grid point takes the tilted ones, else all."""
    return draws // 2 if np.any(tilted) else draws


@functools.lru_cache(maxsize=8)
def tilt_plan(pair) -> tuple[TupleLaw | None, float, np.ndarray]:
    """(the tuple law, κ >= E[M_a^4]/ρ, the grid points that take the tilted draws) of step 4, all fixed before any
    draw; (None, inf, none) where the tuple law cannot be formed. The power a is the one of (1, ``TILT_POWER``) whose
    upper moment E[M_a^4] (:func:`power_moment`; at a = 1 the law's own E[S_F^4]) gives the smaller range
    E[M_a^4]/s^{4a} at s = ``TILT_REFERENCE`` (deterministic; any a >= 1 is sound): 1.5 at n = b = 10^4, 64 bands,
    σ = 2 (E[M_a^4] 2.0 at a = 1, 19 at 1.5), 1 at n = b = 128, 32 bands, σ = 1 (1.1·10⁵ against 5·10¹⁹)."""
    factor, low = dominating_law(pair)[2:]
    # at a = 1, M_1 = S_F: the law's own fourth moment of the raised covariance bounds E[M_1^4]
    moments = {1.0: low[4], TILT_POWER: power_moment(factor, TILT_POWER)}
    power = min(moments, key=lambda a: (moments[a] / TILT_REFERENCE ** (TILT_ORDER * a), a))
    try:
        tuples = TupleLaw(factor, power)
    except ValueError:  # the log-weights out of the tuple law's range: plain draws only
        return None, math.inf, np.zeros(survival_grid().size, dtype=bool)
    weight = moments[power] / tuples.rho * (1.0 + 2.0 * UNIT_ROUNDOFF)
    with np.errstate(over="ignore"):
        # the tilted values' range below the plain ones'
        tilted = weight / survival_grid() ** (TILT_ORDER * power) < 1.0
    tilted.flags.writeable = False  # cached and shared: read only
    return tuples, weight, tilted


def power_moment(factor: np.ndarray, power: float) -> float:
    """An upper bound on E[M_a^4] = m^{-4} Σ_t e^{γ_t} (step 4; γ_t = Σ_{i<j} L_{k_i k_j}, L of
    :func:`~epscert.matrix.block_draws.log_weights`): :func:`block_moments`' fourth moment of
    :func:`raised_log_weights` (its formula is m^{-4} Σ_t Π_{i<j} e^{L̄_{k_i k_j}} for any symmetric L̄, increasing in
    every entry)."""
    return block_moments(raised_log_weights(factor, power), (4,))[4]


def raised_log_weights(factor: np.ndarray, power: float) -> np.ndarray:
    """L̄ >= L entrywise, L = a² Σ + (a² - a)/6 (v_j + v_k) of the exact Σ = F Fᵀ, v its diagonal (a >= 1): formed
    from :func:`raised_covariance` Σ̄ (every entry, the diagonal v̄ included, at least the exact one; L increases in
    each for a >= 1), then raised past its own rounding: the constants a² and (a² - a)/6, the two products and the
    two sums each round by at most u of their operands' magnitude, so 8u (a² |Σ̄_jk| + (a² - a)/6 (|v̄_j| + |v̄_k|))
    covers them (a bound on the terms, not on the result, which may cancel), and 2^-1074 a subnormal result."""
    raised = raised_covariance(factor)
    diag = np.abs(np.diag(raised))
    size = (power * power) * np.abs(raised) + ((power * power - power) / 6.0) * (diag[:, None] + diag[None, :])
    return log_weights(raised, power) + 8.0 * UNIT_ROUNDOFF * size * (1.0 + 4.0 * UNIT_ROUNDOFF) + 2.0**-1074


@functools.lru_cache(maxsize=2)
def plain_means(pair, draws: int, seed: int) -> tuple[np.ndarray, float]:
    """The plain draws of step 4 (:func:`draw_means` of the dominating factor), shared by the REMOVE and the ADD
    bound of the same run (each holds at its own β; the union bound needs no independence)."""
    means, rel = draw_means(dominating_law(pair)[2], draws, seed)
    means.flags.writeable = False  # cached and shared by both bounds: read only
    return means, rel


class BlockLawAddBound:
    """Steps 1-3 and 4'-6' of the module docstring for one pair, sample count, seed and β; :meth:`upper` bounds
    δ_add. Half of β goes to the LCBs L_j, half to the plain UCBs P_j (step 5'*)."""

    def __init__(self, pair, samples: int, seed: int, error_prob: float) -> None:
        blocks, cov, _, moments = _checked_law(pair, samples, error_prob)
        self.blocks = blocks
        self.draws = total_draws(samples, cov.shape[0])
        plain_draws = plain_count(self.draws, tilt_plan(pair)[2])
        means, rel = plain_means(pair, plain_draws, seed)
        grid = survival_grid()
        share = error_prob / 2.0 / grid.size
        bound = plain_lower(means, rel, grid, share)
        upper = survival_upper(plain_upper(means, rel, grid, share), markov(grid, moments))
        self.grid, self.survival, self.upper_survival = grid, bound, upper
        tail = float(upper[-1])
        law = mean_one_add_law(grid, upper, bound, tail_integral(float(grid[-1]), tail, moments))
        self.mean_one = law is not None
        if law is None:
            # Y_low (step 5'): atoms 0, s_1, .., s_K with masses 1 - L_1, L_j - L_{j+1}, L_K, each rounded up
            law = (np.concatenate([[0.0], grid]),
                   -np.diff(np.concatenate([[1.0], bound, [0.0]])) * (1.0 + 4.0 * UNIT_ROUNDOFF))
        sigma = max(1.0 / math.sqrt(float(np.max(np.diag(cov)))), BRACKET_MIN_SIGMA)
        self._bracket = _BlockLawBracket(CellLaw(*law), sigma, blocks, Direction.ADD, 0.0)

    def upper(self, epsilons) -> np.ndarray:
        """Upper bounds on δ_add(ε) (non-increasing in ε)."""
        return self._bracket.delta_side(np.asarray(epsilons, dtype=float), "add", "upper")


class BlockLawBound:
    """Step 1-6 of the module docstring for one pair, sample count, seed and β; :meth:`upper` bounds δ_remove. Half
    of β goes to the UCBs P_j, half to the LCBs L_j of step 5*."""

    def __init__(self, pair, samples: int, seed: int, error_prob: float) -> None:
        blocks, cov, factor, moments = _checked_law(pair, samples, error_prob)
        self.blocks = blocks
        size = cov.shape[0]
        self.moments = moments
        self.draws = total_draws(samples, size)
        grid = survival_grid()
        share = error_prob / 2.0 / grid.size
        tuples, weight, tilted = tilt_plan(pair)
        self.tilt_weight = weight
        plain_draws = plain_count(self.draws, tilted)
        means, rel = plain_means(pair, plain_draws, seed)
        ucb = np.empty(grid.size)
        ucb[~tilted] = plain_upper(means, rel, grid[~tilted], share)
        if np.any(tilted):
            t_means, powers, t_rel, rel_power = draw_tilted(factor, self.draws - plain_draws, seed, tuples)
            ucb[tilted] = tilted_survival_ucbs(t_means, powers, t_rel, rel_power, grid[tilted], share, weight,
                                               tuples.power)
        bound = survival_upper(ucb, markov(grid, self.moments))
        lower = plain_lower(means, rel, grid, share)
        c = float(grid[-1])
        tail = float(bound[-1])
        law = mean_one_remove_law(grid, bound, lower, tail)
        self.mean_one = law is not None
        if law is None:
            # Y (step 5): P(Y > s) = 1 below s_1, P_j on [s_j, s_{j+1}), min(P_K, M(s)) from c = s_K on: atoms at
            # s_j with mass P_{j-1} - P_j (P_0 = 1), each rounded up (>= the exact one), the rest above c
            law = (grid, -np.diff(np.concatenate([[1.0], bound])) * (1.0 + 4.0 * UNIT_ROUNDOFF))
        values, masses = law
        above_c = (c * tail + tail_integral(c, tail, self.moments)) * (1.0 + 2.0 * UNIT_ROUNDOFF)
        mean_y = (float(np.dot(masses, values)) + above_c) * (1.0 + gamma_n(values.size + 4))
        remove_cap = (above_c + (blocks - 1) * mean_y * tail) * (1.0 + 4.0 * UNIT_ROUNDOFF)
        self.mean = mean_y
        self.grid, self.survival, self.tail = grid, bound, tail  # P_j on the grid, P(Y > c) = P_K (benchmarks)
        self.lower_survival = lower
        sigma = max(1.0 / math.sqrt(float(np.max(np.diag(cov)))), BRACKET_MIN_SIGMA)
        self._bracket = _BlockLawBracket(CellLaw(values, masses), sigma, blocks, Direction.REMOVE, remove_cap)

    def upper(self, epsilons) -> np.ndarray:
        """Upper bounds on δ_remove(ε) (non-increasing in ε)."""
        return self._bracket.delta_side(np.asarray(epsilons, dtype=float), "remove", "upper")


def tail_integral(c: float, level: float, moments: dict[int, float]) -> float:
    """An upper bound on ∫_c^∞ min(level, M̄(s)) ds, M̄(s) = (1 + 20u) min_p E[S^p]/s^p (a continuous function at
    least the value :func:`markov` computes, whose pow, quotient and raising by 10 ulps move it by under 20 ulps).
    Since min(a, (1 + x) b) <= (1 + x) min(a, b), it is at most 1 + 20u times ∫ min(level, E[S^p] s^{-p}) ds for
    each p; for any s* >= c that integral is at most level (s* - c) + E[S^p] s*^{1-p}/(p - 1) (the first term bounds
    the integrand by ``level`` on [c, s*], the second by the p-th Markov bound beyond), taken at s* = max(c,
    (E[S^p]/level)^{1/p}) (where the two meet; any s* >= c is valid, so its rounding does not matter), the smallest
    over p, raised by 16 ulps for the few roundings of each expression and by the 20 of M̄. +inf where every moment
    is."""
    best = math.inf
    for p, mp in moments.items():
        if not math.isfinite(mp):
            continue
        meet = (mp / level) ** (1.0 / p) if level > 0.0 else math.inf
        knee = max(c, meet) if math.isfinite(meet) else c
        value = level * (knee - c) + mp * knee ** (1 - p) / (p - 1)
        best = min(best, value)
    return best * (1.0 + 40.0 * UNIT_ROUNDOFF)


@functools.lru_cache(maxsize=8)
def fits(pair) -> bool:
    """Whether G is banded in the natural order with J >= 2 blocks of ``MIN_SIZE`` to ``MAX_SIZE`` bins
    (:func:`~epscert.matrix.block_bound.block_count`)."""
    band, blocks = band_and_blocks(pair.gram, pair.sigma)
    return band is not None and MIN_SIZE <= band.shape[1] // blocks <= MAX_SIZE


def law_block_count(bins: int, natural: int) -> int:
    """J of the law (module constants ``LAW_MAX_SIZE``, ``LAW_MIN_BLOCKS``): b/m for the largest divisor m of b
    with b/natural <= m <= LAW_MAX_SIZE and b/m >= LAW_MIN_BLOCKS; ``natural`` itself where there is none. Any J
    with b/J >= h + 1 is sound (step 1); this only picks one, from b and h alone."""
    low = bins // natural
    for size in range(min(LAW_MAX_SIZE, bins // LAW_MIN_BLOCKS), low - 1, -1):
        if bins % size == 0:
            return bins // size
    return natural


@functools.lru_cache(maxsize=8)
def dominating_law(pair) -> tuple[int, np.ndarray, np.ndarray, dict[int, float]] | None:
    """(J, C, F, E[S_F^p] for p <= 4, of F Fᵀ raised by its rounding: the far-tail moments of step 4) of steps
    1-4, or None where the pair does not
    :func:`fits` or no factor is found (an SVD or a Cholesky factorisation fails)."""
    if not fits(pair):
        return None
    band, natural = band_and_blocks(pair.gram, pair.sigma)
    blocks = law_block_count(band.shape[1], natural)
    try:
        cov = dominating_covariance(*split_blocks(band, blocks))
        factor = dominating_factor(cov)
    except (linalg.LinAlgError, ValueError):
        return None
    if not (np.all(np.isfinite(cov)) and np.all(np.isfinite(factor))):
        return None
    return blocks, cov, factor, block_moments(raised_covariance(factor))


def applies(pair) -> bool:
    """Whether :class:`BlockLawBound` is formed for a pair: it :func:`fits`, the dominating covariance has a factor,
    and its tail is light: c · min_{p <= 4} E[S_F^p]/c^p <= ``TAIL_CEILING``, c the survival grid's end. All of it
    is deterministic (no draw), so the split of β that rests on it (:mod:`epscert.results.rows`) is fixed in
    advance and sound whichever way it falls. Where the test fails the Markov tail from p <= 4 alone leaves the cap
    term c · P(Y > c) of step 6 above every δ the tool certifies (at b = 192, 96 bands, σ = 0.5 E[S²] is 7e98);
    the values' UCB then keeps the whole β and the draws are not made."""
    law = dominating_law(pair)
    if law is None:
        return False
    c = float(survival_grid()[-1])
    return c * float(markov(np.array([c]), law[3])[0]) <= TAIL_CEILING


def _formed(kind, pair, samples: int, seed: int, error_prob: float):
    """``kind(pair, ..)``, or None where the block law does not apply or the bound fails on the way (a numerical
    failure after :func:`applies`: the caller's other bounds, still at their shares of β, stand alone)."""
    if not applies(pair):
        return None
    try:
        return kind(pair, samples, seed, error_prob)
    except (linalg.LinAlgError, ValueError, FloatingPointError):
        return None


@functools.lru_cache(maxsize=8)
def add_law_bound(pair, samples: int, seed: int, error_prob: float) -> BlockLawAddBound | None:
    """The (cached) ADD bound of one pair, sample count, seed and β, or None (:func:`_formed`)."""
    return _formed(BlockLawAddBound, pair, samples, seed, error_prob)


@functools.lru_cache(maxsize=8)
def remove_bound(pair, samples: int, seed: int, error_prob: float) -> BlockLawBound | None:
    """The (cached) REMOVE bound of one pair, sample count, seed and β, or None (:func:`_formed`)."""
    return _formed(BlockLawBound, pair, samples, seed, error_prob)
