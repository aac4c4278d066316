"""The loss-tilted estimator of the matrix mechanism's δ_remove (method ``tilted``): values with a range
near δ itself.

Notation of :mod:`epscert.matrix.values`: under Q, g ~ N(0, G) in R^b, v_k = G_kk,
x_k = g_k - v_k/2, L = log((1/b) Σ_k e^{x_k}) = log dP/dQ, δ_remove(ε) = E_Q[(e^L - e^ε)_+].

The proposal. For an integer order θ >= 1 let Q_θ(dg) = e^{θ L(g)} Q(dg) / Z_θ with Z_θ = E_Q[e^{θ L}] (the
Rényi moment of order θ of P against Q; Z_1 = 1 and Q_1 = P). Expanding the power,

    e^{θ L} = b^{-θ} Σ_{k ∈ [b]^θ} exp(Σ_j x_{k_j}),

and for a count vector s = Σ_j e_{k_j}, exp(Σ_j x_{k_j}) = exp(sᵀg - sᵀGs/2) · exp(Σ_{j<j'} G_{k_j k_j'}),
where exp(sᵀg - sᵀGs/2) Q(dg) is the law N(G s, G) (a Gaussian shifted by its covariance times s). So

    Z_θ = b^{-θ} Σ_k w(k),    w(k) = Π_{j<j'} e^{G_{k_j k_j'}},    Q_θ = Σ_k (w(k) / (b^θ Z_θ)) N(G s_k, G):

a finite mixture, drawn by drawing the ordered θ-tuple k with probability w(k)/(b^θ Z_θ) (one index
at a time from exact conditional tables, below; rounding, at the end) and then g = G s_k + L_G ξ.

The estimator. δ_remove(ε) = E_{Q_θ}[Y] with

    Y = Z_θ (e^L - e^ε)_+ e^{-θ L} = Z_θ e^{(1-θ) L} (1 - e^{ε - L})_+        (unbiased: dQ/dQ_θ = Z_θ e^{-θL}),

and since u ↦ (u - e^ε) u^{-θ} on u >= e^ε is largest at u = θ e^ε/(θ - 1),

    0 <= Y <= B_θ(ε) = Z_θ e^{(1-θ) ε} (θ - 1)^{θ-1} θ^{-θ}     (θ >= 2; B_1 = 1: Y is the naive P-form value).

B_θ(ε) is the Chernoff (Rényi) bound on δ itself, so the range of the values is the gap between the
Rényi-DP bound and δ: at n = 2000, b = 100, 16 bands, σ = 4.61, θ = 4 it is about 60 δ at δ ≈ 10⁻⁶ and
400 δ at δ ≈ 10⁻⁸, where the naive range (1) is 10⁶ and 10⁸ times δ. A KL or empirical Bernstein
bound at that range (:func:`epscert.results.rows.matrix_value_rows`) certifies ε(δ) to within 2–3% from
about 10⁵ samples (δ itself to 10–25% there: UCB/estimate 1.09 at 10⁻⁶ and 1.25 at 10⁻⁸). The ADD direction of this method uses the conditional estimator's mean line
(:func:`epscert.matrix.values.add_line_log_values`, range Φ(ŝ(ε)/√v_u), which falls with ε):
at the setting above δ_add(4) is about 10⁻¹⁸ and its certificate is far below the REMOVE δ. The
importance estimator's truncated mean is cheaper, but its range is fixed at the grid's smallest ε, so
on a wide grid its UCB, not the REMOVE one, set the 'both' row.

The order. Larger θ moves the proposal's mass to larger L. The sampler takes the θ in 1..θ_max that
minimises B_θ at the reference ε (the median of the grid), which is also the θ of the tightest
Rényi bound there. θ_max(b) = 5 while the b³ table fits ``MAX_TABLE_ENTRIES`` and its build
(C(b + 2, 3) rows times the b x b W, below) stays under ``MAX_BUILD_FLOPS`` (b <= 154; 0.3 CPU s at
b = 100), then 4 while the b³ table fits (b <= 203), then 3 (b²), then 2. The choice moves the variance
and the range, never the mean. Why θ = 5 matters: at n = 2000, b = 100, 16 bands, σ = 4.61 the range B_θ(ε)/δ is 2.2·10³ at
δ = 10⁻¹⁰ (ε = 4.969) and 1.2·10⁴ at 10⁻¹² (ε = 5.94) for θ = 4, and 60 and 124 for θ = 5
(``benchmarks/matrix_renyi_floor.py``). For one participation (b = n: G banded) the orders above the tables'
are drawn cluster by cluster, up to 13 (:mod:`epscert.matrix.cluster_tilt`, whose ``choose_order`` and
``tilt_for`` the sampler uses): the same values with Z̄ >= Z_θ in place of Z_θ.

The tables. With W = e^G (entrywise, symmetric), write F_m(k_1..k_m) for the total weight of the tuples
that begin with k_1..k_m: F_θ = w, F_m = Σ_{k_{m+1}} F_{m+1}. Then P(k_m | k_1..k_{m-1}) ∝ F_m(k_1..k_m)
and the product of these conditionals telescopes to w(k)/F_0 with F_0 = b^θ Z_θ. Stored: F_1 .. F_{θ-1}
(F_{θ-1} from one inner sum, Σ_l Π_{j<θ} W_{k_j l}, a matrix product); the last index is drawn from
Π_{j<θ} W_{k_j, ·}, computed per draw.

Row-wise (``LossTilt.rowwise``, θ = 5): F_{θ-1} has b^{θ-1} entries, too many to store, so it is not formed.
With H = Π_{j<=θ-2} W_{k_j, ·} (a b-vector) and w_{θ-2} = w(k_1..k_{θ-2}),

    F_{θ-1}(k_1..k_{θ-2}, l) = w_{θ-2} H_l (W H)_l,      F_{θ-2}(k_1..k_{θ-2}) = w_{θ-2} Hᵀ W H,

so F_{θ-2} (b^{θ-2} entries, stored; each entry a sum of b² positive terms, formed for sorted indices and
copied: it is symmetric) is the top table, and index θ-1 is drawn from the weights H ∘ (W H), formed per draw
by one (n x b) by (b x b) product (w_{θ-2} is common to the row and drops out of the conditional).

Rounding. W <= e^{max G}; θ is capped so that C(θ, 2) max G <= ``MAX_LOG_WEIGHT`` (no product or sum
overflows, none underflows since W >= 1). Every table entry is a sum of positive terms, formed level by
level from sums of b terms: the computed Z̃_θ is within (θ b + θ²) 2^-53 (1 + o(1)) relative of the exact
one (a sum of n positive terms in floating point is within (n - 1) 2^-53 relative; products of at most
θ² rounded factors add θ² 2^-53; the exponentials of G are within 1 ulp of e^G of the computed G, which
is the G the other estimators sample). Z̃ enters every value as a factor, so it moves the mean by
Z̃/Z - 1, below 10⁻¹⁰ for b <= 10⁴: inside FLOAT_REL, the relative allowance by which the rows raise
every mean (UCB) and lower it (LCB); the values are formed in log space and are within it of the exact
value at the computed loss. The sampled tuple law is the computed one, not the exact one: per index,
both backends draw each index by :func:`inverse_cdf` on the same weights. A cumulative sum of m
positive weights, in any order of summation, has each partial sum within (m - 1) 2^-53 relative of
the exact one, so moving the boundaries moves at most m² 2^-53 of probability; the uniform on a 2^-52
grid (JAX; 2^-53 numpy) and the rounding of U times the total move at most 5m 2^-53 more; the weights
themselves (table entries, and products of e^G) are within (2θ b + 1000) 2^-53 relative (row-wise: the
weights H ∘ (W H) are sums of b products of at most θ rounded factors, within (b + 2θ) 2^-53, and the stored
entries w Hᵀ W H sums of b² such products, within (2b + 2θ) 2^-53 as two nested sums of b terms, both under 2θ b). Per level
TV <= (m² + 5m + 2θ b + 1000) 2^-53 with m = b, over θ levels (:func:`law_tv`). Since 0 <= Y <= B_θ(ε),
the mean moves by at most TV · B_θ(ε); :meth:`LossTilt.value_slack` returns it and the rows add it to
the UCB and take it from the LCB (5.5·10⁻¹² B at b = 100, θ = 4: about 2·10⁻⁹ δ at the setting above).
"""

