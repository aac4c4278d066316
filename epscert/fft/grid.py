"""The loss grid of the Fourier accountant and the placement of one PLD on it.

Grid (Koskela et al., Section 4.2): x_i = -L + i·Δx, i = 0..n-1, Δx = 2L/n, n even, so that
x_{n/2} = 0; the composition is computed on this window of n points (circularly).

A mechanism's pair (P, Q) is placed as two grid sub-probabilities (:mod:`epscert.fft.pairs`), each
on the lattice offset + kΔx (the offset is the mechanism's: 0, or the one that puts a subsampled
step's body on one grid point, :mod:`epscert.fft.gaussmix`; the composition's lattice is then
Σ_j c_j o_j + kΔx):

- ``Rounding.UP``: connect the dots. Each loss is split between its two grid neighbours keeping its
  P- and Q-mass; the result dominates the pair, so every composed δ(ε) can only grow. Losses above
  the window go to +∞, losses below it are moved up to its bottom point (both raise δ).
- ``Rounding.DOWN``: a post-processing that merges neighbouring parts of cells into atoms whose
  loss is a grid point (or above one, then rounded down); the result is dominated by the pair, so
  every composed δ(ε) can only shrink. Losses above the window go to its top point (rounded down),
  losses below it are dropped.

Both are second order in Δx where the loss density is smooth: connect-the-dots adds, and merging
removes, about Δx²/6 of variance per step. Koskela et al.'s placement moves every loss to the next
grid point up (UP) or down (DOWN), a first-order shift of up to k·Δx over k steps: that, not the
FFT, is what made the bracket of a 10,000-step schedule 1.2 to 1.4 times wide at δ between 0.3 and
0.01 (issue 24). Masses carry outward floating-point allowances (the modules above).
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

import numpy as np

from epscert.fft.gaussmix import SubsampledPair
from epscert.fft.pairs import UNIT_ROUNDOFF, Cells, GridMasses, ctd_upper, merge_lower
from epscert.checks import check_float, check_int

#: Smallest grid step accepted (the loss maps' round-off must stay far below it).
MIN_DX = 1e-9
#: Largest grid accepted (2^27 points: 1 GiB per complex128 half-spectrum).
MAX_N = 2**27
#: The placement keeps a step's losses out to this many noise standard deviations (then the window cuts).
PLACE_TAIL_Z = 37.5


class Rounding(str, enum.Enum):
    """Which grid PMF: UP (connect the dots) gives an upper bound, DOWN (merging) a lower bound."""

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


def _index_range(grid: Grid, offset: float, low: float, high: float) -> tuple[int, int]:
    """Cell indices covering [low, high] ∩ [-L, L] on the lattice offset + kΔx (at least one cell)."""
    dx, half = grid.dx, grid.half_width
    lo = math.floor((max(low, -half) - offset) / dx)
    hi = math.ceil((min(high, half) - offset) / dx)
    return lo, max(hi, lo + 1)


def place_pair(pair: SubsampledPair, grid: Grid, rounding: Rounding) -> GridMasses:
    """One (subsampled) Gaussian step on the grid (module docstring). The support is cut at the
    window (and, far beyond it, at Φ̄(PLACE_TAIL_Z) ~ 1e-308): what lies above goes to +∞ (UP) or
    to the top point (DOWN), so the composition's floor is the step's mass above L, not a fixed cut."""
    low, high = pair.loss_range(PLACE_TAIL_Z)
    edge = pair.reservoir_edge(grid.dx) if rounding is Rounding.DOWN else None
    offset = edge if edge is not None and -grid.half_width < edge < grid.half_width else 0.0
    if offset == 0.0:
        edge = None
    i_lo, i_hi = _index_range(grid, offset, low, high)
    if rounding is Rounding.UP:
        return ctd_upper(pair.cells(grid.dx, offset, i_lo, i_hi - i_lo))
    if edge is None:
        return merge_lower(pair.cells(grid.dx, offset, i_lo, i_hi - i_lo))
    if pair.increasing:  # the reservoir {ω < edge} at index -1, cells from index 0 up
        return merge_lower(pair.cells(grid.dx, offset, 0, max(i_hi, 1)), pair.reservoir(edge, grid.dx))
    return merge_lower(pair.cells(grid.dx, offset, min(i_lo, -1), -min(i_lo, -1)), pair.reservoir(edge, grid.dx))


def place_atoms(grid: Grid, rounding: Rounding, values, p_masses, q_masses, inf_mass: float = 0.0) -> GridMasses:
    """A pair with finitely many finite atoms (loss ``values``, P-masses, Q-masses) on the grid.

    Atoms are summed per cell (exactly up to round-off: 2u of each sum, an absolute error allowance),
    then placed as cells are (:mod:`epscert.fft.pairs`); an atom on a cell edge belongs to the cell
    above it, and a loss computed within ``eta`` = 4u(1 + |v|) of an edge is allowed for.
    """
    values = np.asarray(values, dtype=np.float64)
    p_masses = np.asarray(p_masses, dtype=np.float64)
    q_masses = np.asarray(q_masses, dtype=np.float64)
    dx = grid.dx
    keep = p_masses > 0.0
    values, p_masses, q_masses = values[keep], p_masses[keep], q_masses[keep]
    if values.size == 0:
        return GridMasses(dx, 0.0, 0, np.zeros(1), inf_mass)
    i_lo, i_hi = _index_range(grid, 0.0, float(values.min()), float(values.max()) + dx)
    k = np.clip(np.floor(values / dx).astype(np.int64), i_lo - 1, i_hi)
    inside = (k >= i_lo) & (k < i_hi)
    size = i_hi - i_lo
    p = np.bincount(k[inside] - i_lo, weights=p_masses[inside], minlength=size)
    q = np.bincount(k[inside] - i_lo, weights=q_masses[inside], minlength=size)
    err_p, err_q = 4.0 * UNIT_ROUNDOFF * p, 4.0 * UNIT_ROUNDOFF * q
    above = float(np.sum(p_masses[k >= i_hi]))
    below = float(np.sum(p_masses[k < i_lo]))
    eta = float(4.0 * UNIT_ROUNDOFF * (1.0 + np.max(np.abs(values))))
    cells = Cells(dx, 0.0, i_lo, p, q, err_p, err_q, below_p=below, below_err=4.0 * UNIT_ROUNDOFF * below,
                  above_p=above, above_err=4.0 * UNIT_ROUNDOFF * above, eta=eta)
    if rounding is Rounding.UP:
        out = ctd_upper(cells)
        return GridMasses(dx, 0.0, out.start, out.masses, min(1.0, out.inf_mass + inf_mass))
    out = merge_lower(cells)
    return GridMasses(dx, 0.0, out.start, out.masses, inf_mass)
