"""Grid placement: validity of the rounded PLDs (dominance), mass bookkeeping, validation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from epscert.fft.grid import EDGE_SLACK_FRACTION, Grid, Rounding
from epscert.fft.mechanisms import Gaussian, RandomizedResponse, Schedule, SubsampledGaussian
from epscert.params import Direction

REMOVE, ADD = Direction.REMOVE, Direction.ADD


def _exact_cdf(mech, direction, t):
    """Pr_P[ω <= t] from the definitions, independently of the placement code."""
    if isinstance(mech, Gaussian):
        return stats.norm.cdf(t, loc=mech.mu, scale=math.sqrt(2 * mech.mu))
    q, s = mech.q, mech.sigma
    if direction is REMOVE:  # ω = log(1-q+q e^{(2x-1)/(2s²)}) increasing, X ~ mixture
        x = np.array([s * s * math.log((math.exp(v) - (1 - q)) / q) + 0.5 if math.exp(v) > 1 - q else -np.inf
                      for v in np.atleast_1d(t)])
        return (1 - q) * stats.norm.cdf(x / s) + q * stats.norm.cdf((x - 1) / s)
    x = np.array([s * s * math.log((math.exp(-v) - (1 - q)) / q) + 0.5 if math.exp(-v) > 1 - q else -np.inf
                  for v in np.atleast_1d(t)])
    return stats.norm.sf(x / s)


@pytest.mark.parametrize("mech", [Gaussian(1.3), Gaussian(0.7, sensitivity=2.0),
                                  SubsampledGaussian(0.05, 0.9), SubsampledGaussian(0.5, 2.0)])
@pytest.mark.parametrize("direction", [REMOVE, ADD])
def test_up_is_dominated_and_down_dominates(mech, direction):
    """CDF_up <= CDF_exact <= CDF_down at every grid point (UP moves mass up, DOWN down)."""
    grid = Grid(6.0, 512)
    x = grid.points()
    up = mech.place(grid, Rounding.UP, direction)
    down = mech.place(grid, Rounding.DOWN, direction)
    exact = _exact_cdf(mech, direction, x)
    tol = 1e-12
    assert np.all(np.cumsum(up.pmf) <= exact + tol)
    # DOWN drops mass below x_0: add it back (it sits at -inf) before comparing CDFs
    dropped = 1.0 - down.inf_mass - down.pmf.sum()
    assert np.all(dropped + np.cumsum(down.pmf) >= exact - tol)
    assert up.pmf.sum() + up.inf_mass == pytest.approx(1.0, abs=1e-12)
    assert down.pmf.sum() <= 1.0 - down.inf_mass + 1e-15


def test_up_and_down_differ_by_one_cell():
    """DOWN's mass at x_i is UP's mass at x_{i+1} (same cell), up to the 2·slack edge shift."""
    grid = Grid(5.0, 256)
    mech = SubsampledGaussian(0.2, 1.0)
    up = mech.place(grid, Rounding.UP, REMOVE)
    down = mech.place(grid, Rounding.DOWN, REMOVE)
    # each edge moves by 2·slack = 2·EDGE_SLACK_FRACTION·dx: a fraction of a neighbouring cell's mass
    slack_mass = 8 * EDGE_SLACK_FRACTION * up.pmf.max()
    np.testing.assert_allclose(down.pmf[1:-1], up.pmf[2:], rtol=0, atol=slack_mass)
    assert abs(down.pmf.sum() - up.pmf[1:].sum()) < slack_mass


def test_tails_outside_the_grid():
    """UP: mass above x_{n-1} goes to +inf, mass below -L to x_0; DOWN: above -> x_{n-1}."""
    grid = Grid(1.0, 64)
    mech = Gaussian(0.5)  # ω ~ N(2, 4): much mass above L = 1
    up = mech.place(grid, Rounding.UP, REMOVE)
    down = mech.place(grid, Rounding.DOWN, REMOVE)
    above = stats.norm.sf(grid.points()[-1], loc=2.0, scale=2.0)
    assert up.inf_mass == pytest.approx(above, rel=1e-3)
    assert up.pmf[0] == pytest.approx(stats.norm.cdf(-1.0, 2.0, 2.0), rel=1e-3)
    assert down.inf_mass == 0.0
    assert down.pmf[-1] == pytest.approx(above, rel=1e-3)


def test_randomized_response_atoms():
    grid = Grid(4.0, 400)  # dx = 0.02
    rr = RandomizedResponse(0.75)
    a = math.log(3.0)
    up = rr.place(grid, Rounding.UP, REMOVE)
    down = rr.place(grid, Rounding.DOWN, REMOVE)
    x = grid.points()
    (iu,) = np.nonzero(up.pmf == 0.75)
    (idn,) = np.nonzero(down.pmf == 0.75)
    assert x[iu[0]] >= a and x[iu[0]] - grid.dx < a
    assert x[idn[0]] <= a and x[idn[0]] + grid.dx > a
    certain = RandomizedResponse(1.0).place(grid, Rounding.DOWN, ADD)
    assert certain.inf_mass == 1.0 and certain.pmf.sum() == 0.0


def test_atom_on_a_grid_point_is_moved_the_safe_way():
    """An atom exactly at (or within round-off of) a grid point never moves the wrong way."""
    grid = Grid(4.0, 400)
    x = grid.points()
    p = 1.0 / (1.0 + math.exp(-x[250]))  # loss log(p/(1-p)) = x[250] up to round-off
    up = RandomizedResponse(p).place(grid, Rounding.UP, REMOVE)
    down = RandomizedResponse(p).place(grid, Rounding.DOWN, REMOVE)
    assert x[np.nonzero(up.pmf == p)[0][0]] >= RandomizedResponse(p).loss
    assert x[np.nonzero(down.pmf == p)[0][0]] <= RandomizedResponse(p).loss


@pytest.mark.parametrize("kwargs, field", [
    ({"half_width": -1.0, "size": 64}, "half_width"),
    ({"half_width": 1.0, "size": 63}, "size"),
    ({"half_width": 1.0, "size": 2}, "size"),
    ({"half_width": 1e-12, "size": 64}, "grid step"),
    ({"half_width": float("nan"), "size": 64}, "half_width"),
])
def test_grid_validation_names_the_field(kwargs, field):
    with pytest.raises(ValueError, match=field):
        Grid(**kwargs)


@pytest.mark.parametrize("make, field", [
    (lambda: Gaussian(0.0), "sigma"), (lambda: Gaussian(1.0, sensitivity=-1), "sensitivity"),
    (lambda: SubsampledGaussian(1.5, 1.0), "q"), (lambda: SubsampledGaussian(0.0, 1.0), "q"),
    (lambda: SubsampledGaussian(0.1, -2.0), "sigma"), (lambda: RandomizedResponse(0.4), "p"),
    (lambda: Schedule(()), "entries"), (lambda: Schedule(((Gaussian(1.0), 0),)), "count"),
])
def test_mechanism_validation_names_the_field(make, field):
    with pytest.raises(ValueError, match=field):
        make()


def test_schedule_from_dict_errors_name_the_entry():
    with pytest.raises(ValueError, match=r"mechanisms\[1\].*sigma"):
        Schedule.from_dict({"mechanisms": [{"mechanism": "gaussian", "sigma": 1.0},
                                           {"mechanism": "gaussian", "sigma": -1.0}]})
    with pytest.raises(ValueError, match=r"mechanisms\[0\].mechanism"):
        Schedule.from_dict([{"mechanism": "laplace", "b": 1.0}])
    with pytest.raises(ValueError, match="unknown fields"):
        Schedule.from_dict([{"mechanism": "gaussian", "sigma": 1.0, "sigma2": 1.0}])
    with pytest.raises(ValueError, match="count"):
        Schedule.from_dict([{"mechanism": "gaussian", "sigma": 1.0, "count": 2.5}])


def test_schedule_groups_identical_mechanisms():
    s = Schedule.of([(Gaussian(1.0), 2), (SubsampledGaussian(0.1, 1.0), 3), (Gaussian(1.0), 5)])
    assert s.steps == 10
    assert dict(s.distinct) == {Gaussian(1.0): 7, SubsampledGaussian(0.1, 1.0): 3}
    assert Schedule.from_dict(s.to_dict()) == s