from __future__ import annotations

import functools
import itertools
import math

import numpy as np

from epscert.matrix import kernels as mk
from epscert.matrix.kernels import FLOAT_REL

#: Largest table (entries of F_{θ-1}) the order may need: 2^23 float64 (64 MiB); θ = 4 up to b = 203.
MAX_TABLE_ENTRIES = 2**23
#: Largest order.
MAX_ORDER = 5
#: Largest build of a row-wise order's top table: C(b + 2, 3) rows of a product by the b x b W, 2 b² flops each.
MAX_BUILD_FLOPS = 3e10
#: Largest log of a tuple weight, C(θ, 2) max G: products and sums stay far from overflow.
MAX_LOG_WEIGHT = 600.0
#: Unit roundoff of float64.
UNIT_ROUNDOFF = 2.0**-53


def max_order(pair) -> int:
    """The largest θ the tables and the weights allow for this pair (module docstring)."""
    b = pair.bins
    top = float(np.max(pair.g))
    order = 1
    for theta in range(2, MAX_ORDER + 1):
        fits = rowwise_fits(b) if theta == 5 else b ** (theta - 1) <= MAX_TABLE_ENTRIES
        if not fits or theta * (theta - 1) / 2 * top > MAX_LOG_WEIGHT:
            break
        order = theta
    return order


