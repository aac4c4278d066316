"""benchmarks/matrix_block_law.py: its stop-loss envelope gives back a law from that law's own stop-loss, stays
below the points it is built from, keeps the mean; the mixture's stop-loss against the test's own quadrature; the
interior block of the split has the product's per-site diagonal; the mixture alone reproduces the product's bracket."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.integrate import quad

from benchmarks.matrix_block_law import envelope_law, epsilons_of, interior_block, mixture_stop_loss
from benchmarks.matrix_rivals import binomial_c_col
from epscert.allocation.mixture import mixture_bracket_for
from epscert.config.samplers import cached_pair
from epscert.matrix.block_bound import block_mixtures, natural_half_width, svd_split_diagonal
from epscert.matrix.strategies import toeplitz_strategy


def stop_loss(values, masses, t):
    return np.array([np.dot(masses, np.maximum(values - x, 0.0)) for x in t])


def test_envelope_of_a_discrete_laws_own_stop_loss_is_that_law():
    values = np.array([0.25, 1.0, 2.5, 6.0])
    masses = np.array([0.4, 0.3, 0.2, 0.1])
    masses *= 1.0 / np.dot(masses, values)  # mean 1 (not a probability: mean and stop-loss are what is compared)
    grid = np.concatenate([np.linspace(0.05, 8.0, 160), values])
    grid = np.unique(grid)
    law = envelope_law(grid, stop_loss(values, masses, grid))
    assert law.first_moment == pytest.approx(1.0, abs=1e-12)
    assert np.allclose(stop_loss(law.values, law.masses, grid), stop_loss(values, masses, grid), atol=1e-12)


def test_envelope_stays_below_nonconvex_points_and_keeps_the_mean():
    rng = np.random.default_rng(3)
    grid = np.linspace(0.1, 40.0, 400)
    # nonincreasing (as a stop-loss bound is), not convex, above (1 - t)_+
    points = np.minimum.accumulate(np.exp(-0.8 * grid) * (1.0 + 0.5 * rng.random(grid.size)))
    points = np.maximum(points, np.maximum(1.0 - grid, 0.0))
    law = envelope_law(grid, points)
    assert law.first_moment == pytest.approx(1.0, abs=1e-12)
    assert np.all(law.masses >= 0.0)
    fitted = stop_loss(law.values, law.masses, grid)
    assert np.all(fitted <= points + 1e-12)
    hull_points = np.isin(grid, law.values)  # the vertices the envelope passes through
    assert np.allclose(fitted[hull_points], points[hull_points], atol=1e-12)


@pytest.mark.parametrize("t", [0.05, 0.7, 2.0, 9.0])
def test_mixture_stop_loss_against_quadrature(t):
    sigmas, weights = np.array([0.9, 1.4, 3.0]), np.array([0.2, 0.5, 0.3])
    ref = 0.0
    for sigma, weight in zip(sigmas, weights):
        s = 1.0 / sigma

        def hinge(z):
            return max(math.exp(s * z - 0.5 * s * s) - t, 0.0) * math.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)

        start = (math.log(t) + 0.5 * s * s) / s
        ref += weight * quad(hinge, start, start + 40.0, epsabs=0.0, epsrel=1e-11, limit=200)[0]
    assert mixture_stop_loss(np.array([t]), sigmas, weights)[0] == pytest.approx(ref, rel=1e-9)


def test_interior_block_dominates_gs_block_and_the_mixture_alone_is_the_product():
    n, bands, sigma = 600, 8, 1.5
    pair = cached_pair(toeplitz_strategy(np.array(binomial_c_col(bands)), n), n, sigma)
    blocks, mixtures = block_mixtures(pair.gram, sigma)
    size, h = n // blocks, natural_half_width(pair.gram.g0)
    assert size >= h + 1
    split = interior_block(pair.gram, sigma, blocks)
    lo = (blocks // 2) * size
    # its diagonal is the product's per-site diagonal of the same split (step 1'), less the rounding allowances
    band = np.array([np.concatenate([np.diagonal(pair.gram.g0, -d), np.zeros(d)]) for d in range(h + 1)]) / sigma**2
    product_diag = svd_split_diagonal(band, blocks)[lo:lo + size]
    assert np.all(np.diag(split) <= product_diag)
    assert np.allclose(np.diag(split), product_diag, rtol=1e-9, atol=0.0)
    # what it adds to G's block is PSD with trace the two edges' nuclear norms (U Σ Uᵀ and V Σ Vᵀ, trace Σ σ_i each)
    g = pair.gram.g0 / sigma**2
    added = split - g[lo:lo + size, lo:lo + size]
    assert np.min(np.linalg.eigvalsh(added)) >= -1e-12
    nuclear = sum(np.linalg.norm(g[e - h:e, e:e + h], "nuc") for e in (lo, lo + size))
    assert np.trace(added) == pytest.approx(nuclear, rel=1e-12)
    _, sig, wts = next(mix for mix in mixtures if mix[0] == "svd")
    sigmas, weights = np.array(sig), np.array(wts)
    grid = np.exp(np.linspace(math.log(0.01), math.log(1e4), 1500))
    law = envelope_law(grid, mixture_stop_loss(grid, sigmas, weights))
    product = [mixture_bracket_for(sig, wts, blocks).epsilon_side(d, "both", "upper") for d in (1e-6, 1e-8)]
    got = epsilons_of(law, blocks, float(sigmas.min()))[:2]
    assert got == pytest.approx(product, abs=0.01)
