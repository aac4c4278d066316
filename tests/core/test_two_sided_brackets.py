"""epscert.inverse.epsilon_at_delta._brackets: a two-sided inversion keeps a bracket for the lower side when the
coarse grid stops before the Monte Carlo UCB reaches δ (issue 33: the grid is cut at a deterministic upper bound
that the sampled UCB does not reach, and the certified lower side was lost)."""

from __future__ import annotations

import numpy as np

from epscert.inverse.epsilon_at_delta import _brackets, lower_epsilon

GRID = np.array([0.0, 0.125, 0.25, 0.5, 0.75, 1.0])


def test_a_ucb_crossing_brackets_as_before():
    ucb = np.array([1.0, 0.5, 0.1, 1e-3, 1e-7, 1e-9])
    lcb = np.array([0.9, 0.4, 1e-5, 1e-8, 0.0, 0.0])
    out = _brackets(GRID, ucb, [1e-6], lcb)
    assert out == {1e-6: (0.5, 1.0, 0.25)}  # UCB first <= δ at 0.75; LCB last > δ at 0.25


def test_no_ucb_crossing_keeps_the_lower_side():
    ucb = np.full(GRID.size, 1e-2)  # the sampled UCB never reaches δ on the (cut) grid
    lcb = np.array([1.0, 1e-4, 2e-6, 1e-8, 0.0, 0.0])
    out = _brackets(GRID, ucb, [1e-6], lcb)
    assert out == {1e-6: (0.25, 0.5, 0.25)}
    assert lower_epsilon(GRID, lcb, 1e-6) == 0.25  # the same point the bracket starts from


def test_no_crossing_on_either_side_or_one_sided_gives_no_bracket():
    ucb = np.full(GRID.size, 1e-2)
    assert _brackets(GRID, ucb, [1e-6], np.zeros(GRID.size)) == {}
    assert _brackets(GRID, ucb, [1e-6], None) == {}  # one-sided inversions are unchanged