def rowwise_fits(b: int) -> bool:
    """Whether order 5's top table F_3 (b³ entries) fits and its build is cheap enough (the row-wise order: the
    build loop is written for three stored indices)."""
    return b**3 <= MAX_TABLE_ENTRIES and math.comb(b + 2, 3) * 2 * b**2 <= MAX_BUILD_FLOPS


def log_bound(log_z: float, theta: int, eps) -> np.ndarray:
    """log B_θ(ε) = log Z_θ + (1 - θ) ε + (θ - 1) log(θ - 1) - θ log θ (0 for θ = 1), exact arithmetic aside."""
    eps = np.asarray(eps, dtype=np.float64)
    if theta == 1:
        return np.zeros_like(eps)
    return log_z + (1.0 - theta) * eps + log_peak(theta)


def tilt_value_range(log_z: float, theta: int, epsilons) -> np.ndarray:
    """B_θ(ε) = e^{log_z} e^{(1-θ)ε} (θ-1)^{θ-1} θ^{-θ} >= every value of a tilt of order θ whose values carry this
    log_z, FLOAT_REL on top (the values carry the same computed Z as the range: FLOAT_REL covers their own
    rounding and Z's, module docstring)."""
    return np.exp(log_bound(log_z, theta, epsilons)) * (1.0 + 4 * FLOAT_REL)


def log_peak(theta: float) -> float:
    """log max_{u >= 1} (u - 1) u^{-θ} = (θ - 1) log(θ - 1) - θ log θ (at u = θ/(θ - 1)), θ > 1: the constant
    of every bound of the form (e^L - e^ε)_+ e^{-θL} <= e^{(1-θ)ε + log_peak(θ)}."""
    return (theta - 1.0) * math.log(theta - 1.0) - theta * math.log(theta)


