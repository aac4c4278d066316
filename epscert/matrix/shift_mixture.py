"""The shift mixture: δ_remove's values where the loss tilt reaches no useful order (one participation, b in the
thousands, wide bands).

Notation of :mod:`epscert.matrix.values`: under Q, g ~ N(0, G) in R^b, x_k = g_k - v_k/2 (v = diag G),
L = log((1/b) Σ_k e^{x_k}) = log dP/dQ, δ_remove(ε) = E_Q[(e^L - e^ε)_+]. The sampler draws g = M z with z ~ N(0, I)
and M M^T = G (M the factor of :mod:`epscert.matrix.strategies.gram` with its permutation); as for every estimator
of the package, the computed M z is taken as the draw of N(0, G) and the computed L as the loss (the factor's and the
sum's rounding change the sampled law by a negligible amount, not a bound).

Why. :mod:`epscert.matrix.loss_tilt` draws from Q_θ ∝ e^{θL} Q, whose values lie in [0, B_θ(ε)], B_θ the Rényi
bound. Its tables hold b^{θ-1} entries, so at b > 2896 they reach θ = 2 only, and the cluster proposal of
:mod:`epscert.matrix.cluster_tilt` does not form for 64 bands (its window states). At n = b = 10^4, 64 bands, σ = 2,
B_2(0.18) = 0.21 against δ ≈ 10⁻⁶: from 10⁵ draws the θ = 2 values crossed δ = 10⁻⁶ at ε ≈ 0.186 with a standard
error of 40% of δ, and their lower confidence bound was useless (δ ≈ 1.3·10⁻⁷ at 0.178). The loss there is close to
a sum of many weakly dependent terms, so its upper tail is reached by moving every g_k up together.

The proposal. With η ∈ R^b a fixed vector and λ = 1/``DEFENSIVE``,

    π = λ P + (1 - λ) Π_η,      Π_η: g = M (z + η), z ~ N(0, I)      (so g ~ N(M η, G)).

In z-space (w = M^{-1} g, where Q is N(0, I)), dΠ_η/dQ = exp(η^T w - |η|²/2), and dP/dQ = e^{L}. Hence

    Y = (e^L - e^ε)_+ / (λ e^L + (1 - λ) e^{η^T w - |η|²/2})
      = (1 - e^{ε - L})_+ / (λ + (1 - λ) e^{η^T w - |η|²/2 - L})

has E_π[Y] = E_Q[(e^L - e^ε)_+] = δ_remove(ε) (π has a positive density against Q everywhere), and, the denominator
being at least λ e^L,

    0 <= Y <= (1 - e^{ε - L})_+ / λ < 1/λ:          the proven range (``value_range``, raised by 4 FLOAT_REL).

That range is far above δ, so these values give no useful upper confidence bound (the rule below uses them only
where the block-law bound of :mod:`epscert.matrix.block_law` gives REMOVE's, at its own share of β); what they give
is a low variance, so a lower confidence bound close to δ (:mod:`epscert.bounds.truncated_lcb`: truncation needs no
range, only Y >= 0) and a point estimate. Against Π_η alone, λ costs at most a factor 1/(1 - λ) in the second
moment: E_π[Y²] = E_Q[h² dQ/dπ] <= E_Q[h² dQ/dΠ_η]/(1 - λ), h = (e^L - e^ε)_+.

The shift. η = t M^T 1, so that Π_η's mean is M η = t G 1: every g_k moves up by t times its row sum of G, and L by
about t r̄, r̄ = 1^T G 1 / b (the mean row sum). t = ε_ref / r̄ with ε_ref the median of the run's grid (fixed before
the draws; any η keeps Y unbiased with the same range, the choice moves only the variance). Measured at n = b = 10^4,
64 bands, σ = 2 (5,000 draws of Π_η alone, one core, 0.4 ms a draw): the relative standard deviation of Y at
ε = 0.178-0.19 was 8-11 at t r̄ = 0.08, 4.3-4.8 at 0.16-0.18 and 6.6-6.9 at 0.20; at ε = 0.22-0.24 (δ ≈ 2·10⁻⁸ to
3·10⁻⁹) 6-7 at t r̄ = 0.22; at 0.26-0.29 (δ ≈ 3·10⁻¹⁰ to 8·10⁻¹²) 9-23 at 0.22-0.28. The mixture itself (heavy
draws are rare, so these figures move between runs): 7 in the certifying pass of 10⁵ draws at δ = 10⁻⁶ (a standard
error of 2.2% of δ), 6-17 in a reviewer's runs of 2-4·10⁴ draws.

Drawing (exact law). A row is a P row when an integer uniform on {0, .., DEFENSIVE - 1} is 0 (probability λ exactly),
with its mode k uniform on {0, .., b - 1} (numpy's bounded integers are exact): g = M z + G e_k, whose z-space point
is w = z + M^T e_k (G e_k = M M^T e_k), so η^T w = η^T z + (M η)_k. Otherwise g = M (z + η) and η^T w = η^T z + |η|².
So η^T w - |η|²/2 = η^T z + (m_k for a P row, else |η|²) - |η|²/2, m = M η stored once (``shift``).

Rounding. η, m and |η|² are fixed vectors and numbers, so the law drawn is π for the stored η (with the convention
above, which also covers G e_k = M M^T e_k up to the factor's rounding); what must be accurate is the exponent
e = η^T w - |η|²/2 of each value, as its error moves log Y by at most as much (the derivative of
log(λ + (1 - λ) e^{e - L}) in e is below 1). η^T z is summed in double in two levels (:func:`blocked_dot`): the
products of each block of ``SUM_BLOCK`` consecutive terms summed (in any order), then the block sums. A sum of m terms
in any order is within γ_{m-1} of the sum of their absolute values, and each product within u of its own (γ_n = n u/
(1 - n u), u = 2^-53), so the error is at most Γ Σ_k |η_k z_k| with Γ = γ_B + γ_{J-1} (1 + γ_B), B = ``SUM_BLOCK``
and J the number of blocks, computed for every row, on every platform (x86-64's long double, which the estimator
summed in before, is double on Windows and on arm64 macOS, where the bound at n = b = 10^4 was over the allowance and
the draw refused; Γ ≈ 221 u there, against b u). The shifted rows' point is fl(z + η), within u (|z_k| + |η_k|) of
z + η entrywise, which moves η^T w by at most u (Σ_k |η_k z_k| + |η|²); m_k, a sum of at most K products of the
factor (K the band product's terms, or b for a dense factor), is within γ_K (|M| |η|)_k, bounded once over k; |η|²
(b squares, the same two levels) within Γ |η|²; the exponent's additions within 4 ulps of its terms. Every row's bound
must be at most ``EXPONENT_ALLOWANCE`` = FLOAT_REL/4, else the draw raises FloatingPointError (at the setting above
the bound is about 10⁻¹¹; the draw refuses rather than the rule switching estimators, so shards merged from several
machines are always of one estimator). In :meth:`ShiftMixture.log_values` e - L is
formed with an absolute error of at most u (|e| + |L|), checked against the same allowance; the rest (a log1p, an
expm1, a logaddexp) is within a few ulp relative. So every computed value is within FLOAT_REL relative of the
exact value at the computed loss, the allowance by which :func:`epscert.results.rows.matrix_value_rows` lowers the
LCB and raises the UCB.
"""

