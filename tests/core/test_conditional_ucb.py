"""The certified UCB of the conditional estimator (issue 13, item 2) and the bounds it rests on.

Independent values: closed forms (n = 1, 2 factors), plain Monte Carlo frequencies of the
lognormal sums, the Gaussian closed form at T = 1, the quadrature at T = 3, and the PLD
bracket's lower bound as a floor for every UCB. Statistical checks give their false-failure
probability in a comment.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import special, stats

import epscert
from epscert.allocation import bracket_for
from epscert.bounds.empirical_bernstein import eb_ucb
from epscert.bounds.kl import kl_ucb
from epscert.bounds.truncated_lcb import LEVELS, truncation_levels
from epscert.dpsgd.conditional import FLOAT_REL, ConditionalSampler, remove_values
from epscert.dpsgd.conditional_ucb import level_threshold, order_stats_domination, remove_cap, remove_tails, remove_ucb
from epscert.dpsgd.lognormal_sums import sum_lower_tail, trimmed_sum_excess, trimmed_sum_tail
from epscert.config import Direction, default_orders
from tests.reference.quadrature import bnb_delta_quadrature


def _w(rng, shape, sigma):
    return np.exp(rng.standard_normal(shape) / sigma - 0.5 / sigma**2)


# ---- empirical Bernstein -------------------------------------------------------------------------

def test_eb_formula_and_range():
    log_term = math.log(2.0 / 0.1)
    want = 0.25 + math.sqrt(2 * 0.01 * log_term / 100) + 7 * 2.0 * log_term / (3 * 99)
    assert eb_ucb(0.25, 0.01, 100, 0.1, scale=2.0) == pytest.approx(want, rel=1e-11)
    assert eb_ucb(0.25, 0.01, 100, 0.1, scale=2.0) >= want
    assert eb_ucb(0.9, 1.0, 10, 0.1) == 1.0  # capped at the range
    assert eb_ucb(0.1, 0.0, 1, 0.1, scale=3.0) == 3.0  # no variance from one value
    with pytest.raises(ValueError, match="error_prob"):
        eb_ucb(0.1, 0.0, 10, 1.0)


def test_eb_coverage_on_a_skewed_law():
    # Values 1e-3·Beta(2, 5) in a range 1 (1000x the bulk) plus a rare 1: mean known exactly.
    # 400 runs at β = 0.1: failures > 60 have probability < 5e-4 under Binomial(400, 0.1).
    rng = np.random.default_rng(21)
    true_mean = 1e-3 * 2 / 7 * (1 - 1e-5) + 1e-5
    fails, ratios = 0, []
    for _ in range(400):
        y = 1e-3 * rng.beta(2, 5, 3000)
        y[rng.random(3000) < 1e-5] = 1.0
        u = eb_ucb(y.mean(), y.var(ddof=1), y.size, 0.1)
        fails += u < true_mean
        ratios.append(u / true_mean)
    assert fails <= 60
    # where the spread is far below the range and m is large, EB's excess over the mean is a fraction
    # of KL–Chernoff's (its point here)
    y = 1e-3 * rng.beta(2, 5, 1_000_000)
    eb, kl = eb_ucb(y.mean(), y.var(ddof=1), y.size, 0.1), kl_ucb(y.mean(), y.size, 0.1)
    assert eb - y.mean() < 0.5 * (kl - y.mean())


# ---- lognormal sums ------------------------------------------------------------------------------

@pytest.mark.parametrize("sigma", [0.5, 1.0])
def test_trimmed_tail_two_factors_closed_form(sigma):
    # n = 2: S' = min(X1, X2) and Pr[S' > s] = Φ̄(u(s))² exactly.
    s = np.array([0.5, 1.0, 3.0, 10.0, 100.0])
    exact = special.ndtr(-(sigma * np.log(s) + 0.5 / sigma)) ** 2
    bound = trimmed_sum_tail(sigma, 2, s)
    assert np.all(bound >= exact)


@pytest.mark.parametrize("sigma,n", [(0.5, 9), (0.5, 99), (1.0, 30)])
def test_trimmed_tail_and_excess_above_monte_carlo(sigma, n):
    # 200k draws: a bound below p̂ - 5 SE fails with probability < 3e-7 per point when valid.
    rng = np.random.default_rng(22)
    x = _w(rng, (200_000, n), sigma)
    sp = x.sum(axis=1) - x.max(axis=1)
    for s in np.quantile(sp, [0.5, 0.9, 0.99, 0.999]):
        p = (sp > s).mean()
        assert trimmed_sum_tail(sigma, n, np.array([s]))[0] >= p - 5 * math.sqrt(p * (1 - p) / sp.size)
        excess = np.maximum(sp - s, 0.0)
        assert trimmed_sum_excess(sigma, n, float(s)) >= excess.mean() - 5 * excess.std() / math.sqrt(sp.size)
    # the order-statistics form (ρ S') is the tail of S' at s/ρ
    assert trimmed_sum_tail(sigma, n, np.array([50.0]), 2.0)[0] == trimmed_sum_tail(sigma, n, np.array([25.0]))[0]


@pytest.mark.parametrize("bound", [math.inf, 0.5, pytest.param(-0.5, marks=pytest.mark.slow)])
def test_sum_lower_tail(bound):
    sigma = 0.5
    # n = 1: Pr_b[W < r] = Φ(min(u(r), b)) / Φ(b) exactly
    for r in (0.05, 0.2, 0.6):
        u = sigma * (math.log(r) + 0.5 / sigma**2)
        exact = special.ndtr(min(u, bound)) / special.ndtr(bound)
        assert sum_lower_tail(sigma, 1, r, bound) >= exact
    # n = 20: Monte Carlo over the truncated law (200k draws, 5 SE)
    rng = np.random.default_rng(23)
    z = stats.truncnorm.rvs(-np.inf, bound, size=(200_000, 20), random_state=rng)
    tot = np.exp(z / sigma - 0.5 / sigma**2).sum(axis=1)
    for r in np.quantile(tot, [0.001, 0.01, 0.2]):
        p = (tot < r).mean()
        assert sum_lower_tail(sigma, 20, float(r), bound) >= p - 5 * math.sqrt(p * (1 - p) / tot.size)
    assert sum_lower_tail(sigma, 20, 0.0, bound) == 0.0


# ---- the cap, its levels, the order-statistics domination ----------------------------------------

@pytest.mark.parametrize("sigma", [0.3, 0.5, 1.0, 2.0])
def test_level_threshold_is_valid_and_near_minimal(sigma):
    for tau in (1.5, 0.3, 1e-3, 1e-8, 1e-20):
        g = level_threshold(tau, sigma)
        assert remove_cap(np.array([g]), sigma)[0] <= tau
        assert remove_cap(np.array([g * (1 - 1e-6)]), sigma)[0] > tau * (1 - 1e-3)


def test_cap_bounds_the_values_on_random_states():
    # Y(R, M) <= Ycap(TK - (R - M)) on random conditioning vectors (the grid check of the cap lives in
    # tests/soundness/test_conditional_remove_cap.py).
    rng = np.random.default_rng(24)
    for sigma, steps, eps in [(0.5, 10, 0.5), (0.3, 50, 2.0), (1.0, 200, 0.2)]:
        x = _w(rng, (20_000, steps - 1), sigma)
        r, m = x.sum(axis=1), x.max(axis=1)
        y = remove_values(np.log(r), np.log(m), sigma, steps, np.array([eps]))[0]
        g = steps * math.exp(eps) - (r - m)
        ok = g > 0
        assert np.all(y[ok] <= remove_cap(g[ok], sigma) * (1 + FLOAT_REL))


def test_order_stats_domination_is_exact_on_step_vectors():
    steps = 100_000
    ranks = np.array(default_orders(steps))
    d = steps - 1
    rho = order_stats_domination(ranks, d)
    w = np.diff(np.append(ranks, d + 1)).astype(float)
    best = 0.0
    for last in ranks[1:]:  # W_(i) = 1 for ranks 2..last, 0 beyond: the extreme points of the cone
        raised = float(np.sum(w[1:][ranks[1:] <= last]))
        best = max(best, raised / (last - 1))
    assert best == pytest.approx(rho, rel=1e-12)
    rng = np.random.default_rng(25)
    for _ in range(20):  # and on sorted random vectors
        v = np.sort(_w(rng, d, 0.5))[::-1]
        assert np.sum(w[1:] * v[ranks[1:] - 1]) <= rho * np.sum(v[1:]) * (1 + 1e-12)
    assert order_stats_domination(np.array([1, 3, 5]), 10) == math.inf  # rank 2 missing
    assert order_stats_domination(None, d) == 1.0


def test_tails_dominate_monte_carlo_of_the_dropped_part():
    # tail_k >= E[Y 1{S' > s*_k}] (the part of δ above the level): plain Monte Carlo, 5 SE.
    sigma, steps, eps = 0.5, 10, 1.0
    rng = np.random.default_rng(26)
    x = _w(rng, (400_000, steps - 1), sigma)
    r, m = x.sum(axis=1), x.max(axis=1)
    y = remove_values(np.log(r), np.log(m), sigma, steps, np.array([eps]))[0]
    sp = r - m
    big = steps * float(np.max(y)) * 10
    taus, tails = remove_tails(sigma, steps, eps, big)
    tk = steps * math.exp(eps)
    checked = 0
    for k in range(1, LEVELS):
        s_star = tk - level_threshold(float(taus[k]), sigma)
        part = y * (sp > s_star)
        assert tails[k] >= part.mean() - 5 * part.std() / math.sqrt(part.size)
        assert np.all(y[sp <= s_star] <= taus[k])  # the level's claim, sample by sample
        checked += part.mean() > 0
    assert checked >= 3  # levels where the dropped part is seen at all


# ---- the UCB end to end --------------------------------------------------------------------------

def test_ucb_coverage_against_quadrature():
    # T = 3, σ = 0.7, ε = 0.5: 300 runs of 300 samples at β = 0.2; failures > 80 have probability
    # < 1e-4 under Binomial(300, 0.2) (the union over levels makes the true rate far lower).
    sigma, steps, eps = 0.7, 3, 0.5
    value, err = bnb_delta_quadrature(sigma, steps, eps, "remove")
    truth = value - err  # failing below the smallest possible δ is a real failure
    sampler = ConditionalSampler(sigma, steps, eps)
    rng = np.random.default_rng(27)
    bound = float(sampler.value_range(Direction.REMOVE, [eps])[0])
    taus = truncation_levels(bound)
    _, tails = remove_tails(sigma, steps, eps, bound)
    fails, ratios = 0, []
    for _ in range(300):
        y = sampler.draw(rng, 300, Direction.REMOVE, [eps])[0]
        trunc = np.minimum(y[None, :], taus[:, None]).mean(axis=1)
        u = remove_ucb(y.size, trunc, float(np.mean(y**2)), taus, tails, 0.2, FLOAT_REL)[0]
        fails += u < truth
        ratios.append(u / truth)
    assert fails <= 80
    assert np.median(ratios) < 1.5  # a certificate, not the proven range


def test_ucb_is_tight_at_1e_8_and_above_the_bracket():
    # The point: σ = 0.5, T = 1000, δ ≈ 1.3e-8 certified within 10% of the estimate with
    # 20k samples (the proven-range KL bound gave 6e-2 here).
    eps = 5.75
    table = epscert.certify(sampler="balls_and_bins", sigma=0.5, steps=1000, epsilons=[eps],
                            method="conditional", samples=20_000, seed=4, direction="both").to_pylist()
    row = next(r for r in table if r["method"] == "conditional" and r["direction"] == "both")
    lower = bracket_for(0.5, 1000, 1).delta([eps], "both")[1][0]
    assert row["delta_upper"] >= lower  # a UCB below a certified lower bound would be a false certificate
    assert row["delta_upper"] <= 1.10 * row["delta"]
    assert row["delta_lower"] <= bracket_for(0.5, 1000, 1).delta([eps], "both")[0][0]


def test_order_stats_ucb_is_above_the_bracket():
    eps = 1.5
    table = epscert.certify(sampler="balls_and_bins", sigma=0.5, steps=100_000, epsilons=[eps],
                            method="conditional_order_stats", samples=2000, seed=4,
                            direction="remove").to_pylist()
    row = next(r for r in table if r["method"] == "conditional_order_stats")
    lower = bracket_for(0.5, 100_000, 1).delta([eps], "remove")[1][0]
    assert lower <= row["delta_upper"] <= 3.0 * row["delta"]  # certified, and far below the proven range
