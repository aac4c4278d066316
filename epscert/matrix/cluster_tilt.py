"""Loss-tilted draws at high orders θ for a banded Gram matrix (one participation): tuples built cluster by cluster.

This is the proposal of :mod:`epscert.matrix.loss_tilt` (method ``tilted``) at orders its b^{θ-1} tables cannot
reach. Notation there: under Q, g ~ N(0, G) in R^b, x_k = g_k - G_kk/2, L = log((1/b) Σ_k e^{x_k}),
δ_remove(ε) = E_Q[(e^L - e^ε)_+], and for every ordered θ-tuple k with count vector s_k,

    δ_remove(ε) = b^{-θ} Σ_k w(k) E_{N(G s_k, G)}[h(g)],   w(k) = Π_{j<j'} e^{G_{k_j k_j'}},   h = e^{-θL} (e^L - e^ε)_+.

So for ANY law π on the count vectors s (multisets of θ indices), with Π_s = θ!/Π_i s_i! ordered tuples each,

    Y = (θ! / Π_i s_i!) w(s) / (b^θ π(s)) · h(g),   s ~ π,  g | s ~ N(G s, G),

is unbiased for δ_remove(ε), and 0 <= Y <= sup_s [(θ!/Π s_i!) w(s)/(b^θ π(s))] · e^{(1-θ)ε} (θ-1)^{θ-1} θ^{-θ}
(the maximum of h over L, as in loss_tilt). π ∝ (θ!/Π s!) w is Q_θ itself (the sup is then Z_θ); here π is a
law of the same shape that can be drawn and evaluated when G is banded, with the sup Z̄ >= Z_θ written below.

The band. Let w be the band: G_{kk'} = 0 for |k - k'| >= w (one participation, b = n, of a Toeplitz strategy
with w bands: modes k and k' share no row of C). Let p_d = max_k G_{k,k+d} for d < w (p_0 the largest diagonal
entry) and p_d = 0 for d >= w: a stationary profile with G_{kk'} <= p_{|k-k'|} for every pair. Write
w̄(s) = Π_{pairs} e^{p_{|Δ|}} >= w(s) (pairs at one site count p_0, as in w).

Clusters. Sort the θ indices of s. Consecutive ones less than w apart are in one cluster; clusters are maximal.
Indices of different clusters are at least w apart, so their factors are e^0 = 1 in w and w̄: w̄(s) is the product
over clusters of each cluster's own weight, which depends only on its shape (its offsets from its first index).
A cluster of m indices has a shape with offsets 0 = o_1 <= .. <= o_m, consecutive gaps o_{j+1} - o_j in [0, w),
span σ = o_m, and weight

    ω(shape) = Π_{j<j'} e^{p_{o_j' - o_j}} / Π_sites (count at the site)!,      a_m = Σ_{shapes of m} ω.

A configuration s is a sequence of r clusters (sizes m_1..m_r summing to θ, shapes, spans σ_i) placed at first
indices x_1 < .. < x_r with x_{i+1} >= x_i + σ_i + w and x_r + σ_r <= b - 1. With U = Σ σ_i + w (r - 1) there are
C(b - 1 - U + r, r) placements (stars and bars: r + 1 non-negative slacks summing to b - 1 - U), at most
C_max(r) = C(b - 1 - w(r - 1) + r, r) (all spans 0).

The proposal π: draw the ordered sizes (m_1..m_r) with probability C_max(r) Π a_{m_i} / A, A the sum over the
2^{θ-1} compositions of θ; each shape with probability ω/a_{m_i} (exactly, index by index, below); the
placement uniform among the C(b - 1 - U + r, r). The cluster decomposition of s is unique, so

    π(s) = C_max(r) Π ω_i / (A C(b - 1 - U + r, r)),     Π ω_i = w̄(s)/Π s_i!,

and the value's weight is (θ!/Π s!) w(s)/(b^θ π(s)) = Z̄ ρ κ with

    Z̄ = θ! A / b^θ,   ρ = w(s)/w̄(s) = Π_{pairs in a cluster} e^{G_{kk'} - p_{|k-k'|}} <= 1,
    κ = C(b - 1 - U + r, r) / C_max(r) <= 1.

So Y = Z̄ ρ κ h(g) lies in [0, B̄_θ(ε)], B̄_θ(ε) = Z̄ e^{(1-θ)ε} (θ-1)^{θ-1} θ^{-θ}: loss_tilt's range with Z̄ for Z_θ.
Z̄ >= Z_θ; Z̄/Z_θ = 1/E_π[ρκ] is the price of the profile and of the placements (a few percent at n = b = 2000,
16 bands). Placements with U > b - 1 do not exist: κ = 0 there, and the value is 0.

Drawing a shape. Walk the cluster index by index with the window of the last w sites as the state: the counts
c_0..c_{w-1} at offsets 0..w-1 behind the last index (c_0 >= 1). The next index is d in [0, w) sites further;
its factor is t_d = exp(Σ_{o <= w-1-d} p_{d+o} c_o) (its pairs with every index still within w), divided by
c_0 + 1 when d = 0 (the site's count grows). With V_0 = 1 and V_r(c) = Σ_d t_d(c) V_{r-1}(next_d(c)), the total
weight of the shapes that complete the cluster with r more indices, a_m = V_{m-1}(one index), and drawing d with
probability t_d V_{r-1}(next_d)/V_r(c) at each step draws the shape with probability ω/a_m (the product
telescopes). V_r is tabulated on every window with c_0 >= 1 and Σ c <= θ_max - r: C(θ_max - r - 1 + w, w) states,
the cost that limits θ_max (``MAX_STATES``). Windows are stored as integer keys, digit o (base θ_max + 1) = c_o.

Rounding (the law drawn is the computed one). Every table entry is a sum of positive terms: V_r of at most 16^r
products of r factors t, each the exponential of a dot product of at most w terms (within w (θ p_0 + 1) 2^-53
relative: at most 2^13 ulps, as w <= 64 and θ p_0 <= 100 by MAX_LOG_WEIGHT), so V_r and a_m are within
r (w + 2^13 + 2) 2^-53 relative; A and Z̄ within θ (w + 2^14) 2^-53, far inside FLOAT_REL (below 10^-10 for
θ <= 13, w <= 64). A decision among m computed weights
within u relative moves at most :func:`~epscert.matrix.loss_tilt.law_tv` (m, u) of probability; a draw takes
one decision among the 2^{θ-1} compositions and at most θ - 1 among w gaps; the placement is drawn with
integer uniforms (exact). :meth:`ClusterTilt.value_slack` is that TV times B̄, as loss_tilt's.
"""

