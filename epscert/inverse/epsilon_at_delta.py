"""Certified ε(δ): from one shared Monte Carlo sample set over an ε grid (SPEC §8).

Monotonicity. With one sample set for the whole grid, every sample's value
Y(ε) = (1 - e^{ε-ℓ})_+ is non-increasing in ε, so p̂(ε) is, and so is the KL–Chernoff
UCB(ε) (same m, same scale s; :func:`epscert.results.rows.monotone_ucbs` enforces it to the
last ulp). Then

    ε̂(δ) = min{ε in grid : UCB(ε) <= δ}

is an upper confidence bound on the true ε(δ) at level β with no union bound over the
grid, even when the grid is chosen after looking at the same samples: if ε̂ < ε* = ε(δ),
monotonicity gives UCB(ε*) <= UCB(ε̂) <= δ = δ(ε*) (δ(·) is continuous), an event of
probability <= β at the single fixed point ε*. This is why the refinement may reuse
samples.

Refinement: a coarse grid brackets each crossing, then a fine grid of ``fine_points``
values between the bracketing points. Without importance sampling the fine pass uses the
same seed, so its samples are the coarse pass's samples. With importance sampling the
event depends on the smallest ε of the grid, so the fine pass conditions on the lower end
of the bracket: it draws a new, independent sample set (unless that end is the coarse
grid's smallest ε, when the event and the samples are the same and the argument above
applies), and the certificate comes from that pass alone. The rule is general: the coarse
points count only when the two passes have the same sampling key (the same samples); a key
that depends on the smallest ε (importance, conditional, every matrix-mechanism method) makes
the passes independent, and merging their points would need a union bound (2β).

Fixed grids (the matrix mechanism, and truncated batches). There the coarse pass draws on its
own seed (seed + 1), so the fine grid is fixed before the certifying samples are drawn and the
argument needs no monotonicity between grid points. (A matrix mechanism's block-law and decoupled bounds, which
hold for every ε at once from streams of their own, are drawn on the user's seed in every pass,
:func:`epscert.results.rows.law_seed`: the grid may depend on them, as the values' draws of the certifying pass
are independent of both.) Upper side: if ε̂ < ε*, the largest grid
point ε_k <= ε* has ε_k >= ε̂, so UCB(ε_k) <= UCB(ε̂) <= δ <= δ(ε_k) (the UCB curve of one sample
set is non-increasing on the grid, :func:`epscert.results.rows.raised_from_the_right`): the UCB
fails at the fixed point ε_k, probability <= β. Lower side (rows with an LCB, the matrix
mechanism's value estimators): with λ(ε_i) = min_{j <= i} LCB(ε_j) (a running minimum, it only
lowers each LCB) and

    ε̌(δ) = max{ε_i in grid : λ(ε_i) > δ},

if ε* < ε̌ the smallest grid point ε_k > ε* has ε_k <= ε̌, so LCB(ε_k) >= λ(ε̌) > δ >= δ(ε_k): the
LCB fails at the fixed point ε_k, probability <= β. Each side holds at β; both at once at 2β.
The certifying grid then spans both crossings (:func:`two_sided_grid`: a second search pass on the
search seed narrows them first, so ``fine_points`` values give a fine resolution). Both search passes draw a quarter
of a large run's samples (:func:`search_samples`; the coarse one again at the run's own count for a δ whose UCB
crossing a quarter did not find, so no δ goes without a bracket that the full count would give it).

Between grid points (:func:`refined_upper`): where the block-law bounds of a one-participation strategy apply, each
holds for every ε at once (:func:`epscert.results.rows.matrix_law_upper`: their survival bounds hold jointly, the
rest is deterministic), on events already counted in the rows' β. So the upper side may move down from the grid's
answer to the first of ``REFINE_POINTS`` - 1 points of the step below it where those bounds alone are <= δ in every
direction, though that point was chosen after the samples: at n = b = 10^4, 64 bands, σ = 2 the grid's steps are
1/1024 to 1/256 there, and the upper sides moved from 0.1910, 0.2422 and 0.2930 (grid points) to 0.1906, 0.2408 and
0.2914 at 10⁻⁶, 10⁻⁸ and 10⁻¹⁰ (with the grid placed as :func:`two_sided_grid` now places it: 0.1905, 0.2407 and
0.2913).
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Callable, Sequence

import numpy as np

from epscert.results.tables import certify_config
from epscert.results.baselines import baseline_tasks
from epscert.results.rows import analytic_bounds, base_row, law_seed, matrix_law_upper
from epscert.inverse.search import epsilon_for_delta
from epscert.config import BRACKET_METHODS, CertifyConfig, Direction, Method, Sampler, canonical_method, check_float
from epscert.analytic.poisson import poisson_pld_epsilon
from epscert.analytic.truncation import config_penalty
from epscert.config.samplers import loss_sampler
from epscert.progress import Callback, ProgressMeter

DEFAULT_COARSE_GRID = (0.0, 0.125, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0,
                       10.0, 12.0, 16.0, 20.0, 24.0, 32.0, 40.0, 48.0, 64.0)
FINE_POINTS = 32
#: Steps of the second search pass of a two-sided inversion across each coarse bracket (two_sided_grid).
SEARCH_POINTS = 8
#: Both search passes of a fixed-grid inversion (the coarse one and two_sided_grid's) draw the run's samples divided by
#: this, but not fewer than SEARCH_MIN (nor more than the run's): they only place the certifying grid, and a small run's
#: placement from a quarter of its samples was measured coarser (n = b = 128, 2000 samples: the upper side's grid step
#: 3.5% where it was under 2%)
SEARCH_SHARE = 4
SEARCH_MIN = 10_000
#: ``bound`` of a matrix mechanism's ε(δ) rows: its rows' UCB and LCB, inverted on a fixed grid.
MATRIX_GRID_BOUND = "mc_ucb_lcb_fixed_grid"
#: The same, its upper side refined between two grid points by the block-law bounds alone (:func:`refined_upper`)
MATRIX_REFINED_BOUND = "mc_ucb_lcb_fixed_grid+block_law_refined"
#: Points of that refinement in each grid step (an upper side within 1/REFINE_POINTS of a step of the law's own)
REFINE_POINTS = 64
#: The matrix mechanism's deterministic bounds (:mod:`epscert.matrix.bracket`), with an ε(δ) curve.
MATRIX_BOUNDS = (Method.INDEPENDENT_LOWER_BOUND, Method.COMONOTONE_UPPER_BOUND)
#: Analytic methods whose curve is an upper bound on δ(ε) (so their ε(δ) is an upper bound).
UPPER_METHODS = (Method.EXACT, Method.PLD_UPPER, Method.BRACKET_UPPER, Method.COMONOTONE_UPPER_BOUND)
#: ε values scanned for a feasible point when the truncation penalty makes δ(ε) non-monotone.
TRUNCATION_SCAN = tuple(np.linspace(0.0, 64.0, 513).tolist())


def check_deltas(deltas: Sequence[float]) -> tuple[float, ...]:
    if isinstance(deltas, (int, float)):
        deltas = (deltas,)
    values = tuple(check_float("delta", d, low=0.0, low_open=True, high=1.0) for d in deltas)
    if not values:
        raise ValueError("deltas must be a non-empty list, got deltas=[]")
    return values


def _curve(table, direction: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(ε, δ estimate, UCB, LCB) of one direction's rows, by ε; LCB is 0 where a row has none."""
    rows = sorted((r for r in table.to_pylist() if r["direction"] == direction), key=lambda r: r["epsilon"])
    return (np.array([r["epsilon"] for r in rows]), np.array([r["delta"] for r in rows]),
            np.array([r["delta_upper"] for r in rows]),
            np.array([r["delta_lower"] if r["delta_lower"] is not None else 0.0 for r in rows]))