class LossTilt:
    """Tables of Q_θ for one pair and order (module docstring): ``tables[m - 1]`` = F_m for m < θ,
    ``log_z`` = log Z_θ, ``weights`` = W = e^G."""

    #: drawn from tables (JAX has these kernels), not by :mod:`epscert.matrix.cluster_tilt`
    by_clusters = False

    def __init__(self, pair, theta: int) -> None:
        theta = int(theta)
        if not 1 <= theta <= max_order(pair):
            raise ValueError(f"the tilt order must be in [1, {max_order(pair)}] for this pair, got theta={theta}")
        self.pair, self.theta = pair, theta
        b = pair.bins
        self.weights = np.exp(pair.g) if theta > 1 else None  # θ = 1 draws the one index uniformly
        #: F_{θ-1} is formed per draw, not stored (module docstring, Row-wise): θ = 5, always
        self.rowwise = theta == 5
        tables = [] if theta == 1 else [self._penultimate_table() if self.rowwise else self._last_table()]
        while tables and tables[0].ndim > 1:
            tables.insert(0, tables[0].sum(axis=-1))
        self.tables = tables
        total = float(tables[0].sum()) if tables else float(b)  # F_0 = b^θ Z_θ
        self.log_z = math.log(total) - theta * math.log(b)

    def _last_table(self) -> np.ndarray:
        """F_{θ-1}(k_1..k_{θ-1}) = Π_{j<j'<θ} W · Σ_l Π_{j<θ} W_{k_j l}."""
        w, theta = self.weights, self.theta
        if theta == 2:
            return w.sum(axis=1)
        if theta == 3:
            return w * (w @ w)
        out = np.empty((w.shape[0],) * 3)
        for i in range(w.shape[0]):  # (j, k): W_ij W_ik W_jk Σ_l W_il W_jl W_kl
            out[i] = (w[i][:, None] * w[i][None, :] * w) * ((w * w[i][None, :]) @ w.T)
        return out

    def _penultimate_table(self) -> np.ndarray:
        """F_3(k_1, k_2, k_3) = W_12 W_13 W_23 Hᵀ W H with H = W_{k_1·} W_{k_2·} W_{k_3·} (θ = 5, row-wise),
        formed for k_1 <= k_2 <= k_3 (one (b - k_2) x b by b x b product per pair k_1 <= k_2) and copied to
        the other orders: F_3 is symmetric in its indices, and every copy is the same float."""
        w = self.weights
        b = w.shape[0]
        canon = np.zeros((b, b, b))
        for i in range(b):
            for j in range(i, b):
                h = (w[i] * w[j])[None, :] * w[j:]  # row k - j: H of (i, j, k)
                quad = np.einsum("kl,kl->k", h @ w, h)
                canon[i, j, j:] = w[i, j] * w[i, j:] * w[j, j:] * quad
        # every entry off the sorted region is 0 and every entry on it positive (W >= 1), so the largest of the
        # six transposes at a position is its sorted entry, the same float (no b³ index arrays)
        full = canon.copy()
        for axes in itertools.permutations(range(3)):
            np.maximum(full, canon.transpose(axes), out=full)
        return full

    def value_range(self, epsilons) -> np.ndarray:
        """B_θ(ε) >= every value (:func:`tilt_value_range`)."""
        return tilt_value_range(self.log_z, self.theta, epsilons)

    def value_slack(self, epsilons) -> np.ndarray:
        """TV · B_θ(ε): the most the computed tuple law moves the mean (module docstring, Rounding)."""
        b, theta = self.pair.bins, self.theta
        return theta * law_tv(b, 2 * theta * b) * self.value_range(epsilons)

    def draw_tuples(self, uniforms: np.ndarray) -> np.ndarray:
        """(n, θ) tuples from (n, θ) uniforms on [0, 1) (:func:`draw_tuples`, numpy).

        The same indices as :func:`draw_tuples`, with the table levels read from cumulative sums formed
        once (:attr:`cumulative`): each row of F_{m+1}(k_1..k_m, ·) is summed in the order ``inverse_cdf``
        sums it, so the partial sums are the same floats, and the count of those <= U·total is found
        by bisection (:func:`count_at_most`) instead of a pass over all b. Cost only: at b = 2000, θ = 3
        the tuple draws were a tenth of a run (issue 33)."""
        if self.theta == 1:
            weights = np.ones((1, 1))
            return draw_tuples(np, self.tables, weights, self.theta, self.pair.bins, uniforms)
        picks = []
        for m, cum in enumerate(self.cumulative):
            rows = cum[tuple(picks)] if m else cum
            picks.append(count_at_most(rows, uniforms[:, m]))
        while len(picks) < self.theta:
            weight = last_weights(np, self.weights, picks, self.rowwise and len(picks) == self.theta - 2)
            picks.append(inverse_cdf(np, weight, uniforms[:, len(picks)]))
        return np.stack(picks, axis=1)

    def shifted(self, g_noise: np.ndarray, tuples: np.ndarray) -> np.ndarray:
        """g = g_noise + Σ_j G e_{k_j}, formed in ``g_noise`` (the sampler's own fresh array) from G's full rows."""
        for j in range(tuples.shape[1]):
            g_noise += self.pair.g[tuples[:, j]]
        return g_noise

    def draw(self, rng: np.random.Generator, n: int) -> tuple[np.ndarray, float]:
        """((n, θ) tuples of Q_θ, 0.0): the draws and the log of their weight's factor beyond Z_θ (none here; the
        cluster proposal of :mod:`epscert.matrix.cluster_tilt` has one per draw)."""
        return self.draw_tuples(rng.random((n, self.theta))), 0.0

    @functools.cached_property
    def cumulative(self) -> list[np.ndarray]:
        """np.cumsum of F_1 .. F_{θ-1} along their last axis (the partial sums :func:`inverse_cdf` forms)."""
        return [np.cumsum(table, axis=-1) for table in self.tables]


def count_at_most(cum: np.ndarray, uniforms: np.ndarray) -> np.ndarray:
    """:func:`inverse_cdf`'s index from precomputed partial sums: per row of ``cum`` (N x m, or one row of m
    for every uniform), min(#{partial sums <= U·total}, m - 1), by bisection. The partial sums of
    non-negative weights do not decrease (a rounded sum never falls when a term >= 0 is added), so the
    count is the first position whose partial sum exceeds the target."""
    n, m = uniforms.shape[0], cum.shape[-1]
    if cum.ndim == 1:
        target = uniforms * cum[-1]
        return np.minimum(np.searchsorted(cum, target, side="right"), m - 1)
    target = uniforms * cum[:, -1]
    rows = np.arange(n)
    lo, hi = np.zeros(n, dtype=np.int64), np.full(n, m, dtype=np.int64)
    while True:
        live = lo < hi
        if not live.any():
            break
        mid = (lo + hi) // 2
        above = cum[rows, np.minimum(mid, m - 1)] > target
        hi = np.where(live & above, mid, hi)
        lo = np.where(live & ~above, mid + 1, lo)
    return np.minimum(lo, m - 1)


