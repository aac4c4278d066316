"""The draws of one block's mean for :mod:`epscert.matrix.block_law` (its step 4; the argument is in that module's
docstring): plain draws of S_F, and draws tilted at order 4 and power a, whose tuple of sites comes from an exactly
sampled law within a certified factor ρ of the tilt's own, with the bounds on their rounding and the UCBs of the
survival function from the tilted values."""

from __future__ import annotations

import hashlib
import math

import numpy as np

from epscert.allocation.cells import rel_product
from epscert.bounds.kl import kl_ucbs
from epscert.matrix.add_decoupled import UNIT_ROUNDOFF, gamma_n
from epscert.rng import stream_generator

#: Rows of one chunk of draws
CHUNK = 16_384
#: The stream of the block draws: rng.stream_generator(seed, STREAM_KEY)
STREAM_KEY = int.from_bytes(hashlib.sha256(b"epscert.matrix.block_law").digest()[:8], "big")
TILTED_STREAM_KEY = int.from_bytes(hashlib.sha256(b"epscert.matrix.block_law.tilted").digest()[:8], "big")
#: Order θ of the tilted draws: tuples t = (k_1, .., k_4) of the block's sites (step 4)
TILT_ORDER = 4
#: Power a >= 1 of the tilt (step 4): the draws' density against the plain law is at least ρ M_a^4/E[M_a^4], M_a the
#: mean of the W_k^a, so their values fall like s^{-4a} in the tail. At n = b = 10^4, 64 bands, σ = 2 (blocks of
#: 200), a = 1.5 gave ε_remove(10⁻¹⁰) <= 0.292 where a = 1 gave 0.574, a = 1.25 0.319 and a = 2 0.328 (prototype,
#: the same draws' budget); at 10⁻⁶ and 10⁻⁸ all but a = 2 gave the same
TILT_POWER = 1.5
#: Integer weights of the tuple sampler: ω = floor(2^WEIGHT_BITS · ŵ/ŵ_max) + 1, exact in int64 (their sums,
#: m² (2^40 + 1) < 2^56 for m <= 255, block_law.LAW_MAX_SIZE = 200)
WEIGHT_BITS = 40
#: Largest |entry| of the tuple law's log-weights L (:class:`TupleLaw`): every weight's term within e^{±600}
MAX_LOG_WEIGHT = 100.0
#: Tilted draws whose tuples are drawn at once (memory: about 40 bytes per draw while drawing them); a multiple of
#: CHUNK
TUPLE_BLOCK = 1 << 20


def log_weights(cov: np.ndarray, power: float) -> np.ndarray:
    """L = a² Σ + (a² - a)/6 (v_j + v_k), v = diag(Σ), as computed: the tuple weight of step 4 is e^{γ_t} with
    γ_t = Σ_{i<j} L_{k_i k_j} = a² c_t + (a² - a)/2 Σ_i v_{k_i} (each site is in three of the four's six pairs).
    Increasing in every entry of Σ for a >= 1."""
    diag = np.diag(cov)
    return (power * power) * cov + ((power * power - power) / 6.0) * (diag[:, None] + diag[None, :])