def _first_below(eps: np.ndarray, values: np.ndarray, target: float) -> float:
    hits = np.flatnonzero(values <= target)
    return float(eps[hits[0]]) if hits.size else math.inf


def mean_crossing(eps: np.ndarray, mean: np.ndarray, target: float) -> float:
    """Point estimate of ε(δ) from the estimated curve δ̂(ε) on an ascending grid: the first grid interval
    where δ̂ falls to ``target``, interpolated linearly in log δ̂ (δ(ε) falls about exponentially there;
    linearly in δ̂ where an end is 0). An estimate, not a bound: the certificate's ends are grid points
    with a UCB or LCB; this only places the estimate between grid points instead of on one."""
    hits = np.flatnonzero(mean <= target)
    if not hits.size:
        return math.inf
    j = int(hits[0])
    if j == 0:
        return float(eps[0])
    e0, e1, m0, m1 = float(eps[j - 1]), float(eps[j]), float(mean[j - 1]), float(mean[j])
    if not (m0 > target >= m1) or e1 <= e0:
        return e1
    if m1 > 0.0:
        t = (math.log(m0) - math.log(target)) / (math.log(m0) - math.log(m1))
    else:
        t = (m0 - target) / (m0 - m1)
    return float(min(e1, max(e0, e0 + t * (e1 - e0))))


