"""The decoupled-blocks Chernoff bound on δ_add (epscert/matrix/add_decoupled.py): each step of its argument
against an independent value, and the bound against this file's own naive sampler."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.linalg import cholesky
from scipy.special import comb, logsumexp
from scipy.stats import binom

from epscert import certify
from epscert.config.samplers import cached_pair
from epscert.matrix import add_decoupled as ad
from epscert.matrix.strategies import toeplitz_strategy
from tests.matrix.helpers import Z_CLT, row


def binomial_col(bands: int) -> list[float]:
    return [comb(2 * i, i) / 4**i for i in range(bands)]


def naive_add(g: np.ndarray, eps: list[float], draws: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(mean, standard error) of (1 - e^ε S)_+ under g ~ N(0, G): this test's own sampler."""
    b = g.shape[0]
    chol = cholesky(g, lower=True)
    x = (chol @ np.random.default_rng(seed).standard_normal((b, draws))).T - np.diag(g) / 2
    log_s = logsumexp(x, axis=1) - math.log(b)
    vals = np.maximum(1.0 - np.exp(np.asarray(eps)[:, None] + log_s[None, :]), 0.0)
    return vals.mean(axis=1), vals.std(axis=1) / math.sqrt(draws)


def test_the_sampled_block_law_dominates_g_in_loewner_order():
    # (16, 0.7, 48): three blocks of h + 1 = 16 bins, so the middle one takes terms from both its edges
    for bands, sigma, n in ((4, 1.0, 60), (16, 1.2, 300), (1, 2.0, 40), (16, 0.7, 48)):
        pair = cached_pair(toeplitz_strategy(binomial_col(bands), n), n, sigma)
        g = np.asarray(pair.g)
        edges = ad.pair_edges(pair)
        assert edges is not None and np.all(np.diff(edges) >= ad.half_width(g) + 1)
        sampled = np.zeros_like(g)
        for (lo, hi), factor in zip(zip(edges[:-1], edges[1:]), ad.decoupled_blocks(g, edges)):
            sampled[lo:hi, lo:hi] = factor @ factor.T
        gap = np.linalg.eigvalsh(sampled - g)
        assert gap.min() > 0  # ⪰ G with the rounding allowance τ on top
        inner = slice(edges[1] + bands, edges[2] - bands)  # away from the edges G'_ii = G_ii (+ τ)
        assert np.allclose(sampled[inner, inner], g[inner, inner], rtol=0, atol=1e-11)
    assert len(edges) == 4 and np.all(np.diff(edges) == 16)  # the last case: blocks shorter than 2h


def test_the_chernoff_factor_is_the_least_multiple_of_the_exponential_above_the_hinge():
    for eps in (0.0, 0.3, 1.5):
        s = np.linspace(0.0, math.exp(-eps), 300_001)  # the hinge vanishes beyond e^{-ε}
        hinge = np.maximum(1 - math.exp(eps) * s, 0.0)
        log_a = ad.chernoff_log_factor(eps)
        for lam, la in zip(ad.LAMBDAS, log_a):
            ratio = hinge * np.exp(lam * s - la)
            assert ratio.max() <= 1 + 1e-12
            top = max(0.0, math.exp(-eps) - 1 / lam)  # where (1 - K s) e^{λ s} peaks on [0, 1/K]
            peak = (1 - math.exp(eps) * top) * math.exp(lam * top - la)
            assert abs(peak - 1) < 1e-12  # attained: no smaller multiple works


def test_a_wrapped_band_or_a_singular_g_gets_no_decoupled_bound():
    pair = cached_pair(toeplitz_strategy(binomial_col(4), 120), 40, 1.0)  # three participations: the band wraps
    assert ad.pair_edges(pair) is None and ad.add_bound(pair, 100, 0, 0.01) is None
    singular = cached_pair(toeplitz_strategy([0.0, 1.0], 40), 40, 1.0)  # the last mode is zero: no Cholesky factor
    assert ad.pair_edges(singular) is not None and ad.add_bound(singular, 100, 0, 0.01) is None


def test_the_bound_refuses_a_negative_or_nan_epsilon():
    bound = ad.DecoupledAddBound(cached_pair(toeplitz_strategy(binomial_col(2), 20), 20, 1.0), 50, 0, 0.01)
    for bad in (-0.1, float("nan")):
        with pytest.raises(ValueError, match="epsilons must be >= 0"):
            bound.upper([0.5, bad])
    assert bound.upper([0.0, math.inf]).tolist()[1] == 0.0


@pytest.mark.parametrize("n, bands, sigma, eps", [(60, 4, 1.0, [0.05, 0.15]),
                                                       pytest.param(200, 8, 1.5, [0.1, 0.2], marks=pytest.mark.slow)])
def test_the_bound_holds_against_a_naive_estimate_and_bites(n, bands, sigma, eps):
    pair = cached_pair(toeplitz_strategy(binomial_col(bands), n), n, sigma)
    bound = ad.DecoupledAddBound(pair, 20_000, 3, 0.01).upper(eps)
    mean, se = naive_add(np.asarray(pair.g), eps, 200_000, 5)
    assert np.all(mean > 20 * se)  # δ_add well resolved
    assert np.all(bound >= mean - Z_CLT * se)
    assert np.all(bound <= 30 * mean)  # the check bites: the bound is within a small factor of δ_add


def test_each_block_ucb_covers_its_mean_over_seeds():
    """U_i(λ) >= M_i(λ) at a generous β, 100 seeds of 60 draws, against a 300 000-draw reference of each
    block's mean; a failure count above the binomial limit at false-failure rate 1e-6 fails the test."""
    pair = cached_pair(toeplitz_strategy(binomial_col(3), 30), 30, 0.8)
    g = np.asarray(pair.g)
    edges = ad.pair_edges(pair)
    blocks = ad.decoupled_blocks(g, edges)
    reference = np.zeros(len(ad.LAMBDAS))
    rng = np.random.default_rng(17)
    for factor in blocks:
        x = rng.standard_normal((300_000, factor.shape[0])) @ factor.T - 0.5 * (factor * factor).sum(axis=1)
        reference += np.log(np.exp(-np.outer(np.exp(x).sum(axis=1), ad.LAMBDAS / g.shape[0])).mean(axis=0))
    beta = 0.5
    runs = 100
    failures = sum(np.any(ad.DecoupledAddBound(pair, 60, seed, beta).log_ucbs < reference - 1e-3)
                   for seed in range(runs))
    assert failures <= binom.isf(1e-6, runs, beta)


def test_certify_uses_it_for_add_at_one_participation():
    strategy = toeplitz_strategy(binomial_col(8), 200)
    table = certify(sampler="balls_and_bins_persistent", sigma=1.5, steps=200, epsilons=[0.15], method="tilted",
                    samples=5_000, seed=0, error_prob=0.01, strategy=strategy, direction="both")
    add = row(table, direction="add", epsilon=0.15, method="tilted")
    assert add["bound"].endswith("+decoupled_chernoff")
    pair = cached_pair(strategy, 200, 1.5)
    decoupled = ad.add_bound(pair, 5_000, 0, 0.01 / 4).upper([0.15])[0]
    assert add["delta_upper"] <= decoupled * (1 + 1e-12)
    wrapped = certify(sampler="balls_and_bins_persistent", sigma=1.5, steps=40, epsilons=[2.0], method="tilted",
                      samples=2_000, strategy=toeplitz_strategy(binomial_col(4), 120), direction="add")
    assert not row(wrapped, direction="add", epsilon=2.0, method="tilted")["bound"].endswith("+decoupled_chernoff")
