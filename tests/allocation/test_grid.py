"""The main-cell map of epscert.allocation.grid (tightness only, but the kernel relies on its guess).

The kernel places each pair by the guess ``position`` and searches the misses, so a wrong map
would only be slow; these checks pin down that the edges and the map agree, that the edges span
the significant range, and that the centre bump really refines the bulk.
"""

from __future__ import annotations

import numpy as np
import pytest

from epscert.allocation.cells import CellLaw
from epscert.allocation.grid import GridShape, MainGrid


def _law(sd: float, n: int = 400) -> CellLaw:
    z = np.linspace(-6.0, 6.0, n)
    values = np.exp(sd * z)
    masses = np.exp(-0.5 * z * z)
    return CellLaw(values, masses / masses.sum())


@pytest.mark.parametrize("shape", [GridShape(0.3, 0.0), GridShape(0.05, 0.3), GridShape(0.0, 0.5)])
def test_edges_span_the_range_and_the_map_finds_their_cells(shape):
    x = _law(0.01)
    lo, hi, n = -30.0, 20.0, 500
    grid = MainGrid.build(x, x, "mean", (0.5, 0.5), lo, hi, n, shape)
    edges = grid.log_edges
    assert edges.size == n + 1 and edges[0] == lo and edges[-1] == hi
    assert np.all(np.diff(edges) > 0)
    mids = 0.5 * (edges[:-1] + edges[1:])
    guess = np.floor(grid.position(mids.copy())).astype(int) - 1
    assert np.mean(guess == np.arange(n)) > 0.99


def test_centre_bump_refines_the_bulk():
    x = _law(0.01)  # bulk of log-width ~0.01/√2 after the mean, in a range of 50
    lo, hi, n = -30.0, 20.0, 500
    plain = MainGrid.build(x, x, "mean", (0.5, 0.5), lo, hi, n, GridShape(0.05, 0.0))
    bump = MainGrid.build(x, x, "mean", (0.5, 0.5), lo, hi, n, GridShape(0.05, 0.3))

    def cells_within(grid, half_width):
        return int(np.sum(np.abs(grid.log_edges) < half_width))

    assert cells_within(bump, 0.05) >= 10 * max(1, cells_within(plain, 0.05))
