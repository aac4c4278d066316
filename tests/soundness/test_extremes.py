"""Numerical extremes of the public API: tiny and huge σ, T up to 10^6, ε from 0 to 1000,
up to 100 epochs. Each request gives a finite valid table (δ in [0, 1], UCB >= mean, no NaN,
no numpy RuntimeWarning) or a clear ValueError naming a field. Where δ is known
(T = 1: the Gaussian with σ/√E; T = 2: ``truth.py``), the UCB covers it and the mean is near it.

Statistical checks run at error_prob = 1e-6 per row (the UCB misses with probability <= 1e-6)
and use a Bernstein interval at 1e-6 for the mean, so their false-failure probability is far
below 1e-4 per test.
"""

from __future__ import annotations

import math
import warnings

import pytest

import epscert

from .truth import bnb2_delta, gaussian_delta, log_gaussian_delta

SIGMAS = (0.05, 0.1, 5.0, 50.0)
BETA = 1e-6
SAMPLES = 4000
#: Float slack for delta <= delta_upper and lower <= delta comparisons.
ORDER_TOL = 1e-12


def certify_checked(**kwargs):
    """certify with RuntimeWarnings as errors; returns the rows, or None after a clear ValueError."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        try:
            table = epscert.certify(**kwargs)
        except ValueError as exc:
            assert "=" in str(exc), f"unclear ValueError {str(exc)!r} for {kwargs}"
            return None
    rows = table.to_pylist()
    for row in rows:
        where = f"{row['method']}/{row['direction']}/ε={row['epsilon']} for {kwargs}"
        for key in ("delta", "delta_upper", "delta_lower", "std_error", "scale"):
            assert row[key] is None or not math.isnan(row[key]), f"{where}: {key} is NaN"
        assert 0.0 <= row["delta"] <= 1.0, f"{where}: delta={row['delta']!r}"
        if row["delta_upper"] is not None:
            assert row["delta"] <= row["delta_upper"] + ORDER_TOL <= 1.0 + ORDER_TOL, where
        if row["delta_lower"] is not None:
            assert 0.0 <= row["delta_lower"] <= row["delta"] + ORDER_TOL, where
    return rows


def bernstein_halfwidth(scale: float, delta: float, samples: int, alpha: float = BETA) -> float:
    """Two-sided Bernstein half-width for the mean of m i.i.d. values in [0, s] with mean δ.

    Var <= s δ, so Pr[|mean - δ| >= t] <= 2 exp(-m t² / (2 (s δ + s t / 3))) = α at the t below.
    """
    log_term = math.log(2.0 / alpha)
    b = scale * log_term / 3.0
    return (b + math.sqrt(b * b + 2.0 * samples * scale * delta * log_term)) / samples


def check_against_truth(rows: list[dict], truth_of) -> None:
    """UCB >= truth and |mean - truth| within Bernstein, for every per-direction MC row."""
    for row in rows:
        if row["direction"] == "both" or row["samples"] is None:
            continue
        true = truth_of(row)
        if true is None:
            continue
        where = f"{row['method']}/{row['direction']}/ε={row['epsilon']} σ={row['sigma']} T={row['steps']}"
        assert row["delta_upper"] >= true, f"{where}: UCB {row['delta_upper']} < truth {true}"
        half = bernstein_halfwidth(row["scale"], true, row["samples"])
        assert abs(row["delta"] - true) <= half + 1e-12, f"{where}: mean {row['delta']} vs truth {true} ± {half}"


def _t2_truth(row: dict) -> float | None:
    sigma, eps, direction = row["sigma"], row["epsilon"], row["direction"]
    return bnb2_delta(sigma, 1, eps, direction, tol=1e-7)[0]  # ranks {1} + rank T=2 for ADD: exact


GRID = [(sigma, steps, method)
        for sigma in SIGMAS
        for steps, methods in ((1, ("naive", "importance")),
                               (2, ("naive", "importance", "order_stats", "importance_order_stats")),
                               (10**6, ("order_stats", "importance_order_stats")))
        for method in methods]


@pytest.mark.parametrize("epsilons", [(0.0, 50.0), (50.0,)], ids=["eps0-50", "eps50"])
@pytest.mark.parametrize("sigma,steps,method", GRID)
def test_monte_carlo_extremes(sigma, steps, method, epsilons):
    orders = {1: None, 2: "1,2,1", 10**6: "1,50,1"}[steps] if "order_stats" in method else None
    rows = certify_checked(sampler="balls_and_bins", sigma=sigma, steps=steps, epsilons=list(epsilons),
                           method=method, samples=SAMPLES, error_prob=BETA, seed=17, orders=orders)
    assert rows is not None, "a valid request was refused"
    if steps == 1:
        check_against_truth(rows, lambda r: gaussian_delta(r["sigma"], r["epsilon"]))
    elif steps == 2:
        check_against_truth(rows, _t2_truth)
    for direction in ("remove", "add", "both"):  # one sample set per grid: monotone UCB
        ucb = [r["delta_upper"] for r in rows if r["direction"] == direction]
        assert all(b <= a for a, b in zip(ucb, ucb[1:])), (direction, ucb)


@pytest.mark.parametrize("epochs", [10, 100])
@pytest.mark.parametrize("sigma", SIGMAS)
@pytest.mark.parametrize("sampler", ["balls_and_bins", "deterministic", "poisson"])
def test_many_epochs_single_step(sampler, sigma, epochs):
    """T = 1: every sampler is the Gaussian with σ/√E (Poisson with q = 1 too)."""
    rows = certify_checked(sampler=sampler, sigma=sigma, steps=1, epochs=epochs, epsilons=[0.0, 1.0, 50.0],
                           method="naive", samples=SAMPLES, error_prob=BETA, seed=5)
    assert rows is not None
    check_against_truth(rows, lambda r: gaussian_delta(sigma / math.sqrt(epochs), r["epsilon"]))


@pytest.mark.parametrize("sigma", SIGMAS)
@pytest.mark.parametrize("sampler,method,steps",
                         [("balls_and_bins", "naive", 2), ("balls_and_bins", "order_stats", 2),
                          ("balls_and_bins", "order_stats", 10**6), ("shuffle", "naive", 3),
                          ("shuffle_persistent", "naive", 3), ("poisson", "naive", 2)])
def test_many_epochs_several_steps(sampler, method, steps, sigma):
    orders = "1,50,1" if steps == 10**6 else None
    rows = certify_checked(sampler=sampler, sigma=sigma, steps=steps, epochs=100, epsilons=[0.0, 50.0],
                           method=method, samples=500 if steps > 2 else SAMPLES, error_prob=BETA, seed=6,
                           orders=orders)
    assert rows is not None


def test_two_epochs_two_steps_against_truth():
    for sigma in (0.3, 3.0):
        for method in ("naive", "order_stats"):
            rows = certify_checked(sigma=sigma, steps=2, epochs=2, epsilons=[0.0, 2.0, 50.0], method=method,
                                   samples=SAMPLES, error_prob=BETA, seed=8)
            kind = {"remove": "exact", "add": "exact"}  # ADD draws rank T too: exact at T = 2
            check_against_truth(rows, lambda r: bnb2_delta(r["sigma"], 2, r["epsilon"], r["direction"],
                                                           kind=kind[r["direction"]], tol=1e-7)[0])


# -- regressions found by this suite (see the report) ------------------------------------------

@pytest.mark.parametrize("method", ["importance", "importance_order_stats"])
@pytest.mark.parametrize("sigma,epsilon", [(1.0, 39.0), (2.0, 20.0), (5.0, 50.0)])
def test_importance_far_tail_is_zero_not_a_domain_error(sigma, epsilon, method):
    """C(ε)/σ beyond ~38: Φ(C/σ)^T rounds to 1 and log(1 - 1) raised 'math domain error'.
    δ is astronomically small there; the table should say δ = 0 with a valid UCB."""
    steps = 2
    rows = certify_checked(sigma=sigma, steps=steps, epsilons=[epsilon], method=method, samples=100,
                           error_prob=0.01, direction="remove", seed=1)
    assert rows is not None, "valid request refused"
    assert 0.0 <= rows[0]["delta_upper"] <= 1e-12  # δ_B <= δ_Gaussian(σ, ε) < 1e-80 here


@pytest.mark.parametrize("sampler", ["balls_and_bins", "shuffle"])
@pytest.mark.parametrize("sigma", [0.05, 0.1])
def test_composed_cube_bound_small_sigma(sampler, sigma):
    """E >= 2 cube bound at small σ: survival functions underflow on both slice edges, giving
    NaN masses and 'cannot convert float NaN to integer'."""
    rows = certify_checked(sampler=sampler, sigma=sigma, steps=2, epochs=2, epsilons=[0.0, 1.0],
                           method="cube_lower_bound", pld_discretization=0.05)
    assert rows is not None
    if sampler == "balls_and_bins":
        for row in rows:
            if row["direction"] != "both":
                true = bnb2_delta(sigma, 2, row["epsilon"], row["direction"], tol=1e-7)[0]
                assert row["delta_lower"] <= true + 1e-9, (row, true)


@pytest.mark.parametrize("sigma", (0.5, 1.0, 2.0, 5.0, 50.0))
def test_cube_lower_bound_single_step_is_below_the_gaussian(sigma):
    """T = 1: the cube bound can at most reach the exact Gaussian δ. In the far tail the Q-side
    probability underflowed to 0 and the 'lower bound' became P(A) ~ 1e-307, far above δ."""
    for epsilon in (0.5, 5.0, 20.0, 100.0):
        rows = certify_checked(sampler="balls_and_bins", sigma=sigma, steps=1, epsilons=[epsilon],
                               method="cube_lower_bound", direction="remove")
        lower = rows[0]["delta_lower"]
        log_true = log_gaussian_delta(sigma, epsilon)
        if lower > 0.0:
            assert math.log(lower) <= log_true + max(1e-3, 1e-9 * abs(log_true)), (sigma, epsilon, lower, log_true)


@pytest.mark.parametrize("epsilon", [700.0, 710.0, 1000.0])
@pytest.mark.parametrize("sampler,method,epochs",
                         [("poisson", "pld_upper", 2), ("poisson", "pld_lower", 2), ("poisson", "rdp_upper", 2),
                          ("deterministic", "exact", 2), ("balls_and_bins", "cube_lower_bound", 2),
                          ("shuffle", "cube_lower_bound", 2), ("balls_and_bins", "naive", 2)])
def test_huge_epsilon_gives_zero_not_nan(sampler, method, epochs, epsilon):
    """ε > ~709: dp_accounting's e^ε overflows and δ came back NaN (with RuntimeWarnings)."""
    rows = certify_checked(sampler=sampler, sigma=5.0, steps=4, epochs=epochs, epsilons=[1.0, epsilon],
                           method=method, pld_discretization=0.05, samples=100)
    if rows is not None:
        big = [r for r in rows if r["epsilon"] == epsilon]
        assert all(r["delta"] <= 1e-9 for r in big), big


