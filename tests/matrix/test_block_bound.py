"""The block-comonotone upper bound at one participation (epscert/matrix/block_bound.py): each step against an
independent value (this file's own split, eigenvalues, the Balls-and-Bins bracket, its own naive sampler)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.linalg import cholesky
from scipy.special import comb, logsumexp

from epscert import certify
from epscert.allocation.bracket import bracket_for
from epscert.config.samplers import cached_pair
from epscert.matrix import block_bound as bb
from epscert.matrix.strategies import toeplitz_strategy
from tests.matrix.helpers import Z_CLT, row


def binomial_col(bands: int) -> list[float]:
    return [comb(2 * i, i) / 4**i for i in range(bands)]


def band_of(g: np.ndarray, h: int) -> np.ndarray:
    b = g.shape[0]
    band = np.zeros((h + 1, b))
    for d in range(h + 1):
        band[d, : b - d] = np.diagonal(g, -d)
    return band


def test_block_count_is_the_largest_divisor_with_blocks_of_h_plus_one():
    assert bb.block_count(2000, 15) == 125  # blocks of 16
    assert bb.block_count(10_000, 63) == 125  # blocks of 80 (64 does not divide 10^4)
    assert bb.block_count(12, 5) == 2
    assert bb.block_count(97, 3) == 0  # prime: one block only, no bound
    assert bb.block_count(12, 6) == 0  # blocks of 7 or more leave fewer than two
    assert bb.block_count(40, 0) == 40  # a diagonal G: every bin its own block


@pytest.mark.parametrize("power", [0.0, 0.5, 1.0])
def test_the_split_covariance_dominates_g_and_its_diagonal_is_below_v_prime(power):
    n, bands, sigma = 48, 4, 0.9
    pair = cached_pair(toeplitz_strategy(binomial_col(bands), n), n, sigma)
    g = np.asarray(pair.g)
    h = bands - 1
    blocks = bb.block_count(n, h)
    assert blocks == 12
    v_prime = bb.block_variance(band_of(g, h), blocks, (power,))
    # this test's own G'': dense Cholesky, every column split at the block edges with η = (|c|/|a|)^p
    chol = cholesky(g, lower=True)
    size = n // blocks
    split = np.zeros_like(g)
    for j in range(n):
        col = chol[:, j]
        block = j // size
        a = np.where(np.arange(n) // size == block, col, 0.0)
        c = col - a
        if not c.any():
            split += np.outer(col, col)
            continue
        eta = (np.linalg.norm(c) / np.linalg.norm(a)) ** power
        split += (1 + eta) * np.outer(a, a) + (1 + 1 / eta) * np.outer(c, c)
    same_block = (np.arange(n)[:, None] // size) == (np.arange(n)[None, :] // size)
    assert np.all(split[~same_block] == 0.0)  # block-diagonal
    assert np.linalg.eigvalsh(split - g).min() > -1e-12  # G'' ⪰ G
    assert np.max(np.diag(split)) <= v_prime <= np.max(np.diag(split)) * (1 + 1e-9)
    # site by site too (the per-site mixture of step 3' stands on these)
    (sites,) = bb.split_diagonals(band_of(g, h), blocks, (power,))
    assert np.all(np.diag(split) <= sites) and np.all(sites <= np.diag(split) * (1 + 1e-9) + 1e-15)
    assert v_prime > np.max(np.diag(g)) * 1.2  # the edges do inflate: the check is not vacuous


@pytest.mark.parametrize("n, bands, sigma", [(48, 4, 0.9), (90, 9, 1.3)])
def test_the_singular_vector_split_dominates_g_and_its_diagonal_is_below_the_bound(n, bands, sigma):
    pair = cached_pair(toeplitz_strategy(binomial_col(bands), n), n, sigma)
    g = np.asarray(pair.g)
    h = bands - 1
    blocks = bb.block_count(n, h)
    size = n // blocks
    # this test's own G'': the dense G's off-diagonal blocks removed, each corner's SVD parts added
    split = np.zeros_like(g)
    for i in range(blocks):
        sl = slice(i * size, (i + 1) * size)
        split[sl, sl] = g[sl, sl]
    for e in range(size, n, size):
        u, s, vt = np.linalg.svd(g[e - size:e, e:e + size])  # the whole cross block (zero outside the corner)
        split[e - size:e, e - size:e] += (u * s) @ u.T
        split[e:e + size, e:e + size] += (vt.T * s) @ vt
    same_block = (np.arange(n)[:, None] // size) == (np.arange(n)[None, :] // size)
    assert np.all(split[~same_block] == 0.0)
    assert np.linalg.eigvalsh(split - g).min() > -1e-12  # G'' ⪰ G
    sites = bb.svd_split_diagonal(band_of(g, h), blocks)
    assert np.all(np.diag(split) <= sites * (1 + 1e-12)) and np.all(sites <= np.diag(split) * (1 + 1e-9) + 1e-14)
    # the least added trace: never more than any column split's (2 ||K||_* against Σ_j (η|a_j|² + |c_j|²/η))
    for diag in bb.split_diagonals(band_of(g, h), blocks):
        assert np.sum(sites - np.diag(g)) <= np.sum(diag - np.diag(g)) * (1 + 1e-9)


def test_a_diagonal_g_is_balls_and_bins_at_its_own_steps():
    # C = c I, b = n: G is diagonal, every bin its own block, no split: the bound is the bracket's upper side
    n, sigma, c = 40, 1.1, 0.8
    strategy = toeplitz_strategy([c], n)
    pair = cached_pair(strategy, n, sigma)
    blocks, sigma_eff = bb.block_law(pair.gram, sigma)
    assert blocks == n
    assert sigma_eff == pytest.approx(sigma / c, rel=1e-12) and sigma_eff <= sigma / c
    eps = np.array([0.5, 1.0, 2.0])
    got = bb.block_upper(pair.gram, sigma, "both", eps)
    exact = bracket_for(sigma / c, n, 1)
    assert np.all(got >= exact.delta_side(eps, "both", "lower"))
    assert np.allclose(got, exact.delta_side(eps, "both", "upper"), rtol=1e-6)


def test_several_participations_or_no_room_get_no_bound():
    wrapped = cached_pair(toeplitz_strategy(binomial_col(4), 120), 40, 1.5)  # b = 40 < n: the band wraps
    assert bb.block_law(wrapped.gram, 1.5) is None
    prime = cached_pair(toeplitz_strategy(binomial_col(4), 97), 97, 1.5)
    assert bb.block_law(prime.gram, 1.5) is None


@pytest.mark.parametrize("n, bands, sigma", [(60, 8, 0.8), pytest.param(120, 16, 1.5, marks=pytest.mark.slow)])
def test_the_bound_is_above_a_naive_estimate_in_both_directions_and_below_the_plain_comonotone(n, bands, sigma):
    pair = cached_pair(toeplitz_strategy(binomial_col(bands), n), n, sigma)
    g = np.asarray(pair.g)
    rng = np.random.default_rng(11)
    draws = 200_000
    x = (cholesky(g, lower=True) @ rng.standard_normal((n, draws))).T - np.diag(g) / 2
    s = np.exp(logsumexp(x, axis=1) - math.log(n))
    eps = np.array([0.25, 0.5, 1.0, 1.5])
    remove = np.maximum(s[None, :] - np.exp(eps)[:, None], 0.0)
    add = np.maximum(1.0 - np.exp(eps)[:, None] * s[None, :], 0.0)
    for direction, vals in (("remove", remove), ("add", add)):
        bound = bb.block_upper(pair.gram, sigma, direction, eps)
        mean, se = vals.mean(axis=1), vals.std(axis=1) / math.sqrt(draws)
        assert np.all(mean - Z_CLT * se <= bound), (direction, mean, bound)
    # it bites: below the Gaussian mechanism of the largest mode (the comonotone bound without blocks)
    from epscert.analytic.deterministic import gaussian_bracket
    plain = gaussian_bracket(1.0 / math.sqrt(float(np.max(np.diag(g)))), eps)[1]
    both = bb.block_upper(pair.gram, sigma, "both", eps)
    assert np.all(both <= plain) and np.all(both < 0.9 * plain)


def test_the_comonotone_method_uses_it_at_one_participation():
    n, sigma = 400, 2.0
    strategy = toeplitz_strategy(binomial_col(32), n)
    table = certify(sampler="balls_and_bins_persistent", sigma=sigma, steps=n, epsilons=[0.5, 1.0],
                    method="comonotone_upper_bound", strategy=strategy, direction="both")
    pair = cached_pair(strategy, n, sigma)
    for eps in (0.5, 1.0):
        r = row(table, direction="both", epsilon=eps, method="comonotone_upper_bound")
        assert r["bound"] == "comonotone_gaussian+blocks_allocation"
        assert r["delta_upper"] >= bb.block_upper(pair.gram, sigma, "both", [eps])[0] * (1 - 1e-12)
        assert r["delta_upper"] <= bb.block_upper(pair.gram, sigma, "both", [eps])[0] * (1 + 1e-9)


def test_the_site_mixture_dominates_every_blocks_sorted_diagonal():
    rng = np.random.default_rng(5)
    blocks, size = 7, 30
    diag = rng.uniform(0.5, 2.0, blocks * size)
    for groups in (64, 8, 1):
        variances, weights = bb.site_mixture(diag, blocks, groups)
        assert len(variances) == min(groups, size) and np.all(weights > 0) and abs(weights.sum() - 1) < 1e-12
        # the mixture as a list of m values, one per order statistic: each block's i-th smallest is below it
        expanded = np.repeat(variances, np.round(weights * size).astype(int))
        assert expanded.size == size
        for i in range(blocks):
            assert np.all(np.sort(diag[i * size:(i + 1) * size]) <= expanded)
    assert np.max(bb.site_mixture(diag, blocks, 1)[0]) == np.max(diag)  # one group: step 3's largest diagonal


@pytest.mark.parametrize("n, bands, sigma", [(120, 16, 1.5), (400, 32, 2.0)])
def test_the_mixture_bound_is_below_one_lognormal_per_block(n, bands, sigma):
    pair = cached_pair(toeplitz_strategy(binomial_col(bands), n), n, sigma)
    blocks, sigma_eff = bb.block_law(pair.gram, sigma)
    eps = np.array([0.25, 0.5, 1.0])
    single = bracket_for(sigma_eff, blocks, 1).delta_side(eps, "both", "upper")
    mixed = bb.block_upper(pair.gram, sigma, "both", eps)
    assert np.all(mixed <= single * (1 + 1e-9))
    assert np.all(mixed < 0.8 * single)  # it bites
    laws = bb.block_mixtures(pair.gram, sigma)
    assert laws[0] == blocks and [split for split, _, _ in laws[1]] == ["svd", *bb.MIXTURE_POWERS]


def test_no_bound_where_a_block_noise_falls_below_the_brackets_range():
    n = 60
    pair = cached_pair(toeplitz_strategy(binomial_col(4), n), n, 0.02)  # σ_eff about 0.014 < 0.05
    assert bb.block_law(pair.gram, 0.02) is None
    assert bb.block_mixtures(pair.gram, 0.02) is None
    assert bb.block_upper(pair.gram, 0.02, "both", [1.0]) is None


def test_the_comonotone_rows_take_the_smaller_bound_eps_by_eps():
    from epscert.analytic.deterministic import gaussian_bracket
    from epscert.matrix.bracket import matrix_bounds
    from epscert.names import Direction, Method
    n, sigma = 2000, 0.6  # 16 bands: the two bounds cross near ε = 13 (benchmarks/results/matrix_block_bound.log)
    pair = cached_pair(toeplitz_strategy(binomial_col(16), n), n, sigma)
    eps = np.array([12.0, 14.0, 16.0])
    _, upper, guarantee, name, _ = matrix_bounds(pair.gram, sigma, Method.COMONOTONE_UPPER_BOUND, Direction.BOTH, eps)
    gauss = gaussian_bracket(1.0 / math.sqrt(float(np.max(np.diag(pair.gram.g0)) / sigma**2)), eps)[1]
    blocks = bb.block_upper(pair.gram, sigma, "both", eps)
    assert blocks[0] < gauss[0] and np.all(blocks[1:] > gauss[1:])  # each wins somewhere
    assert np.array_equal(upper, np.minimum(gauss, blocks)) and guarantee == "upper_bound"
    assert name == "comonotone_gaussian+blocks_allocation"


@pytest.mark.parametrize("power_of_two", [-700, 600])
def test_the_site_diagonals_do_not_depend_on_the_scale_of_g(power_of_two):
    # σ far from 1 scales G by 2^k: every bound must scale with it (no square lost to underflow, no overflow)
    n, bands, sigma = 90, 9, 1.3
    pair = cached_pair(toeplitz_strategy(binomial_col(bands), n), n, sigma)
    band = band_of(np.asarray(pair.g), bands - 1)
    blocks = bb.block_count(n, bands - 1)
    factor = 2.0**power_of_two
    base = bb.svd_split_diagonal(band, blocks)
    scaled = bb.svd_split_diagonal(band * factor, blocks)
    assert np.all(scaled >= base * factor * (1 - 1e-12)) and np.all(scaled <= base * factor * (1 + 1e-12))
    for plain, big in zip(bb.split_diagonals(band, blocks), bb.split_diagonals(band * factor, blocks)):
        assert np.all(big >= plain * factor * (1 - 1e-12)) and np.all(big <= plain * factor * (1 + 1e-12))


def test_blocks_longer_than_the_mixture_groups_keep_every_block_below_the_mixture():
    # blocks of 65 bins > MIXTURE_GROUPS = 64: the runs of order statistics are merged (one run of two)
    n, bands, sigma = 260, 64, 2.0
    pair = cached_pair(toeplitz_strategy(binomial_col(bands), n), n, sigma)
    g = np.asarray(pair.g)
    blocks, mixtures = bb.block_mixtures(pair.gram, sigma)
    size = n // blocks
    assert blocks == 4 and size == 65 > bb.MIXTURE_GROUPS
    # this test's own singular-vector split, dense, as in the test above
    split = np.zeros_like(g)
    for i in range(blocks):
        sl = slice(i * size, (i + 1) * size)
        split[sl, sl] = g[sl, sl]
    for e in range(size, n, size):
        u, s, vt = np.linalg.svd(g[e - size:e, e:e + size])
        split[e - size:e, e - size:e] += (u * s) @ u.T
        split[e:e + size, e:e + size] += (vt.T * s) @ vt
    name, sigmas, weights = mixtures[0]
    assert name == "svd" and len(sigmas) == bb.MIXTURE_GROUPS
    counts = np.round(np.asarray(weights) * size).astype(int)
    assert counts.sum() == size and sorted(set(counts)) == [1, 2]
    expanded = np.repeat(1.0 / np.square(sigmas), counts)  # one variance per order statistic, ascending
    assert np.all(np.diff(expanded) >= 0)
    for i in range(blocks):
        assert np.all(np.sort(np.diag(split)[i * size:(i + 1) * size]) <= expanded)


def test_the_products_mixture_bracket_contains_an_independent_convolution():
    # the bracket block_upper uses, at the law block_mixtures hands it (tens of components), against the
    # convolution of tests/allocation/test_mixture.py (this repository's other, independent evaluation)
    from tests.allocation.test_mixture import convolved_remove
    from epscert.allocation.mixture import mixture_bracket_for
    n, bands, sigma = 400, 32, 2.0
    pair = cached_pair(toeplitz_strategy(binomial_col(bands), n), n, sigma)
    blocks, mixtures = bb.block_mixtures(pair.gram, sigma)
    _, sigmas, weights = mixtures[0]
    assert blocks == 10 and len(sigmas) == 40
    eps = np.array([0.3, 0.8, 1.5])
    reference = convolved_remove(sigmas, weights, blocks, eps)
    bracket = mixture_bracket_for(sigmas, weights, blocks)
    up = bracket.delta_side(eps, "remove", "upper")
    lo = bracket.delta_side(eps, "remove", "lower")
    assert np.all(lo <= reference * (1 + 1e-3)) and np.all(up >= reference * (1 - 1e-3)), (lo, reference, up)
    assert np.all(up <= reference * 1.02)
    assert np.all(bb.block_upper(pair.gram, sigma, "remove", eps) <= up)  # the smallest over the splits