from __future__ import annotations

import functools
import itertools
import math

import numpy as np
from scipy.special import gammaln, logsumexp

from epscert.matrix.loss_tilt import MAX_LOG_WEIGHT, law_tv, log_bound, loss_tilt, max_order, tilt_value_range

#: Most window states of a V table (C(θ_max - 2 + w, w) for V_1): 2·10^6 at θ_max = 11, w = 16 (about 5 CPU s).
MAX_STATES = 2_100_000
#: Largest order drawn by clusters.
MAX_CLUSTER_ORDER = 13
#: Keys must fit an int64 with room: (θ_max + 1)^w < 2^62.
MAX_KEY = 2.0**62
#: Bins above this: the pair's dense G (read for ρ) is not built, so no cluster order.
MAX_DENSE_BINS = 4000


def band_profile(g: np.ndarray) -> tuple[int, np.ndarray] | None:
    """(w, p): the band w (G_{kk'} = 0 for |k - k'| >= w) and the profile p_d = max_k G_{k,k+d}, d < w; None when
    G is not banded below its size (cyclic corners: more than one participation)."""
    b = g.shape[0]
    nonzero = [d for d in range(b) if np.any(np.diagonal(g, d) != 0.0)]
    w = max(nonzero) + 1 if nonzero else 1
    if w >= b:
        return None
    return w, np.array([float(np.max(np.diagonal(g, d))) for d in range(w)])


