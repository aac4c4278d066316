"""Exact sums and accumulators: merge invariance bit for bit (issue 2, item 4)."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest

from epscert.montecarlo import accumulator as acc_mod
from epscert.montecarlo.exactsum import GRID_LOG2, grid_mean, grid_sum
from epscert.config import Direction

EPS = (0.0, 0.5, 1.0, 3.0)


def _losses(seed: int, n: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.normal(0.5, 1.5, n)


def test_grid_sum_matches_fraction_arithmetic():
    rng = np.random.default_rng(0)
    y = rng.random(5000) ** 7
    y[::11] = 0.0
    y[3], y[4] = 1.0, 5e-324
    expected = sum(math.ceil(Fraction(v) * 2**GRID_LOG2) for v in y.tolist())
    assert grid_sum(y) == expected
    # rounding up on the 2**-52 grid: the mean is >= the exact mean, by < 2**-52
    exact_mean = sum(Fraction(v) for v in y.tolist()) / y.size
    assert 0 <= Fraction(grid_mean(expected, y.size)) - exact_mean < Fraction(1, 2**51)


@pytest.mark.parametrize("bad", [np.array([-1e-300]), np.array([1.0000000000000002]), np.array([np.nan])])
def test_grid_sum_refuses_values_outside_unit_interval(bad):
    with pytest.raises(ValueError, match="values in"):
        grid_sum(bad)


def test_split_at_every_point_gives_identical_accumulator():
    losses = _losses(1, 64)
    whole = acc_mod.add(acc_mod.create([Direction.REMOVE], len(EPS)), Direction.REMOVE, losses, EPS)
    for cut in range(0, losses.size + 1):
        empty = acc_mod.create([Direction.REMOVE], len(EPS))
        left = acc_mod.add(empty, Direction.REMOVE, losses[:cut], EPS)
        right = acc_mod.add(empty, Direction.REMOVE, losses[cut:], EPS)
        assert acc_mod.merge([left, right]) == whole
        assert acc_mod.merge([right, left]) == whole


def test_merge_is_associative_and_order_independent():
    parts = []
    for i, d in enumerate([Direction.REMOVE, Direction.ADD, Direction.REMOVE, Direction.ADD, Direction.REMOVE]):
        parts.append(acc_mod.add(acc_mod.create([d], len(EPS)), d, _losses(10 + i, 100 + 37 * i), EPS))
    a, b, c = parts[:3]
    m = acc_mod.merge
    assert m([a, m([b, c])]) == m([m([a, b]), c])
    reference = m(parts)
    for perm in itertools.permutations(parts):
        assert m(perm) == reference
    # an arbitrary tree shape
    assert m([m([parts[3], parts[0]]), m([parts[4], m([parts[2], parts[1]])])]) == reference


def test_merge_refuses_different_epsilon_grids():
    a = acc_mod.create([Direction.REMOVE], 2)
    b = acc_mod.create([Direction.REMOVE], 3)
    with pytest.raises(ValueError, match="epsilons"):
        acc_mod.merge([a, b])


def test_nan_losses_are_refused():
    with pytest.raises(FloatingPointError):
        acc_mod.add(acc_mod.create([Direction.ADD], 1), Direction.ADD, np.array([0.0, np.nan]), (1.0,))


def test_y_values_are_the_hockey_stick_integrand():
    losses = np.array([-np.inf, -1.0, 0.0, 1.0, 2.5, 40.0])
    eps = 1.0
    expected = np.maximum(0.0, 1.0 - np.exp(eps - losses))
    np.testing.assert_allclose(acc_mod.y_values(losses, eps), expected, rtol=1e-15, atol=0)
