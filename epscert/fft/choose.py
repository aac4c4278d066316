"""A-priori choice of the grid (L, n) for a target error (after Koskela et al., Section 5.4).

Two error sources, each given half of the target η:

- Wrap-around: Pr[S >= L] and Pr[S <= -L] for the composed PLD S = Σ ω_j, by Chernoff with
  the continuous PLDs' log-MGFs K_j (each mechanism's ``log_mgf_bound``) inflated by the
  rounding shift: log E e^{±λ ω̂_j} <~ K_j(±λ) + λΔx. L is the smallest value with both tails
  <= η/4 (bisection; the tails fall with L).
- Discretisation: with t = kΔx (k steps, each loss moved by less than Δx) and
  f_ε(w + t) = f_{ε-t}(w),
      δ_up(ε) - δ(ε)   <= (1 - e^{-t}) Pr[S > ε - t],
      δ(ε) - δ_down(ε) <= (1 - e^{-t}) Pr[S > ε],
  (f_{ε-t} - f_ε <= 1 - e^{-t}, and it vanishes for w <= ε - t), with Pr by Chernoff.
  Δx is the largest step with the sum <= η/2 at every requested ε; n = 2L/Δx rounded up to
  a power of two.

These are predictions that size the grid; the certified bracket is always the a-posteriori
one of :func:`~epscert.fft.compose.fft_bounds`, whatever grid is used.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from epscert.fft.grid import MAX_N, MIN_DX, Grid
from epscert.fft.mechanisms import Schedule
from epscert.params import MAX_EPSILON, Direction, check_float, check_int

#: λ values for the a-priori Chernoff bounds (integers where the subsampled RDP is exact).
APRIORI_LAMBDAS = np.concatenate([2.0 ** np.arange(-8.0, 0.0, 0.25), np.arange(1.0, 257.0)])
#: Search range of L.
L_RANGE = (0.5, 1e4)
#: Bisection steps (on log L and on log Δx).
BISECTION_STEPS = 60


@dataclass(frozen=True)
class GridChoice:
    """The chosen grid and the predicted error of each kind at that grid (not certified)."""

    grid: Grid
    target_error: float
    predicted_tail: float
    predicted_discretisation: float
    capped: bool


def _log_mgf_sums(schedule: Schedule, direction: Direction) -> tuple[np.ndarray, np.ndarray]:
    pos = np.zeros(APRIORI_LAMBDAS.size)
    neg = np.zeros(APRIORI_LAMBDAS.size)
    for mech, count in schedule.distinct:
        pos += count * np.array([mech.log_mgf_bound(float(lam), direction) for lam in APRIORI_LAMBDAS])
        neg += count * np.array([mech.log_mgf_bound(-float(lam), direction) for lam in APRIORI_LAMBDAS])
    return pos, neg


def _chernoff(log_mgf: np.ndarray, shift: float, threshold: float) -> float:
    """min(1, min_λ exp(K(λ) + λ·shift - λ·threshold))."""
    with np.errstate(invalid="ignore"):
        exps = log_mgf + APRIORI_LAMBDAS * (shift - threshold)
    best = float(np.nanmin(exps)) if np.any(~np.isnan(exps)) else 0.0
    return math.exp(min(best, 0.0))


def _tail(sums, steps: int, dx: float, half_width: float) -> float:
    return max(max(_chernoff(pos, steps * dx, half_width), _chernoff(neg, steps * dx, half_width))
               for pos, neg in sums)


def _discretisation(sums, steps: int, dx: float, epsilons) -> float:
    t = steps * dx
    worst = 0.0
    for pos, _ in sums:
        for eps in epsilons:
            worst = max(worst, -math.expm1(-t) * (_chernoff(pos, 0.0, eps - t) + _chernoff(pos, 0.0, eps)))
    return worst


def _bisect(predicate, lo: float, hi: float) -> float:
    """Smallest x in [lo, hi] (geometric bisection) with predicate(x) true; hi if none."""
    if predicate(lo):
        return lo
    for _ in range(BISECTION_STEPS):
        mid = math.sqrt(lo * hi)
        lo, hi = (lo, mid) if predicate(mid) else (mid, hi)
    return hi


def choose_grid(schedule: Schedule, epsilons, target_error: float,
                direction: Direction | str = Direction.BOTH, max_size: int = MAX_N) -> GridChoice:
    """(L, n) predicted to give bracket width about ``target_error`` at the given ε values.

    If the prediction needs more than ``max_size`` points, n = ``max_size`` (``capped``):
    the bracket stays certified, only wider than the target.
    """
    target = check_float("target_error", target_error, low=0.0, low_open=True, high=1.0)
    max_size = check_int("max_size", max_size, 4)
    eps = [check_float("epsilons", e, low=0.0, low_open=False, high=MAX_EPSILON, high_open=False)
           for e in np.atleast_1d(epsilons).tolist()]
    direction = Direction(direction)
    sums = [_log_mgf_sums(schedule, d) for d in direction.parts()]
    k = schedule.steps
    half_width = _bisect(lambda L: _tail(sums, k, 0.0, L) <= target / 8, *L_RANGE)
    half_width = max(half_width, 1.25 * max(eps) + 1.0)
    dx = 1.0 / _bisect(lambda inv: _discretisation(sums, k, 1.0 / inv, eps) <= target / 2,
                       1.0 / (2 * half_width), 1.0 / MIN_DX)
    half_width = max(half_width, _bisect(lambda L: _tail(sums, k, dx, L) <= target / 4, *L_RANGE))
    size = 2 ** max(2, math.ceil(math.log2(2.0 * half_width / dx)))
    capped = size > max_size
    if capped:
        size = max_size - max_size % 2
    grid = Grid(half_width, size)
    return GridChoice(grid, target, _tail(sums, k, grid.dx, half_width),
                      _discretisation(sums, k, grid.dx, eps), capped)
