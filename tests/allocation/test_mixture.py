"""Balls-and-Bins with a mixture of lognormal factors (epscert/allocation/mixture.py), against independent values:
the Gaussian hockey-stick closed form at T = 1, this file's own convolution of the mixture's law at T = 8 and 32,
and the plain brackets of its extreme components."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.signal import fftconvolve
from scipy.stats import norm

from epscert.allocation.bracket import AllocationBracket
from epscert.allocation.mixture import MixtureBracket
from epscert.allocation.tails import base_laws, log_cap, mixture_base_laws

SIGMAS = (0.8, 1.1, 1.6)
WEIGHTS = (0.25, 0.35, 0.4)


def gaussian_hockey(sigma: float, eps: np.ndarray) -> np.ndarray:
    """δ(ε) of the Gaussian mechanism with sensitivity 1 and noise σ (either direction; the closed form)."""
    return norm.cdf(-eps * sigma + 0.5 / sigma) - np.exp(eps) * norm.cdf(-eps * sigma - 0.5 / sigma)


def convolved_remove(sigmas, weights, steps: int, eps: np.ndarray, dx: float = 2e-3) -> np.ndarray:
    """E[(S - e^ε)_+] for S the mean of ``steps`` i.i.d. mixture factors: the factor's law on a grid of step dx
    (each cell's mass split to its ends keeping its mean, from exact lognormal integrals), the sum by FFT
    convolution restricted to [0, T·e^ε] (nothing above it reaches the put side), and
    E[(S - K)_+] = 1 - K + E[(K - S)_+] (E S = 1)."""
    top = steps * math.exp(float(np.max(eps))) * 1.01
    edges = np.arange(0.0, top + dx, dx)
    law = np.zeros(edges.size)
    with np.errstate(divide="ignore"):
        logs = np.log(edges)
    for sigma, weight in zip(sigmas, weights):
        cdf = norm.cdf(sigma * logs + 0.5 / sigma)  # P(W <= x)
        part = norm.cdf(sigma * logs - 0.5 / sigma)  # E[W 1{W <= x}]
        mass, moment = np.diff(cdf), np.diff(part)
        right = (moment - edges[:-1] * mass) / dx
        law[:-1] += weight * (mass - right)
        law[1:] += weight * right
    total, power, k = None, law, steps
    while k:
        if k & 1:
            total = power if total is None else np.maximum(fftconvolve(total, power)[: edges.size], 0.0)
        k >>= 1
        if k:
            power = np.maximum(fftconvolve(power, power)[: edges.size], 0.0)
    values = edges / steps
    out = []
    for e in eps:
        strike = math.exp(e)
        below = values < strike
        out.append(1.0 - strike + float(np.sum(total[below] * (strike - values[below]))))
    return np.array(out)


def test_one_component_of_weight_one_is_the_plain_bracket_exactly():
    for sigma, steps in ((0.9, 125), (1.7, 40)):
        c = log_cap(sigma, steps, 1, 1e-14)
        plain, mixed = base_laws(sigma, c, 500, 1e-18), mixture_base_laws((sigma,), (1.0,), c, 500, 1e-18)
        for x, y in zip(plain[:2], mixed[:2]):
            assert np.array_equal(x.values, y.values) and np.array_equal(x.masses, y.masses)
        assert plain[2:] == mixed[2:]
    # the same base law through the same chains: the same bracket (one small run; the laws are checked above)
    eps = np.array([0.2, 0.6, 1.2])
    for side in ("upper", "lower"):
        assert np.array_equal(MixtureBracket([1.7], [1.0], 40).delta_side(eps, "both", side),
                              AllocationBracket(1.7, 40).delta_side(eps, "both", side))


def test_one_step_is_the_mixture_of_the_gaussian_closed_forms():
    eps = np.array([0.0, 0.5, 1.0, 2.0, 3.0])
    exact = sum(w * gaussian_hockey(s, eps) for s, w in zip(SIGMAS, WEIGHTS))
    bracket = MixtureBracket(SIGMAS, WEIGHTS, 1)
    for direction in ("remove", "add"):
        up = bracket.delta_side(eps, direction, "upper")
        lo = bracket.delta_side(eps, direction, "lower")
        assert np.all(lo <= exact * (1 + 1e-12)) and np.all(exact <= up * (1 + 1e-12)), (direction, lo, exact, up)
        assert np.all(up <= exact * 1.01 + 1e-14)  # and tight


@pytest.mark.parametrize("steps", [8, 32])
def test_several_steps_contain_an_independent_convolution(steps):
    eps = np.array([0.1, 0.3, 0.6, 1.0])
    reference = convolved_remove(SIGMAS, WEIGHTS, steps, eps)
    bracket = MixtureBracket(SIGMAS, WEIGHTS, steps)
    up = bracket.delta_side(eps, "remove", "upper")
    lo = bracket.delta_side(eps, "remove", "lower")
    # the reference is itself a fine spread (a little above the truth): 1e-3 relative covers its grid
    assert np.all(lo <= reference * (1 + 1e-3)), (lo, reference)
    assert np.all(up >= reference * (1 - 1e-3)), (up, reference)
    assert np.all(up <= reference * 1.02)


def test_the_mixture_lies_between_its_extreme_components():
    steps = 50
    eps = np.array([0.1, 0.4, 0.8, 1.5])
    mixed = MixtureBracket(SIGMAS, WEIGHTS, steps)
    heaviest = AllocationBracket(min(SIGMAS), steps)  # every component ⪯_cx the smallest σ's factor
    lightest = AllocationBracket(max(SIGMAS), steps)
    for direction in ("remove", "add"):
        up = mixed.delta_side(eps, direction, "upper")
        assert np.all(up <= heaviest.delta_side(eps, direction, "upper") * (1 + 1e-9))
        assert np.all(up < 0.9 * heaviest.delta_side(eps, direction, "upper"))  # and not by a rounding
        assert np.all(mixed.delta_side(eps, direction, "lower")
                      >= lightest.delta_side(eps, direction, "lower") * (1 - 1e-9))


def test_the_cap_terms_are_the_weighted_components_at_the_heaviest_components_cap():
    bracket = MixtureBracket(SIGMAS, WEIGHTS, 20)
    log_c = bracket.settings["log_cap"]
    assert log_c == log_cap(min(SIGMAS), 20, 1000, 1e-14)
    for key in ("remove", "add"):
        # the tail terms of the mixture, from this file's own normal tails (P(W > c), E[W 1{W > c}] per component)
        tail_p = sum(w * norm.sf(s * log_c + 0.5 / s) for s, w in zip(SIGMAS, WEIGHTS))
        tail_m = sum(w * norm.sf(s * log_c - 0.5 / s) for s, w in zip(SIGMAS, WEIGHTS))
        want = tail_m + 19 * tail_p if key == "remove" else 20 * tail_p
        assert want <= bracket.caps[key] <= want * (1 + 1e-12)
        assert bracket.caps[key] <= 1e-14


@pytest.mark.parametrize("sigmas, weights, match", [
    ((1.0, 2.0), (0.5,), "same length"),
    ((1.0, 2.0), (0.6, 0.6), "sum to 1"),
    ((1.0, 2.0), (1.0, 0.0), "positive"),
    ((), (), "same length"),
    ((1.0, float("nan")), (0.5, 0.5), "sigmas\\[1\\]"),
    ((0.01, 1.0), (0.5, 0.5), "sigma"),
    ((1.0, 2.0), (0.5, 0.5 - 1e-13), "sum to 1"),  # not the rounding of two probabilities
])
def test_bad_mixtures_are_refused_before_any_work(sigmas, weights, match):
    with pytest.raises(ValueError, match=match):
        MixtureBracket(sigmas, weights, 10)


def test_noise_levels_far_apart_get_a_finer_grid_and_stay_exact_at_one_step():
    # the largest σ sets the base cells' width in Z: the grid is refined, not refused (it was an error)
    sigmas, weights = (0.5, 10.0), (0.5, 0.5)
    eps = np.array([0.05, 0.5, 1.0, 2.0])
    exact = sum(w * gaussian_hockey(s, eps) for s, w in zip(sigmas, weights))
    bracket = MixtureBracket(sigmas, weights, 1)
    up, lo = bracket.delta_side(eps, "remove", "upper"), bracket.delta_side(eps, "remove", "lower")
    assert np.all(lo <= exact * (1 + 1e-12)) and np.all(exact <= up * (1 + 1e-12)) and np.all(up <= exact * 1.01)
    with pytest.raises(ValueError, match="too far apart"):
        MixtureBracket((0.05, 1e6), weights, 10)
