"""Edge cases the slow property sweep (tests/soundness/test_edges_properties.py) found after the tilted
FFT landed, pinned here in the fast suite."""

from __future__ import annotations

import numpy as np

from epscert.analytic import poisson
from epscert.analytic.resolution import UNDERFLOW_FLOOR
from epscert.fft.choose import choose_grid
from epscert.fft.compose import fft_bounds
from epscert.fft.mechanisms import Schedule, SubsampledGaussian
from epscert.config import Direction

TARGET = 1e-3


def bounds(sigma: float, steps: int, eps, direction: Direction):
    sched = Schedule.of([(SubsampledGaussian(q=1.0 / steps, sigma=sigma), steps)])
    choice = choose_grid(sched, eps, TARGET, direction, 2**18)
    return fft_bounds(sched, eps, choice.grid, direction).brackets[direction]


def test_fft_bounds_are_monotone_in_epsilon_given_in_any_order():
    """σ = 3, T = 57, ADD: both ε fall in one coarse cell; the upper at ε = 3 was 1 ulp above ε = 1's."""
    b = bounds(3.0, 57, [3.0, 1.0], Direction.ADD)
    assert b.upper[0] <= b.upper[1] and b.lower[0] <= b.lower[1]


def test_a_grid_step_past_exps_range_does_not_overflow():
    """σ = 3.58, T = 725, ε = 4: a cell of more than 709 nats raised OverflowError in the upper PMF."""
    b = bounds(3.5803059868168114, 725, [4.0], Direction.BOTH)
    assert UNDERFLOW_FLOOR <= b.upper[0] <= 1.0 and 0.0 <= b.lower[0] <= b.upper[0]


def test_the_poisson_upper_bound_is_never_zero():
    """σ = 2, T = 5, E = 13, ADD, ε = 14 (just below the ADD loss cap 65·log 1.25 = 14.5): the true δ is
    positive but underflows; the upper bound reports the smallest normal, with that resolution."""
    vals, res, _ = poisson.poisson_pld_bounds(2.0, 5, 13, [14.0], Direction.ADD, 1e-4, True)
    assert vals[0] == UNDERFLOW_FLOOR and res[0] >= UNDERFLOW_FLOOR
    lower = poisson.poisson_pld_bounds(2.0, 5, 13, [14.0], Direction.ADD, 1e-4, False)[0]
    assert 0.0 <= lower[0] <= vals[0] and np.isfinite(lower[0])
