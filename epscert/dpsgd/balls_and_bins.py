"""Balls-and-Bins pair (P_B, Q_B): naive, importance, order-statistic and combined sampling.

Loss of one epoch (SPEC §2), with x/σ² = z/σ + e_1/σ² for x = e_1 + σz:

    L_B(x) = logsumexp(x/σ²) - log T - 1/(2σ²)

REMOVE samples x = e_1 + σz (z ~ N(0, I_T)); ADD samples x = σz and uses ℓ = -L_B.
E epochs (Algorithm 11): ℓ = Σ_e ℓ_e over independent epochs.

Importance sampling (SPEC §4, Algorithms 5 and 10), one epoch, with ε0 = min of the grid:
- REMOVE: E = {max_t y_t >= C}, C = 1/2 + σ²(ε0 - log((e^{1/σ²} + T - 1)/T)), s = 1 - Φ(C/σ)^T.
  Outside E, L <= ε0 <= ε for every ε of the grid, so δ(ε) = s E_{P|E}[(1 - e^{ε-L})_+].
- ADD: E = {max_t x_t <= C}, C = 1/2 + σ²(log T - ε0), s = Φ(C/σ)^T.
Order statistics (SPEC §5) replace the T - 1 (REMOVE) or T (ADD) plain coordinates by a
bound through the ranks k_1 = 1 < ... < k_R; combined with importance as in SPEC §6. ADD
also draws rank T (the minimum): the lower bound on Σ then keeps the (T - k_R) smallest
coordinates at v_T instead of dropping them (SPEC §5 drops them; both are valid, ours is
tighter, and exact when the ranks are 1..T-1).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

from epscert.dpsgd.gauss import log_survival_max, logsumexp_rows, max_at_least, normal_below
from epscert.dpsgd.orderstats import gaussian_order_stats_by_rank, lower_tail_weights, upper_tail_weights, usable_ranks
from epscert.names import Direction, Method
from epscert.montecarlo.protocol import LossSampler


def log_mean_exp_shift(a: float, steps: int) -> float:
    """log((e^a + T - 1) / T) without overflow for large a = 1/σ²."""
    if steps == 1:
        return a
    return float(np.logaddexp(a, math.log(steps - 1))) - math.log(steps)


def threshold_remove(sigma: float, steps: int, eps0: float) -> float:
    """C(ε0) of the REMOVE importance event {max_t y_t >= C} (SPEC §4)."""
    return 0.5 + sigma**2 * (eps0 - log_mean_exp_shift(1.0 / sigma**2, steps))


def threshold_add(sigma: float, steps: int, eps0: float) -> float:
    """C(ε0) of the ADD importance event {max_t x_t <= C} (SPEC §4)."""
    return 0.5 + sigma**2 * (math.log(steps) - eps0)


class BallsAndBinsSampler(LossSampler):
    """Directional losses of the Balls-and-Bins pair for one of the four Monte Carlo methods."""

    def __init__(self, sigma: float, steps: int, epochs: int, method: Method,
                 ranks: tuple[int, ...] | None, eps0: float) -> None:
        if method.uses_importance and epochs != 1:
            raise ValueError(f"method={method.value!r} needs epochs=1, got epochs={epochs}")
        self.sigma, self.steps, self.epochs, self.method = sigma, steps, epochs, method
        self.ranks = np.asarray(ranks if ranks is not None else (), dtype=np.int64)
        if method.uses_order_stats and (self.ranks.size == 0 or self.ranks[0] != 1):
            raise ValueError(f"order statistics need ranks starting at 1, got orders={ranks}")
        # ADD bounds Σ over all T coordinates from below: adding rank T (the minimum) costs one
        # order statistic and makes ranks 1..T-1 (the default for T <= 151) exact in ADD too.
        self.add_ranks = (np.append(self.ranks, steps) if self.ranks.size and self.ranks[-1] < steps
                          else self.ranks)
        self.inv_sigma = 1.0 / sigma
        self.inv_var = 1.0 / sigma**2
        self.offset = math.log(steps) + 0.5 * self.inv_var  # L = lse - offset
        self.eps0 = eps0
        self.b_remove = threshold_remove(sigma, steps, eps0) / sigma  # in units of σ
        self.b_add = threshold_add(sigma, steps, eps0) / sigma

    #: The module of this sampler's JAX kernels, named, not imported (it imports this one and JAX lazily).
    jax_kernels_module = "epscert.dpsgd.jax_kernels"

    def width(self) -> int:
        return (self.ranks.size + 4) if self.method.uses_order_stats else self.steps

    def log_scale(self, direction: Direction) -> float:
        if not self.method.uses_importance:
            return 0.0
        if direction is Direction.REMOVE:
            return log_survival_max(self.b_remove, self.steps)
        return self.steps * float(special.log_ndtr(self.b_add))

    def draw(self, rng: np.random.Generator, n: int, direction: Direction) -> np.ndarray:
        kernel = {
            (Method.NAIVE, Direction.REMOVE): self._naive_remove,
            (Method.NAIVE, Direction.ADD): self._naive_add,
            (Method.IMPORTANCE, Direction.REMOVE): self._importance_remove,
            (Method.IMPORTANCE, Direction.ADD): self._importance_add,
            (Method.ORDER_STATS, Direction.REMOVE): self._order_remove,
            (Method.ORDER_STATS, Direction.ADD): self._order_add,
            (Method.IMPORTANCE_ORDER_STATS, Direction.REMOVE): self._combined_remove,
            (Method.IMPORTANCE_ORDER_STATS, Direction.ADD): self._combined_add,
        }[(self.method, direction)]
        total = np.zeros(n)
        for _ in range(self.epochs):
            total += kernel(rng, n)
        return total

    # -- naive (Algorithm 4 / 11) -------------------------------------------------------------
    def _naive_remove(self, rng: np.random.Generator, n: int) -> np.ndarray:
        a = rng.standard_normal((n, self.steps))
        a *= self.inv_sigma
        a[:, 0] += self.inv_var
        return logsumexp_rows(a) - self.offset

    def _naive_add(self, rng: np.random.Generator, n: int) -> np.ndarray:
        a = rng.standard_normal((n, self.steps))
        a *= self.inv_sigma
        return self.offset - logsumexp_rows(a)

    # -- importance (Algorithms 5 and 10) -----------------------------------------------------
    def _draw_max(self, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
        """(M, first): conditioned max in σ units and whether it sits at coordinate 1."""
        m = max_at_least(rng, self.b_remove, self.steps, self.log_scale(Direction.REMOVE), n)
        first = rng.random(n) < 1.0 / self.steps
        return m, first

    def _importance_remove(self, rng: np.random.Generator, n: int) -> np.ndarray:
        m, first = self._draw_max(rng, n)
        a = normal_below(rng, m, (n, self.steps))
        col = np.where(first | (self.steps == 1), 0, 1)  # by symmetry the max sits at 1 or 2
        a[np.arange(n), col] = m
        a *= self.inv_sigma
        a[:, 0] += self.inv_var
        return logsumexp_rows(a) - self.offset

    def _importance_add(self, rng: np.random.Generator, n: int) -> np.ndarray:
        a = normal_below(rng, self.b_add, (n, self.steps))
        a *= self.inv_sigma
        return self.offset - logsumexp_rows(a)

    # -- order statistics (Algorithm 6, SPEC §5) ----------------------------------------------
    # Rank-major (R, n) arrays. The shift of each log-sum is a known near-maximum: the term of
    # the top rank (weight 1 for ADD) or x_1/σ², M/σ². Every other term is at most
    # log T above it (v_j <= v_1 and log w_j <= log T), so no exp overflows, and the
    # shifted sum is >= 1, so none underflows: the same value as with the exact maximum.
    def _upper_terms(self, rng, n: int, d: int, log_cdf_bound) -> np.ndarray:
        """(R, n) log-terms v_j/σ + log w_j bounding Σ of d conditioned coordinates from above."""
        ranks = usable_ranks(self.ranks, d)
        v = gaussian_order_stats_by_rank(rng, ranks, d, n, log_cdf_bound)
        v *= self.inv_sigma
        v += upper_tail_weights(ranks, d)[:, None]
        return v

    def _lower_terms(self, rng, n: int, log_cdf_bound: float) -> np.ndarray:
        """(R, n) log-terms v_j/σ + log(k_j - k_{j-1}) bounding Σ of the T coordinates from below."""
        v = gaussian_order_stats_by_rank(rng, self.add_ranks, self.steps, n, log_cdf_bound)
        v *= self.inv_sigma
        v += lower_tail_weights(self.add_ranks)[:, None]
        return v

    def _order_remove(self, rng: np.random.Generator, n: int) -> np.ndarray:
        a1 = rng.standard_normal(n) * self.inv_sigma + self.inv_var
        terms = self._upper_terms(rng, n, self.steps - 1, 0.0)
        return _log_sum(np.maximum(a1, terms[0]), terms, a1) - self.offset

    def _order_add(self, rng: np.random.Generator, n: int) -> np.ndarray:
        terms = self._lower_terms(rng, n, 0.0)
        return self.offset - _log_sum(terms[0].copy(), terms)

    # -- importance + order statistics (Appendix B.3, SPEC §6) --------------------------------
    def _combined_remove(self, rng: np.random.Generator, n: int) -> np.ndarray:
        m, first = self._draw_max(rng, n)
        log_cdf_m = special.log_ndtr(m)
        out = np.empty(n)
        rows = np.flatnonzero(first)  # max at coordinate 1: x_1 = 1 + M
        if rows.size:
            a1 = m[rows] * self.inv_sigma + self.inv_var  # >= every other term's v_j/σ
            terms = self._upper_terms(rng, rows.size, self.steps - 1, log_cdf_m[rows])
            out[rows] = _log_sum(a1.copy(), terms, a1)
        rows = np.flatnonzero(~first)  # max at coordinate 2, x_1 = 1 + y_1 with y_1 <= M
        if rows.size:
            y1 = normal_below(rng, m[rows], (rows.size, 1))[:, 0]
            a1 = y1 * self.inv_sigma + self.inv_var
            am = m[rows] * self.inv_sigma
            terms = self._upper_terms(rng, rows.size, self.steps - 2, log_cdf_m[rows])
            out[rows] = _log_sum(np.maximum(a1, am), terms, a1, am)
        return out - self.offset

    def _combined_add(self, rng: np.random.Generator, n: int) -> np.ndarray:
        terms = self._lower_terms(rng, n, float(special.log_ndtr(self.b_add)))
        return self.offset - _log_sum(terms[0].copy(), terms)


def _log_sum(shift: np.ndarray, terms: np.ndarray, *singles: np.ndarray) -> np.ndarray:
    """shift + log(Σ_j e^{terms[j] - shift} + Σ_s e^{s - shift}), per column; overwrites ``terms``."""
    terms -= shift
    np.exp(terms, out=terms)
    total = terms.sum(axis=0)
    for single in singles:
        total += np.exp(single - shift)
    return np.log(total) + shift
