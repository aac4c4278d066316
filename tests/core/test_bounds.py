"""KL–Chernoff upper confidence bound (SPEC §3) against independent computations."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import optimize, stats

from epscert.bounds.kl import bernoulli_kl, kl_ucb, standard_error


def _ucb_by_brentq(p_hat: float, m: int, beta: float) -> float:
    target = math.log(1 / beta) / m
    f = lambda p: p_hat * math.log(p_hat / p) + (1 - p_hat) * math.log((1 - p_hat) / (1 - p)) - target
    return optimize.brentq(f, p_hat, 1 - 1e-15, xtol=1e-15, rtol=1e-14)


@pytest.mark.parametrize("p_hat,m,beta", [(0.1, 1000, 0.01), (0.5, 50, 0.05), (1e-4, 10**6, 1e-3), (0.9, 30, 0.2)])
def test_ucb_solves_the_kl_equation(p_hat, m, beta):
    u = kl_ucb(p_hat, m, beta)
    ref = _ucb_by_brentq(p_hat, m, beta)
    assert u >= ref  # bisection returns the upper end of its bracket
    assert u == pytest.approx(ref, rel=1e-8)  # within the safety inflation UCB_SAFETY


def test_ucb_at_zero_mean_is_the_closed_form():
    m, beta = 500, 0.01
    exact = 1 - beta ** (1 / m)
    assert exact <= kl_ucb(0.0, m, beta) <= exact * (1 + 2e-9)  # inflated by UCB_SAFETY, never below


def test_ucb_is_above_the_mean_and_monotone():
    means = np.linspace(0, 1, 41)
    ucbs = [kl_ucb(p, 200, 0.05) for p in means]
    assert all(u >= p for u, p in zip(ucbs, means))
    assert all(b >= a for a, b in zip(ucbs, ucbs[1:]))


def test_scaled_ucb():
    assert kl_ucb(2e-4, 1000, 0.01, scale=1e-3) == pytest.approx(1e-3 * kl_ucb(0.2, 1000, 0.01), rel=1e-14)


def test_ucb_is_tighter_than_hoeffding_but_valid_against_exact_binomial():
    # For Bernoulli data the exact one-sided Clopper-Pearson bound is the tightest valid one;
    # the Chernoff bound must be at least as large (it is valid for any [0,1] data).
    m, beta = 400, 0.01
    for k in (0, 3, 40, 200):
        cp = stats.beta.ppf(1 - beta, k + 1, m - k) if k < m else 1.0
        hoeffding = k / m + math.sqrt(math.log(1 / beta) / (2 * m))
        u = kl_ucb(k / m, m, beta)
        assert cp <= u + 1e-12
        assert u <= min(1.0, hoeffding) + 1e-12


def test_kl_edge_cases():
    assert bernoulli_kl(0.3, 0.3) == 0.0
    assert bernoulli_kl(0.0, 0.0) == 0.0
    assert bernoulli_kl(0.5, 1.0) == math.inf


def test_standard_error_matches_numpy():
    rng = np.random.default_rng(3)
    y = rng.random(1000)
    se = standard_error(y.mean(), (y * y).mean(), y.size, scale=2.0)
    assert se == pytest.approx(2.0 * y.std(ddof=1) / math.sqrt(y.size), rel=1e-9)


@pytest.mark.parametrize("kwargs", [dict(count=0), dict(error_prob=0.0), dict(error_prob=1.0)])
def test_bad_bound_arguments(kwargs):
    args = dict(mean=0.1, count=10, error_prob=0.1) | kwargs
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        kl_ucb(**args)