def cluster_order_limit(w: int, p0: float, b: int) -> int:
    """The largest θ the V tables allow for band w (``MAX_STATES``, ``MAX_KEY``, ``MAX_LOG_WEIGHT``); 0 if none >= 2."""
    top = 0
    for theta in range(2, MAX_CLUSTER_ORDER + 1):
        states = math.comb(theta - 2 + w, w)
        if states > MAX_STATES or (theta + 1.0) ** w >= MAX_KEY or theta * (theta - 1) / 2 * p0 > MAX_LOG_WEIGHT:
            break
        if w * (theta - 1) > b - 1:  # (one cluster's widest span must fit; smaller b: the tables serve)
            break
        top = theta
    return top


class ClusterGas:
    """The V tables of one banded pair up to order ``theta_max`` (module docstring)."""

    def __init__(self, w: int, profile: np.ndarray, theta_max: int) -> None:
        self.w, self.profile, self.theta_max = int(w), np.asarray(profile, dtype=np.float64), int(theta_max)
        self.base = self.theta_max + 1
        self.powers = self.base ** np.arange(self.w + 1, dtype=np.int64)
        #: keys[r], values[r]: the sorted window keys with Σ c <= θ_max - r and V_r on them, r = 1..θ_max - 1
        self.keys: dict[int, np.ndarray] = {}
        self.values: dict[int, np.ndarray] = {}
        for r in range(1, self.theta_max):
            keys = self._windows(self.theta_max - r)
            total = np.zeros(keys.size)
            factors = self.factors(self.digits(keys))
            for d in range(self.w):
                nxt = self.next_keys(keys, d)
                total += factors[:, d] * (1.0 if r == 1 else self.lookup(r - 1, nxt))
            self.keys[r], self.values[r] = keys, total
        #: a_m for m = 0..θ_max (a_0 unused)
        self.a = np.array([0.0, 1.0] + [float(self.lookup(m - 1, np.array([1]))[0]) for m in range(2, self.theta_max + 1)])

    def _windows(self, top: int) -> np.ndarray:
        """Sorted keys of every window with c_0 >= 1 and Σ c <= top."""
        keys = np.arange(1, top + 1, dtype=np.int64)
        sums = keys.copy()
        for o in range(1, self.w):
            parts_k, parts_s = [], []
            for v in range(top + 1):
                ok = sums + v <= top
                parts_k.append(keys[ok] + v * self.powers[o])
                parts_s.append(sums[ok] + v)
            keys, sums = np.concatenate(parts_k), np.concatenate(parts_s)
        return np.sort(keys)

    def digits(self, keys: np.ndarray) -> np.ndarray:
        """(n, w) window counts of the keys."""
        return ((keys[:, None] // self.powers[None, : self.w]) % self.base).astype(np.int8)

    def factors(self, c: np.ndarray) -> np.ndarray:
        """(n, w) factors t_d of windows with counts c (n, w): exp(Σ_{o <= w-1-d} p_{d+o} c_o), over c_0 + 1 at d = 0."""
        w, p = self.w, self.profile
        reach = np.zeros((w, w))  # reach[o, d] = p_{d+o} where d + o < w
        for o in range(w):
            reach[o, : w - o] = p[o:]
        out = np.exp(c.astype(np.float64) @ reach)
        out[:, 0] /= c[:, 0] + 1.0
        return out

    def next_keys(self, keys: np.ndarray, d: int) -> np.ndarray:
        """The windows after the next index d sites further: c_0 + 1 (d = 0), else the counts shift by d and c_0 = 1."""
        if d == 0:
            return keys + 1
        return (keys % self.powers[self.w - d]) * self.powers[d] + 1

    def lookup(self, r: int, keys: np.ndarray) -> np.ndarray:
        """V_r at windows ``keys`` (every one in the table: Σ c <= θ_max - r)."""
        if r == 0:
            return np.ones(keys.shape)
        table = self.keys[r]
        at = np.searchsorted(table, keys)
        if np.any(at >= table.size) or np.any(table[np.minimum(at, table.size - 1)] != keys):
            raise AssertionError("a window outside the V table: Σ c exceeds θ_max - r")
        return self.values[r][at]

    def draw_shapes(self, rng: np.random.Generator, sizes: np.ndarray) -> np.ndarray:
        """(clusters, θ_max) offsets of shapes drawn with probability ω/a_m for the cluster sizes ``sizes`` (the
        first m of each row; the rest -1)."""
        n = sizes.size
        offsets = np.full((n, self.theta_max), -1, dtype=np.int64)
        offsets[:, 0] = 0
        keys = np.ones(n, dtype=np.int64)
        last = np.zeros(n, dtype=np.int64)
        for j in range(1, int(sizes.max(initial=1))):
            live = np.flatnonzero(sizes > j)
            rem = sizes[live] - j  # indices still to place after this one
            k = keys[live]
            factors = self.factors(self.digits(k))
            weights = np.empty((live.size, self.w))
            nexts = np.empty((live.size, self.w), dtype=np.int64)
            for d in range(self.w):
                nxt, factor = self.next_keys(k, d), factors[:, d]
                future = np.ones(live.size)
                for r in np.unique(rem - 1):
                    if r > 0:
                        sel = rem - 1 == r
                        future[sel] = self.lookup(int(r), nxt[sel])
                weights[:, d], nexts[:, d] = factor * future, nxt
            cum = np.cumsum(weights, axis=1)
            u = rng.random(live.size) * cum[:, -1]
            gap = np.minimum(np.sum(cum <= u[:, None], axis=1), self.w - 1)
            keys[live] = nexts[np.arange(live.size), gap]
            last[live] += gap
            offsets[live, j] = last[live]
        return offsets


@functools.lru_cache(maxsize=4)
def cluster_gas(w: int, profile: tuple[float, ...], theta_max: int) -> ClusterGas:
    """The (cached) V tables of one profile."""
    return ClusterGas(w, np.array(profile), theta_max)


@functools.lru_cache(maxsize=MAX_CLUSTER_ORDER + 1)
def compositions(theta: int) -> tuple[tuple[int, ...], ...]:
    """The 2^{θ-1} ordered compositions of θ (cached: at most 2^12 of them)."""
    out = []
    for cuts in itertools.product((0, 1), repeat=theta - 1):
        parts, size = [], 1
        for cut in cuts:
            if cut:
                parts.append(size)
                size = 1
            else:
                size += 1
        out.append(tuple(parts + [size]))
    return tuple(out)


def log_comb(n, k):
    """log C(n, k) for arrays (n >= k >= 0); -inf where n < k."""
    n, k = np.asarray(n, dtype=np.float64), np.asarray(k, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        out = gammaln(n + 1.0) - gammaln(k + 1.0) - gammaln(n - k + 1.0)
    return np.where(n >= k, out, -np.inf)


class ClusterTilt:
    """Order-θ draws of the cluster proposal for one banded pair (module docstring): ``log_z`` = log Z̄."""

    #: drawn cluster by cluster (numpy only: JAX draws tuples from loss_tilt's tables)
    by_clusters = True

    def __init__(self, pair, theta: int, gas: ClusterGas) -> None:
        self.pair, self.theta, self.gas = pair, int(theta), gas
        b, w, theta = pair.bins, gas.w, self.theta
        self.comps = compositions(theta)
        self.sizes = np.zeros((len(self.comps), theta), dtype=np.int64)
        for i, c in enumerate(self.comps):
            self.sizes[i, : len(c)] = c
        r = np.count_nonzero(self.sizes, axis=1)
        self.log_cmax = log_comb(b - 1 - w * (r - 1) + r, r)
        log_a = np.log(np.maximum(gas.a, np.finfo(np.float64).tiny))
        log_a[0] = 0.0  # a_0 = 0 is never a cluster's: the padding of ``sizes`` adds 0
        total = np.zeros(len(self.comps))
        for j in range(theta):  # Σ_{m in c} log a_m, summed in the composition's order
            total = total + log_a[self.sizes[:, j]]
        log_weights = self.log_cmax + total
        top = logsumexp(log_weights)
        self.comp_cum = np.cumsum(np.exp(log_weights - top))
        self.log_z = float(math.lgamma(theta + 1) + top - theta * math.log(b))

    def value_range(self, epsilons) -> np.ndarray:
        """B̄_θ(ε) >= every value (module docstring): loss_tilt's range with Z̄ for Z_θ."""
        return tilt_value_range(self.log_z, self.theta, epsilons)

    def value_slack(self, epsilons) -> np.ndarray:
        """TV · B̄_θ(ε): the most the computed law moves the mean (module docstring, Rounding)."""
        ulps = self.theta * (self.gas.w + 2**14)
        tv = law_tv(len(self.comps), ulps) + (self.theta - 1) * law_tv(self.gas.w, ulps)
        return tv * self.value_range(epsilons)

    def draw(self, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
        """((n, θ) tuples, (n,) log ρκ) of n draws of π (module docstring)."""
        b, w, theta = self.pair.bins, self.gas.w, self.theta
        u = rng.random(n) * self.comp_cum[-1]
        comp = np.minimum(np.searchsorted(self.comp_cum, u, side="right"), len(self.comps) - 1)
        sizes = self.sizes[comp]  # (n, θ): the ordered cluster sizes, then zeros
        r = np.count_nonzero(sizes, axis=1)
        flat = sizes[sizes > 0]
        shapes = self.gas.draw_shapes(rng, flat)  # clusters in row-major order: sample by sample, in sequence
        spans = shapes.max(axis=1)
        span = np.zeros(sizes.shape, dtype=np.int64)
        span[sizes > 0] = spans
        slack = b - 1 - (span.sum(axis=1) + w * (r - 1))
        log_kappa = np.where(slack >= 0, log_comb(slack + r, r), -np.inf) - self.log_cmax[comp]
        z = sorted_distinct(rng, np.maximum(slack, 0) + r, r, theta)  # (n, θ): r sorted values, then large
        starts = z - np.arange(theta)[None, :] + np.concatenate(
            [np.zeros((n, 1), dtype=np.int64), np.cumsum(span + w, axis=1)[:, :-1]], axis=1)
        # each cluster's start (row-major: the order of ``flat``) plus its offsets, cluster after cluster
        pos = np.repeat(starts[sizes > 0], flat) + shapes[shapes >= 0]
        tuples = np.where(slack[:, None] >= 0, pos.reshape(n, theta), 0)  # no placement: κ = 0, any tuple
        return tuples, log_kappa + self.log_rho(tuples)

    @functools.cached_property
    def band_rows(self) -> np.ndarray:
        """(b, 2w - 1): row k of G on columns k - w + 1 .. k + w - 1 (0 outside [0, b): G is 0 there anyway)."""
        g, w = self.pair.g, self.gas.w
        b = g.shape[0]
        cols = np.arange(b)[:, None] + np.arange(-(w - 1), w)[None, :]
        inside = (cols >= 0) & (cols < b)
        return np.where(inside, g[np.arange(b)[:, None], np.clip(cols, 0, b - 1)], 0.0)

    def shifted(self, g_noise: np.ndarray, tuples: np.ndarray) -> np.ndarray:
        """g = g_noise + G s for the count vectors s of ``tuples``, adding each index's band row only (G is 0 beyond
        the band: the same sums as loss_tilt's full rows, in O(θ w) per draw instead of O(θ b)). Formed in a copy
        padded by w - 1 columns on each side, so every window is in range and no column repeats within a row."""
        n, b = g_noise.shape
        w = self.gas.w
        padded = np.zeros((n, b + 2 * (w - 1)))
        padded[:, w - 1 : w - 1 + b] = g_noise
        rows = np.arange(n)[:, None]
        window = np.arange(2 * w - 1)[None, :]
        for j in range(tuples.shape[1]):
            k = tuples[:, j]
            padded[rows, k[:, None] + window] += self.band_rows[k]
        return padded[:, w - 1 : w - 1 + b]

    def log_rho(self, tuples: np.ndarray) -> np.ndarray:
        """log ρ = Σ_{j<j'} (G_{k_j k_j'} - p_{|Δ|}) (0 for pairs w or more apart: both terms are 0)."""
        g, p, w = self.pair.g, self.gas.profile, self.gas.w
        out = np.zeros(tuples.shape[0])
        for j, jj in itertools.combinations(range(self.theta), 2):
            a, c = tuples[:, j], tuples[:, jj]
            gap = np.abs(a - c)
            near = gap < w
            out += np.where(near, g[a, c] - p[np.minimum(gap, w - 1)], 0.0)
        return np.minimum(out, 0.0)  # ρ <= 1 exactly; rounding of the sum stays inside FLOAT_REL


def sorted_distinct(rng: np.random.Generator, size: np.ndarray, r: np.ndarray, width: int) -> np.ndarray:
    """(n, width) rows: r_i distinct integers uniform on [0, size_i), sorted, then 2^40 in the unused columns
    (sequential draws without replacement: the j-th is uniform among the size - j values left, found as the u-th
    value not yet taken)."""
    n = size.size
    big = np.int64(2**40)
    chosen = np.full((n, width), big, dtype=np.int64)
    for j in range(width):
        live = r > j
        u = rng.integers(0, np.maximum(size - j, 1))
        value = u.copy()
        for _ in range(j + 1):  # value = u + #{taken <= value}: a fixed point within j + 1 rounds
            value = u + np.sum(chosen[:, :j] <= value[:, None], axis=1)
        chosen[:, j] = np.where(live, value, big)
    return np.sort(chosen, axis=1)


@functools.lru_cache(maxsize=4)
def cluster_order_range(pair) -> tuple[int, ClusterGas | None]:
    """(θ_max, V tables) of the cluster proposal for this pair; (0, None) when G is not banded or too wide."""
    if pair.bins > MAX_DENSE_BINS:
        return 0, None
    band = band_profile(pair.g)
    if band is None:
        return 0, None
    w, profile = band
    top = cluster_order_limit(w, float(profile[0]), pair.bins)
    if top < 2:
        return 0, None
    return top, cluster_gas(w, tuple(float(x) for x in profile), top)


@functools.lru_cache(maxsize=4)
def _cluster_tilts(pair) -> dict[int, ClusterTilt]:
    return {}


def cluster_tilt(pair, theta: int) -> ClusterTilt:
    """The (cached) cluster proposal of one pair and order: every order of a pair is kept with it (choose_order reads
    them all, up to 13: a cache of 6 (pair, θ) entries rebuilt each of them on every certificate)."""
    top, gas = cluster_order_range(pair)
    if not 2 <= theta <= top:
        raise ValueError(f"the cluster tilt order must be in [2, {top}] for this pair, got theta={theta}")
    tilts = _cluster_tilts(pair)
    if theta not in tilts:
        tilts[theta] = ClusterTilt(pair, theta, gas)
    return tilts[theta]


def tilt_for(pair, theta: int):
    """The proposal of order θ: loss_tilt's exact tables up to their order, the clusters above it."""
    theta = int(theta)
    if theta <= max_order(pair):
        return loss_tilt(pair, theta)
    return cluster_tilt(pair, theta)


def choose_order(pair, epsilons, clusters: bool = True) -> int:
    """θ minimising the range at the median ε of the grid over the table orders (exact Z_θ) and, with
    ``clusters``, the cluster orders above them (Z̄ >= Z_θ): the tightest Rényi bound the proposals reach."""
    ref = float(np.median(np.asarray(epsilons, dtype=np.float64)))
    best, best_log = 1, 0.0
    top = max(max_order(pair), cluster_order_range(pair)[0] if clusters else 0)
    for theta in range(2, top + 1):
        value = float(log_bound(tilt_for(pair, theta).log_z, theta, ref))
        if value < best_log:
            best, best_log = theta, value
    return best
