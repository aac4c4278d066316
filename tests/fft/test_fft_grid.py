"""Grid placement: connect-the-dots dominates, merging is dominated (per step, against closed forms),
masses and Q-masses add up, atoms, the reservoir; validation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from dp_accounting.pld import privacy_loss_mechanism as plm

from epscert.fft.grid import Grid, Rounding
from epscert.fft.mechanisms import Gaussian, RandomizedResponse, Schedule, SubsampledGaussian
from epscert.config import Direction

REMOVE, ADD = Direction.REMOVE, Direction.ADD


def exact_delta(mech, direction, eps):
    """δ(ε) of one step from dp_accounting's closed form (independent of the placement code)."""
    if isinstance(mech, Gaussian):
        loss = plm.GaussianPrivacyLoss(mech.sigma, sensitivity=mech.sensitivity)
    else:
        kind = plm.AdjacencyType.REMOVE if direction is REMOVE else plm.AdjacencyType.ADD
        loss = plm.GaussianPrivacyLoss(mech.sigma, sensitivity=1.0, sampling_prob=mech.q, adjacency_type=kind)
    return np.asarray([loss.get_delta_for_epsilon(float(e)) for e in eps])


def placed_delta(g, eps):
    """δ(ε) = p∞ + Σ ν_i (1 - e^{ε - ℓ_i})_+ of a placed PMF."""
    ell = g.losses()
    return np.asarray([g.inf_mass + float(np.sum(g.masses * np.where(ell > e, -np.expm1(np.minimum(e - ell, 0.0)), 0.0)))
                       for e in eps])


MECHS = [Gaussian(1.3), Gaussian(0.7, sensitivity=2.0), SubsampledGaussian(0.05, 0.9), SubsampledGaussian(0.5, 2.0),
         SubsampledGaussian(1e-5, 0.6)]


@pytest.mark.parametrize("mech", MECHS)
@pytest.mark.parametrize("direction", [REMOVE, ADD])
def test_up_dominates_and_down_is_dominated(mech, direction):
    """δ_down(ε) <= δ(ε) <= δ_up(ε) at every ε (negative ones too: the pair, not only the tail),
    connect-the-dots is exact at its grid points, and the masses add up (P-mass <= 1 below)."""
    grid = Grid(6.0, 2048)
    up = mech.place(grid, Rounding.UP, direction)
    down = mech.place(grid, Rounding.DOWN, direction)
    eps = np.concatenate([np.linspace(-1.5, 5.0, 157), up.losses()[::97]])
    eps = eps[(eps > -grid.half_width) & (eps < grid.half_width - 1.0)]
    exact = exact_delta(mech, direction, eps)
    tol = 1e-12
    assert np.all(placed_delta(down, eps) <= exact + tol)
    assert np.all(exact <= placed_delta(up, eps) + tol)
    if up.inf_mass < 1e-12:  # the support fits the window: connect-the-dots is exact on the grid
        on_grid = up.losses()[::97]
        on_grid = on_grid[(on_grid > 0.0) & (on_grid < 4.0)]
        np.testing.assert_allclose(placed_delta(up, on_grid), exact_delta(mech, direction, on_grid),
                                   rtol=1e-6, atol=1e-13)
    assert down.masses.sum() <= 1.0 + 1e-12 and up.masses.sum() + up.inf_mass >= 1.0 - 1e-12


def test_reservoir_keeps_a_narrow_body_on_one_point():
    """q = 1e-5 << Δx: the body of the REMOVE step (losses within q of 0) is one merged atom on the
    grid, not rounded down by Δx; the offset that puts it there is the reservoir's."""
    grid = Grid(4.0, 2**14)  # Δx = 4.9e-4
    down = SubsampledGaussian(1e-5, 0.8).place(grid, Rounding.DOWN, REMOVE)
    k = int(np.argmax(down.masses))
    assert down.masses[k] > 0.5 and abs(down.losses()[k]) < 1e-4
    assert down.offset != 0.0


def test_tails_outside_the_grid():
    """UP: mass above the window goes to +∞; DOWN: it stays, at the window's top (rounded down)."""
    grid = Grid(1.0, 64)
    mech = Gaussian(0.5)  # ω ~ N(2, 4): much mass above L = 1
    up = mech.place(grid, Rounding.UP, REMOVE)
    down = mech.place(grid, Rounding.DOWN, REMOVE)
    assert up.inf_mass >= float(exact_delta(mech, REMOVE, [grid.half_width])[0])
    assert down.inf_mass == 0.0 and down.losses()[-1] <= grid.half_width + 1e-12
    assert down.masses[-1] > 0.3


def test_randomized_response_atoms():
    grid = Grid(4.0, 400)  # dx = 0.02
    rr = RandomizedResponse(0.75)
    eps = np.linspace(-2.0, 2.0, 41)
    exact = np.maximum(0.75 - np.exp(eps) * 0.25, 0.0) + np.maximum(0.25 - np.exp(eps) * 0.75, 0.0)
    up, down = rr.place(grid, Rounding.UP, REMOVE), rr.place(grid, Rounding.DOWN, REMOVE)
    assert np.all(placed_delta(down, eps) <= exact + 1e-12) and np.all(exact <= placed_delta(up, eps) + 1e-12)
    certain = RandomizedResponse(1.0).place(grid, Rounding.DOWN, ADD)
    assert certain.inf_mass == 1.0 and certain.masses.sum() == 0.0


def test_atom_on_a_grid_point_is_moved_the_safe_way():
    """An atom exactly at (or within round-off of) a grid point never moves the wrong way."""
    grid = Grid(4.0, 400)
    x = grid.points()
    p = 1.0 / (1.0 + math.exp(-x[250]))  # loss log(p/(1-p)) = x[250] up to round-off
    rr = RandomizedResponse(p)
    eps = np.linspace(-1.0, 1.0, 81)
    exact = np.maximum(p - np.exp(eps) * (1 - p), 0.0) + np.maximum((1 - p) - np.exp(eps) * p, 0.0)
    assert np.all(placed_delta(rr.place(grid, Rounding.DOWN, REMOVE), eps) <= exact + 1e-12)
    assert np.all(exact <= placed_delta(rr.place(grid, Rounding.UP, REMOVE), eps) + 1e-12)


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
