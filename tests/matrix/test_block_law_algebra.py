"""epscert/matrix/block_law.py, its deterministic parts: the split and the dominating covariance by eigenvalues of
dense matrices built here, the raised covariance against extended precision, the exact moments against brute-force
sums over all tuples and against draws, the certified top eigenvalue against exact spectra, the law's block count
and the far tail's integral against quadrature."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import integrate, linalg

from epscert.matrix import block_draws, block_law

from tests.matrix.block_law_helpers import one_participation


def random_band(b: int, h: int, seed: int) -> np.ndarray:
    """The band (band[d, k] = G_{k+d, k}) of G = L Lᵀ with L banded lower triangular (h sub-diagonals), entries >= 0."""
    rng = np.random.default_rng(seed)
    lower = np.zeros((b, b))
    for d in range(h + 1):
        lower[np.arange(d, b), np.arange(b - d)] = rng.uniform(0.2, 1.0, b - d) / (1 + d)
    g = lower @ lower.T
    return np.array([np.concatenate([np.diagonal(g, -d), np.zeros(d)]) for d in range(h + 1)]), g


@pytest.mark.parametrize("b, h, blocks, seed", [(60, 5, 6, 0), (96, 11, 8, 1), (40, 9, 4, 2), (48, 11, 2, 3)])
def test_split_dominates_g_and_every_block_is_below_the_covariance_drawn(b, h, blocks, seed):
    band, g = random_band(b, h, seed)
    parts, shift = block_law.split_blocks(band, blocks)
    size = b // blocks
    dense = np.zeros((b, b))
    for i, part in enumerate(parts):
        dense[i * size:(i + 1) * size, i * size:(i + 1) * size] = part
    assert np.min(np.linalg.eigvalsh(dense + shift * np.eye(b) - g)) >= 0.0
    # without the singular-vector additions the blocks alone do not dominate G (the test can fail)
    plain = np.zeros((b, b))
    for i in range(blocks):
        sl = slice(i * size, (i + 1) * size)
        plain[sl, sl] = g[sl, sl]
    assert np.min(np.linalg.eigvalsh(plain + shift * np.eye(b) - g)) < 0.0
    cov = block_law.dominating_covariance(parts, shift)
    for part in parts:
        assert np.min(np.linalg.eigvalsh(cov - part - shift * np.eye(size))) >= 0.0
    factor = block_law.dominating_factor(cov)
    assert np.min(np.linalg.eigvalsh(factor @ factor.T - cov)) >= 0.0


def test_raised_covariance_is_above_the_exact_product():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((40, 40))
    factor = np.linalg.cholesky(x @ x.T / 40 + np.eye(40))
    exact = factor.astype(np.longdouble) @ factor.T.astype(np.longdouble)
    raised = block_law.raised_covariance(factor)
    assert np.all(raised.astype(np.longdouble) >= exact)
    assert np.max(np.abs(raised - exact.astype(np.float64))) < 1e-12


@pytest.mark.parametrize("seed", [0, 1])
def test_moments_against_brute_force_over_all_tuples(seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((5, 5))
    cov = x @ x.T / 8.0
    moments = block_law.block_moments(cov)
    e = np.exp(cov)
    for p in block_law.MOMENTS:
        total = 0.0
        for tup in itertools.product(range(5), repeat=p):
            total += math.prod(e[tup[i], tup[j]] for i in range(p) for j in range(i + 1, p))
        exact = total / 5**p
        assert exact <= moments[p] <= exact * (1.0 + 2 * block_law.MOMENT_REL)


def test_moments_against_the_draws():
    """E[S^p] for p = 2, 3 within CLT limits of the sample moments of the drawn law (same covariance)."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((12, 12))
    cov = x @ x.T / 40.0
    factor = np.linalg.cholesky(cov)
    moments = block_law.block_moments(factor @ factor.T)
    means, rel = block_draws.draw_means(factor, 400_000, seed=3)
    assert rel < 1e-12
    assert abs(means.mean() - 1.0) < 5 * means.std() / math.sqrt(means.size)
    for p in (2, 3):
        vals = means**p
        assert abs(vals.mean() - moments[p]) < 5 * vals.std() / math.sqrt(vals.size)


