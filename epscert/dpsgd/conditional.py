"""Conditional Monte Carlo (Asmussen–Kroese) for Balls-and-Bins, one epoch, both directions.

Notation: z ~ N(0, I_T), W_t = exp(z_t/σ - 1/(2σ²)) (i.i.d., mean 1), K = e^ε,
Φ̄ = 1 - Φ, and for a level a > 0, u(a) = σ(log a + 1/(2σ²)), so that W > a  <=>  z > u(a).
Two partial expectations of the lognormal W (tilt by e^{z/σ - 1/(2σ²)}, which shifts z by 1/σ):

    E[W 1{W > a}] = Φ̄(u(a) - 1/σ),        E[W 1{W < a}] = Φ(u(a) - 1/σ).

REMOVE. Under Q, dP_B/dQ_B (x = σz) = S = (1/T) Σ_t W_t, so by SPEC §2 (Eq. 1 rewritten under Q)
δ_remove = E_Q[(S - K)_+] = (1/T) E[(Σ_t W_t - TK)_+]. Split on which W_t is largest (ties have
probability 0) and use exchangeability: δ = E[(Σ_t W_t - TK)_+ 1{W_T largest}]. Condition on
W_1..W_{T-1}: with R = Σ_{t<T} W_t, M = max_{t<T} W_t, c = TK - R, the integrand is
(W_T - c) 1{W_T > M, W_T > c} = (W_T - c) 1{W_T > a}, a = max(M, c) (> 0), so

    Y_remove = E[(W_T - c) 1{W_T > a}] = Φ̄(u(a) - 1/σ) - c Φ̄(u(a)),     δ_remove = E[Y_remove].

(T = 1: R = 0, M = 0, a = c = K, and Y is the Gaussian closed form of SPEC §7, without noise.)
Range: on {W_T largest}, Σ_t W_t <= T W_T, so Y_remove <= T E[(W - K)_+] = T δ_1(ε) with
δ_1(ε) = Φ̄(σε - 1/(2σ)) - K Φ̄(σε + 1/(2σ)) (one Gaussian, SPEC §7). This proven range is the
scale of the truncated LCB (:mod:`epscert.bounds.truncated_lcb`) and of the truncation levels of
the certified UCB (:mod:`epscert.dpsgd.conditional_ucb`), which bounds the part of δ above a
level analytically, so its cost does not grow with the range.

ADD. δ_add = E_Q[(1 - K S)_+] = E[(1 - (K/T) Σ_t W_t)_+] (SPEC §2: E_Q[(1 - e^{ε+L})_+]).
Condition on W_1..W_{T-1} and put d = T/K - R: the integrand is (K/T)(d - W_T)_+, zero unless
d > 0, and the put's partial expectation gives

    Y_add = (K/T) [d Φ(u(d)) - Φ(u(d) - 1/σ)]   (d > 0),   0 otherwise.

Combined with the ADD importance event of SPEC §4 (every z_t <= b = C(ε0)/σ, s = Φ(b)^T): the
integrand vanishes unless W_T < d <= T/K <= T/K0, i.e. z_T < u(d) <= u(T/K0) = b, so the
truncation of z_T cuts nothing and, with z_1..z_{T-1} drawn truncated to <= b,
δ_add = s E[Y_add / Φ(b)]. The value Y_add/Φ(b) = E[(1 - (K/T)Σ W)_+ | z_{<T}, all z <= b]
lies in [0, 1] (an average of values in [0, 1]).

Order-statistics variant (T >= 10^4 is where it pays): the T - 1 conditioning coordinates are
replaced by order statistics at ranks k_1 = 1 < ... < k_R (SPEC §5). REMOVE takes M exactly from
rank 1 and R from above, R <= Σ_j w_j W(v_j); ADD takes R from below, R >= Σ_j (k_j - k_{j-1}) W(v_j)
(rank T - 1, the minimum, is added). Y_remove is non-decreasing in R at fixed M (c falls, and
(W + R - TK)_+ 1{W > M} grows) and Y_add non-increasing in R, so both substitutions raise every
value: the mean is pessimistic, the UCB stays valid, and the rows carry no lower confidence
bound for this variant (a lower bound on a raised value says nothing about δ). The raised
values keep the same ranges (Σ_j w_j W(v_j) <= (T - 1) M, and R >= 0).

Numerics: all in log space (``log_ndtr`` of either tail), so values far below 1e-300 of the
tails are computed to full relative precision; the difference of the two partial expectations
is formed as e^A (-expm1(B - A)). Computed values differ from the exact ones by a relative error
far below ``FLOAT_REL`` (log_ndtr is accurate to a few ulps; the cancellation in -expm1(B - A) is
at most a factor ~ σu), which :mod:`epscert.bounds.truncated_lcb` allows for.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

from epscert.analytic.deterministic import gaussian_bracket
from epscert.dpsgd.gauss import logsumexp_rows, normal_below
from epscert.dpsgd.orderstats import gaussian_order_stats_by_rank, lower_tail_weights, upper_tail_weights, usable_ranks
from epscert.dpsgd.balls_and_bins import threshold_add
from epscert.montecarlo.protocol import BLOCK_ELEMENTS, ValueSampler
from epscert.names import Direction

#: Relative error allowance for a computed conditional value against the exact one.
FLOAT_REL = 1e-9


def _log_diff_pos(log_x: np.ndarray, log_y: np.ndarray) -> np.ndarray:
    """log(e^x - e^y) for x >= y (-inf where equal)."""
    with np.errstate(divide="ignore"):
        return log_x + np.log(-np.expm1(np.minimum(log_y - log_x, 0.0)))


def remove_values(log_r: np.ndarray, log_m: np.ndarray, sigma: float, steps: int,
                  epsilons: np.ndarray) -> np.ndarray:
    """(|ε|, n) array of Y_remove from log R and log M (one per sample; -inf for T = 1)."""
    inv_sigma, half = 1.0 / sigma, 0.5 / sigma**2
    log_tk = math.log(steps) + np.asarray(epsilons, dtype=np.float64)[:, None]
    lr, lm = log_r[None, :], log_m[None, :]
    pos = lr < log_tk  # c = TK - R > 0
    log_c_pos = _log_diff_pos(log_tk, lr)
    log_c_neg = _log_diff_pos(lr, log_tk)  # log |c| where c <= 0
    log_a = np.where(pos, np.maximum(lm, log_c_pos), lm)
    u = sigma * (log_a + half)
    a_term = special.log_ndtr(-(u - inv_sigma))  # log E[W 1{W > a}]
    with np.errstate(invalid="ignore"):
        c_term = special.log_ndtr(-u) + np.where(pos, log_c_pos, log_c_neg)  # log |c| Φ̄(u)
        y_pos = np.exp(a_term) * -np.expm1(np.minimum(c_term - a_term, 0.0))
    y_neg = np.exp(a_term) + np.exp(c_term)
    return np.where(pos, y_pos, y_neg)


def add_values(log_r: np.ndarray, sigma: float, steps: int, epsilons: np.ndarray,
               log_cdf_bound: float = 0.0) -> np.ndarray:
    """(|ε|, n) array of Y_add / Φ(b), with log Φ(b) = ``log_cdf_bound`` (0: no truncation)."""
    inv_sigma, half = 1.0 / sigma, 0.5 / sigma**2
    eps = np.asarray(epsilons, dtype=np.float64)[:, None]
    log_tk = math.log(steps) - eps  # log(T/K)
    lr = log_r[None, :]
    pos = lr < log_tk  # d > 0
    log_d = _log_diff_pos(log_tk, np.minimum(lr, log_tk))
    with np.errstate(invalid="ignore"):
        u = sigma * (log_d + half)
        a_term = log_d + special.log_ndtr(u)  # log d Φ(u)
        b_term = special.log_ndtr(u - inv_sigma)  # log E[W 1{W < d}]
        y = np.exp(a_term + eps - math.log(steps) - log_cdf_bound) * -np.expm1(np.minimum(b_term - a_term, 0.0))
    return np.where(pos, np.minimum(y, 1.0), 0.0)


class ConditionalSampler(ValueSampler):
    """Draws conditional values Y (per ε) for one direction; δ = s · E[Y], Y in [0, B(ε)]."""

    guarantee = "mc_upper_confidence"

    def __init__(self, sigma: float, steps: int, eps0: float, ranks: tuple[int, ...] | None = None) -> None:
        self.sigma, self.steps, self.eps0 = float(sigma), int(steps), float(eps0)
        self.order_stats = ranks is not None
        d = self.steps - 1
        r = np.asarray(ranks if ranks is not None else (), dtype=np.int64)
        self.ranks = usable_ranks(r, d) if self.order_stats else r
        if self.order_stats and (self.ranks.size == 0 or self.ranks[0] != 1):
            raise ValueError(f"order statistics need ranks starting at 1 and steps >= 2, got orders={ranks}")
        self.add_ranks = (np.append(self.ranks, d) if self.order_stats and self.ranks[-1] < d else self.ranks)
        self.b_add = threshold_add(self.sigma, self.steps, self.eps0) / self.sigma
        self.log_phi_b = float(special.log_ndtr(self.b_add))

    #: The module of this sampler's JAX kernels, named, not imported (it imports this one and JAX lazily).
    jax_kernels_module = "epscert.dpsgd.jax_conditional"

    def width(self) -> int:
        return int(self.add_ranks.size + 2) if self.order_stats else max(1, self.steps - 1)

    def block_size(self) -> int:
        return max(1, BLOCK_ELEMENTS // self.width())

    def log_scale(self, direction: Direction) -> float:
        """log s: 0 for REMOVE, T log Φ(b) for ADD (importance event of SPEC §4)."""
        return 0.0 if direction is Direction.REMOVE else self.steps * self.log_phi_b

    def value_range(self, direction: Direction, epsilons) -> np.ndarray:
        """B(ε) with 0 <= Y <= B (module docstring): T δ_1(ε) for REMOVE, 1 for ADD. δ_1 is the upper
        side of the Gaussian bracket (:func:`epscert.analytic.deterministic.gaussian_bracket`), so B
        is never below the exact range: the clamp of the values and the tails that use B stay safe."""
        eps = np.asarray(epsilons, dtype=np.float64)
        if direction is Direction.ADD:
            return np.ones_like(eps)
        return np.minimum(self.steps * gaussian_bracket(self.sigma, eps)[1], float(self.steps))

    def draw(self, rng: np.random.Generator, n: int, direction: Direction, epsilons) -> np.ndarray:
        """(|ε|, n) i.i.d. conditional values (pessimistic ones for the order-statistics variant)."""
        log_r, log_m = self.log_sums(rng, n, direction)
        return self.values(direction, log_r, log_m, epsilons)

    def values(self, direction: Direction, log_r: np.ndarray, log_m: np.ndarray | None, epsilons) -> np.ndarray:
        """(|ε|, n) values from log R (and log M for REMOVE) of each sample (module docstring);
        the one host copy of the value formulas, also used on the sums the JAX backend draws."""
        eps = np.asarray(epsilons, dtype=np.float64)
        if np.any(eps < self.eps0):
            raise ValueError(f"epsilons must be >= eps0={self.eps0}, got min epsilon={eps.min()}")
        if direction is Direction.REMOVE:
            y = remove_values(log_r, log_m, self.sigma, self.steps, eps)
            return np.minimum(y, self.value_range(direction, eps)[:, None])
        return add_values(log_r, self.sigma, self.steps, eps, self.log_phi_b)

    def log_sums(self, rng: np.random.Generator, n: int, direction: Direction) -> tuple[np.ndarray, np.ndarray | None]:
        """(log R, log M) per sample (log M None for ADD): the T - 1 conditioning coordinates drawn."""
        half, inv_sigma, d = 0.5 / self.sigma**2, 1.0 / self.sigma, self.steps - 1
        if direction is Direction.REMOVE:
            if d == 0:
                log_r = log_m = np.full(n, -np.inf)
            elif self.order_stats:
                v = gaussian_order_stats_by_rank(rng, self.ranks, d, n) * inv_sigma
                log_m = v[0] - half
                v += upper_tail_weights(self.ranks, d)[:, None]
                log_r = logsumexp_rows(v.T) - half
            else:
                z = rng.standard_normal((n, d)) * inv_sigma
                log_m = z.max(axis=1) - half
                log_r = logsumexp_rows(z) - half
            return log_r, log_m
        if d == 0:
            log_r = np.full(n, -np.inf)
        elif self.order_stats:
            v = gaussian_order_stats_by_rank(rng, self.add_ranks, d, n, self.log_phi_b) * inv_sigma
            v += lower_tail_weights(self.add_ranks)[:, None]
            log_r = logsumexp_rows(v.T) - half
        else:
            z = normal_below(rng, self.b_add, (n, d)) * inv_sigma
            log_r = logsumexp_rows(z) - half
        return log_r, None


def conditional_sampler(config, method) -> ConditionalSampler:
    """The sampler of a validated config (CertifyConfig) for ``conditional`` / ``conditional_order_stats``."""
    if not method.is_conditional or config.sampler.value != "balls_and_bins" or config.epochs != 1:
        raise ValueError(f"method={method.value!r} needs sampler='balls_and_bins' and epochs=1, got "
                         f"sampler={config.sampler.value!r}, epochs={config.epochs}")
    ranks = config.ranks if method.uses_order_stats else None
    return ConditionalSampler(config.sigma, config.steps, min(config.epsilons), ranks)
