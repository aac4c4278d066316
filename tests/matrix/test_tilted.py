"""The tilted-mixture estimate of δ_remove (:mod:`epscert.matrix.tilted`) against values computed
without it, and its proven value bounds.

- C = I, b | n: the allocation bracket at σ/√k (no matrix code), at δ from 1e-3 down to 4e-12.
- Correlated modes (4 bands): the conditional estimator, another estimator on another stream, at δ ≈ 2e-7
  and 1.4e-10, where naive sampling resolves nothing; and naive sampling at δ ≈ 0.1, where it does (θ = 1
  too, which is naive sampling under P on another stream).
- Every drawn value lies under the two proven bounds of the module docstring (a slack of 1e-9 relative
  for rounding), and for moderate θ some value comes within a factor 2 of them (so a bound made looser
  fails).

Estimates are compared within Z_CLT standard errors: 6.8e-6 per check under the CLT, which is optimistic
here. The tilted values are very skewed (skewness about 400 at ε = 2.5, so about 1.3 for a mean of 10^5
of them), which puts the one-sided tail nearer 1e-4; the seeds are fixed, so a run either passes or fails
for good.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import epscert
from epscert.allocation import bracket_for
from epscert.matrix.tilted import default_theta, tilted_remove_estimate, tilted_value_bound, tilted_values
from epscert.matrix.pair import MatrixPair
from epscert.rng import stream_generator
from epscert.matrix.strategies import toeplitz_strategy
from epscert.matrix.strategies.gram import mode_gram

from .helpers import agree, row, within_clt

SAMPLES = 100_000
BANDED = [1.0, 0.5, 0.375, 0.3125]


def pair_of(c_col, n: int, b: int, sigma: float) -> MatrixPair:
    return MatrixPair(mode_gram(toeplitz_strategy(c_col, n), b), sigma)


IDENTITY = [(2.0, 40, 10, (3.0, 4.0)), (2.4, 40, 10, (2.5, 3.5)), (3.0, 45, 5, (1.5, 2.5))]


@pytest.mark.parametrize("sigma,n,b,eps", IDENTITY, ids=[f"s{s}-n{n}-b{b}" for s, n, b, _ in IDENTITY])
def test_identity_strategy_against_the_bracket(sigma, n, b, eps):
    """C = I: the pair is one Balls-and-Bins epoch of b steps at σ/√(n/b) (δ from 2e-3 to 4e-12)."""
    upper, lower = bracket_for(sigma / math.sqrt(n // b), b, 1).delta(list(eps), "remove")
    est = tilted_remove_estimate(pair_of([1.0], n, b, sigma), eps, SAMPLES, seed=3)
    assert est.theta > 1.0
    for i, e in enumerate(eps):
        assert est.std_error[i] <= 0.05 * est.delta[i], (e, est.delta[i], est.std_error[i])  # the check bites
        assert within_clt(est.delta[i], est.std_error[i], lower[i], upper[i]), (e, est.delta[i], lower[i], upper[i])


def test_correlated_modes_against_the_conditional_estimator():
    """4 bands, n = 200, b = 20, σ = 4: δ ≈ 2e-7 and 1.4e-10, out of naive sampling's reach."""
    sigma, n, b, eps = 4.0, 200, 20, [2.5, 3.5]
    strategy = toeplitz_strategy(BANDED, n)
    est = tilted_remove_estimate(pair_of(BANDED, n, b, sigma), eps, SAMPLES, seed=3)
    table = epscert.certify(sampler="balls_and_bins_persistent", sigma=sigma, steps=b, epsilons=eps,
                            method="conditional", samples=4000, seed=5, strategy=strategy, direction="remove")
    for i, e in enumerate(eps):
        r = row(table, epsilon=e)
        assert est.std_error[i] <= 0.05 * est.delta[i] and r["std_error"] <= 0.1 * r["delta"]
        assert agree(est.delta[i], est.std_error[i], r["delta"], r["std_error"]), (e, est.delta[i], r["delta"])