def _brackets(coarse: np.ndarray, ucb: np.ndarray, deltas: Sequence[float],
              lcb: np.ndarray | None = None) -> dict[float, tuple[float, float, float]]:
    """For each δ whose crossing the coarse pass found: (lower end, one coarse step above it, and the
    last coarse ε whose LCB exceeds δ when ``lcb`` is given and that point is below the lower end,
    else the lower end again).

    Two-sided (``lcb`` given), a δ whose UCB never reaches it on the grid still gets a bracket for its lower
    side when the LCB exceeds δ at the grid's first points: (the last of them, the next coarse point, the
    same last point). The grid may stop early (:func:`matrix_search_grid`, at a deterministic upper bound
    the Monte Carlo UCB does not reach), and the certified lower side is worth resolving there all the same;
    the Monte Carlo upper side of such a δ is then inf, and a deterministic one answers."""
    out = {}
    for delta in deltas:
        hi = _first_below(coarse, ucb, delta)
        if math.isfinite(hi):
            k = int(np.searchsorted(coarse, hi))
            lo = float(coarse[k - 1]) if k > 0 else hi
            low = lo
            if lcb is not None:
                above = np.flatnonzero(lcb[:k] > delta)
                low = min(lo, float(coarse[above[-1]])) if above.size else lo
            out[delta] = (lo, float(coarse[min(k + 1, coarse.size - 1)]), low)
        elif lcb is not None:
            failing = np.flatnonzero(~(lcb > delta))
            first_fail = int(failing[0]) if failing.size else coarse.size
            if first_fail > 0:  # lower_epsilon's rule: the prefix of points with LCB > δ
                lo = float(coarse[first_fail - 1])
                out[delta] = (lo, float(coarse[min(first_fail, coarse.size - 1)]), lo)
    return out


def lower_epsilon(eps: np.ndarray, lcb: np.ndarray, delta: float) -> float | None:
    """ε̌(δ) = max{ε_i : min_{j <= i} LCB(ε_j) > δ} on an ascending grid fixed before the samples
    (module docstring, at the LCB's β); None when the first point's LCB is already <= δ."""
    below = np.flatnonzero(~(lcb > delta))
    if below.size == 0:
        return float(eps[-1])
    return float(eps[below[0] - 1]) if below[0] > 0 else None


def matrix_search_grid(config: CertifyConfig, coarse: Sequence[float], delta: float) -> tuple[float, ...]:
    """The coarse grid of a matrix mechanism, cut after its first point where the comonotone upper
    bound (:mod:`epscert.matrix.bracket`, both directions) is <= ``delta``: ε(δ) lies at or below that point,
    so the search needs nothing beyond it (and past it the estimators' ranges underflow to 0). The cut
    depends on the configuration only, never on samples."""
    grid = np.asarray(sorted(coarse), dtype=np.float64)
    upper = analytic_bounds(config, Method.COMONOTONE_UPPER_BOUND, Direction.BOTH, grid)["upper"]
    done = np.flatnonzero(upper <= delta)
    return tuple(grid[: done[0] + 1].tolist()) if done.size else tuple(grid.tolist())


#: A memo of sampling passes shared by several questions about one run (:func:`mc_epsilon_rows`'s ``passes``):
#: configuration id -> its table. The same configuration (seed, samples, ε grid, method...) draws the same
#: samples and gives bit-identical rows (SPEC §10), so a pass found here is the pass a fresh call would compute.
Passes = dict


