"""Certified bracket on δ(ε) of a heterogeneous composition: all k mechanisms in one tilted FFT.

For each direction and each side the distinct mechanisms are placed on the grid (``grid.py``:
connect-the-dots for the upper side, merging for the lower), and composed by the tilted FFT of
``tilt.py`` on the window [-L, L) of n points: the spectra of the tilted PMFs m_j e^{λℓ}/M_j(λ) are
multiplied (Π ŷ_j^{c_j}, O(n) per distinct mechanism after its O(n log n) FFT), one inverse FFT
gives the tilted composition wrapped modulo 2L, and

    δ(ε) = p∞ + Π_j M_j(λ)^{c_j} Σ_{ℓ > ε} (1 - e^{ε-ℓ}) e^{-λℓ} z(ℓ),   p∞ = 1 - Π_j (1 - p∞_j)^{c_j}.

The inequalities the bracket rests on are written in ``tilt.py``: the round-off of each step
(relative to the tilted mass near ε), the wrap-around (upper: + Pr[S >= top] by Chernoff on the
placed PMFs; lower: - S e^{-λε} Pr_λ[outside the window]), the reading. The tilt λ for ε is the
Chernoff saddle point of the placed upper PMFs (snapped to eighth octaves, so that close ε share
one composition); λ = 0 is the untilted FFT of Koskela et al. The first composition of each side
and direction is checked against a second tilt (``tilt.check_agree``; a disagreement beyond the
budgets raises ``TiltCheckError``).

Direction BOTH is the max over REMOVE and ADD (one neighbouring relation for the whole run).
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Iterable, Mapping

import numpy as np

from epscert.fft import tilt
from epscert.fft.grid import Grid, Rounding
from epscert.fft.mechanisms import Schedule
from epscert.names import Direction
from epscert.checks import check_float

#: The check tilt is the tilt divided by this (λ = 0 is checked against CHECK_LAM).
CHECK_FACTOR = 2.0**0.25
CHECK_LAM = 2.0**-3
#: A tilt is used only if the grid's window holds all but this much of the tilted mass (Chernoff).
FIT_TAIL = 1e-6


def check_epsilons(epsilons, grid: Grid) -> np.ndarray:
    """ε values as a float array, each in [0, L) (the window must hold every ε read)."""
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
    """lower <= δ(ε) <= upper for one direction, with the tilt and the absolute allowances.

    ``lam`` is the tilt each ε was read with; ``absolute_up`` / ``absolute_down`` the parts of the
    allowances that do not scale with δ (∞ mass, tails, wrap-around, round-off floor). For BOTH
    only lower/upper are set.
    """

    direction: Direction
    epsilons: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    lam: np.ndarray | None = None
    absolute_up: np.ndarray | None = None
    absolute_down: np.ndarray | None = None

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


def placed_factors(schedule: Schedule, grid: Grid, direction: Direction, rounding: Rounding) -> list[tilt.Factor]:
    """The distinct mechanisms of ``schedule`` placed on ``grid`` (one side), with their counts."""
    return [tilt.Factor(mech.place(grid, rounding, direction), count) for mech, count in schedule.distinct]


def window_of(grid: Grid) -> tuple[float, float]:
    return -grid.half_width, grid.half_width - grid.dx


def fit_tilt(mgf: tilt.Mgf, lam: float, eps: float, grid: Grid) -> float:
    """λ if its Chernoff window fits the grid's [-L, L) (all but FIT_TAIL of the tilted mass), else 0:
    with tilted mass spilling out of the window the wrap-around term, not the value, would decide the
    bracket (λ = 0 is Koskela et al.'s untilted FFT, whose wrap-around terms are plain tails)."""
    if lam <= 0.0:
        return 0.0
    bottom, top = tilt.window_for(mgf, lam, eps, FIT_TAIL)
    return lam if top <= grid.half_width - grid.dx and bottom >= -grid.half_width else 0.0


def tilts_for(mgf: tilt.Mgf, epsilons: np.ndarray, grid: Grid) -> np.ndarray:
    """Per ε: the saddle-point tilt (snapped), lowered until its window fits the grid."""
    return np.array([fit_tilt(mgf, tilt.lam_grid(lam), float(e), grid)
                     for lam, e in zip(mgf.saddles(epsilons), epsilons.tolist())])


def compose_side(factors: list[tilt.Factor], grid: Grid, lam: float, mgf: tilt.Mgf) -> tilt.Composition:
    """The tilted composition of one side on the grid's window [-L, L) (n points)."""
    return tilt.compose(factors, lam, -grid.half_width, mgf, size=grid.size, window=window_of(grid))


def check_side(factors: list[tilt.Factor], grid: Grid, comp: tilt.Composition, mgf: tilt.Mgf,
               eps: float, upper: bool) -> None:
    """The a-posteriori check of one composition against a second tilt (module docstring)."""
    other = tilt.lam_grid(comp.lam / CHECK_FACTOR) if comp.lam > 0.0 else CHECK_LAM
    if other == comp.lam:
        other = 0.0
    tilt.check_agree(comp, compose_side(factors, grid, other, mgf), eps, upper)


def bracket_direction(schedule: Schedule, grid: Grid, direction: Direction, epsilons) -> Bracket:
    """The certified bracket for REMOVE or ADD."""
    eps = check_epsilons(epsilons, grid)
    up_f = placed_factors(schedule, grid, direction, Rounding.UP)
    down_f = placed_factors(schedule, grid, direction, Rounding.DOWN)
    up_mgf, down_mgf = tilt.Mgf(up_f), tilt.Mgf(down_f)
    lams = tilts_for(up_mgf, eps, grid)
    upper, lower = np.empty(eps.size), np.empty(eps.size)
    abs_up, abs_down = np.empty(eps.size), np.empty(eps.size)
    checked = False
    for lam in sorted(set(lams.tolist())):
        comp_up = compose_side(up_f, grid, lam, up_mgf)
        comp_down = compose_side(down_f, grid, lam, down_mgf)
        for i in np.flatnonzero(lams == lam):
            e = float(eps[i])
            upper[i], abs_up[i] = comp_up.upper(e), comp_up.absolute(e, True)
            lower[i], abs_down[i] = comp_down.lower(e), comp_down.absolute(e, False)
        if not checked:
            e = float(eps[np.flatnonzero(lams == lam)[0]])
            check_side(up_f, grid, comp_up, up_mgf, e, True)
            check_side(down_f, grid, comp_down, down_mgf, e, False)
            checked = True
    # monotone envelopes (δ(ε) is non-increasing): over ascending ε, uppers a running minimum from the
    # left and lowers a running maximum from the right; each stays a bound (a round-off tie had an
    # upper 1 ulp above the one at a smaller ε)
    order = np.argsort(eps, kind="stable")
    upper[order] = np.minimum.accumulate(upper[order])
    lower[order] = np.maximum.accumulate(lower[order][::-1])[::-1]
    return Bracket(direction, eps, np.maximum(lower, 0.0), np.minimum(upper, 1.0), lams, abs_up, abs_down)


def combine_both(brackets: Iterable[Bracket], epsilons: np.ndarray) -> Bracket:
    """δ_both = max(δ_remove, δ_add): the max of the lowers and the max of the uppers."""
    brackets = list(brackets)
    return Bracket(Direction.BOTH, epsilons, np.max([b.lower for b in brackets], axis=0),
                   np.max([b.upper for b in brackets], axis=0))


def fft_bounds(schedule: Schedule, epsilons, grid: Grid,
               direction: Direction | str = Direction.BOTH) -> FFTBounds:
    """Certified lower <= δ(ε) <= upper of the composition ``schedule``, tilted FFTs per side.

    Cost for d distinct mechanisms, independent of the counts: per direction, side and distinct
    tilt, d FFTs (O(d·n log n)), one inverse FFT and O(n) per ε; plus one check composition per
    side and direction. See the module docstring for the inequalities.
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