from __future__ import annotations

import math

import numpy as np

from epscert.matrix import kernels as mk
from epscert.matrix.add_decoupled import gamma_n
from epscert.matrix.block_law import applies as law_applies
from epscert.matrix.cluster_tilt import cluster_order_range
from epscert.matrix.kernels import FLOAT_REL
from epscert.matrix.loss_tilt import max_order

#: λ = 1/DEFENSIVE: the share of P draws (a power of two is not needed: the draw is an integer uniform).
DEFENSIVE = 8
#: Largest error bound of a value's exponent (module docstring, Rounding).
EXPONENT_ALLOWANCE = FLOAT_REL / 4
#: Factor on every γ_n (Higham's bound, :func:`~epscert.matrix.add_decoupled.gamma_n`) for its own rounding.
ROUND_UP = 1.01
#: Terms per block of :func:`blocked_dot`'s first level (module docstring, Rounding).
SUM_BLOCK = 64


def blocked_gamma(terms: int) -> float:
    """Γ = γ_B + γ_{J-1} (1 + γ_B) of :func:`blocked_dot` for ``terms`` terms (B = ``SUM_BLOCK``, J blocks), raised by
    ``ROUND_UP``: its error is at most Γ times the sum of the terms' absolute values, whatever order numpy sums in."""
    blocks = -(-terms // SUM_BLOCK)
    inner = gamma_n(min(terms, SUM_BLOCK))
    return ROUND_UP * (inner + gamma_n(max(blocks - 1, 0)) * (1.0 + inner))


def blocked_dot(rows: np.ndarray, vector: np.ndarray) -> np.ndarray:
    """rows @ vector in double, in two levels: the products of each block of ``SUM_BLOCK`` consecutive columns summed,
    then the block sums (zeros pad the last block: they add nothing and round nothing)."""
    n, b = rows.shape
    blocks = -(-b // SUM_BLOCK)
    padded = np.zeros((n, blocks * SUM_BLOCK))
    padded[:, :b] = rows * vector[None, :]
    return padded.reshape(n, blocks, SUM_BLOCK).sum(axis=2).sum(axis=1)


def applies(pair, backend: str | None = None) -> bool:
    """Whether 'tilted' takes its REMOVE values from the shift mixture (deterministic, before any draw): the block law
    gives REMOVE's upper bound (:func:`epscert.matrix.block_law.applies`), the loss tilt reaches no order above 2
    (:func:`~epscert.matrix.loss_tilt.max_order` and the cluster orders of :mod:`epscert.matrix.cluster_tilt`), the
    backend is not JAX (the mixture has numpy kernels only). The platform does not enter (shards merged from several
    machines are of one estimator): the mixture sums in double everywhere (module docstring, Rounding)."""
    if backend == "jax":
        return False
    if max(max_order(pair), cluster_order_range(pair)[0]) > 2:
        return False
    return law_applies(pair)


def column_sums(pair) -> np.ndarray:
    """M^T 1 in z's order: the column sums of the factor (band storage: ``band[k, i] = L[i + k, i]``, its columns)."""
    f = pair.factor
    if f.kind == "dense":
        return f.dense.sum(axis=0)
    return f.band.sum(axis=0)


def abs_factor_tuple(pair):
    """The factor with every entry replaced by its absolute value, in :func:`~epscert.matrix.kernels.apply_factor`'s
    form: |M| applied to a vector bounds the rounding of M applied to it."""
    f = pair.factor
    if f.kind == "dense":
        return ("dense", np.abs(f.dense))
    if f.kind == "diag":
        return ("diag", np.abs(f.band[0]))
    band = np.abs(f.band)
    return ("band", band, f.inverse) + mk.band_blocks(band)


class ShiftMixture:
    """π = λ P + (1 - λ) Π_η for one pair and one reference ε (module docstring)."""

    def __init__(self, pair, eps_ref: float) -> None:
        if not math.isfinite(eps_ref):
            raise ValueError(f"eps_ref must be finite, got eps_ref={eps_ref!r}")
        self.pair = pair
        b = pair.bins
        self.mean_row = float(np.sum(pair.g)) / b
        self.t = max(float(eps_ref), 0.0) / self.mean_row if self.mean_row > 0 else 0.0
        self.eta = self.t * column_sums(pair)
        self.dot_gamma = blocked_gamma(b)
        self.norm_sq = float(blocked_dot(self.eta[None, :], self.eta)[0])
        self.shift = pair.noise(self.eta[None, :])[0]  # m = M η: Π_η's mean
        f = pair.factor
        # products summed per entry of M η: b (dense), 1 (diagonal), 2K (the band's two K x K blocks, kernels)
        terms = b if f.kind == "dense" else (1 if f.kind == "diag" else 2 * f.band.shape[0])
        self.abs_eta = np.abs(self.eta)
        # |fl(m_k) - m_k| <= γ_K (|M| |η|)_k, the computed |M| |η| itself within γ_K of the exact one
        gamma_m = ROUND_UP * gamma_n(terms)
        m_error = gamma_m * (1.0 + 2.0 * gamma_m) * float(np.max(mk.apply_factor(np, self.abs_eta[None, :],
                                                                                  abs_factor_tuple(pair))[0]))
        #: error bound of every exponent but the row's terms: m_k, |η|² (the two-level sum of b squares: within Γ of the
        #: exact |η|², which is at most the computed one over 1 - Γ, so Γ (1 + 2Γ) of the computed one), and 2u |η|²
        #: more, which covers the computed |η|² standing for the exact one in the bound u (Σ|η_k z_k| + |η|²) of dots
        #: (the rounding of fl(z + η))
        self.fixed_error = m_error + (self.dot_gamma * (1.0 + 2.0 * self.dot_gamma) + 2.0**-52) * self.norm_sq
        #: |m|_max + |η|²: the size of the other terms of an exponent (their additions' rounding)
        self.term_size = float(np.max(np.abs(self.shift))) + 1.5 * self.norm_sq
        self.log_lambda = -math.log(DEFENSIVE)
        self.log_rest = math.log1p(-1.0 / DEFENSIVE)

    def value_range(self, epsilons) -> np.ndarray:
        """1/λ, raised by 4 FLOAT_REL (every value is below (1 - e^{ε - L})/λ < 1/λ, computed within FLOAT_REL)."""
        eps = np.asarray(epsilons, dtype=np.float64)
        return np.full(eps.shape, DEFENSIVE * (1.0 + 4 * FLOAT_REL))

    def draw(self, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
        """(g, e): n draws of π (g, n x b) and their exponents e = η^T w - |η|²/2 (module docstring)."""
        pair, b = self.pair, self.pair.bins
        z = rng.standard_normal((n, b))
        p_rows = rng.integers(0, DEFENSIVE, size=n) == 0
        modes = rng.integers(0, b, size=n)
        dots, error = self.dots(z)
        error = error + self.fixed_error + 2.0**-50 * (np.abs(dots) + self.term_size)
        if not bool(np.all(error <= EXPONENT_ALLOWANCE)):
            raise FloatingPointError(f"the shift mixture's exponent error bound {float(np.max(error)):.3g} exceeds "
                                     f"{EXPONENT_ALLOWANCE:.3g} (epscert.matrix.shift_mixture, Rounding)")
        shift_rows = ~p_rows
        z[shift_rows] += self.eta
        g = pair.noise(z)
        g[p_rows] += pair.g[modes[p_rows]]
        exponent = dots + np.where(p_rows, self.shift[modes], self.norm_sq) - 0.5 * self.norm_sq
        return g, exponent

    def dots(self, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(η^T z per row, by :func:`blocked_dot`; a bound on each one's error): Γ Σ_k |η_k z_k| (that sum computed
        within 1e-6 relative: b positive terms, γ_b far below it), and the rounding of z + η on the shifted rows
        (u (Σ_k |η_k z_k| + |η|²): the z-space point is fl(z + η))."""
        dots = blocked_dot(z, self.eta)
        sizes = (np.abs(z) @ self.abs_eta) * (1.0 + 1e-6)
        return dots, self.dot_gamma * sizes + 2.0**-53 * (sizes + self.norm_sq)

    def log_values(self, g: np.ndarray, exponent: np.ndarray, eps) -> np.ndarray:
        """(|ε|, n) logs of Y = (1 - e^{ε - L})_+ / (λ + (1 - λ) e^{e - L}) (-inf where L <= ε)."""
        loss = mk.log_mean_exp(np, g - self.pair.half_diag)
        # e - L is formed with an absolute error of at most u (|e| + |L|) (rounded up to 4u)
        if not bool(np.all(2.0**-51 * (np.abs(exponent) + np.abs(loss)) <= EXPONENT_ALLOWANCE)):
            raise FloatingPointError("the shift mixture's exponent minus the loss is formed with an error above "
                                     f"{EXPONENT_ALLOWANCE:.3g} (epscert.matrix.shift_mixture, Rounding)")
        log_den = np.logaddexp(self.log_lambda, self.log_rest + exponent - loss)
        eps = np.asarray(eps, dtype=np.float64)[:, None]
        gap = np.minimum(eps - loss[None, :], 0.0)
        with np.errstate(divide="ignore"):
            out = np.log(-np.expm1(gap)) - log_den[None, :]
        return np.where(loss[None, :] > eps, out, -np.inf)
