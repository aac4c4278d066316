"""The deterministic Balls-and-Bins bracket against independent values (issue 11).

References, none of which shares code with epscert.allocation:
- T = 1: the Gaussian closed form δ_D (one Gaussian at σ/√E);
- T = 2, 3, one epoch: tests/reference/quadrature.py; T = 2, two epochs: tests/reference/epochs_gh.py;
- the Monte Carlo mean of a large naive run (epscert's sampler code) within 4 standard errors;
- the cube lower bound (below), the deterministic δ (above every lower bound);
- pld-accounting 2.0 (Feldman & Shenfeld's own implementation, a test extra), where installed.
"""

from __future__ import annotations

import numpy as np
import pytest

import epscert
from epscert.allocation import AllocationBracket, bracket_for
from epscert.analytic.cube import cube_lower_bound
from epscert.analytic.deterministic import deterministic_delta
from epscert.config import Direction
from tests.reference.epochs_gh import bnb_delta_t2
from tests.reference.quadrature import bnb_delta_quadrature

DIRECTIONS = ("remove", "add")


@pytest.mark.parametrize("sigma", [0.5, 1.0, 2.0])
@pytest.mark.parametrize("epochs", [1, 3])
def test_t1_contains_the_closed_form(sigma, epochs):
    eps = np.array([0.0, 0.3, 1.0, 2.5, 5.0])
    truth = deterministic_delta(sigma, epochs, eps)
    b = AllocationBracket(sigma, 1, epochs)
    for d in DIRECTIONS:
        up, lo = b.delta(eps, d)
        assert np.all(lo <= truth) and np.all(truth <= up), (d, lo, truth, up)
        big = truth > 1e-8
        assert np.all(up[big] / lo[big] - 1 < 1e-2)


@pytest.mark.parametrize("steps,sigma,eps", [(2, 0.7, 1.0), (2, 1.0, 2.0), (3, 0.8, 1.5), (3, 1.5, 0.5)])
def test_t2_t3_one_epoch_contain_the_quadrature(steps, sigma, eps):
    b = AllocationBracket(sigma, steps)
    for d in DIRECTIONS:
        ref, err = bnb_delta_quadrature(sigma, steps, eps, d)
        up, lo = b.delta([eps], d)
        assert lo[0] <= ref + err and ref - err <= up[0], (d, lo, ref, up)
        assert up[0] / lo[0] - 1 < 1e-2


@pytest.mark.parametrize("sigma,eps", [pytest.param(1.0, 1.0, marks=pytest.mark.slow), (0.7, 2.0)])
def test_t2_two_epochs_contain_the_reference(sigma, eps):
    b = AllocationBracket(sigma, 2, 2)
    for d in DIRECTIONS:
        ref, err = bnb_delta_t2(sigma, 2, eps, d)
        up, lo = b.delta([eps], d)
        assert lo[0] <= ref + err and ref - err <= up[0], (d, lo, ref, up)


@pytest.mark.parametrize("sigma,steps,epochs", [(1.0, 10, 1), (0.7, 100, 1), (1.0, 50, 3)])
def test_between_the_cube_lower_bound_and_the_deterministic_value(sigma, steps, epochs):
    eps = np.linspace(0.0, 4.0, 9)
    b = bracket_for(sigma, steps, epochs)
    for d in (Direction.REMOVE, Direction.ADD):
        up, lo = b.delta(eps, d)
        if epochs == 1:
            assert np.all(up >= cube_lower_bound(sigma, steps, eps, "balls_and_bins", d))
        assert np.all(lo <= deterministic_delta(sigma, epochs, eps))


@pytest.mark.parametrize("sigma,steps,epochs", [pytest.param(0.6, 30, 1, marks=pytest.mark.slow), (1.0, 200, 2),
                                                (2.0, 5, 7)])
def test_monotone_and_ordered_everywhere(sigma, steps, epochs):
    eps = np.concatenate([np.linspace(0, 12, 241), [20.0, 50.0, 700.0]])
    b = bracket_for(sigma, steps, epochs)
    for d in ("remove", "add", "both"):
        up, lo = b.delta(eps, d)
        assert np.all(np.diff(up) <= 0) and np.all(np.diff(lo) <= 0)
        assert np.all(lo <= up) and np.all((0 <= lo) & (up <= 1))
        assert np.all(np.isfinite(up)) and np.all(np.isfinite(lo))
    # unsorted input gives the same values at the same ε
    perm = np.random.default_rng(0).permutation(eps.size)
    up_p, lo_p = b.delta(eps[perm], "both")
    up, lo = b.delta(eps, "both")
    assert np.array_equal(up_p, up[perm]) and np.array_equal(lo_p, lo[perm])


