"""The draws of one block's mean for :mod:`epscert.matrix.block_law` (its step 4; the argument is in that module's
docstring): plain draws of S_F, and draws tilted at order 4, whose tuple of sites comes from an exactly sampled law
within a certified factor ρ of the tilt's own, with the bounds on their rounding and the UCBs of the survival
function from the tilted values."""

from __future__ import annotations

import hashlib
import math

import numpy as np

from epscert.allocation.cells import rel_product
from epscert.bounds.kl import kl_ucb
from epscert.matrix.add_decoupled import UNIT_ROUNDOFF, gamma_n
from epscert.rng import stream_generator

#: Rows of one chunk of draws
CHUNK = 16_384
#: The stream of the block draws: rng.stream_generator(seed, STREAM_KEY)
STREAM_KEY = int.from_bytes(hashlib.sha256(b"epscert.matrix.block_law").digest()[:8], "big")
TILTED_STREAM_KEY = int.from_bytes(hashlib.sha256(b"epscert.matrix.block_law.tilted").digest()[:8], "big")
#: Order θ of the tilted draws: tuples t = (k_1, .., k_4) of the block's sites (step 4)
TILT_ORDER = 4
#: Integer weights of the tuple sampler: ω = floor(2^WEIGHT_BITS · ŵ/ŵ_max) + 1, exact in int64 (m² (2^40 + 1) <
#: 2^54 for m <= 96, block_law.MAX_SIZE)
WEIGHT_BITS = 40
#: Largest |entry| of the covariance for the tuple law (:class:`TupleLaw`): every weight's term within e^{±600}
MAX_LOG_WEIGHT = 100.0
#: Tilted draws whose tuples are drawn at once (memory: about 40 bytes per draw while drawing them); a multiple of
#: CHUNK
TUPLE_BLOCK = 1 << 20