@pytest.mark.parametrize("sampler,method,epochs",
                         [("poisson", "pld_upper", 1), ("poisson", "pld_upper", 2), ("poisson", "pld_lower", 2),
                          ("shuffle", "cube_lower_bound", 2), ("shuffle", "cube_lower_bound", 3)])
def test_analytic_delta_at_most_one(sampler, method, epochs):
    """σ = 0.05 (δ ≈ 1): dp_accounting's float error gave δ = 1.0000000000073 > 1."""
    rows = certify_checked(sampler=sampler, sigma=0.05, steps=1, epochs=epochs, epsilons=[0.0, 0.05],
                           method=method, pld_discretization=0.01)
    assert rows is not None


@pytest.mark.parametrize("sigma", [1e-300, 1e-200, 1e-160])
@pytest.mark.parametrize("method", ["naive", "importance", "order_stats", "importance_order_stats"])
def test_tiny_sigma_valid_or_refused(sigma, method):
    """σ so small that σ² underflows: a table (δ = 1) or a ValueError naming sigma; it raised
    ZeroDivisionError."""
    rows = certify_checked(sigma=sigma, steps=3, epsilons=[1.0], method=method, samples=50)
    if rows is not None:
        assert all(r["delta_upper"] is None or r["delta_upper"] >= 0.99 for r in rows)


@pytest.mark.parametrize("sampler", ["balls_and_bins", "shuffle", "shuffle_persistent"])
@pytest.mark.parametrize("sigma", [5.0, 50.0])
def test_cube_bound_huge_sigma_no_warnings(sampler, sigma):
    """σ = 50: the Brent refinement in cube_lower_bound met -inf objective values and numpy
    warned 'invalid value encountered in scalar multiply'."""
    rows = certify_checked(sampler=sampler, sigma=sigma, steps=8, epsilons=[0.0, 5.0, 45.0],
                           method="cube_lower_bound")
    assert rows is not None
