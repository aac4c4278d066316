"""Cube-set lower bounds for one epoch of Balls-and-Bins and shuffling (SPEC §7, Eqs. 6–7).

For a test set A, D_{e^ε}(P||Q) >= P(A) - e^ε Q(A). With the statistic
M(w) = max_t w_t, the cube sets E_C = {M >= C} and their complements give, for a
pair whose special coordinate has mean μ_P under P and μ_Q under Q (all other
coordinates N(0, σ²)) and F_μ(C) = Φ((C - μ)/σ) Φ(C/σ)^{T-1} = Pr[M < C]:

    REMOVE:  δ(ε) >= max_C [1 - F_{μP}(C)] - e^ε [1 - F_{μQ}(C)]
    ADD:     δ(ε) >= max_C F_{μQ}(C) - e^ε F_{μP}(C)

Balls-and-Bins: (μP, μQ) = (1, 0) (Eq. 6). Shuffle: (2, 1) (Eq. 7). Any C gives a
valid bound, so the maximisation is a dense grid followed by a bounded Brent refinement
around the best grid point, keeping whichever is larger: never a fixed 0.01 grid.

Outward value (issue 12). The bound is valid for any C, so the reported value is the objective
at the best C found, re-evaluated with an outward margin (:func:`cube_outward`): with u = 2^-53
and log_ndtr accurate to K = 64 ulp, log Pr[M < C] has absolute error <= ζ_F = K·u·(|log Φ((C-μ)/σ)|
+ (T-1)|log Φ(C/σ)|) + 2u·|log Pr[M < C]|; the complement log(1 - e^x) amplifies it by at most
e^x/(1 - e^x); the value e^{log a}(1 - e^{ε + log b - log a}) is then lowered by
e^{-ζ_a}, by ζ_a + ζ_b + 2u(|ε| + |log a| + |log b|) in the exponent, and by 16u for exp/expm1.
A candidate that is not positive after the margin (float noise) reports 0.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from scipy import optimize, special

from epscert.names import Direction

#: Grid points for the first pass of the maximisation over C.
GRID_POINTS = 2001
#: Brent tolerance on C.
BRENT_XTOL = 1e-10
#: log-probabilities below this are treated as underflow in the cube objective.
LOG_TRUSTED = -700.0

PAIR_MEANS = {"balls_and_bins": (1.0, 0.0), "shuffle": (2.0, 1.0)}


def log1mexp(x: np.ndarray) -> np.ndarray:
    """log(1 - e^x) for x <= 0, accurate everywhere."""
    x = np.minimum(x, 0.0)
    with np.errstate(divide="ignore"):
        return np.where(x > -math.log(2.0), np.log(-np.expm1(x)), np.log1p(-np.exp(x)))


def log_cdf_max(c: np.ndarray, mean: float, sigma: float, steps: int) -> np.ndarray:
    """log Pr[M < C] with one coordinate N(mean, σ²) and T - 1 coordinates N(0, σ²)."""
    return special.log_ndtr((c - mean) / sigma) + (steps - 1) * special.log_ndtr(c / sigma)


def cube_objective(c: np.ndarray, eps: float, sigma: float, steps: int,
                   means: tuple[float, float], direction: Direction) -> np.ndarray:
    """P(A) - e^ε Q(A) for the cube set at threshold(s) c, in log space (may be negative)."""
    c = np.asarray(c, dtype=np.float64)
    lp = log_cdf_max(c, means[0], sigma, steps)
    lq = log_cdf_max(c, means[1], sigma, steps)
    return objective_from_logs(lp, lq, eps, direction)


def objective_from_logs(lp, lq, eps, direction: Direction) -> np.ndarray:
    """:func:`cube_objective` from log Pr[M < C] under P (``lp``) and Q (``lq``); arrays broadcast."""
    if direction is Direction.REMOVE:
        log_a, log_b = log1mexp(lp), log1mexp(lq)  # P(M >= C), Q(M >= C)
    else:
        log_a, log_b = lq, lp  # Q(M < C), P(M < C)
    with np.errstate(invalid="ignore", over="ignore"):
        diff = eps + log_b - log_a
        out = np.exp(log_a) * -np.expm1(np.minimum(diff, 0.0))
        out = np.where(diff >= 0.0, -np.exp(np.minimum(log_b + eps, 700.0)) + np.exp(log_a), out)
    # below e^-700 a probability is underflow, not a value: an underflowed Q(A) = 0 would let
    # P(A) alone pose as a lower bound (the far tail of a tiny δ)
    trusted = (log_a > LOG_TRUSTED) & (log_b > LOG_TRUSTED)
    return np.where(np.isfinite(out) & trusted, out, -np.inf)


#: Assumed accuracy of scipy.special.log_ndtr (ulp, relative) and the final exp/expm1 allowance.
LOG_NDTR_ULP = 64.0
UNIT_ROUNDOFF = 2.0**-53


def log_cdf_error(c, mean: float, sigma: float, steps: int, value):
    """Absolute error bound of :func:`log_cdf_max` at c (module docstring); arrays allowed."""
    c = np.asarray(c, dtype=np.float64)
    terms = np.abs(special.log_ndtr((c - mean) / sigma)) + (steps - 1) * np.abs(special.log_ndtr(c / sigma))
    return LOG_NDTR_ULP * UNIT_ROUNDOFF * terms + 2.0 * UNIT_ROUNDOFF * np.abs(value)


def cube_outward(c: float, eps: float, sigma: float, steps: int,
                 means: tuple[float, float], direction: Direction) -> float:
    """The cube bound at threshold c, lowered by its floating-point margin; 0 if not positive."""
    return float(cube_outward_many(np.asarray([c], dtype=np.float64), np.asarray([eps], dtype=np.float64),
                                   sigma, steps, means, direction)[0])


def cube_outward_many(c: np.ndarray, eps: np.ndarray, sigma: float, steps: int,
                      means: tuple[float, float], direction: Direction) -> np.ndarray:
    """:func:`cube_outward` at thresholds ``c`` and ε ``eps`` (arrays of one shape), element by element.

    The margins are the module docstring's: log Pr[M < C] within ζ (:func:`log_cdf_error`), the complement
    amplifying it by at most e^x/(1 - e^x), the exponent z raised by ζ_a + ζ_b + 2u(|ε| + |log a| + |log b|),
    the factor e^{log a} lowered by e^{-ζ_a}, and 16u for exp/expm1 (NumPy's or libm's, either within a
    few ulp). A candidate whose margins are not finite, whose probabilities are below e^LOG_TRUSTED, or
    whose exponent is not negative (or NaN) reports 0."""
    c = np.asarray(c, dtype=np.float64)
    eps = np.asarray(eps, dtype=np.float64)
    lp, lq = log_cdf_max(c, means[0], sigma, steps), log_cdf_max(c, means[1], sigma, steps)
    ep, eq = log_cdf_error(c, means[0], sigma, steps, lp), log_cdf_error(c, means[1], sigma, steps, lq)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if direction is Direction.REMOVE:
            def comp(x, err):  # log(1 - e^x) and its error; (-inf, inf) where x + err >= 0
                hi = np.minimum(x + err, 0.0)
                val = log1mexp(x)
                amp = np.exp(hi) / -np.expm1(hi)
                bad = hi >= 0.0
                return (np.where(bad, -np.inf, val),
                        np.where(bad, np.inf, amp * err + 2.0 * UNIT_ROUNDOFF * np.abs(val)))
            (log_a, za), (log_b, zb) = comp(lp, ep), comp(lq, eq)
        else:
            (log_a, za), (log_b, zb) = (lq, eq), (lp, ep)
        z = eps + log_b - log_a + za + zb + 2.0 * UNIT_ROUNDOFF * (np.abs(eps) + np.abs(log_a) + np.abs(log_b))
        value = np.exp(log_a - za) * -np.expm1(z) * (1.0 - 16.0 * UNIT_ROUNDOFF)
        ok = (np.isfinite(log_a) & np.isfinite(za) & (log_a >= LOG_TRUSTED) & (log_b >= LOG_TRUSTED)
              & (z < 0.0) & (value > 0.0))
    return np.where(ok, value, 0.0)


def c_search_range(eps: float, sigma: float, steps: int) -> tuple[float, float]:
    """Interval of cube thresholds C searched for the maximum (covers the top order statistics
    and the ε-dependent importance threshold of SPEC §4 with a wide margin)."""
    spread = sigma * (math.sqrt(2.0 * math.log(steps + 1.0)) + 12.0)
    return -spread - 3.0, spread + 3.0 + sigma**2 * (abs(eps) + math.log(steps + 1.0))


def cube_lower_bound(sigma: float, steps: int, epsilons, pair: str, direction: Direction) -> np.ndarray:
    """max over C of the cube bound, per ε (BOTH: the max of the two directions).

    Each direction's values over a grid are kept (a few recent grids): the rows of 'both' are the
    max of the 'remove' and 'add' values just computed for the same grid, not a second pass."""
    grid = tuple(float(e) for e in np.atleast_1d(np.asarray(epsilons, dtype=np.float64)))
    if direction is Direction.BOTH:
        return np.maximum(cube_grid(float(sigma), int(steps), grid, pair, Direction.REMOVE),
                          cube_grid(float(sigma), int(steps), grid, pair, Direction.ADD))
    return cube_grid(float(sigma), int(steps), grid, pair, direction).copy()


#: Grids of at least this many ε are maximised together (:func:`cube_dense`); smaller ones per ε.
DENSE_MIN = 16
#: A group of ε shares one C grid while its search ranges' tops stay within this factor of width.
GROUP_WIDTH = 2.0
#: Golden-section steps of the shared refinement (0.618^60 of a two-cell bracket: far below BRENT_XTOL).
GOLDEN_STEPS = 60
#: ε per vectorised block (a (block, points) array of the objective: a few MB).
DENSE_BLOCK = 256


@functools.lru_cache(maxsize=8)
def cube_grid(sigma: float, steps: int, grid: tuple[float, ...], pair: str, direction: Direction) -> np.ndarray:
    """:func:`cube_lower_bound` of one direction over ``grid`` (cached; read-only array)."""
    out = cube_dense(sigma, steps, grid, pair, direction) if len(grid) >= DENSE_MIN else \
        cube_sparse(sigma, steps, grid, pair, direction)
    arr = np.asarray(out, dtype=np.float64)
    arr.flags.writeable = False
    return arr


#: Coarse stride of the dense search: the C grid is scanned every COARSE_STRIDE points first, and only the
#: cells whose upper bound beats the best coarse value are scanned point by point (:func:`grid_argmax`).
COARSE_STRIDE = 8
#: Relative and absolute slack on a cell's upper bound (covers the round-off of the bound and of a
#: log-CDF that is monotone only up to a few ulp): a cell is scanned whenever it might hold the best point.
CELL_SLACK_REL, CELL_SLACK_ABS = 1e-9, 1e-300


def cube_dense(sigma: float, steps: int, grid: tuple[float, ...], pair: str, direction: Direction) -> list[float]:
    """The cube bound over a dense ε grid, maximised for all ε together (issue 35 item 5).

    Any threshold C gives a valid lower bound once re-evaluated outward at C (:func:`cube_outward_many`,
    the same final step as :func:`cube_sparse`), so how C is found only decides how tight the bound
    is, never whether it holds. Here the log-CDFs log Pr[M < C] (which do not depend on ε) are computed
    once on a shared grid per group of ε, with a spacing no wider than any member's own grid
    (GRID_POINTS over its :func:`c_search_range`) and covering each member's range; each ε takes its
    best point there (:func:`grid_argmax`: the same point as a scan of every grid point, found from a
    coarse scan and the cells that can beat it), then a golden-section search in the two cells around
    it (all ε of the group in one array pass per step) replaces the per-ε Brent search.
    tests/core/test_analytic.py checks the values against :func:`cube_sparse`'s.
    """
    means = PAIR_MEANS[pair]
    eps_all = np.asarray(grid, dtype=np.float64)
    best_c = np.zeros(eps_all.size)
    best = np.full(eps_all.size, -np.inf)
    order = np.argsort(eps_all, kind="stable")
    start = 0
    while start < order.size:  # groups of ε whose ranges' widths stay within GROUP_WIDTH
        lo, hi0 = c_search_range(float(eps_all[order[start]]), sigma, steps)
        stop = start + 1
        while stop < order.size and c_search_range(float(eps_all[order[stop]]), sigma, steps)[1] - lo <= \
                GROUP_WIDTH * (hi0 - lo):
            stop += 1
        idx = order[start:stop]
        his = np.asarray([c_search_range(float(e), sigma, steps)[1] for e in eps_all[idx]])
        step = (hi0 - lo) / (GRID_POINTS - 1)
        count = int(math.ceil((float(his.max()) - lo) / step)) + 1
        cs = lo + step * np.arange(count, dtype=np.float64)
        lp, lq = log_cdf_max(cs, means[0], sigma, steps), log_cdf_max(cs, means[1], sigma, steps)
        ks = np.zeros(idx.size, dtype=np.int64)
        for b in range(0, idx.size, DENSE_BLOCK):
            sl = slice(b, b + DENSE_BLOCK)
            ks[sl], best[idx[sl]] = grid_argmax(lp, lq, cs, eps_all[idx[sl]], his[sl], direction)
        best_c[idx] = cs[ks]
        a, c = cs[np.maximum(ks - 1, 0)], cs[np.minimum(ks + 1, count - 1)]
        gc, gv = golden_max(a, c, eps_all[idx], sigma, steps, means, direction)
        better = gv > best[idx]
        best[idx] = np.where(better, gv, best[idx])
        best_c[idx] = np.where(better, gc, best_c[idx])
        start = stop
    out = cube_outward_many(best_c, eps_all, sigma, steps, means, direction)
    return np.where(best > 0.0, out, 0.0).tolist()


def grid_argmax(lp: np.ndarray, lq: np.ndarray, cs: np.ndarray, eps: np.ndarray, his: np.ndarray,
                direction: Direction) -> tuple[np.ndarray, np.ndarray]:
    """For each ε_i: (index k, value) of the best grid point C_k <= his_i of the cube objective
    (first index among equal values): the answer of a scan of every point, from fewer evaluations.

    Cells [C_{jS}, C_{(j+1)S}] of S = COARSE_STRIDE points. Both probabilities of the objective a - e^ε b
    move the same way in C (REMOVE: a = P(M >= C), b = Q(M >= C) both fall; ADD: a = Q(M < C),
    b = P(M < C) both rise), so on a cell a <= a(the cell's left end, REMOVE; right end, ADD) and
    b >= b(the other end): the objective there is at most u_j = a_end - e^ε b_end, raised by
    CELL_SLACK. The coarse points give a value every cell must beat; only cells with u_j above it
    are scanned point by point (a cell below it cannot hold the best point). Where that leaves many
    cells the cost only approaches the full scan's. Where every cell's u_j is negative the objective is
    negative on the whole range (grid points and the points between them), so the bound is 0 at any C:
    that ε is not scanned and gets (0, -inf), which :func:`cube_dense` reports as 0, as the full scan would."""
    stride = COARSE_STRIDE
    count = cs.size
    e = eps[:, None]
    coarse = np.arange(0, count, stride)
    vals = objective_from_logs(lp[None, coarse], lq[None, coarse], e, direction)
    vals = np.where(cs[None, coarse] <= his[:, None], vals, -np.inf)
    floor = np.max(vals, axis=1)
    left, right = coarse, np.minimum(coarse + stride, count - 1)
    if direction is Direction.REMOVE:
        a_end, b_end = log1mexp(lp[left]), log1mexp(lq[right])
    else:
        a_end, b_end = lq[right], lp[left]
    with np.errstate(over="ignore", invalid="ignore"):
        bound = np.exp(a_end)[None, :] - np.exp(np.minimum(b_end[None, :] + e, 700.0))
    bound = bound + CELL_SLACK_REL * np.abs(bound) + CELL_SLACK_REL * np.exp(a_end)[None, :] + CELL_SLACK_ABS
    allowed = cs[None, left] <= his[:, None]
    # no cell can reach 0: the bound is 0 whichever point is best (the golden search near it stays below
    # the cell's bound too), so that ε scans nothing and reports (index 0, -inf)
    hopeless = np.max(np.where(allowed, bound, -np.inf), axis=1) < 0.0
    live = (bound >= floor[:, None]) & allowed & ~hopeless[:, None]
    rows, cells = np.nonzero(live)
    points = np.minimum(coarse[cells][:, None] + np.arange(stride + 1)[None, :], count - 1)
    fine = objective_from_logs(lp[points], lq[points], eps[rows][:, None], direction)
    fine = np.where(cs[points] <= his[rows][:, None], fine, -np.inf)
    pick = np.argmax(fine, axis=1)
    value, index = fine[np.arange(rows.size), pick], points[np.arange(rows.size), pick]
    # per ε: the largest value, then the smallest index (the first maximum of a full scan)
    order = np.lexsort((index, -value, rows))
    first = np.ones(order.size, dtype=bool)
    first[1:] = rows[order][1:] != rows[order][:-1]
    out_k = np.zeros(eps.size, dtype=np.int64)
    out_v = np.full(eps.size, -np.inf)
    out_k[rows[order][first]] = index[order][first]
    out_v[rows[order][first]] = value[order][first]
    return out_k, out_v


def golden_max(a: np.ndarray, b: np.ndarray, eps: np.ndarray, sigma: float, steps: int,
               means: tuple[float, float], direction: Direction) -> tuple[np.ndarray, np.ndarray]:
    """Golden-section search for the maximum of the cube objective on [a_i, b_i], one per ε_i, all at
    once: (the best C evaluated, its value). Any C is valid; this only looks for a good one."""
    inv = (math.sqrt(5.0) - 1.0) / 2.0
    a, b = a.astype(np.float64).copy(), b.astype(np.float64).copy()

    def f(c):
        return cube_objective(c, eps, sigma, steps, means, direction)

    x1, x2 = b - inv * (b - a), a + inv * (b - a)
    f1, f2 = f(x1), f(x2)
    best_c, best_v = np.where(f1 >= f2, x1, x2), np.maximum(f1, f2)
    for _ in range(GOLDEN_STEPS):
        left = f1 >= f2  # the maximum is in [a, x2]
        b = np.where(left, x2, b)
        a = np.where(left, a, x1)
        nx1 = np.where(left, b - inv * (b - a), x2)
        nx2 = np.where(left, x1, a + inv * (b - a))
        new = f(np.where(left, nx1, nx2))
        f1, f2 = np.where(left, new, f2), np.where(left, f1, new)
        x1, x2 = nx1, nx2
        cand_c, cand_v = np.where(left, x1, x2), new
        up = cand_v > best_v
        best_c, best_v = np.where(up, cand_c, best_c), np.where(up, cand_v, best_v)
    return best_c, best_v


def cube_sparse(sigma: float, steps: int, grid: tuple[float, ...], pair: str, direction: Direction) -> list[float]:
    """The cube bound per ε: a GRID_POINTS grid over its search range, then Brent (module docstring)."""
    means = PAIR_MEANS[pair]
    out = []
    for eps in grid:
        lo, hi = c_search_range(float(eps), sigma, steps)
        grid = np.linspace(lo, hi, GRID_POINTS)
        vals = cube_objective(grid, float(eps), sigma, steps, means, direction)
        k = int(np.argmax(vals))
        best, best_c = float(vals[k]), float(grid[k])
        a, b = grid[max(k - 1, 0)], grid[min(k + 1, grid.size - 1)]
        if b > a:
            res = optimize.minimize_scalar(
                lambda c: -max(float(cube_objective(np.asarray(c), float(eps), sigma, steps, means, direction)),
                               -1.0),  # finite for Brent; the maximum is >= 0 whenever it matters
                bounds=(a, b), method="bounded", options={"xatol": BRENT_XTOL},
            )
            if -float(res.fun) > best:
                best, best_c = -float(res.fun), float(res.x)
        out.append(cube_outward(best_c, float(eps), sigma, steps, means, direction) if best > 0.0 else 0.0)
    return out