class TupleLaw:
    """An exactly sampled law π' on [m]^4 close to the tilt's tuple law π_t = e^{γ_t}/Z, γ_t = Σ_{i<j} L_{k_i k_j}
    (:func:`log_weights` of Σ = F Fᵀ at power a: a² c_t + (a² - a)/2 Σ_i v_{k_i}, c_t = Σ_{i<j} Σ_{k_i k_j}),
    Z = Σ_t e^{γ_t} = m^4 E[M_a^4] (step 4), with ``rho`` <= min_t π'_t/π_t. At a = 1, γ_t = c_t and M_1 = S_F.

    Two stages, each from integer weights ω = floor(2^40 ŵ/ŵ_max) + 1 (>= 1, exact in int64) drawn exactly (a
    uniform integer below their sum, located in their cumulative sum): the pair (k_1, k_2) with ŵ the computed
    μ_{12} = Σ_{k_3 k_4} e^{γ_t} = E_{12} αᵀ E α (E = exp(L) entrywise, α = E_{k_1,:} ∘ E_{k_2,:}), then (k_3, k_4)
    given it with ŵ the computed E_{34} α_3 α_4 (∝ e^{γ_t} for that pair). The computed entries of L are within
    d_L = (a² + (a² - a)/3) d + 8u (a² max|Σ̂| + (a² - a)/3 max v̂) of the exact ones, where |fl(F Fᵀ) - F Fᵀ| <= d
    entrywise, d = 2 γ_{m+2} max fl(|F||F|ᵀ) as in :func:`~epscert.matrix.block_law.raised_covariance` (the
    products by a² and (a² - a)/6 and the two sums, each a rounding of at most u of its result, the constants a² and
    (a² - a)/6 themselves within u: at most 4 such relative errors on each term, covered by 8u with room). Every
    computed weight, a sum of at most m² positive terms each a product of 6 computed exponentials of computed entries
    of L (exp with relative error at most 4u as assumed in :func:`~epscert.matrix.block_law.block_moments`) with at
    most m² + 4 more roundings each, is within the factor λ = e^{6 d_L} / ((1 - 4u)^6 (1 - γ_{m²+8})) of its exact
    value both ways. No term under- or overflows: the computed entries of L are refused beyond ±``MAX_LOG_WEIGHT``
    = 100 (ValueError), so every term lies within e^{±600} ⊂ (2^-866, 2^866). For n weights with exact values w_i and
    sum W: ω_i > 2^40 (1 - u) ŵ_i/ŵ_max >= 2^40 (1 - u) w_i/(λ ŵ_max) and Σ ω <= 2^40 (1 + u) λ W/ŵ_max + n, with
    ŵ_max <= λ W, so (ω_i/Σ ω)/(w_i/W) >= (1 - u)/(λ² (1 + u + n 2^-40)); ``rho`` is the product of the two stages'
    bounds, rounded down."""

    def __init__(self, factor: np.ndarray, power: float = TILT_POWER) -> None:
        if not (math.isfinite(power) and power >= 1.0):
            raise ValueError(f"the tilt's power must be >= 1 (the power mean M_a >= S^a needs it), got {power}")
        size = factor.shape[0]
        self.size = size
        self.power = float(power)
        absf = np.abs(factor)
        d = 2.0 * gamma_n(size + 2) * float(np.max(absf @ absf.T))
        cov = factor @ factor.T
        logw = log_weights(cov, power)
        if not (np.all(np.isfinite(logw)) and float(np.max(np.abs(logw))) <= MAX_LOG_WEIGHT):
            raise ValueError(f"the order-4 tilt needs its log-weights' entries within ±{MAX_LOG_WEIGHT:g}")
        site = (power * power - power) / 3.0  # the two v terms of an entry together: their weight in d_L
        d_l = ((power * power + site) * d + 8.0 * UNIT_ROUNDOFF * (power * power * float(np.max(np.abs(cov)))
                                                                   + site * float(np.max(np.diag(cov)))))
        d_l *= 1.0 + 8.0 * UNIT_ROUNDOFF  # its own few roundings, upward
        self.exp_weight = np.exp(logw)
        f2 = (self.exp_weight[:, None, :] * self.exp_weight[None, :, :]).reshape(size * size, size)  # α per pair
        first = np.einsum("ak,kl,al->a", f2, self.exp_weight, f2) * self.exp_weight.ravel()
        self.first_cum = self._cumulative(first)
        lam = math.exp(6.0 * d_l) / ((1.0 - 4.0 * UNIT_ROUNDOFF) ** 6 * (1.0 - gamma_n(size * size + 8)))
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
        alpha = self.exp_weight[k1] * self.exp_weight[k2]
        return self._cumulative((self.exp_weight * np.outer(alpha, alpha)).ravel())

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


