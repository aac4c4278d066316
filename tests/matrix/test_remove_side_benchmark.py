"""benchmarks/matrix_remove_side.py: its line-conditioned REMOVE value (a closed form) against the test's own
quadrature, and both value kinds it prints against the test's own naive sampler of δ_remove."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.integrate import quad
from scipy.linalg import cholesky
from scipy.special import comb, logsumexp

from benchmarks.matrix_remove_side import draw_values, line_log_k
from epscert.config.samplers import cached_pair
from epscert.matrix.cluster_tilt import tilt_for
from epscert.matrix.strategies import toeplitz_strategy


@pytest.mark.parametrize("mu, theta, var", [(-0.3, 11, 0.0069), (0.05, 5, 0.01), (0.4, 3, 0.2), (-1.0, 2, 0.5)])
def test_line_value_is_the_gaussian_integral_of_the_tilted_hinge(mu, theta, var):
    s = math.sqrt(var)

    def integrand(y):
        return math.exp(-0.5 * ((y - mu) / s) ** 2) / (s * math.sqrt(2 * math.pi)) * (
            math.exp((1 - theta) * y) - math.exp(-theta * y))

    ref, err = quad(integrand, 0.0, mu + 40 * s if mu + 40 * s > 0 else 1.0, points=[max(mu, 0.0)], limit=400,
                    epsabs=0.0, epsrel=1e-11)
    got = math.exp(float(line_log_k(np.array([mu + 0.7]), 0.7, theta, var)[0]))
    assert ref > 0 and got == pytest.approx(ref, rel=1e-7)


def test_plain_and_line_values_estimate_the_naive_remove_delta():
    n, bands, sigma, eps = 40, 8, 1.0, 0.6
    c = np.array([comb(2 * i, i) / 4**i for i in range(bands)])
    pair = cached_pair(toeplitz_strategy(c, n), n, sigma)
    # the test's own G and naive sampler: δ_remove = E_Q[(S - e^ε)_+], S = mean e^{g - v/2}, g ~ N(0, G)
    big_c = sum(ci * np.eye(n, k=-i) for i, ci in enumerate(c))
    g = big_c.T @ big_c / sigma**2
    assert np.allclose(g, pair.g)
    rng = np.random.default_rng(3)
    draws = (cholesky(g, lower=True) @ rng.standard_normal((n, 400_000))).T
    s = np.exp(logsumexp(draws - np.diag(g) / 2, axis=1) - math.log(n))
    naive = np.maximum(s - math.exp(eps), 0.0)
    ones = np.ones(n)
    u = np.linalg.solve(pair.g, ones)
    var_tau = 1.0 / float(u @ pair.g @ u)
    plain, line, _ = draw_values(pair, tilt_for(pair, 3), np.array([eps]), 60_000, np.random.default_rng(5),
                                 u * var_tau, var_tau)
    assert naive.mean() > 1e-3  # resolved by the naive sampler: the check bites
    for values in (plain[0], line[0]):
        se = math.hypot(naive.std() / math.sqrt(naive.size), values.std() / math.sqrt(values.size))
        assert abs(values.mean() - naive.mean()) < 4.5 * se
    assert line[0].var() < plain[0].var()  # the conditioning reduces the variance (it is a conditional mean)