def test_narrows_as_the_cells_are_refined():
    eps = [0.5, 1.0, 2.0]
    widths = []
    for cells in (100, 200, 400):
        up, lo = AllocationBracket(1.0, 64, 2, cells=cells).delta(eps)
        widths.append(up / lo - 1)
    assert np.all(widths[1] < widths[0]) and np.all(widths[2] < widths[1])
    # and every refinement still contains the finest one's interval midpoint region
    up_f, lo_f = AllocationBracket(1.0, 64, 2, cells=400).delta(eps)
    up_c, lo_c = AllocationBracket(1.0, 64, 2, cells=100).delta(eps)
    assert np.all(lo_c <= up_f) and np.all(lo_f <= up_c)


def test_epsilon_brackets_are_consistent_with_delta():
    b = bracket_for(1.0, 234, 1)
    eps_up, eps_lo = b.epsilon(1e-5)
    assert 0 < eps_lo <= eps_up < np.inf
    up, _ = b.delta([eps_up])
    _, lo = b.delta([eps_lo])
    assert up[0] <= 1e-5 < lo[0] + 1e-18  # upper certified at eps_up; lower still above δ at eps_lo


@pytest.mark.parametrize("kwargs,field", [({"sigma": 0.04}, "sigma"), ({"steps": 0}, "steps"),
                                          ({"steps": 10**7}, "steps"), ({"epochs": 0}, "epochs"),
                                          ({"sigma": float("nan")}, "sigma"), ({"cells": 3}, "cells")])
def test_bad_input_names_the_field(kwargs, field):
    args = {"sigma": 1.0, "steps": 10, "epochs": 1} | kwargs
    with pytest.raises(ValueError, match=field):
        AllocationBracket(args.pop("sigma"), args.pop("steps"), args.pop("epochs"), **args)


def test_certify_rows_name_the_bracket_and_refuse_outside_its_range():
    t = epscert.certify(sampler="balls_and_bins", sigma=1.0, steps=20, epochs=2, epsilons=[0.5, 1.0],
                        method=["pld_upper", "pld_lower"])
    rows = t.to_pylist()
    ups = [r for r in rows if r["method"] == "bracket_upper"]  # asked for by the old names: rows say the new ones
    los = [r for r in rows if r["method"] == "bracket_lower"]
    assert {r["guarantee"] for r in ups} == {"upper_bound"} and {r["guarantee"] for r in los} == {"lower_bound"}
    assert {r["bound"] for r in ups} == {"allocation_bracket_upper"}
    for u, l in zip(ups, los):
        assert l["delta_lower"] <= u["delta_upper"]
    with pytest.raises(ValueError, match="sigma"):
        epscert.certify(sampler="balls_and_bins", sigma=0.04, steps=20, epsilons=[1.0], method="pld_upper")


# --- the Monte Carlo mean of a large naive run lies inside the bracket (within 4 SE) ----------
# At each configuration ε is the bracket's ε(δ_target), so δ spans 1e-2 .. 1e-5.
MC_FAST = [(1.0, 10, 1, 1e-2), (0.8, 20, 2, 1e-3), (1.0, 50, 3, 1e-3)]
MC_SLOW = [(1.0, 100, 1, 1e-4), (0.7, 1000, 1, 1e-3), (1.0, 1000, 2, 1e-4), (1.5, 10**4, 1, 1e-3),
           (1.0, 300, 5, 1e-3), (2.0, 10, 4, 1e-5), (0.6, 200, 1, 1e-4), (1.2, 30, 3, 1e-5)]


def _mc_inside(sigma, steps, epochs, delta, samples):
    b = bracket_for(sigma, steps, epochs)
    eps = b.epsilon(delta)[0]
    t = epscert.certify(sampler="balls_and_bins", sigma=sigma, steps=steps, epochs=epochs, epsilons=[eps],
                        method="naive", samples=samples, seed=11, direction="remove")
    row = next(r for r in t.to_pylist() if r["method"] == "naive")
    up, lo = b.delta([eps], "remove")
    se = row["std_error"]
    assert lo[0] - 4 * se <= row["delta"] <= up[0] + 4 * se, (row["delta"], se, lo, up)
    return row["delta"], se


@pytest.mark.parametrize("sigma,steps,epochs,delta", MC_FAST)
def test_monte_carlo_mean_inside_the_bracket(sigma, steps, epochs, delta):
    _mc_inside(sigma, steps, epochs, delta, 100_000)


@pytest.mark.slow
@pytest.mark.parametrize("sigma,steps,epochs,delta", MC_SLOW)
def test_monte_carlo_mean_inside_the_bracket_large(sigma, steps, epochs, delta):
    _mc_inside(sigma, steps, epochs, delta, 400_000 if steps * epochs <= 1000 else 40_000)


