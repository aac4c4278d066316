"""Certified bracket on δ(ε) of a heterogeneous composition: all k mechanisms in one FFT.

For each direction and each rounding (UP, DOWN) the distinct mechanisms are placed on the
grid, their half-swapped spectra multiplied (Π ŷ_j^{c_j}, O(n) per distinct mechanism after
its O(n log n) FFT) and one inverse FFT gives b, the grid PLD of the sum wrapped modulo 2L:

    δ̃(ε) = p∞ + Σ_{x_ℓ > ε} (1 - e^{ε - x_ℓ}) b_ℓ,        p∞ = 1 - Π_j (1 - p∞_j)^{c_j}.

Wrap-around (the inequalities the bracket rests on). Let S be the sum of the grid losses
(finite part), f_ε(w) = (1 - e^{ε-w})_+, non-decreasing with values in [0, 1], and
0 <= ε < L. Mass of S at m >= L wraps to m - 2Lt < L and mass at m < -L wraps upwards:

- UP:   δ̂_up(ε) - δ̃_up(ε) = Σ_{S>=L} f_ε(S) - Σ_{S∉[-L,L)} f_ε(wrap S) <= Pr[S >= L]
        (f_ε = 0 below -L <= ε), so  δ(ε) <= δ̂_up(ε) <= δ̃_up(ε) + Pr[S_up >= L].
- DOWN: for S >= L, f_ε(S) >= f_ε(wrap S); for S < -L, f_ε(S) = 0 >= f_ε(wrap S) - 1, so
        δ(ε) >= δ̂_down(ε) >= δ̃_down(ε) - Pr[S_down < -L].

Both tails are bounded by Chernoff on the placed PMFs' moment-generating functions
(``spectrum.py``): Pr[S >= L] <= exp(Σ_j c_j log E e^{λ ω̂_j} - λL), λ > 0. The
floating-point allowance (``fp``) adds the FFT/product round-off bound E(ω) through
|Σ f·(b̃ - b)| <= ||f||₂ ||E||₂ / √n (Parseval), the inverse FFT's normwise round-off, the
summation error, and the placement's Kolmogorov allowance Σ_j c_j·cdf_error_j. So

    lower = δ̃_down - Pr[S_down < -L] - fp_down  <=  δ(ε)  <=  δ̃_up + Pr[S_up >= L] + fp_up = upper.

Direction BOTH is the max over REMOVE and ADD (one neighbouring relation for the whole run).
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass, field
from typing import Iterable, Mapping

import numpy as np

from epscert.fft.grid import UNIT_ROUNDOFF, Grid, Rounding
from epscert.fft.mechanisms import Schedule
from epscert.fft.spectrum import FFT_ROUNDOFF_UNITS, SpectrumProduct, full_sum, prepare
from epscert.params import Direction, check_float


def check_epsilons(epsilons, grid: Grid) -> np.ndarray:
    """ε values as a float array, each in [0, L) (the wrap-around argument needs ε >= -L)."""
    values = np.atleast_1d(np.asarray(epsilons, dtype=object))
    if values.size == 0:
        raise ValueError("epsilons must hold at least one value, got epsilons=()")
    out = np.array([check_float("epsilons", e, low=0.0, low_open=False, high=grid.half_width)
                    for e in values.tolist()], dtype=np.float64)
    return out


def hockey_weights(grid: Grid, eps: float) -> np.ndarray:
    """f_ε(x_ℓ) = -expm1(ε - x_ℓ) for x_ℓ > ε, else 0."""
    x = grid.points()
    return np.where(x > eps, -np.expm1(np.minimum(eps - x, 0.0)), 0.0)


def parts_of(schedule: Schedule, direction: Direction) -> tuple[Direction, ...]:
    """Directions to compute: one suffices when every mechanism is symmetric."""
    parts = direction.parts()
    if len(parts) == 2 and all(getattr(m, "symmetric", False) for m, _ in schedule.distinct):
        return (Direction.REMOVE,)
    return parts


@dataclass(frozen=True, eq=False)
class Bracket:
    """lower <= δ(ε) <= upper for one direction, with the pieces that make each side.

    ``estimate_*`` is δ̃ (wrapped grid value, ∞ mass included), ``tail_*`` the Chernoff
    wrap-around term, ``fp_*`` the floating-point allowance. For BOTH only lower/upper are set.
    """

    direction: Direction
    epsilons: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    estimate_down: np.ndarray | None = None
    estimate_up: np.ndarray | None = None
    tail_down: float | None = None
    tail_up: float | None = None
    fp_down: np.ndarray | None = None
    fp_up: np.ndarray | None = None

    @property
    def width(self) -> np.ndarray:
        return self.upper - self.lower


@dataclass(frozen=True, eq=False)
class FFTBounds:
    """The result of :func:`fft_bounds`: a :class:`Bracket` per direction (and BOTH if asked)."""

    schedule: Schedule
    grid: Grid
    direction: Direction
    epsilons: np.ndarray
    brackets: Mapping[Direction, Bracket]
    wall_seconds: float = field(default=0.0)

    @property
    def result(self) -> Bracket:
        """The bracket for the requested direction."""
        return self.brackets[self.direction]


def _one_side(schedule: Schedule, grid: Grid, direction: Direction, rounding: Rounding,
              epsilons: np.ndarray) -> tuple[np.ndarray, float, np.ndarray]:
    """(δ̃ per ε, Chernoff tail, fp allowance per ε) for one direction and rounding."""
    n = grid.size
    product = SpectrumProduct(grid)
    for mech, count in schedule.distinct:
        product.add(prepare(mech.place(grid, rounding, direction), grid), count)
    spectrum = product.spectrum()
    error = product.spectrum_error(spectrum)
    b = np.fft.fftshift(np.fft.irfft(spectrum, n))
    error_norm = math.sqrt(max(full_sum(error**2), 0.0)) / math.sqrt(n)
    b_norm = float(np.linalg.norm(b))
    abs_b = np.abs(b)
    log2n = math.log2(n)
    estimates, fps = [], []
    for eps in epsilons.tolist():
        f = hockey_weights(grid, eps)
        f_norm = float(np.linalg.norm(f))
        estimates.append(product.inf_mass + float(f @ b))
        fps.append(f_norm * (error_norm + FFT_ROUNDOFF_UNITS * UNIT_ROUNDOFF * log2n * b_norm)
                   + (log2n + 4.0) * UNIT_ROUNDOFF * float(f @ abs_b)
                   + product.cdf_error + (product.factors + 2) * UNIT_ROUNDOFF)
    tail = product.upper_tail() if rounding is Rounding.UP else product.lower_tail()
    return np.asarray(estimates), tail, np.asarray(fps)


def bracket_direction(schedule: Schedule, grid: Grid, direction: Direction, epsilons) -> Bracket:
    """The certified bracket for REMOVE or ADD."""
    eps = check_epsilons(epsilons, grid)
    est_up, tail_up, fp_up = _one_side(schedule, grid, direction, Rounding.UP, eps)
    est_down, tail_down, fp_down = _one_side(schedule, grid, direction, Rounding.DOWN, eps)
    upper = np.minimum(est_up + tail_up + fp_up, 1.0)
    lower = np.maximum(est_down - tail_down - fp_down, 0.0)
    return Bracket(direction, eps, lower, upper, est_down, est_up, tail_down, tail_up, fp_down, fp_up)


def combine_both(brackets: Iterable[Bracket], epsilons: np.ndarray) -> Bracket:
    """δ_both = max(δ_remove, δ_add): the max of the lowers and the max of the uppers."""
    brackets = list(brackets)
    return Bracket(Direction.BOTH, epsilons, np.max([b.lower for b in brackets], axis=0),
                   np.max([b.upper for b in brackets], axis=0))


def fft_bounds(schedule: Schedule, epsilons, grid: Grid,
               direction: Direction | str = Direction.BOTH) -> FFTBounds:
    """Certified lower <= δ(ε) <= upper of the composition ``schedule``, one FFT per side.

    Cost for d distinct mechanisms, independent of the counts: per direction and side, d FFTs
    (O(d·n log n)), d·n·|LAMBDAS| multiply-adds for the Chernoff MGFs, one inverse FFT and
    O(n) per ε. See the module docstring for the inequalities.
    """
    start = time.perf_counter()
    direction = Direction(direction)
    eps = check_epsilons(epsilons, grid)
    parts = parts_of(schedule, direction)
    brackets = {d: bracket_direction(schedule, grid, d, eps) for d in parts}
    if len(direction.parts()) == 2 and len(parts) == 1:  # symmetric: ADD equals REMOVE
        only = brackets[Direction.REMOVE]
        brackets[Direction.ADD] = dataclasses.replace(only, direction=Direction.ADD)
    if direction is Direction.BOTH:
        brackets[Direction.BOTH] = combine_both([brackets[Direction.REMOVE], brackets[Direction.ADD]], eps)
    return FFTBounds(schedule, grid, direction, eps, brackets, time.perf_counter() - start)