def sampled(config: CertifyConfig, progress, passes: Passes | None = None):
    """``certify_config(config, progress)``, read from ``passes`` when that exact pass was already run."""
    if passes is None:
        return certify_config(config, progress)
    key = config.config_id
    if key not in passes:
        passes[key] = certify_config(config, progress)
    return passes[key]


def two_sided_grid(search: CertifyConfig, brackets: dict, direction: str, fine_points: int,
                   progress: Callable[[int], None] | None = None, passes: Passes | None = None,
                   samples: int | None = None) -> list[float]:
    """The certifying grid of a two-sided inversion (placement only: any fixed grid keeps the certificate valid).

    A second search pass (``search``'s seed and sample count, :data:`SEARCH_POINTS` steps of h across each coarse
    bracket [low, top]) finds the first ε with UCB <= δ (u) and the last below it with LCB > δ (l), and
    where it can, the crossings between them and their neighbours by log-linear interpolation of the two
    curves (û, l̂). It may draw fewer than the certifying pass's ``samples`` (:data:`SEARCH_SHARE`); it then
    reads the curves predicted for that pass (:func:`predicted_sides`). The certifying pass gets ``fine_points`` -
    ``fine_points`` // 4 steps across [l̂ - h/4, û + h/4] and ``fine_points`` // 4 across [l - h, u + h] (the span
    the crossings lie in whatever the interpolation says), plus the coarse points of [low, top] (a coarse answer if
    its own crossings fall outside both spans). At n = b = 10^4, 64 bands, σ = 2, δ = 10⁻⁶ the search's h is 0.047
    and u - l one h: one span of 32 steps had a resolution of 0.0044, the interpolated one 0.0012.
    """
    spans = sorted({e for _, top, low in brackets.values() for e in np.linspace(low, top, SEARCH_POINTS + 1).tolist()})
    table = sampled(dataclasses.replace(search, epsilons=tuple(spans)), progress, passes)
    eps, mean, ucb, lcb = _curve(table, direction)
    drawn_lcb = lcb
    if samples is not None and samples > search.samples:
        ucb, lcb = predicted_sides(mean, ucb, lcb, samples / search.samples)
    grid: set[float] = set()
    wide = fine_points // 4
    for delta, (_, top, low) in brackets.items():
        step = (top - low) / SEARCH_POINTS
        crossed = np.flatnonzero(ucb <= delta)
        upper = float(eps[crossed[0]]) if crossed.size else top
        near_upper = log_crossing(eps, ucb, delta, int(crossed[0])) if crossed.size else upper
        lower, near_lower = lower_crossing(eps, lcb, delta, upper, low)
        grid.update(np.linspace(max(0.0, (low if lower is None else lower) - step), upper + step, wide + 1).tolist())
        grid.update(np.linspace(max(0.0, min(near_lower, near_upper) - step / 4), near_upper + step / 4,
                                fine_points - wide + 1).tolist())
        if lower is not None:  # the lower side is read at grid points only: fine_points more within h/16 of l̂, from
            # the drawn LCB's own crossing where that is below (a mean drawn low, heavy tails: n = b = 2000, σ = 1.2,
            # δ = 1e-10 put l̂ at 0.98, the certifying pass's crossing near 0.87, the drawn one at the bracket's end)
            floor = lower_crossing(eps, drawn_lcb, delta, upper, low)[1]
            grid.update(np.linspace(max(0.0, min(floor, near_lower) - step / 16), near_lower + step / 16,
                                    fine_points + 1).tolist())
        grid.update(e for e in search.epsilons if low <= e <= top)  # coarse fallbacks if the crossings moved
    return sorted(grid)


def lower_crossing(eps: np.ndarray, lcb: np.ndarray, delta: float, upper: float,
                   low: float) -> tuple[float | None, float]:
    """(l, l̂) of :func:`two_sided_grid` for one LCB curve: the last ε below ``upper`` with LCB > δ (None where there
    is none) and the log-linear crossing after it (``low`` where there is none)."""
    above = np.flatnonzero((lcb > delta) & (eps < upper))
    if not above.size:
        return None, low
    return float(eps[above[-1]]), log_crossing(eps, lcb, delta, int(above[-1]) + 1)


