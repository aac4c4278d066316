"""The loss grid of the Fourier accountant and the placement of one PLD on it.

Grid (Koskela et al., Section 4.2): x_i = -L + i·Δx, i = 0..n-1, Δx = 2L/n, n even, so that
x_{n/2} = 0. A mechanism's privacy-loss distribution (PLD: the law of ω = log P(o)/Q(o) for
o ~ P, with an atom at +∞ where P has mass that Q lacks) is moved onto the grid:

- ``Rounding.UP``   : each finite loss goes to the smallest grid point >= it. Losses below x_0
  go to x_0, losses above x_{n-1} go to +∞ (x_{n-1} + Δx = L is not a grid point: it is -L
  modulo 2L). Every loss moves up, so by the coupling ω̂ >= ω and the monotonicity of
  f_ε(w) = (1 - e^{ε-w})_+ the composed δ̂(ε) = E f_ε(Σ ω̂_j) is >= the true δ(ε).
- ``Rounding.DOWN`` : each finite loss goes to the largest grid point <= it. Losses above
  x_{n-1} go to x_{n-1}; losses below x_0 are dropped (sent to -∞, where f_ε = 0 and the
  whole sum is -∞). Every loss moves down, so δ̂(ε) <= δ(ε). The +∞ atom stays at +∞.

Both statements are exact for any mechanism: they only use ω̂ >= ω (resp. <=) pointwise.

Floating point. Cell edges are evaluated with a slack of ``EDGE_SLACK_FRACTION``·Δx in the
safe direction (UP: edges a little below the grid point; DOWN: a little above), so errors of
order u·L in the loss <-> output maps cannot move mass the wrong way. Cell masses are
differences of a CDF evaluated to a few ulps (lower tail from Φ, upper tail from the
survival function), so the placed PMF is within Kolmogorov distance ``cdf_error`` of the
exact one; for a monotone g with values in [0, 1], |E₁g - E₂g| <= sup|F₁ - F₂|, so the
composed δ moves by at most Σ_j count_j·cdf_error_j, which the accountant adds to its
floating-point allowance. Mass lost to underflow is put at +∞ for UP (conservative) and
dropped for DOWN (conservative).
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from epscert.params import check_float, check_int

#: Unit round-off of IEEE double precision (2^-53).
UNIT_ROUNDOFF = 2.0**-53
#: Edges are shifted by this fraction of Δx in the safe direction (see the module docstring).
EDGE_SLACK_FRACTION = 1e-3
#: Smallest grid step accepted: the edge slack must dominate the round-off of the loss maps.
MIN_DX = 1e-9
#: Largest grid accepted (2^27 points: 1 GiB per complex128 half-spectrum).
MAX_N = 2**27
#: Kolmogorov-distance allowance of a placed PMF, in units of round-off (Φ differences).
PLACEMENT_ROUNDOFF_UNITS = 16.0

#: A CDF evaluator: losses t -> (F(t) = Pr[ω <= t], S(t) = Pr[ω > t]), S including the ∞ atom.
CdfPair = Callable[[np.ndarray], "tuple[np.ndarray, np.ndarray]"]


class Rounding(str, enum.Enum):
    """Which way losses are moved onto the grid: UP gives an upper bound, DOWN a lower bound."""

    UP = "up"
    DOWN = "down"


@dataclass(frozen=True)
class Grid:
    """x_i = -L + i·Δx, i = 0..n-1, Δx = 2L/n (``half_width`` = L, ``size`` = n, n even)."""

    half_width: float
    size: int

    def __post_init__(self) -> None:
        half_width = check_float("half_width", self.half_width, low=0.0, low_open=True)
        size = check_int("size", self.size, 4)
        if size % 2:
            raise ValueError(f"size must be even (x_(n/2) = 0), got size={self.size!r}")
        if size > MAX_N:
            raise ValueError(f"size must be <= {MAX_N}, got size={self.size!r}")
        if 2.0 * half_width / size < MIN_DX:
            raise ValueError(f"grid step 2*half_width/size must be >= {MIN_DX}, got "
                             f"half_width={self.half_width!r}, size={self.size!r}")
        object.__setattr__(self, "half_width", half_width)
        object.__setattr__(self, "size", size)

    @property
    def dx(self) -> float:
        return 2.0 * self.half_width / self.size

    def points(self) -> np.ndarray:
        """The grid points x_0..x_{n-1}."""
        return -self.half_width + self.dx * np.arange(self.size, dtype=np.float64)

    def to_dict(self) -> dict:
        return {"half_width": self.half_width, "size": self.size}


@dataclass(frozen=True, eq=False)
class GridPLD:
    """A PLD on the grid: ``pmf[i]`` is the mass at x_i, ``inf_mass`` the mass at +∞.

    ``cdf_error`` bounds the Kolmogorov distance between ``pmf`` and the exactly rounded PMF.
    """

    pmf: np.ndarray
    inf_mass: float
    rounding: Rounding
    cdf_error: float

    @property
    def finite_mass(self) -> float:
        return float(np.sum(self.pmf))


def mass_error(pmf: np.ndarray) -> float:
    """Bound on |np.sum(pmf) - Σ pmf| for a non-negative vector (pairwise summation)."""
    return (math.log2(max(pmf.size, 2)) + 2.0) * UNIT_ROUNDOFF * float(np.sum(pmf))


def _cell_masses(f_lo: np.ndarray, s_lo: np.ndarray, f_hi: np.ndarray, s_hi: np.ndarray) -> np.ndarray:
    """Pr[lo < ω <= hi] from the CDF on the lower half and the survival function on the upper."""
    with np.errstate(invalid="ignore"):
        mass = np.where(f_hi <= 0.5, f_hi - f_lo, s_lo - s_hi)
    return np.maximum(np.nan_to_num(mass, nan=0.0), 0.0)


def place_continuous(grid: Grid, rounding: Rounding, cdf: CdfPair, inf_mass: float = 0.0) -> GridPLD:
    """Place a PLD given by its CDF pair on the grid (see the module docstring for the rules)."""
    x = grid.points()
    slack = EDGE_SLACK_FRACTION * grid.dx
    n = grid.size
    if rounding is Rounding.UP:
        f, s = cdf(x - slack)  # cell (e_{i-1}, e_i] -> x_i, e_i = x_i - slack <= x_i
        pmf = np.empty(n)
        pmf[0] = max(float(f[0]), 0.0)
        pmf[1:] = _cell_masses(f[:-1], s[:-1], f[1:], s[1:])
        top = max(float(s[-1]), inf_mass, 1.0 - float(np.sum(pmf)) + mass_error(pmf), 0.0)
        return GridPLD(pmf, min(top, 1.0), rounding, PLACEMENT_ROUNDOFF_UNITS * UNIT_ROUNDOFF + mass_error(pmf))
    f, s = cdf(x + slack)  # cell [e_i, e_{i+1}) -> x_i, e_i = x_i + slack >= x_i
    pmf = np.empty(n)
    pmf[:-1] = _cell_masses(f[:-1], s[:-1], f[1:], s[1:])
    pmf[-1] = max(float(s[-1]) - inf_mass, 0.0)
    pmf = _cap_mass(pmf, 1.0 - inf_mass)
    return GridPLD(pmf, inf_mass, rounding, PLACEMENT_ROUNDOFF_UNITS * UNIT_ROUNDOFF + mass_error(pmf))


def place_atoms(grid: Grid, rounding: Rounding, values, probs, inf_mass: float = 0.0) -> GridPLD:
    """Place a PLD with finitely many finite atoms (``values``, ``probs``) on the grid."""
    values = np.asarray(values, dtype=np.float64)
    probs = np.asarray(probs, dtype=np.float64)
    pos = (values + grid.half_width) / grid.dx
    pmf = np.zeros(grid.size)
    extra_inf = 0.0
    for p, r in zip(probs.tolist(), pos.tolist()):
        if p <= 0.0:
            continue
        if rounding is Rounding.UP:
            i = math.ceil(r + EDGE_SLACK_FRACTION)
            if i > grid.size - 1:
                extra_inf += p
            else:
                pmf[max(i, 0)] += p
        else:
            i = math.floor(r - EDGE_SLACK_FRACTION)
            if i >= 0:
                pmf[min(i, grid.size - 1)] += p
    if rounding is Rounding.UP:
        return GridPLD(pmf, min(inf_mass + extra_inf, 1.0), rounding, 4 * UNIT_ROUNDOFF)
    return GridPLD(_cap_mass(pmf, 1.0 - inf_mass), inf_mass, rounding, 4 * UNIT_ROUNDOFF)


def _cap_mass(pmf: np.ndarray, total: float) -> np.ndarray:
    """Scale ``pmf`` down if round-off made its mass exceed ``total`` (DOWN must not gain mass).

    An excess below the summation error ``mass_error`` may remain; it is part of ``cdf_error``.
    """
    mass = float(np.sum(pmf))
    if mass > total:
        pmf = pmf * (total / mass) * (1.0 - 2 * UNIT_ROUNDOFF)
    return pmf