def draw_means(factor: np.ndarray, draws: int, seed: int) -> tuple[np.ndarray, float]:
    """(sorted computed block means, r): ``draws`` plain means of exp(x_k - v_k/2), x = F z, z ~ N(0, I),
    v = diag(F Fᵀ), and r with exact <= computed · (1 + r) and computed <= exact · (1 + r) for every draw
    (:func:`_exponent_error` with A_max = max|g|, z = g exactly)."""
    rng = stream_generator(seed, STREAM_KEY)
    offset = 0.5 * (factor * factor).sum(axis=1)
    out = np.empty(draws)
    g_max = 0.0
    for start in range(0, draws, CHUNK):
        z = rng.standard_normal((min(CHUNK, draws - start), factor.shape[0]))
        g_max = max(g_max, float(np.max(np.abs(z))))
        out[start: start + z.shape[0]] = np.exp(z @ factor.T - offset).mean(axis=1)
    e_x = _exponent_error(factor, offset, g_max, 0)
    return np.sort(out), rel_product(math.expm1(e_x), gamma_n(factor.shape[0] + 2), gamma_n(factor.shape[0] + 2))


def draw_tilted(factor: np.ndarray, draws: int, seed: int, tuples: TupleLaw
                ) -> tuple[np.ndarray, np.ndarray, float, float]:
    """(computed means S, computed power means M_a, r, r_a), both sorted by S: ``draws`` tilted draws of step 4,
    z = g + a (w_{k_1} + .. + w_{k_4}), g ~ N(0, I), w_k = F's row k, the tuple from ``tuples`` (a
    :class:`TupleLaw` at power a; then x = F z ~ N(a Σ(e_{k_1} + .. + e_{k_4}), Σ)), y = x - v/2, S = mean_k e^{y_k}
    and M_a = mean_k e^{a y_k}; exact <= computed · (1 + r) and computed <= exact · (1 + r) for every S, and alike
    with r_a for every M_a. The tuples of each ``TUPLE_BLOCK`` draws are drawn before their normals (fresh values of
    the stream each, so the draws stay i.i.d.).

    Rounding: the shifts a w_k are formed once (each entry within u a |w_k|) and added one by one, so the computed z
    is within γ_4 (|g| + Σ_j |fl(a w_{k_j})|) + u a Σ_j |w_{k_j}| <= γ_5 A of the exact one, A <= A_max =
    (max|g| + 4 a max|F|)(1 + 2u) entrywise, and y_k within e_x (:func:`_exponent_error` with 5 roundings of z) of
    its exact value. fl(a ŷ_k) is then within a e_x + u a max|ŷ| of a y_k (the constant a exact, as the default 1.5
    is; otherwise one rounding more of the same size, covered by the factor 2 on that term), and the exponentials
    and the mean of m terms within γ_{m+2} more, each way (as for S)."""
    rng = stream_generator(seed, TILTED_STREAM_KEY)
    power = tuples.power
    shifts = power * factor
    offset = 0.5 * (factor * factor).sum(axis=1)
    means, powers = np.empty(draws), np.empty(draws)
    g_max = y_max = 0.0
    picked, block_start = None, 0
    for start in range(0, draws, CHUNK):
        rows = min(CHUNK, draws - start)
        if start % TUPLE_BLOCK == 0:
            picked, block_start = tuples.draw(rng, min(TUPLE_BLOCK, draws - start)), start
        z = rng.standard_normal((rows, factor.shape[0]))
        g_max = max(g_max, float(np.max(np.abs(z))))
        for j in range(TILT_ORDER):
            z += shifts[picked[start - block_start: start - block_start + rows, j]]
        y = z @ factor.T
        y -= offset
        y_max = max(y_max, float(np.max(np.abs(y))))
        means[start: start + rows] = np.exp(y).mean(axis=1)
        y *= power
        powers[start: start + rows] = np.exp(y).mean(axis=1)
    size = factor.shape[0]
    a_max = (g_max + TILT_ORDER * power * float(np.max(np.abs(factor)))) * (1.0 + 2.0 * UNIT_ROUNDOFF)
    e_x = _exponent_error(factor, offset, a_max, TILT_ORDER + 1)
    e_a = (power * e_x + 2.0 * UNIT_ROUNDOFF * power * y_max) * (1.0 + 4.0 * UNIT_ROUNDOFF)
    order = np.argsort(means, kind="stable")
    return (means[order], powers[order],
            rel_product(math.expm1(e_x), gamma_n(size + 2), gamma_n(size + 2)),
            rel_product(math.expm1(e_a), gamma_n(size + 2), gamma_n(size + 2)))


