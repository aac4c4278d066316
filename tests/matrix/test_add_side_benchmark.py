"""benchmarks/matrix_add_side.py: its exact-line ADD value and the ingredients of its concentration bound, against
the test's own naive sampler (the figures it prints rest on these)."""

from __future__ import annotations

import math

import numpy as np
from scipy.linalg import cholesky
from scipy.special import comb, logsumexp

from benchmarks.matrix_add_side import concentration_tail, line_value


def banded_gram(b: int, bands: int, sigma: float) -> np.ndarray:
    """G = CᵀC/σ² for the b x b lower-triangular Toeplitz C with c_i = binom(2i, i)/4^i (this test's own)."""
    c = np.array([comb(2 * i, i) / 4**i for i in range(bands)])
    big_c = np.zeros((b, b))
    for i, ci in enumerate(c):
        big_c += ci * np.eye(b, k=-i)
    return big_c.T @ big_c / sigma**2


def test_line_value_is_unbiased_for_the_add_delta_and_the_bound_has_the_sampled_moments():
    b, eps, y1 = 40, 0.1, 1.0
    g = banded_gram(b, 8, 1.0)
    diag = np.diag(g)
    chol = cholesky(g, lower=True)
    rng = np.random.default_rng(7)
    draws = (chol @ rng.standard_normal((b, 200_000))).T
    naive = np.maximum(1 - math.exp(eps) * np.exp(logsumexp(draws - diag / 2, axis=1) - math.log(b)), 0.0)
    ones = np.ones(b)
    g_inv_one = np.linalg.solve(g, ones)
    var_u = 1.0 / float(ones @ g_inv_one)
    perp = draws - (draws @ (g_inv_one * var_u))[:, None]
    log_s_perp = logsumexp(perp - diag / 2, axis=1) - math.log(b)
    line = line_value(log_s_perp, eps, var_u)
    assert naive.mean() > 0.01  # the check bites: δ_add is well resolved here
    se = math.hypot(naive.std(), line.std()) / math.sqrt(len(naive))
    assert abs(line.mean() - naive.mean()) < 4.5 * se
    assert line.std() < naive.std()  # the exact line integral removes variance

    # Route A's ingredients: F̃ = ||h̃(y)|| from this test's own capped h, y the centred residual.
    y = perp - diag / 2
    y -= y.mean(axis=1, keepdims=True)
    top = math.sqrt(2 * (math.expm1(y1) - y1))
    slope = math.expm1(y1) / top
    h = np.sign(y) * np.sqrt(2 * np.maximum(np.expm1(y) - y, 0.0))
    f_tilde = np.sqrt((np.where(y <= y1, h, top + slope * (y - y1)) ** 2).sum(axis=1))
    _, kappa, lip, mean_f, second = concentration_tail(g, diag, var_u, np.array([-1.0]), y1)
    assert kappa == slope
    sampled = (f_tilde**2).mean()
    assert abs(second - sampled) < 4.5 * (f_tilde**2).std() / math.sqrt(len(f_tilde))  # E F̃² by quadrature
    assert f_tilde.std() <= lip  # Poincaré: Var F̃ <= L²
    assert mean_f <= f_tilde.mean()  # the lower bound on E F̃
    assert f_tilde.mean() - mean_f < 0.25 * mean_f  # and not a vacuous one (sqrt(E F̃² - L²): 15% below here)
    gap = log_s_perp - (perp - diag / 2).mean(axis=1)  # D = log mean e^y: F² = 2b (e^D - 1) >= F̃²
    assert np.all(f_tilde**2 <= 2 * b * np.expm1(gap) * (1 + 1e-12))
