"""A matrix mechanism after k < b iterations (issue 33): the k-bin pair subsampled at q = k/b, and answers
that never fall as the run goes on."""

from __future__ import annotations

import math

import pytest

import epscert
from epscert.inverse.best import Certificate
from epscert.matrix import prefix
from epscert.strategies import toeplitz_strategy


def test_one_iteration_is_the_poisson_subsampled_gaussian_of_dp_accounting():
    """k = 1 of b = 4 with c_0 = 1: the first output is x_0 + σz with x_0 = 1 w.p. 1/4, the Poisson-subsampled
    Gaussian; dp_accounting's PLD accountant (independent) gives its ε(δ). Ours is an upper bound (the REMOVE
    side is an identity, the ADD side a bound) from the exact b = 1 Gaussian, so it lies just above."""
    dp_accounting = pytest.importorskip("dp_accounting")
    from dp_accounting.pld import pld_privacy_accountant

    ref = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-4)
    ref.compose(dp_accounting.PoissonSampledDpEvent(0.25, dp_accounting.GaussianDpEvent(2.0)))
    expected = ref.get_epsilon(1e-3)
    acc = epscert.Accountant(noise_multiplier=2.0, strategy=toeplitz_strategy([1.0, 0.5], 40), cycle_length=4)
    got = acc.get_epsilon(1e-3, steps_done=1)
    assert expected * (1 - 2e-3) <= got <= expected * 1.01  # dp_accounting's own discretisation is ~1e-4


def test_the_issue_sequence_never_falls_and_k_below_b_is_far_below_the_whole_run():
    """toeplitz([1, .5], 40), b = 4, σ = 2, δ = 1e-3: the landed main answered 5.152 for k = 1, 2, 3 (the whole
    run) and 0.938 at k = 4."""
    acc = epscert.Accountant(noise_multiplier=2.0, strategy=toeplitz_strategy([1.0, 0.5], 40), cycle_length=4,
                             samples=5000)
    seq = [acc.get_epsilon(1e-3, steps_done=k) for k in (1, 2, 3, 4, 5)]
    assert seq == sorted(seq)
    whole = acc.get_epsilon(1e-3)
    assert seq[-1] <= whole and seq[2] < 0.5 * whole


def test_amplification_maps_are_on_the_safe_side():
    from decimal import Decimal, getcontext

    getcontext().prec = 60
    for q in (1e-3, 0.25, 0.5, 1.0):
        for eps in (1e-6, 0.1, 1.0, 10.0, 800.0):
            up = prefix.amplified_epsilon(eps, q)
            e = Decimal(eps)  # log(1 + q(e^ε - 1)) in 60 digits, from the same binary inputs
            exact = (Decimal(1) + Decimal(q) * (e.exp() - 1)).ln()
            assert Decimal(up) >= exact and Decimal(up) <= exact * (1 + Decimal(1e-14))
            inner = prefix.inner_epsilon(up, q)
            assert inner <= eps * (1 + 1e-12)  # the inverse map, rounded down
        assert prefix.amplified_delta(0.3, q) >= q * 0.3
    # ε - log q past exp's range (review finding: 1.8e308 came back for q = 2e-7, ε = 695.6)
    far = prefix.inner_epsilon(695.6, 2e-7)
    assert math.isfinite(far) and far == pytest.approx(695.6 - math.log(2e-7), rel=1e-12)
    assert prefix.inner_delta(0.5, 0.25) is None and prefix.inner_delta(0.01, 0.25) == pytest.approx(0.04)
    with pytest.raises(ValueError, match="q"):
        prefix.amplified_epsilon(1.0, 0.0)


def test_the_subsampling_identity_against_a_direct_computation():
    """REMOVE side of P_q = (1-q)Q + qP' for one Gaussian P' = N(μ, 1), Q = N(0, 1): H_α(P_q||Q) computed by
    quadrature equals q·H_α'(P'||Q) with α' = (α - 1 + q)/q (the identity the module rests on)."""
    from scipy import integrate, stats

    mu, q = 1.3, 0.3
    for alpha in (1.0, 1.5, 4.0):
        def hs(p_pdf, a):
            f = lambda y: max(p_pdf(y) - a * stats.norm.pdf(y), 0.0)  # noqa: E731
            return integrate.quad(f, -20, 20, points=[0.0, mu], limit=200)[0]
        mixture = hs(lambda y: (1 - q) * stats.norm.pdf(y) + q * stats.norm.pdf(y, mu), alpha)
        single = hs(lambda y: stats.norm.pdf(y, mu), (alpha - 1 + q) / q)
        assert mixture == pytest.approx(q * single, rel=1e-7, abs=1e-12)


def test_an_estimate_outside_its_interval_is_dropped():
    """Issue 33: '7.80 <= ε <= 11.02, estimate 12' (a Monte Carlo point of a candidate that certified nothing)."""
    cert = Certificate("epsilon", 1e-3, "x", 11.02, "tilted", None, None, 0.01, (), (), lower=7.8, estimate=12.0)
    assert cert.estimate is None
    inside = Certificate("epsilon", 1e-3, "x", 11.02, "tilted", None, None, 0.01, (), (), lower=7.8, estimate=10.0)
    assert inside.interval == (7.8, 10.0, 11.02)


@pytest.mark.parametrize("c_col, b, sigma", [([1.0, 0.5, 0.25], 2, 2.0), ([1.0, 0.5], 4, 1.0)])
def test_matrix_intervals_hold_their_estimate(c_col, b, sigma):
    acc = epscert.Accountant(noise_multiplier=sigma, strategy=toeplitz_strategy(c_col, 12), cycle_length=b,
                             samples=2000)
    lower, estimate, upper = acc.epsilon_interval(1e-3)
    assert lower <= upper
    assert estimate is None or lower <= estimate <= upper
