"""A-priori choice of the grid (L, n) for a target error (after Koskela et al., Section 5.4).

Two error sources, each given half of the target η:

- Wrap-around: Pr[S >= L] and Pr[S <= -L] for the composed PLD S = Σ ω_j, by Chernoff with
  the continuous PLDs' log-MGFs K_j (each mechanism's ``log_mgf_bound``), with an allowance
  λΔx for the placement. L is the smallest value with both tails <= η/4 (bisection; the tails fall
  with L), and at least the top of the tilted window at the largest ε (the tilted mass above L
  <= ``compose.FIT_TAIL``: then the composition reads that ε with its saddle-point tilt).
- Discretisation (``grid.py``): connect-the-dots and merging each change a step's log-MGF at the
  tilt λ by at most about λ(λ+1)Δx²/8 (a loss split between neighbours Δx apart, or merged),
  so the composed δ moves by a factor about exp(kλ(λ+1)Δx²/8) each way; with (λ+1)² for λ(λ+1)
  (the variance term at λ = 0) the predicted width is δ(ε)·k(λ+1)²Δx²/4, δ(ε) by Chernoff.
  The cell masses' floating-point allowances grow as Δx shrinks (a mass is a difference of CDF
  values, split by connect-the-dots over a cell Δx wide): measured, about FP_UNITS·u·k/Δx^{5/3}
  of δ (``FP_UNITS``, ``FP_EXPONENT`` are that measurement, for sizing only). Δx is the largest step with the sum
  <= η/2 at every requested ε, and never below the step that minimises the sum; n = 2L/Δx
  rounded up to a power of two.

These are predictions that size the grid; the certified bracket is always the a-posteriori
one of :func:`~epscert.fft.compose.fft_bounds`, whatever grid is used.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from epscert.fft.compose import FIT_TAIL
from epscert.fft.grid import MAX_N, MIN_DX, Grid
from epscert.fft.pairs import UNIT_ROUNDOFF
from epscert.fft.mechanisms import Schedule
from epscert.names import MAX_EPSILON, Direction
from epscert.checks import check_float, check_int

#: λ values for the a-priori Chernoff bounds (integers where the subsampled RDP is exact).
APRIORI_LAMBDAS = np.concatenate([2.0 ** np.arange(-8.0, 0.0, 0.25), np.arange(1.0, 257.0)])
#: Search range of L.
L_RANGE = (0.5, 1e4)
#: Floating-point part of the predicted width, δ·k·FP_UNITS·u/Δx^FP_EXPONENT (measured: the mass
#: allowance of one connect-the-dots step at q = 0.01, σ = 0.8 is 3.9e-9 at Δx = 1e-4, 5.7e-7 at 6e-6).
FP_UNITS = 8.0
FP_EXPONENT = 5.0 / 3.0
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


def _saddle(log_mgf: np.ndarray, eps: float) -> tuple[float, float]:
    """(λ, log δ bound): the grid λ > 0 minimising K(λ) - λε, and that minimum (Chernoff)."""
    with np.errstate(invalid="ignore"):
        ex = log_mgf - APRIORI_LAMBDAS * eps
    k = int(np.nanargmin(ex)) if np.any(~np.isnan(ex)) else 0
    return float(APRIORI_LAMBDAS[k]), min(float(ex[k]), 0.0) if np.isfinite(ex[k]) else 0.0


def _discretisation(sums, steps: int, dx: float, epsilons) -> float:
    """Predicted width: δ·k·[(λ+1)²Δx²/4 + FP_UNITS·u/Δx^FP_EXPONENT] at the worst requested ε."""
    worst = 0.0
    for pos, _ in sums:
        for eps in epsilons:
            lam, log_delta = _saddle(pos, eps)
            rel = (lam + 1.0) ** 2 * dx * dx / 4.0 + FP_UNITS * UNIT_ROUNDOFF / dx**FP_EXPONENT
            worst = max(worst, math.exp(log_delta) * steps * rel)
    return worst


def _best_dx(sums, epsilons) -> float:
    """The Δx minimising the predicted width at the largest saddle λ: A Δx² + B Δx^{-p} is least at
    Δx^{2+p} = pB/(2A), A = (λ+1)²/4, B = FP_UNITS·u, p = FP_EXPONENT."""
    lam = max(_saddle(pos, eps)[0] for pos, _ in sums for eps in epsilons)
    a, b, p = (lam + 1.0) ** 2 / 4.0, FP_UNITS * UNIT_ROUNDOFF, FP_EXPONENT
    return (p * b / (2.0 * a)) ** (1.0 / (2.0 + p))


def _tilted_top(sums, epsilons, tail: float) -> float:
    """Top of the tilted window at the largest ε: min_s [K(λ+s) - K(λ) - log tail]/s (Chernoff)."""
    eps = max(epsilons)
    top = 0.0
    for pos, _ in sums:
        lam, _ = _saddle(pos, eps)
        k = int(np.argmin(np.abs(APRIORI_LAMBDAS - lam)))
        with np.errstate(invalid="ignore"):
            cand = (pos[k + 1:] - pos[k] - math.log(tail)) / (APRIORI_LAMBDAS[k + 1:] - lam)
        if cand.size and np.any(np.isfinite(cand)):
            top = max(top, float(np.nanmin(cand)))
    return top


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
    half_width = max(half_width, 1.25 * max(eps) + 1.0, min(_tilted_top(sums, eps, FIT_TAIL), L_RANGE[1]))
    best = max(_best_dx(sums, eps), MIN_DX)
    dx = 1.0 / _bisect(lambda inv: _discretisation(sums, k, 1.0 / inv, eps) <= target / 2,
                       1.0 / (2 * half_width), 1.0 / best)
    half_width = max(half_width, _bisect(lambda L: _tail(sums, k, dx, L) <= target / 4, *L_RANGE))
    size = 2 ** max(2, math.ceil(math.log2(2.0 * half_width / dx)))
    capped = size > max_size
    if capped:
        size = max_size - max_size % 2
    grid = Grid(half_width, size)
    return GridChoice(grid, target, _tail(sums, k, grid.dx, half_width),
                      _discretisation(sums, k, grid.dx, eps), capped)
