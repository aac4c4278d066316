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


def _brentq_side(p_hat: float, m: int, beta: float, upper: bool) -> float | None:
    """The exact root of m kl(p̂ ‖ p) = log(1/β) on p̂'s ``upper`` side (brentq on the closed form; None where
    there is none in [1e-300, 1 - 1e-15])."""
    target = math.log(1 / beta) / m
    f = lambda p: p_hat * math.log(p_hat / p) + (1 - p_hat) * math.log((1 - p_hat) / (1 - p)) - target
    if upper:
        return None if f(1 - 1e-15) <= 0 else optimize.brentq(f, p_hat, 1 - 1e-15, xtol=1e-16, rtol=1e-14)
    g = lambda t: f(math.exp(t))  # the lower root may be far below p̂ (1e-213): solved in log p
    return None if g(-690.0) <= 0 else math.exp(optimize.brentq(g, -690.0, math.log(p_hat), xtol=1e-15, rtol=1e-15))


def test_vectorized_kl_bounds_are_the_scalar_ones_and_on_the_safe_side_of_the_root():
    """kl_ucbs / kl_lcbs (one bisection over arrays) against the scalar bounds, element by element, and against the
    exact root (brentq): never on the wrong side of it, within UCB_SAFETY of it; the scalar branches at p̂ = 0, p̂ >= 1
    and scale 0 are kept."""
    from epscert.bounds.kl import kl_lcb, kl_lcbs, kl_ucbs

    rng = np.random.default_rng(11)
    checked = 0
    scales = np.concatenate([rng.uniform(0.5, 3.0, 400), [0.0, 1.0, 1.0, 2.0]])
    means = np.concatenate([rng.uniform(0.0, 1.0, 400) ** 6, [0.3, 0.0, 1.0, 7.0]]) * np.where(scales > 0, scales, 1)
    for m, beta in ((50, 0.05), (10**5, 1e-9)):
        ucb, lcb = kl_ucbs(means, m, beta, scales), kl_lcbs(means, m, beta, scales)
        want_u = [kl_ucb(x, m, beta, s) for x, s in zip(means.tolist(), scales.tolist())]
        want_l = [kl_lcb(x, m, beta, s) for x, s in zip(means.tolist(), scales.tolist())]
        np.testing.assert_allclose(ucb, want_u, rtol=1e-11, atol=0)
        np.testing.assert_allclose(lcb, want_l, rtol=1e-11, atol=0)
        assert ucb[-4] == lcb[-4] == 0.0 and ucb[-1] == 2.0 and ucb[-2] == 1.0
        for k in rng.choice(400, 25, replace=False):
            p_hat, s = means[k] / scales[k], scales[k]
            if 1e-6 < p_hat < 1.0:
                up, low = _brentq_side(p_hat, m, beta, True), _brentq_side(p_hat, m, beta, False)
                assert ucb[k] == s if up is None else up * s * (1 - 1e-13) <= ucb[k] <= up * s * (1 + 3e-9)
                if low is not None:  # a root below p̂ 2^-200 is past the bisection's 200 steps: 0, the safe side
                    assert lcb[k] <= low * s * (1 + 1e-13)
                    assert low * s * (1 - 3e-9) <= lcb[k] or (low < p_hat * 2.0**-190 and lcb[k] == 0.0)
                checked += 1
    assert checked >= 40  # most of the 50 picks have p̂ in (1e-6, 1)
    # a mean that is not a number: the scalar bounds give the whole range and 0, and so do these
    assert kl_ucbs([math.nan], 10, 0.1, 2.0)[0] == kl_ucb(math.nan, 10, 0.1, 2.0) == 2.0
    assert kl_lcbs([math.nan], 10, 0.1, 2.0)[0] == kl_lcb(math.nan, 10, 0.1, 2.0) == 0.0
    with pytest.raises(ValueError, match="count"):
        kl_ucbs(means, 0, 0.1)
    with pytest.raises(ValueError, match="error_prob"):
        kl_lcbs(means, 10, 1.0)


def test_truncated_lcbs_are_the_row_by_row_bounds():
    from epscert.bounds.truncated_lcb import LEVELS, truncated_lcb, truncated_lcbs, truncation_levels

    rng = np.random.default_rng(5)
    ranges = np.array([1e-3, 2.0, 50.0])
    y = rng.exponential(1e-4, size=(3, 2000))
    means = np.array([[np.minimum(y[i], tau).mean() for tau in truncation_levels(r)] for i, r in enumerate(ranges)])
    got = truncated_lcbs(means, ranges, 2000, 0.01, 1e-12)
    assert got.tolist() == [truncated_lcb(means[i], ranges[i], 2000, 0.01, 1e-12) for i in range(3)]
    assert np.all(got <= y.mean(axis=1)) and np.all(got > 0.5 * y.mean(axis=1))  # below the mean, and not far
    with pytest.raises(ValueError, match=r"value_range must be > 0, got value_range=0.0"):
        truncated_lcbs(means, [1.0, 0.0, 2.0], 2000, 0.01)
    with pytest.raises(ValueError, match="truncated_means"):
        truncated_lcbs(means[:, :LEVELS - 1], ranges, 2000, 0.01)