def test_correlated_modes_against_naive_sampling():
    """Where naive sampling resolves δ (about 0.1), the two agree (different streams)."""
    sigma, n, b, eps = 1.5, 200, 20, [3.0]
    strategy = toeplitz_strategy(BANDED, n)
    est = tilted_remove_estimate(pair_of(BANDED, n, b, sigma), eps, SAMPLES, seed=4)
    table = epscert.certify(sampler="balls_and_bins_persistent", sigma=sigma, steps=b, epsilons=eps,
                            method="naive", samples=200_000, seed=6, strategy=strategy, direction="remove")
    r = row(table, epsilon=3.0)
    assert r["std_error"] <= 0.05 * r["delta"]
    assert agree(est.delta[0], est.std_error[0], r["delta"], r["std_error"]), (est.delta[0], r["delta"])


@pytest.mark.parametrize("theta", [1.0, 2.0, None, 9.0], ids=["naive", "2", "default", "9"])
def test_every_value_is_under_its_proven_bounds(theta):
    """Y <= bound 1 at the sample's ρ, capped by the power-mean bound; θ = 1: Y <= 1. For θ <= 2 some draw
    comes within a factor 2 of the bound (measured: within 0.3%), so a bound made looser is caught; at
    θ = 9 the draws sit far below it (the bound is a worst case, not a typical value)."""
    pair = pair_of(BANDED, 200, 20, 2.0)
    eps = np.array([1.0, 2.5])
    theta = default_theta(pair, 2.0) if theta is None else theta
    values, rho = tilted_values(pair, eps, theta, stream_generator(7, 1), 50_000)
    assert np.all(values >= 0.0) and np.all((rho >= 1.0) & (rho <= pair.bins * (1 + 1e-12)))
    for j, e in enumerate(eps):
        bound = tilted_value_bound(pair, theta, e, rho)
        assert np.all(values[:, j] <= bound * (1 + 1e-9)), (theta, e, float(np.max(values[:, j] / bound)))
        if theta <= 2.0:
            assert float(np.max(values[:, j] / bound)) > 0.5, (theta, e)
        assert np.count_nonzero(values[:, j]) > 100  # the bound is checked on values that occur


def test_theta_one_is_naive_sampling_under_p():
    """θ = 1: W = e^L, so Y = (1 - e^{ε - L})_+, the naive P-form value: the same mean as the naive
    estimator (another code path, another stream)."""
    sigma, n, b, eps = 1.5, 200, 20, [3.0]
    est = tilted_remove_estimate(pair_of(BANDED, n, b, sigma), eps, SAMPLES, seed=9, theta=1.0)
    table = epscert.certify(sampler="balls_and_bins_persistent", sigma=sigma, steps=b, epsilons=eps,
                            method="naive", samples=200_000, seed=10, strategy=toeplitz_strategy(BANDED, n),
                            direction="remove")
    r = row(table, epsilon=3.0)
    assert est.max_value[0] <= 1.0 and est.std_error[0] <= 0.05 * est.delta[0]
    assert agree(est.delta[0], est.std_error[0], r["delta"], r["std_error"]), (est.delta[0], r["delta"])


@pytest.mark.parametrize("kwargs,field", [
    (dict(theta=0.5), "theta"), (dict(theta=float("nan")), "theta"), (dict(samples=1), "samples"),
    (dict(samples=2.5), "samples"), (dict(epsilons=[-1.0]), "epsilons"), (dict(epsilons=[]), "epsilons"),
    (dict(seed=-1), "seed"), (dict(theta="x"), "theta"), (dict(theta=True), "theta"),
    (dict(theta=[2.0]), "theta"), (dict(epsilons="abc"), "epsilons"),
])
def test_bad_input_is_refused_naming_the_field(kwargs, field):
    args = dict(epsilons=[1.0], samples=10, seed=0)
    args.update(kwargs)
    with pytest.raises(ValueError, match=field):
        tilted_remove_estimate(pair_of(BANDED, 200, 20, 2.0), **args)


def test_probe_benchmark_quick_mode_runs(tmp_path, capsys):
    """``benchmarks/matrix_tilted.py --quick`` end to end (a smoke run; figures are not asserted)."""
    from benchmarks import matrix_tilted

    report = matrix_tilted.main(["--quick", "--out", str(tmp_path)])
    assert (tmp_path / "matrix_tilted-quick.json").exists()
    assert {r["method"] for r in report["estimates"]} == {"tilted", "conditional"}
    assert all(r["largest_inside_over_bound"] <= 1 + 1e-9 for r in report["range"]["rows"])
    assert "Part 3" in capsys.readouterr().out