class TupleLaw:
    """An exactly sampled law π' on [m]^4 close to the order-4 tilt's tuple law π_t = e^{c_t}/Z, c_t =
    Σ_{i<j} Σ_{k_i k_j}, Z = Σ_t e^{c_t} = m^4 E[S_F^4], Σ = F Fᵀ (step 4), with ``rho`` <= min_t π'_t/π_t.

    Two stages, each from integer weights ω = floor(2^40 ŵ/ŵ_max) + 1 (>= 1, exact in int64) drawn exactly (a
    uniform integer below their sum, located in their cumulative sum): the pair (k_1, k_2) with ŵ the computed
    μ_{12} = Σ_{k_3 k_4} e^{c_t} = E_{12} aᵀ E a (E = exp(Σ) entrywise, a = E_{k_1,:} ∘ E_{k_2,:}), then (k_3, k_4)
    given it with ŵ the computed E_{34} a_3 a_4 (∝ e^{c_t} for that pair). Every computed weight, a sum of at most
    m² positive terms each a product of 6 computed exponentials of computed entries of Σ (|fl(F Fᵀ) - F Fᵀ| <= d
    entrywise, d = 2 γ_{m+2} max fl(|F||F|ᵀ) as in :func:`raised_covariance`; exp with relative error at most 4u
    as assumed in :func:`block_moments`) with at most m² + 4 more roundings each, is within the factor
    λ = e^{6d} / ((1 - 4u)^6 (1 - γ_{m²+8})) of its exact value both ways. No term under- or overflows: the
    computed entries of Σ are refused beyond ±``MAX_LOG_WEIGHT`` = 100 (ValueError), so every term lies within
    e^{±600} ⊂ (2^-866, 2^866). For n weights with exact values w_i and sum W: ω_i > 2^40 (1 - u) ŵ_i/ŵ_max >= 2^40
    (1 - u) w_i/(λ ŵ_max) and Σ ω <= 2^40 (1 + u) λ W/ŵ_max + n, with ŵ_max <= λ W, so (ω_i/Σ ω)/(w_i/W) >=
    (1 - u)/(λ² (1 + u + n 2^-40)); ``rho`` is the product of the two stages' bounds, rounded down."""

    def __init__(self, factor: np.ndarray) -> None:
        size = factor.shape[0]
        self.size = size
        absf = np.abs(factor)
        d = 2.0 * gamma_n(size + 2) * float(np.max(absf @ absf.T))
        cov = factor @ factor.T
        if not (np.all(np.isfinite(cov)) and float(np.max(np.abs(cov))) <= MAX_LOG_WEIGHT):
            raise ValueError(f"the order-4 tilt needs the covariance's entries within ±{MAX_LOG_WEIGHT:g}")
        self.exp_cov = np.exp(cov)
        f2 = (self.exp_cov[:, None, :] * self.exp_cov[None, :, :]).reshape(size * size, size)  # a for every pair
        first = np.einsum("ak,kl,al->a", f2, self.exp_cov, f2) * self.exp_cov.ravel()
        self.first_cum = self._cumulative(first)
        lam = math.exp(6.0 * d) / ((1.0 - 4.0 * UNIT_ROUNDOFF) ** 6 * (1.0 - gamma_n(size * size + 8)))
        lam *= 1.0 + 8.0 * UNIT_ROUNDOFF  # its own rounding (a few operations), upward
        stage = (1.0 - UNIT_ROUNDOFF) / (lam * lam * (1.0 + UNIT_ROUNDOFF + size * size * 2.0**-WEIGHT_BITS))
        self.rho = stage * stage * (1.0 - 16.0 * UNIT_ROUNDOFF)  # each stage's bound computed within 8 ulps, down

    @staticmethod
    def _cumulative(weights: np.ndarray) -> np.ndarray:
        top = float(np.max(weights)) if weights.size else math.nan
        if not (np.all(np.isfinite(weights)) and np.all(weights >= np.finfo(float).tiny) and math.isfinite(top)):
            raise ValueError("a tuple weight of the order-4 tilt is out of the normal floating-point range")
        omega = np.floor(np.ldexp(weights / top, WEIGHT_BITS)).astype(np.int64) + 1
        return np.cumsum(omega)

    def second_cumulative(self, code: int) -> np.ndarray:
        """The cumulative integer weights of (k_3, k_4) given the pair code k_1 m + k_2."""
        k1, k2 = divmod(int(code), self.size)
        a = self.exp_cov[k1] * self.exp_cov[k2]
        return self._cumulative((self.exp_cov * np.outer(a, a)).ravel())

    @staticmethod
    def locate(cumulative: np.ndarray, drawn: np.ndarray) -> np.ndarray:
        """The cell i with cumulative[i-1] <= r < cumulative[i] (cumulative[-1] read as 0) of each uniform integer
        r in [0, cumulative[-1]): i with probability ω_i/Σ ω exactly."""
        return np.searchsorted(cumulative, drawn, side="right")

    def draw(self, rng: np.random.Generator, count: int) -> np.ndarray:
        """``count`` i.i.d. tuples from π' as a (count, 4) array: the first pairs, then for each distinct pair the
        second pairs of the draws that have it (fresh randomness each, written back at those draws' places, so the
        draws stay i.i.d. in their order)."""
        size = self.size
        first = self.locate(self.first_cum, rng.integers(0, self.first_cum[-1], count))
        second = np.empty(count, dtype=np.int64)
        order = np.argsort(first, kind="stable")
        ranked = first[order]
        starts = np.flatnonzero(np.concatenate([[True], ranked[1:] != ranked[:-1]]))
        for lo, hi in zip(starts, np.append(starts[1:], count)):
            cum = self.second_cumulative(int(ranked[lo]))
            second[order[lo:hi]] = self.locate(cum, rng.integers(0, cum[-1], hi - lo))
        return np.stack([first // size, first % size, second // size, second % size], axis=1).astype(np.int32)


def draw_means(factor: np.ndarray, draws: int, seed: int, tuples: TupleLaw | None = None
               ) -> tuple[np.ndarray, float]:
    """(sorted computed block means, r): ``draws`` means of exp(x_k - v_k/2), x = F z, v = diag(F Fᵀ), and r with
    exact <= computed · (1 + r) and computed <= exact · (1 + r) for every draw. z ~ N(0, I), or with ``tuples``
    (a :class:`TupleLaw`) z = g + w_{k_1} + .. + w_{k_4}, g ~ N(0, I), w_k = F's row k (step 4: then
    x ~ N(Σ(e_{k_1} + .. + e_{k_4}), Σ), Σ = F Fᵀ); the tuples of each ``TUPLE_BLOCK`` draws are drawn before
    their normals (fresh values of the stream each, so the draws stay i.i.d.). The computed z, its shifts added
    one by one, is within γ_4 A of the exact one, A = |g| + Σ_j |w_{k_j}| <= max|g| + 4 max|F| =: A_max entrywise;
    so x_k is
    within γ_{m+4+3} A_max max_k Σ_j |F_kj| + 2 γ_{m+2} max v_k/2 of its exact value (γ_{m+3} and A_max = max|g|
    for plain draws, z = g exactly), the exponentials and the mean of m terms within γ_{m+2} more. Plain and
    tilted draws have streams of their own."""
    rng = stream_generator(seed, TILTED_STREAM_KEY if tuples is not None else STREAM_KEY)
    size = factor.shape[0]
    offset = 0.5 * (factor * factor).sum(axis=1)
    reach = float(np.max(np.abs(factor).sum(axis=1)))
    shifts = 0 if tuples is None else TILT_ORDER
    out = np.empty(draws)
    g_max = 0.0
    picked, block_start = None, 0
    for start in range(0, draws, CHUNK):
        rows = min(CHUNK, draws - start)
        if tuples is not None and start % TUPLE_BLOCK == 0:
            picked, block_start = tuples.draw(rng, min(TUPLE_BLOCK, draws - start)), start
        z = rng.standard_normal((rows, size))
        g_max = max(g_max, float(np.max(np.abs(z))))
        if picked is not None:
            for j in range(shifts):
                z += factor[picked[start - block_start: start - block_start + rows, j]]
        out[start: start + rows] = np.exp(z @ factor.T - offset).mean(axis=1)
    a_max = (g_max + shifts * float(np.max(np.abs(factor)))) * (1.0 + 2.0 * UNIT_ROUNDOFF)
    e_x = gamma_n(size + shifts + 3) * a_max * reach + 2.0 * gamma_n(size + 2) * float(np.max(offset))
    # exact <= computed · e^{e_x} / ((1 - u)(1 - γ_m)) <= computed · (1 + expm1(e_x)) (1 + γ_{m+2})², and the
    # other way round alike
    return np.sort(out), rel_product(math.expm1(e_x), gamma_n(size + 2), gamma_n(size + 2))


def tilted_survival_ucbs(means: np.ndarray, rel: float, grid: np.ndarray, share: float, weight: float
                         ) -> np.ndarray:
    """UCBs of P(S_F > s) at the grid points s from sorted tilted draws (step 4), ``weight`` = κ >= E[S_F^4]/ρ:
    with q' the law of the draws, dq'/dp >= ρ S^4/E[S^4], so P(S_F > s) = E_q'[V], V = 1{S > s} dp/dq', and the
    exact values V_l of the draws are i.i.d. in [0, κ/s^4]. Each is at most κ (1 + r)^4/Ŝ_l^4 where the computed
    Ŝ_l > s (1 - 4u)/(1 + r) and 0 elsewhere (every exact S > s is counted, and 1/S <= (1 + r)/Ŝ as r is
    two-sided). The computed mean of those is raised past its rounding: 1/Ŝ^4 (a quotient and two squarings) within
    γ_7, the suffix sums of positive terms over the sorted draws within γ_N, together within γ_{N+8}, covered by
    1 + 2γ_{N+8} >= 1/(1 - γ_{N+8}); (1 + r)^4, the products by it and by κ and the raising factors, about ten
    roundings, by the factor 1 + 16u; a value below the normal range (Ŝ > 2^255) by an absolute 2^-1074 per value
    before the raise. It is then at least the exact values' mean; the KL–Chernoff UCB, increasing in the mean, at scale
    fl(κ/s^4) raised by 8 ulps, at ``share`` each. (Not the raised values themselves: r depends on all the draws,
    so those are not i.i.d.)"""
    count = means.size
    with np.errstate(divide="ignore", over="ignore"):
        inverse = 1.0 / means  # a mean that underflowed to 0 lies below every threshold: never summed
        square = inverse * inverse
        fourth = square * square
    suffix = np.concatenate([np.cumsum(fourth[::-1])[::-1], [0.0]])
    start = np.searchsorted(means, grid / (1.0 + rel) * (1.0 - 4.0 * UNIT_ROUNDOFF), side="right")
    raise_sum = (1.0 + rel) ** 4 * (1.0 + 16.0 * UNIT_ROUNDOFF) * weight * (1.0 + 2.0 * gamma_n(count + 8))
    out = np.empty(grid.size)
    for j, s in enumerate(grid):
        scale = weight / float(s) ** 4 * (1.0 + 8.0 * UNIT_ROUNDOFF)
        mean = min((float(suffix[start[j]]) + count * 2.0**-1074) * raise_sum / count, scale)
        out[j] = kl_ucb(mean, count, share, scale=scale)
    return out