def _exponent_error(factor: np.ndarray, offset: np.ndarray, a_max: float, roundings: int) -> float:
    """A bound on |fl(fl(z Fᵀ) - v/2)_k - (x_k - v_k/2)| for a computed z within γ_roundings A of the exact one,
    |A| <= a_max entrywise (the exact |z| too): the product's inner products of m terms and the z error give
    γ_{m+roundings+3} A_max max_k Σ_j |F_kj|, the computed ``offset`` v_k/2 (sums of m squares) 2 γ_{m+2} max v_k/2. The
    exponentials and the mean of m terms then add γ_{m+2} each way: exact <= computed · e^{e_x} / ((1 - u)(1 - γ_m))
    <= computed · (1 + expm1(e_x)) (1 + γ_{m+2})², and the other way round alike."""
    size = factor.shape[0]
    reach = float(np.max(np.abs(factor).sum(axis=1)))
    return gamma_n(size + roundings + 3) * a_max * reach + 2.0 * gamma_n(size + 2) * float(np.max(offset))


def tilted_survival_ucbs(means: np.ndarray, powers: np.ndarray, rel: float, rel_power: float, grid: np.ndarray,
                         share: float, weight: float, power: float) -> np.ndarray:
    """UCBs of P(S_F > s) at the grid points s from tilted draws sorted by S (step 4; :func:`draw_tilted`),
    ``weight`` = κ >= E[M_a^4]/ρ at ``power`` a >= 1: with q' the law of the draws, dq'/dp >= ρ M_a^4/E[M_a^4], so
    P(S_F > s) = E_q'[V], V = 1{S > s} dp/dq' <= 1{S > s} κ/M_a^4, and as M_a >= S^a (the power mean, a >= 1) the
    exact values V_l of the draws are i.i.d. in [0, κ/s^{4a}]. Each is at most κ (1 + r_a)^4/M̂_l^4 where the
    computed Ŝ_l > s (1 - 4u)/(1 + r) and 0 elsewhere (every exact S > s is counted, and 1/M_a <= (1 + r_a)/M̂_a as
    r_a is two-sided). The computed mean of those is raised past its rounding: 1/M̂^4 (a quotient and two squarings)
    within γ_7, the suffix sums of positive terms over the sorted draws within γ_N, together within γ_{N+8}, covered
    by 1 + 2γ_{N+8} >= 1/(1 - γ_{N+8}); (1 + r_a)^4, the products by it and by κ and the raising factors, about ten
    roundings, by the factor 1 + 16u; a value below the normal range (M̂ > 2^255) by an absolute 2^-1074 per value
    before the raise. It is then at least the exact values' mean; the KL–Chernoff UCB, increasing in the mean, at
    scale fl(κ/s^{4a}) raised by 8 ulps (pow within 2 ulps, the quotient within one), at ``share`` each. (Not the
    raised values themselves: r and r_a depend on all the draws, so those are not i.i.d.)"""
    count = means.size
    with np.errstate(divide="ignore", over="ignore"):
        inverse = 1.0 / powers  # M̂ = 0 needs every a ŷ_k < -745, so Ŝ < e^-496: below every s, never summed
        square = inverse * inverse
        fourth = square * square
    suffix = np.concatenate([np.cumsum(fourth[::-1])[::-1], [0.0]])
    start = np.searchsorted(means, grid / (1.0 + rel) * (1.0 - 4.0 * UNIT_ROUNDOFF), side="right")
    raise_sum = (1.0 + rel_power) ** 4 * (1.0 + 16.0 * UNIT_ROUNDOFF) * weight * (1.0 + 2.0 * gamma_n(count + 8))
    scales = weight / np.asarray(grid, dtype=np.float64) ** (TILT_ORDER * power) * (1.0 + 8.0 * UNIT_ROUNDOFF)
    return kl_ucbs(np.minimum((suffix[start] + count * 2.0**-1074) * raise_sum / count, scales), count, share,
                   scale=scales)