@pytest.mark.parametrize("b", [96, 128, 360, 1000, 2310])
def test_law_block_count_divides_b_and_keeps_blocks_at_least_h_plus_one(b):
    """:func:`law_block_count` for every h with a natural split (block_count): J >= 2 divides b, and the law's blocks
    are at least the natural ones (so >= h + 1) and at most LAW_MAX_SIZE unless the natural ones are larger."""
    from epscert.matrix.block_bound import block_count

    for h in range(1, b // 2):
        natural = block_count(b, h)
        if natural < 2:
            continue
        blocks = block_law.law_block_count(b, natural)
        assert blocks >= 2 and b % blocks == 0
        assert b // blocks >= b // natural >= h + 1
        assert b // blocks <= max(block_law.LAW_MAX_SIZE, b // natural)
    assert block_law.law_block_count(128, 2) == 2  # b/4 below the natural block: nothing larger is taken


@pytest.mark.parametrize("size, a, b", [(64, 3.0, 1.0), (32, 0.5, 2.0), (96, 1e-3, 0.0)])
def test_certified_top_against_an_exact_spectrum(size, a, b):
    """D = a 11ᵀ/m - b I (m a power of two or a·/m exact enough: its entries are formed here) has λ_max = a - b
    exactly; the certified value lies above it and within 10^-12 of the scale."""
    diff = np.full((size, size), a / size) - b * np.eye(size)
    top = block_law.certified_top(diff)
    assert top >= a - b
    assert top <= a - b + 1e-12 * (abs(a) + abs(b))


def hadamard_spectrum(size: int, values: np.ndarray) -> np.ndarray:
    """H diag(values) Hᵀ / m with H the Sylvester Hadamard matrix (H Hᵀ = m I): for integer values and m a power of
    two every entry is a small integer sum divided by m, exact in floating point, and the spectrum is ``values``."""
    h = linalg.hadamard(size).astype(float)
    return (h * values) @ h.T / size


@pytest.mark.parametrize("scale", [2.0**-1040, 2.0**-600, 1.0, 2.0**600])
def test_certified_top_against_hadamard_spectra(scale):
    """Exact spectra at every scale, subnormal entries included (there the scaled copy is exact as well, the
    integers being small): the certified value lies above the exact top and within 10^-12 of the scale."""
    rng = np.random.default_rng(4)
    for size in (16, 64):
        values = rng.integers(-20, 21, size).astype(float)
        diff = hadamard_spectrum(size, values) * scale
        assert np.all(diff == hadamard_spectrum(size, values * scale))  # the scaling is exact
        exact = float(values.max()) * scale
        top = block_law.certified_top(diff)
        assert exact <= top <= exact + 1e-12 * 20 * size * scale + 2.0**-1070
    assert block_law.certified_top(np.zeros((8, 8))) == 0.0
    with pytest.raises(ValueError, match="finite"):
        block_law.certified_top(np.full((4, 4), np.nan))


def test_certified_top_when_the_solver_starts_too_low(monkeypatch):
    """The a posteriori check, not the solver, makes the bound: with the eigenvalues reported 10 scales too low the
    Cholesky factorisation fails and t is raised until it succeeds, and the result still lies above the exact top
    (and far above where the solver pointed)."""
    values = np.arange(-16.0, 16.0)
    diff = hadamard_spectrum(32, values)
    true_eigvalsh = np.linalg.eigvalsh
    monkeypatch.setattr(np.linalg, "eigvalsh", lambda a: true_eigvalsh(a) - 10.0 * float(np.abs(a).sum(axis=1).max()))
    top = block_law.certified_top(diff)
    assert top >= 15.0


def test_tail_integral_against_quadrature():
    """∫_c^∞ min(level, M(s)) ds by adaptive quadrature: the bound lies above it and within 3 % (the best single
    Markov order against the minimum over orders), for a level at M(c) and far below it."""
    bound = block_law.BlockLawBound(one_participation(128, 32, 1.0), 1000, 0, 0.01)
    c = float(block_law.survival_grid()[-1])
    for level in (bound.tail, 1e-12, 1e-14, 1e-16):
        def integrand(s):
            return min(level, float(block_law.markov(np.array([s]), bound.moments)[0]))
        quad = (integrate.quad(integrand, c, 1e6, limit=500, points=[1.0001 * c, 2 * c, 10 * c, 1e5])[0]
                + integrate.quad(integrand, 1e6, np.inf, limit=500)[0])
        value = block_law.tail_integral(c, level, bound.moments)
        assert quad <= value <= 1.03 * quad