def law_tv(m: int, weight_ulps: float) -> float:
    """Total variation between an :func:`inverse_cdf` draw over m computed weights (each within
    ``weight_ulps`` 2^-53 relative of the exact one) and the exact law (module docstring, Rounding)."""
    return (m * m + 5 * m + weight_ulps + 1000) * UNIT_ROUNDOFF * 1.01  # 1.01: the (1 + o(1)) of each γ_n


def inverse_cdf(xp, weights, uniforms):
    """Index per row of ``weights`` (N x m, >= 0, some > 0) with probability weight/total, by inverse CDF on
    the cumulative sums: the count of partial sums <= U·total, for uniforms U on [0, 1) (clipped to m - 1
    against the last ulp)."""
    cum = xp.cumsum(weights, axis=1)
    target = uniforms * cum[:, -1]
    return xp.minimum(xp.sum(cum <= target[:, None], axis=1), weights.shape[1] - 1)


def last_weights(xp, weights, picks, rowwise: bool):
    """The weights of the next index from W alone: H = Π_j W_{k_j, ·} over the picks so far, times W H when
    the next level is a row-wise F_{θ-1} (module docstring, Row-wise)."""
    h = weights[picks[0]]
    for k in picks[1:]:
        h = h * weights[k]
    return h * (h @ weights) if rowwise else h


def draw_tuples(xp, tables, weights, theta: int, b: int, uniforms, rowwise: bool = False):
    """(n, θ) tuples of Q_θ from (n, θ) uniforms: index m by :func:`inverse_cdf` on F_{m+1}(k_1..k_m, ·)
    (``tables``), the rest from W (``weights``; :func:`last_weights`); θ = 1: uniform."""
    n = uniforms.shape[0]
    picks = []
    for m in range(theta):
        if theta == 1:
            weight = xp.ones((n, b))
        elif m < len(tables):
            table = tables[m]
            weight = table[tuple(picks)] if m else xp.broadcast_to(table, (n, b))
        else:
            weight = last_weights(xp, weights, picks, rowwise and m == theta - 2)
        picks.append(inverse_cdf(xp, weight, uniforms[:, m]))
    return xp.stack(picks, axis=1)


@functools.lru_cache(maxsize=6)  # θ = 4 at b = 203 is 64 MiB of tables (θ = 5 at b = 154: 29 MiB)
def loss_tilt(pair, theta: int) -> LossTilt:
    """The (cached) tables of one pair and order: pairs are cached per (strategy, b, σ)."""
    return LossTilt(pair, theta)


def choose_order(pair, epsilons) -> int:
    """θ in 1..max_order minimising B_θ at the median ε of the grid (module docstring)."""
    ref = float(np.median(np.asarray(epsilons, dtype=np.float64)))
    best, best_log = 1, 0.0
    for theta in range(2, max_order(pair) + 1):
        value = float(log_bound(loss_tilt(pair, theta).log_z, theta, ref))
        if value < best_log:
            best, best_log = theta, value
    return best


def remove_tilt_log_values(xp, g_noise, tuples, g_rows, half_diag, log_z, theta: int, eps_list, shifted: bool = False):
    """(|ε|, N) logs of Y = Z_θ e^{(1-θ)L} (1 - e^{ε-L})_+ for g = Σ_j G e_{k_j} + g_noise (``tuples`` k, N x θ;
    ``g_rows`` = G, whose row k is G e_k; ``log_z`` a number, or one per draw: the cluster proposal's log Z̄ρκ;
    ``shifted``: ``g_noise`` is g already, as the numpy sampler passes it: the tilt's ``shifted``)."""
    g = g_noise
    for j in range(0 if shifted else theta):
        g = g + g_rows[tuples[:, j]]
    loss = mk.log_mean_exp(xp, g - half_diag)
    out = []
    for eps in eps_list:
        gap = eps - loss
        neg = gap < 0
        log_h = xp.where(neg, xp.log(-xp.expm1(xp.where(neg, gap, -1.0))), -xp.inf)
        out.append(log_z + (1.0 - theta) * loss + log_h)
    return xp.stack(out)