def predicted_sides(mean: np.ndarray, ucb: np.ndarray, lcb: np.ndarray,
                    ratio: float) -> tuple[np.ndarray, np.ndarray]:
    """The UCB and LCB curves a pass of ``ratio`` times the samples would show, for placing a grid only: each side's
    distance from the mean divided by √ratio (a CLT half-width). Measured at n = b = 2000, 16 bands, σ = 1.2,
    δ = 10⁻⁶, the second search at a quarter of 10⁵ samples: the UCB's distance from the mean was 4.6 standard
    errors there and 4.4 in the certifying pass (a range term, which would fall as 1/ratio, did not set it)."""
    return mean + np.maximum(ucb - mean, 0.0) / math.sqrt(ratio), mean - np.maximum(mean - lcb, 0.0) / math.sqrt(ratio)


def log_crossing(eps: np.ndarray, curve: np.ndarray, delta: float, index: int) -> float:
    """Where the line through (ε_{i-1}, log curve_{i-1}) and (ε_i, log curve_i) meets log δ, i = ``index``, for a
    curve above δ at i - 1 and at or below it at i; ε_i where that does not hold or a value is not positive
    (placement only: :func:`two_sided_grid`)."""
    if index <= 0 or index >= eps.size:
        return float(eps[min(max(index, 0), eps.size - 1)])
    a, b = float(curve[index - 1]), float(curve[index])
    if not (a > delta >= b > 0.0):
        return float(eps[index])
    t = math.log(a / delta) / math.log(a / b)
    return float(eps[index - 1] + t * (eps[index] - eps[index - 1]))