# --- an independent accountant not in this repository: pld-accounting 2.0 ---------------------
PLD_FAST = [(1e-4, 1.0, 50, 1), (1e-5, 1.0, 20, 2)]
PLD_SLOW = [(1e-6, 0.8, 100, 1), (1e-5, 1.0, 234, 1), (1e-8, 0.6, 1000, 1), (1e-7, 0.4, 1563, 1), (1e-5, 1.0, 234, 10)]


def _against_pld_accounting(delta, sigma, steps, epochs):
    api = pytest.importorskip("PLD_accounting.random_allocation_api",
                              reason="pld-accounting (the test extra) is not installed")
    their_up, their_lo = api.gaussian_allocation_epsilon_range(delta=delta, sigma=sigma, num_steps=steps,
                                                               num_epochs=epochs)
    our_up, our_lo = bracket_for(sigma, steps, epochs).epsilon(delta)
    # both are certified brackets on the same ε(δ): they must overlap, and ours contains their lower bound
    assert our_lo <= their_up and their_lo <= our_up
    assert their_lo <= our_up


@pytest.mark.parametrize("delta,sigma,steps,epochs", PLD_FAST)
def test_overlaps_pld_accounting(delta, sigma, steps, epochs):
    _against_pld_accounting(delta, sigma, steps, epochs)


@pytest.mark.slow
@pytest.mark.parametrize("delta,sigma,steps,epochs", PLD_SLOW)
def test_overlaps_pld_accounting_large(delta, sigma, steps, epochs):
    _against_pld_accounting(delta, sigma, steps, epochs)


@pytest.mark.parametrize("sigma,steps,epochs", [(1.0, 100, 1), (2.0, 64, 2),
                                                pytest.param(1.0, 300, 3, marks=pytest.mark.slow)])
def test_default_width_at_most_one_percent(sigma, steps, epochs):
    """The issue's target: upper/lower − 1 <= 1% wherever 1e-10 <= δ <= 1e-3 (default settings)."""
    b = AllocationBracket(sigma, steps, epochs)
    eps = np.linspace(0.0, 30.0, 6001)
    up, lo = b.delta(eps)
    sel = (lo >= 1e-10) & (up <= 1e-3)
    assert sel.sum() > 50
    assert np.max(up[sel] / lo[sel] - 1.0) <= 1e-2


def test_persistent_balls_and_bins_is_the_one_epoch_bracket_at_reduced_sigma():
    # one bin assignment for all E epochs: exactly one epoch at σ/√E (issue 15); the rows must be that
    # bracket, never the Poisson PLD that the shared method names would otherwise reach
    eps = [0.5, 1.0, 2.0]
    persistent = epscert.certify(sampler="balls_and_bins_persistent", sigma=2.0, steps=40, epochs=4,
                                 epsilons=eps, method=["pld_upper", "pld_lower"], direction="remove").to_pylist()
    up, lo = bracket_for(1.0, 40, 1).delta(eps, "remove")
    got_up = [r["delta_upper"] for r in persistent if r["method"] == "bracket_upper"]
    got_lo = [r["delta_lower"] for r in persistent if r["method"] == "bracket_lower"]
    assert got_up == pytest.approx(list(up), rel=1e-12) and got_lo == pytest.approx(list(lo), rel=1e-12)
    with pytest.raises(ValueError, match="sigma"):  # σ/√E = 0.04 is below the bracket's range (0.05)
        epscert.certify(sampler="balls_and_bins_persistent", sigma=0.08, steps=40, epochs=4, epsilons=[1.0],
                        method="pld_upper")


# --- issue 11: relative width <= 1% at δ ≈ 1e-10 (default settings) -----------------------------
# σ = 1, 2 were above 1% (5.5% and 5.2%, measured) while the floating-point allowance was additive
# (~2e-12); σ = 0.5 was at 2.02% (T = 1000, E = 1) and 2.19% (T = 10^4, E = 10) with the σ >= 1 grid.
@pytest.mark.parametrize("sigma,steps,epochs", [(1.0, 1000, 100), (2.0, 1000, 100),  # σ = 0.5 with the slow set
                                                pytest.param(0.5, 1000, 1, marks=pytest.mark.slow),
                                                pytest.param(0.5, 10**4, 10, marks=pytest.mark.slow)])
def test_width_at_delta_1e_10_is_at_most_one_percent(sigma, steps, epochs):
    b = bracket_for(sigma, steps, epochs)
    eps = b.epsilon(1e-10)[0]
    up, lo = b.delta([eps])
    assert 0.5e-10 < up[0] <= 1e-10 and lo[0] > 0
    assert up[0] / lo[0] - 1 <= 0.01, (eps, up, lo, b.diagnostics)
