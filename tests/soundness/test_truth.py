"""Validation of the independent T = 2 truths of ``truth.py`` (no epscert code involved)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.integrate import quad
from scipy.stats import norm

from tests.reference.quadrature import bnb_delta_quadrature, gaussian_delta_closed_form

from .criteria import FALSE_FAILURE, two_sample_z_limit
from .truth import bnb2_delta, gaussian_delta

SIGMAS = (0.4, 0.7, 1.0, 2.0, 5.0)
EPSILONS = (0.0, 0.3, 1.0, 2.5)


@pytest.mark.parametrize("direction", ["remove", "add"])
@pytest.mark.parametrize("sigma", SIGMAS)
def test_one_epoch_matches_reference_quadrature(sigma, direction):
    """E = 1 against tests/reference/quadrature.py (a different change of variables)."""
    for eps in EPSILONS:
        mine, err = bnb2_delta(sigma, 1, eps, direction)
        ref, ref_err = bnb_delta_quadrature(sigma, 2, eps, direction)
        assert err <= 1e-9 and ref_err <= 1e-8
        assert abs(mine - ref) <= 1e-10 + 1e-8 * ref, (sigma, eps, direction, mine, ref)


def _top1_by_quad(sigma: float, eps: float) -> float:
    """δ̃ = E[(1 - e^{ε - ℓ̃})_+], ℓ̃ = log 2 + 1/(2σ²) - M, M = max of two N(0, 1/σ²), by scipy quad."""
    c = math.log(2.0) + 0.5 / sigma**2

    def integrand(m):  # density of the max of two: 2 f(m) F(m)
        return -math.expm1(eps - c + m) * 2.0 * sigma * norm.pdf(m * sigma) * norm.cdf(m * sigma)

    return quad(integrand, -12.0 / sigma, c - eps, epsabs=1e-14, epsrel=1e-12, limit=200)[0]


@pytest.mark.parametrize("sigma", SIGMAS)
def test_top1_one_epoch_matches_direct_integral(sigma):
    for eps in EPSILONS:
        mine, err = bnb2_delta(sigma, 1, eps, "add", kind="top1")
        assert err <= 1e-9
        assert abs(mine - _top1_by_quad(sigma, eps)) <= 1e-10, (sigma, eps)
        # the order-statistic bound is pessimistic
        assert mine >= bnb_delta_quadrature(sigma, 2, eps, "add")[0] - 1e-10


@pytest.mark.parametrize("sigma", SIGMAS)
def test_two_epochs_structure(sigma):
    """Monotone in ε, TV symmetry at ε = 0, below the deterministic (σ/√2) curve, above one epoch."""
    for direction in ("remove", "add"):
        vals = [bnb2_delta(sigma, 2, eps, direction)[0] for eps in EPSILONS]
        assert all(b <= a + 1e-12 for a, b in zip(vals, vals[1:]))
        for eps, v in zip(EPSILONS, vals):
            assert v <= gaussian_delta_closed_form(sigma / math.sqrt(2.0), eps) + 1e-10
            assert v >= bnb2_delta(sigma, 1, eps, direction)[0] - 1e-12
    assert bnb2_delta(sigma, 2, 0.0, "remove")[0] == pytest.approx(bnb2_delta(sigma, 2, 0.0, "add")[0], abs=1e-10)


def test_gaussian_helper_matches_reference():
    for sigma in SIGMAS:
        for eps in EPSILONS + (10.0,):
            assert gaussian_delta(sigma, eps) == pytest.approx(gaussian_delta_closed_form(sigma, eps),
                                                               rel=1e-12, abs=1e-300)


@pytest.mark.parametrize("kind,direction", [("exact", "remove"), ("exact", "add"), ("top1", "add")])
def test_two_epochs_against_plain_monte_carlo(kind, direction):
    """E = 2 against a direct numpy simulation of the pair (fixed seed; false failure <= 1e-4 per ε)."""
    sigma, n = 0.8, 1_000_000
    rng = np.random.default_rng(20240601)
    loss = np.zeros(n)
    for _ in range(2):
        x = sigma * rng.standard_normal((n, 2))
        if direction == "remove":
            x[:, 0] += 1.0
        u = x / sigma**2
        lse = np.logaddexp(u[:, 0], u[:, 1]) if kind == "exact" else u.max(axis=1)
        full = lse - math.log(2.0) - 0.5 / sigma**2
        loss += full if direction == "remove" else -full
    for eps in (0.5, 1.5):
        y = np.maximum(-np.expm1(eps - loss), 0.0)
        value, _ = bnb2_delta(sigma, 2, eps, direction, kind=kind)
        z = (y.mean() - value) / (y.std(ddof=1) / math.sqrt(n))
        assert abs(z) <= two_sample_z_limit(FALSE_FAILURE), (eps, y.mean(), value, z)