def search_samples(config: CertifyConfig) -> int:
    """Samples of a fixed-grid inversion's search passes (placement only): the run's divided by
    :data:`SEARCH_SHARE`, at least :data:`SEARCH_MIN` and the shard count, at most the run's."""
    return max(min(config.samples, SEARCH_MIN), config.shards, config.samples // SEARCH_SHARE)


def mc_epsilon_floor(config: CertifyConfig, method: Method, coarse: Sequence[float] = DEFAULT_COARSE_GRID) -> float:
    """The smallest δ whose ε :func:`mc_epsilon_rows` can certify with ``config.samples``; below it, inf.

    The coarse pass must find a crossing UCB(ε) <= δ first. Its UCB at every grid ε is at least
    s_d·(1 - β_d^{1/m}) in each direction d: the KL–Chernoff UCB of a mean 0 is 1 - β^{1/m}
    (m·kl(0‖p) = -m·log(1 - p) = log(1/β)), it only grows with the mean, and importance sampling
    scales it by s_d = Pr[event of the coarse grid's smallest ε] (1 without importance sampling);
    β_d = β / #directions. The 'both' UCB is the max over directions. Rounded down (a floor that is
    too low only lets a hopeless run start, never skips a useful one).
    """
    plain = dataclasses.replace(config, methods=(method,), epsilons=tuple(coarse), dataset_size=None, batch_size=None,
                                max_batch_size=None)
    parts = config.direction.parts()
    log_beta = math.log(config.error_prob / len(parts))
    floor = -math.expm1(log_beta / config.samples)
    if not method.uses_importance:
        return floor * (1.0 - 1e-12)
    sampler = loss_sampler(plain, method)
    return max(math.exp(sampler.log_scale(d)) for d in parts) * floor * (1.0 - 1e-12)


def mc_epsilon_rows(config: CertifyConfig, method: Method, deltas: Sequence[float],
                    coarse: Sequence[float] = DEFAULT_COARSE_GRID, fine_points: int = FINE_POINTS,
                    progress: Callback | None = None, passes: Passes | None = None) -> list[dict]:
    """ε-at-δ rows of one Monte Carlo method (coarse search, then the certifying fine pass).

    ``passes`` (a dict kept by the caller across calls): every sampling pass is looked up there first and
    stored there after (:func:`sampled`), so separate calls for several δ of one run share the passes they
    have in common (the coarse search always, for DP-SGD) and each answer is the one a call alone gives.

    Truncated batches: the penalty (1 + e^ε)η grows with ε while the UCB falls, so the
    criterion is made monotone by charging every fine-grid point the penalty at the top
    of its bracket, pen_cap. The coarse (search) pass then uses an independent seed, so
    that the grid and pen_cap are fixed before the certifying samples are drawn; with
    target' = δ - pen_cap the argument of the module docstring applies, and at ε̂ the
    truncated mechanism has δ(ε̂) + pen(ε̂) <= target' + pen_cap = δ.

    ``progress`` receives :class:`epscert.progress.ProgressUpdate` s of each pass (None: silent).
    """
    deltas = check_deltas(deltas)
    start = time.perf_counter()
    direction = config.direction.value
    plain = dataclasses.replace(config, methods=(method,), dataset_size=None, batch_size=None, max_batch_size=None)
    # a fixed grid: the coarse pass only searches, on its own seed (module docstring)
    fixed_grid = config.truncated or config.strategy is not None
    two_sided = config.strategy is not None  # value estimators with an LCB per ε
    search_seed = (config.seed + 1) % 2**128 if fixed_grid else config.seed
    per_pass = len(config.direction.parts()) * config.samples
    if config.strategy is not None:
        coarse = matrix_search_grid(config, coarse, min(deltas))
    # a matrix mechanism's block-law and decoupled bounds hold for every ε at once: the searches take the user's seed
    # for them (epscert.results.rows.law_seed), so they are drawn once for the whole inversion
    law = law_seed(config) if config.strategy is not None else None
    search = dataclasses.replace(plain, epsilons=tuple(coarse), seed=search_seed, law_seed=law,
                                 law_samples=config.samples if law is not None else None)
    quarter = dataclasses.replace(search, samples=search_samples(config) if two_sided else config.samples)
    per_quarter = len(config.direction.parts()) * quarter.samples
    c_eps, c_mean, c_ucb, c_lcb = _curve(sampled(
        quarter, ProgressMeter(progress, per_quarter, "sampling (coarse ε grid)").add, passes), direction)
    brackets = _brackets(c_eps, c_ucb, deltas, c_lcb if two_sided else None)
    missing = [d for d in deltas if not math.isfinite(_first_below(c_eps, c_ucb, d))]
    if quarter.samples < config.samples and missing:  # placement only: the run's count where a quarter found none
        c_eps, c_mean, c_ucb, c_lcb = _curve(sampled(search, ProgressMeter(
            progress, per_pass, "sampling (coarse ε grid, all samples)").add, passes), direction)
        brackets.update(_brackets(c_eps, c_ucb, missing, c_lcb))
    if two_sided and brackets:
        grid = two_sided_grid(quarter, brackets, direction, fine_points,
                              ProgressMeter(progress, per_quarter, "sampling (second search)").add, passes,
                              config.samples)
    else:
        grid = sorted({e for lo, top, _ in brackets.values() for e in np.linspace(lo, top, fine_points + 1).tolist()})
    f_eps, f_mean, f_ucb, f_lcb = c_eps, c_mean, c_ucb, c_lcb
    if grid:
        fine = dataclasses.replace(plain, epsilons=tuple(grid))
        f_eps, f_mean, f_ucb, f_lcb = _curve(sampled(
            fine, ProgressMeter(progress, per_pass, "sampling (fine ε grid)").add, passes), direction)
        if not fixed_grid and fine.sampling_key(method) == search.sampling_key(method):
            # same samples (same seed and key): the coarse points count too
            order = np.argsort(np.concatenate([c_eps, f_eps]), kind="stable")
            f_eps = np.concatenate([c_eps, f_eps])[order]
            f_mean = np.concatenate([c_mean, f_mean])[order]
            f_ucb = np.concatenate([c_ucb, f_ucb])[order]
    wall = time.perf_counter() - start
    rows = []
    for delta in deltas:
        pen_cap, eps_up, eps_low, refined_here = 0.0, math.inf, None, False
        if delta in brackets:
            top = brackets[delta][1]
            if config.truncated:
                pen_cap = config_penalty(config, top)
            ok = (f_ucb + pen_cap <= delta) & (f_eps <= top if config.truncated else True)
            eps_up = float(f_eps[np.flatnonzero(ok)[0]]) if ok.any() else math.inf
            if two_sided and grid:
                eps_low = lower_epsilon(f_eps, f_lcb, delta)
                refined = refined_upper(fine, method, f_eps, eps_up, delta)
                refined_here = refined < eps_up
                eps_up = refined
        # the point estimate: the fine curve around the crossing, else the coarse curve
        est_eps, est_mean = (f_eps, f_mean) if delta in brackets else (c_eps, c_mean)
        pens = np.array([config_penalty(config, e) for e in est_eps]) if config.truncated else 0.0
        row = base_row(config, method, config.direction, mean_crossing(est_eps, est_mean + pens, delta), wall)
        row.update(quantity="epsilon_at_delta", target_delta=delta, delta=delta, epsilon_upper=eps_up,
                   epsilon_lower=eps_low, samples=config.samples, error_prob=config.error_prob, seed=str(config.seed),
                   orders=config.orders if method.uses_order_stats else None,
                   bound=(MATRIX_REFINED_BOUND if refined_here else MATRIX_GRID_BOUND) if two_sided
                   else "kl_chernoff_shared_grid",
                   truncation_penalty=pen_cap if config.truncated else None,
                   guarantee="conjecture" if config.sampler in (Sampler.SHUFFLE, Sampler.SHUFFLE_PERSISTENT)
                   else "mc_upper_confidence")
        rows.append(row)
    return rows


def refined_upper(config: CertifyConfig, method: Method, grid, eps_up: float, delta: float) -> float:
    """ε(δ)'s upper side between the grid point below ``eps_up`` and it: the first of ``REFINE_POINTS`` - 1 points
    there where the block-law bounds alone (:func:`epscert.results.rows.matrix_law_upper`, the certifying pass's
    own, at their shares of its β) are <= δ for every direction of the run; ``eps_up`` where there is none, the
    bounds do not apply, or ``eps_up`` is the grid's first point or not finite. Sound because those bounds hold for
    every ε at once: at the returned point δ(ε) <= δ in each direction on the same events the grid's rows rest on,
    and δ(·) is non-increasing, so ε(δ) is at most that point."""
    grid = np.asarray(grid, dtype=float)
    if not math.isfinite(eps_up):
        return eps_up
    below = grid[grid < eps_up]
    if not below.size:
        return eps_up
    points = np.linspace(float(below[-1]), eps_up, REFINE_POINTS + 1)[1:-1]
    upper = matrix_law_upper(config, method, points)
    if upper is None:
        return eps_up
    ok = np.flatnonzero(upper <= delta)
    return float(points[ok[0]]) if ok.size else eps_up


def _delta_curve(config: CertifyConfig, method: Method, direction: Direction):
    """δ(ε) of an analytic method for one direction, as a function of one ε.

    The same certified values as the δ(ε) rows (:func:`epscert.results.rows.analytic_bounds`:
    outward, resolution-aware, lower bounds capped by the deterministic upper bound), so ε(δ)
    inherits them: the bisection returns a point where the upper curve is <= δ (a valid
    certificate there) or the lower curve is > δ (then ε(δ) exceeds it, δ(·) being non-increasing).
    """
    if method not in (Method.EXACT, Method.PLD_UPPER, Method.PLD_LOWER, Method.CUBE_LOWER_BOUND) + MATRIX_BOUNDS + \
            BRACKET_METHODS:
        raise ValueError(f"no ε(δ) for method={method.value!r}")
    upper = method in UPPER_METHODS
    key = "upper" if upper else "lower"
    return lambda e: float(analytic_bounds(config, method, direction, [e])[key][0])


def _analytic_epsilon(config: CertifyConfig, method: Method, delta: float, direction: Direction,
                      upper: bool) -> float:
    """ε(δ) of an analytic curve for one direction (with the truncation penalty if any).

    An upper curve u(ε) + pen(ε) <= δ at the returned point certifies (ε, δ) there; a lower
    curve l(ε) - pen(ε) is non-increasing, and ε below its crossing has δ_true(ε) > δ.
    """
    curve = _delta_curve(config, method, direction)
    if not config.truncated:
        return epsilon_for_delta(curve, delta, "upper" if upper else "lower")
    sign = 1.0 if upper else -1.0
    charged = lambda e: min(1.0, max(0.0, curve(e) + sign * config_penalty(config, e)))  # noqa: E731
    if not upper:  # l(ε) - pen(ε) is non-increasing
        return epsilon_for_delta(charged, delta, "lower")
    # u + pen falls then rises: find a feasible point on a scan, then bisect below it
    feasible = [e for e in TRUNCATION_SCAN if charged(e) <= delta]
    if not feasible:
        return math.inf
    return epsilon_for_delta(charged, delta, "upper", hi=feasible[0])


def analytic_bound_name(config: CertifyConfig, method: Method) -> str:
    """The ``bound`` column of an analytic ε(δ) row (the same names as the δ(ε) rows)."""
    if config.strategy is not None and method in MATRIX_BOUNDS + BRACKET_METHODS:
        return analytic_bounds(config, method, config.direction.parts()[0], [1.0])["bound"]
    if method in BRACKET_METHODS:
        return "allocation_bracket_upper" if method is Method.BRACKET_UPPER else "allocation_bracket_lower"
    return {Method.EXACT: "gaussian_closed_form", Method.PLD_UPPER: "pld_pessimistic",
            Method.PLD_LOWER: "pld_optimistic"}.get(method, "cube")


def poisson_pld(config: CertifyConfig, method: Method) -> bool:
    """Whether ε(δ) comes from the Poisson PLD bracket's own search (:func:`poisson_pld_epsilon`):
    Poisson, a PLD method, no truncation penalty (that one needs the scan of :func:`_analytic_epsilon`)."""
    return (config.sampler is Sampler.POISSON and method in (Method.PLD_UPPER, Method.PLD_LOWER)
            and not config.truncated)


def analytic_epsilon_rows(config: CertifyConfig, method: Method, deltas: Sequence[float]) -> list[dict]:
    """ε-at-δ rows of an analytic method (the max over the requested directions)."""
    method = canonical_method(config.sampler, method)  # Balls-and-Bins pld_upper is the bracket's old name
    deltas = check_deltas(deltas)
    start = time.perf_counter()
    parts = (Direction.REMOVE,) if method is Method.EXACT else config.direction.parts()
    rows = []
    for delta in deltas:
        guarantee = {Method.EXACT: "exact", Method.PLD_UPPER: "upper_bound",
                     Method.BRACKET_UPPER: "upper_bound", Method.COMONOTONE_UPPER_BOUND: "upper_bound"}.get(
                         method, "lower_bound")
        if guarantee == "exact" and config.truncated:
            guarantee = "upper_bound"
        bound = analytic_bound_name(config, method)
        if poisson_pld(config, method):  # the bracket's own ε search (and the name of what answered)
            eps, bound = poisson_pld_epsilon(config.sigma, config.steps, config.epochs, delta, config.direction,
                                             config.pld_discretization, method is Method.PLD_UPPER)
        else:
            eps = max(_analytic_epsilon(config, method, delta, d, guarantee != "lower_bound") for d in parts)
        row = base_row(config, method, config.direction, eps, time.perf_counter() - start)
        row.update(quantity="epsilon_at_delta", target_delta=delta, delta=delta, guarantee=guarantee,
                   bound=bound,
                   epsilon_upper=eps if guarantee in ("exact", "upper_bound") else None,
                   epsilon_lower=eps if guarantee in ("exact", "lower_bound") else None)
        rows.append(row)
    return rows


def epsilon_report(config: CertifyConfig, deltas: Sequence[float], baselines: bool = True,
                   progress: Callback | None = None) -> list[dict]:
    """ε(δ) rows: each Monte Carlo method of ``config`` certified, plus the analytic baselines."""
    rows: list[dict] = []
    for method in config.resolved:
        if method.is_monte_carlo:
            rows.extend(mc_epsilon_rows(config, method, deltas, progress=progress))
        elif method is not Method.RDP_UPPER:
            rows.extend(analytic_epsilon_rows(config, method, deltas))
    if baselines:
        for base, method in baseline_tasks(config):
            rows.extend(analytic_epsilon_rows(base, method, deltas))
    return rows
