"""``balls_and_bins_persistent``: one bin assignment for all E epochs is one epoch at σ/√E (SPEC §1)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import logsumexp

import epscert

SIGMA, T, E, EPS = 1.5, 5, 4, 0.5


def test_persistent_equals_one_epoch_at_reduced_sigma():
    kw = dict(steps=T, epsilons=(EPS, 1.0), method="naive", samples=20_000, seed=3)
    a = epscert.certify(sampler="balls_and_bins_persistent", sigma=SIGMA, epochs=E, **kw).to_pylist()
    b = epscert.certify(sampler="balls_and_bins", sigma=SIGMA / math.sqrt(E), epochs=1, **kw).to_pylist()
    assert [r["sampler"] for r in a] == ["balls_and_bins_persistent"] * len(a)
    assert [(r["delta"], r["delta_upper"]) for r in a] == [(r["delta"], r["delta_upper"]) for r in b]


def test_persistent_accountant_equals_one_epoch_accountant():
    kw = dict(steps=T, samples=20_000, seed=1)
    a = epscert.Accountant(noise_multiplier=SIGMA, epochs=E, sampler="balls_and_bins_persistent", **kw)
    b = epscert.Accountant(noise_multiplier=SIGMA / math.sqrt(E), epochs=1, sampler="balls_and_bins", **kw)
    assert a.method == b.method  # the reduction is one epoch: auto picks importance sampling
    assert a.get_epsilon(1e-3) == b.get_epsilon(1e-3)


def test_naive_monte_carlo_on_the_E_epoch_persistent_pair_agrees():
    """An independent Monte Carlo on the E-epoch pair itself, not the reduction.

    P = (1/T) Σ_t N(e_t ⊗ 1_E, σ² I_{T×E}) (the record sits in bin t of every epoch), Q = N(0, σ² I);
    L(x) = logsumexp_t(Σ_e x_{t,e}/σ²) - log T - E/(2σ²). REMOVE samples x = e_1 ⊗ 1_E + σz.
    Agreement within 4 combined standard errors: false-failure probability about 6e-5.
    """
    rng = np.random.Generator(np.random.PCG64(20240611))
    m = 100_000
    x = SIGMA * rng.standard_normal((m, T, E))
    x[:, 0, :] += 1.0
    loss = logsumexp(x.sum(axis=2) / SIGMA**2, axis=1) - math.log(T) - E / (2 * SIGMA**2)
    y = -np.expm1(np.minimum(EPS - loss, 0.0))
    mine, mine_se = y.mean(), y.std(ddof=1) / math.sqrt(m)
    row = [r for r in epscert.certify(sampler="balls_and_bins_persistent", sigma=SIGMA, steps=T, epochs=E,
                                      epsilons=(EPS,), method="naive", samples=100_000, seed=7,
                                      direction="remove").to_pylist() if r["direction"] == "remove"][0]
    theirs, theirs_se = row["delta"], row["std_error"]
    assert mine > 0.01  # a non-trivial point of the curve
    assert abs(mine - theirs) <= 4 * math.hypot(mine_se, theirs_se)


def test_persistent_differs_from_fresh_balls_and_bins():
    kw = dict(steps=T, epochs=E, epsilons=(EPS,), method="naive", samples=20_000, seed=3, direction="remove")
    p = epscert.certify(sampler="balls_and_bins_persistent", sigma=SIGMA, **kw).to_pylist()[0]["delta"]
    f = epscert.certify(sampler="balls_and_bins", sigma=SIGMA, **kw).to_pylist()[0]["delta"]
    assert p > f  # the persistent run leaks more than fresh assignments (here by far more than 4 SE)


@pytest.mark.parametrize("method", ["cube_lower_bound", "auto"])
def test_persistent_analytic_and_auto_methods_reduce(method):
    kw = dict(steps=T, epsilons=(EPS,), method=method, samples=5_000, seed=2, direction="remove")
    a = epscert.certify(sampler="balls_and_bins_persistent", sigma=SIGMA, epochs=E, **kw).to_pylist()
    b = epscert.certify(sampler="balls_and_bins", sigma=SIGMA / math.sqrt(E), epochs=1, **kw).to_pylist()
    assert [r["delta"] for r in a] == pytest.approx([r["delta"] for r in b], rel=1e-12)
