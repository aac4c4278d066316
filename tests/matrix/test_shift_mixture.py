"""The shift mixture (:mod:`epscert.matrix.shift_mixture`): δ_remove's values where the loss tilt reaches no order
above 2, checked piece by piece against values computed without it.

- The exponent of every draw against η^T M^{-1} g - |η|²/2 from a dense solve (P rows and shifted rows).
- The mean against this file's own naive δ_remove (the P-form (1 - e^{ε - L})_+ of g = M z + G e_k, k uniform)
  and against the loss-tilted estimator, within Z_CLT standard errors; every value within the proven range.
- Its lower confidence bound (:func:`epscert.bounds.truncated_lcb.truncated_lcb`) over seeded repetitions.
- When it is used (the rule of :func:`~epscert.matrix.shift_mixture.applies`), the sampler's wiring, the refused JAX
  kernel and the rounding guard.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

import epscert
from epscert.bounds.truncated_lcb import LEVELS, truncated_lcb, truncation_levels
from epscert.config import Direction, Method
from epscert.config.samplers import value_sampler
from epscert.matrix import kernels as mk
from epscert.matrix import shift_mixture as sm
from epscert.matrix.loss_tilt import choose_order
from epscert.matrix.pair import MatrixPair
from epscert.matrix.strategies import toeplitz_strategy
from epscert.matrix.strategies.gram import mode_gram
from epscert.matrix.values import MatrixValueSampler

from benchmarks.matrix_rivals import binomial_c_col

from .helpers import Z_CLT, agree


def pair_of(b: int, sigma: float, bands: int) -> MatrixPair:
    return MatrixPair(mode_gram(toeplitz_strategy(binomial_c_col(bands), b), b), sigma)


def dense_factor(pair) -> np.ndarray:
    """M with g = M z (the sampler's own factor, permutation included), column by column."""
    return pair.noise(np.eye(pair.bins)).T


def draws(mixture, eps, count, seed, block=1000):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count // block):
        g, e = mixture.draw(rng, block)
        out.append(np.exp(mixture.log_values(g, e, eps)))
    return np.concatenate(out, axis=1)


def naive_remove(pair, eps, count, seed):
    """This file's own δ_remove values: (1 - e^{ε - L})_+ with g = M z + G e_k, k uniform (P itself), dense M."""
    rng = np.random.default_rng(seed)
    m = np.linalg.cholesky(pair.g)
    out = []
    for _ in range(count // 2000):
        g = rng.standard_normal((2000, pair.bins)) @ m.T + pair.g[rng.integers(0, pair.bins, 2000)]
        x = g - 0.5 * np.diag(pair.g)
        top = x.max(axis=1)
        loss = top + np.log(np.mean(np.exp(x - top[:, None]), axis=1))
        out.append(np.maximum(0.0, -np.expm1(np.asarray(eps)[:, None] - loss[None, :])))
    return np.concatenate(out, axis=1)


@pytest.mark.parametrize("b", [200, 600])  # a dense factor and a band one (BAND_MIN_BINS = 512)
def test_the_exponent_is_that_of_the_shifted_component_at_the_draw(b):
    pair = pair_of(b, 2.0, 8)
    assert pair.factor.kind == ("dense" if b < 512 else "band")
    mixture = sm.ShiftMixture(pair, 0.15)
    m = dense_factor(pair)
    # η = t M^T 1: Π_η's mean M η = t G 1
    assert np.allclose(mixture.shift, mixture.t * pair.g.sum(axis=1), rtol=1e-12, atol=1e-14)
    g, e = mixture.draw(np.random.default_rng(3), 400)
    w = np.linalg.solve(m, g.T).T  # the z-space point of each draw
    expected = w @ mixture.eta - 0.5 * mixture.eta @ mixture.eta
    assert np.allclose(e, expected, rtol=0, atol=1e-8)
    # the same stream replayed: which rows were P rows and their modes; both kinds were drawn, the P rows' points
    # are z + M^T e_k and the others' z + η
    replay = np.random.default_rng(3)
    z = replay.standard_normal((400, b))
    p_rows = replay.integers(0, sm.DEFENSIVE, size=400) == 0
    modes = replay.integers(0, b, size=400)
    assert 20 < np.count_nonzero(p_rows) < 80
    assert np.allclose(w[p_rows] - z[p_rows], m[modes[p_rows]], rtol=0, atol=1e-8)  # row k of M: M^T e_k
    assert np.allclose(w[~p_rows] - z[~p_rows], mixture.eta, rtol=0, atol=1e-8)


@pytest.mark.parametrize("eps_ref", [0.0, 0.15])
def test_the_likelihood_ratio_has_mean_one(eps_ref):
    """Far below every loss (ε = -40) a value is dP/dπ = e^L/(λ e^L + (1 - λ) dΠ_η/dQ) (to e^-40 relative), whose
    mean under π is exactly 1 for any η: a check of both components' densities (a wrong λ or normaliser moves it by
    far more than Z_CLT standard errors)."""
    pair = pair_of(600, 2.0, 8)
    y = draws(sm.ShiftMixture(pair, eps_ref), [-40.0], 20_000, 11)[0]
    assert abs(y.mean() - 1.0) <= Z_CLT * y.std() / math.sqrt(y.size), (y.mean(), y.std())
    assert y.std() < 5.0  # finite and moderate (at η = 0 it is below 0.1: there a wrong λ shows at once)


@pytest.mark.parametrize("eps_ref", [0.0, 0.075])  # η = 0: π = λ P + (1 - λ) Q, where the P share weighs most
def test_the_mean_is_delta_remove_against_the_naive_values(eps_ref):
    pair = pair_of(200, 3.0, 8)
    eps = [0.05, 0.1]
    mixture = sm.ShiftMixture(pair, eps_ref)
    ys = draws(mixture, eps, 20_000, 1)
    yn = naive_remove(pair, eps, 40_000, 2)
    assert np.all(ys <= mixture.value_range(eps)[:, None])
    for i in range(len(eps)):
        se_s, se_n = ys[i].std() / math.sqrt(ys.shape[1]), yn[i].std() / math.sqrt(yn.shape[1])
        assert agree(ys[i].mean(), se_s, yn[i].mean(), se_n), (eps[i], ys[i].mean(), yn[i].mean())
        if eps_ref:
            assert se_s < se_n  # the point of it: a lower standard error than the naive values from half the draws


def test_the_mean_agrees_with_the_loss_tilt_where_delta_is_small():
    pair = pair_of(600, 2.0, 8)  # band factor; the tilt's tables reach θ = 3 here
    eps = [0.1, 0.15, 0.2]
    ys = draws(sm.ShiftMixture(pair, 0.15), eps, 20_000, 4)
    tilt = MatrixValueSampler(pair, "tilted", min(eps), order=choose_order(pair, eps))
    rng = np.random.default_rng(5)
    yt = np.concatenate([tilt.draw(rng, 1000, Direction.REMOVE, eps) for _ in range(20)], axis=1)
    for i in range(len(eps)):
        assert agree(ys[i].mean(), ys[i].std() / math.sqrt(ys.shape[1]),
                     yt[i].mean(), yt[i].std() / math.sqrt(yt.shape[1])), (eps[i], ys[i].mean(), yt[i].mean())
    assert 1e-5 < ys[-1].mean() < 1e-4  # δ small enough that the naive values would need 10^6 draws


def test_the_truncated_lcb_covers_delta_over_seeds():
    """20 seeds of 2,000 draws: the LCB at β = 0.05 below δ_remove, the reference an independent estimator's (the
    loss tilt's mean from 40,000 draws, its standard error a few percent, far below the LCB's gap). Each repetition
    fails with probability <= 0.05; at most 4 of 20 may (binomial tail 1.6% at 0.05)."""
    pair = pair_of(600, 2.0, 8)
    eps = [0.15]
    mixture = sm.ShiftMixture(pair, 0.15)
    tilt = MatrixValueSampler(pair, "tilted", min(eps), order=choose_order(pair, eps))
    rng = np.random.default_rng(100)
    reference = np.concatenate([tilt.draw(rng, 2000, Direction.REMOVE, eps)[0] for _ in range(20)])
    delta, se = reference.mean(), reference.std() / math.sqrt(reference.size)
    assert se < 0.1 * delta
    taus = truncation_levels(float(mixture.value_range(eps)[0]))
    failures, gaps = 0, []
    for seed in range(20):
        y = draws(mixture, eps, 2000, 200 + seed)[0]
        lcb = truncated_lcb(np.minimum(y[None, :], taus[:, None]).mean(axis=1), float(taus[0]), y.size, 0.05)
        failures += lcb > delta + Z_CLT * se
        gaps.append(lcb / delta)
    assert failures <= 4
    assert np.median(gaps) > 0.5  # and it is not vacuous: the bound sits within a factor 2 of δ


def test_the_rule_leaves_tables_and_jax_alone():
    small = pair_of(200, 2.0, 8)  # the tables reach θ >= 4
    assert not sm.applies(small)
    assert not sm.applies(small, backend="jax")


def test_the_sampler_takes_remove_from_the_mixture_and_keeps_add(monkeypatch):
    acc = epscert.Accountant(noise_multiplier=2.0, strategy=toeplitz_strategy(binomial_c_col(8), 600), cycle_length=600,
                             samples=2000)
    config = dataclasses.replace(acc.config, methods=(Method.TILTED,), epsilons=(0.1, 0.15, 0.2))
    plain = value_sampler(config, Method.TILTED)
    assert plain.shift is None
    monkeypatch.setattr("epscert.config.samplers.shift_applies", lambda pair, backend=None: True)
    sampler = value_sampler(config, Method.TILTED)
    assert isinstance(sampler.shift, sm.ShiftMixture)
    assert sampler.shift.t == pytest.approx(0.15 / sampler.shift.mean_row)  # ε_ref: the grid's median
    assert np.array_equal(sampler.value_range(Direction.REMOVE, config.epsilons),
                          sampler.shift.value_range(config.epsilons))
    assert np.array_equal(sampler.value_slack(Direction.REMOVE, config.epsilons), np.zeros(3))
    assert np.array_equal(sampler.value_range(Direction.ADD, config.epsilons),
                          plain.value_range(Direction.ADD, config.epsilons))
    # the same stream gives the mixture's own draws for REMOVE and the line's for ADD
    rng_a, rng_b = np.random.default_rng(9), np.random.default_rng(9)
    g, e = sampler.shift.draw(rng_b, 64)
    assert np.array_equal(sampler.draw(rng_a, 64, Direction.REMOVE, config.epsilons),
                          np.exp(sampler.shift.log_values(g, e, config.epsilons)))
    rng_a, rng_b = np.random.default_rng(9), np.random.default_rng(9)
    assert np.array_equal(sampler.draw(rng_a, 64, Direction.ADD, config.epsilons),
                          plain.draw(rng_b, 64, Direction.ADD, config.epsilons))
    with pytest.raises(ValueError, match="shift mixture"):
        sampler.log_values(np.random.default_rng(1), np.zeros((2, 600)), 2, Direction.REMOVE, [0.1])
    with pytest.raises(ValueError, match="method='tilted' only"):
        MatrixValueSampler(plain.pair, "conditional", 0.1, shift=sampler.shift)


def test_jax_refuses_the_mixture():
    pytest.importorskip("jax")
    from epscert.matrix import jax_kernels

    pair = pair_of(600, 2.0, 8)
    sampler = MatrixValueSampler(pair, "tilted", 0.1, order=2, shift=sm.ShiftMixture(pair, 0.15))
    with pytest.raises(ValueError, match="shift mixture"):
        jax_kernels.check_supported(sampler, Method.TILTED)


def test_a_draw_whose_exponent_bound_exceeds_the_allowance_raises(monkeypatch):
    pair = pair_of(200, 2.0, 8)
    mixture = sm.ShiftMixture(pair, 0.1)
    mixture.draw(np.random.default_rng(0), 10)  # within the allowance here
    monkeypatch.setattr(sm, "EXPONENT_ALLOWANCE", 1e-18)
    with pytest.raises(FloatingPointError, match="exponent error bound"):
        mixture.draw(np.random.default_rng(0), 10)


def test_the_range_is_one_over_lambda_and_the_values_reach_above_one():
    """value_range is 8 (1 + 4 FLOAT_REL), and the values come near it: at η = 0 on a pair with a large loss (σ = 0.5)
    Y = (1 - e^{ε - L})/(λ + (1 - λ) e^{-L}) -> 8 as L grows (a range of 1 would be unsound)."""
    pair = pair_of(50, 0.5, 4)
    mixture = sm.ShiftMixture(pair, 0.0)
    assert np.array_equal(mixture.value_range([0.1, 1.0]), np.full(2, 8.0 * (1.0 + 4 * mk.FLOAT_REL)))
    y = draws(mixture, [0.1], 4000, 6)[0]
    assert 4.0 < y.max() <= 8.0


def test_the_dot_product_is_summed_within_its_bound_on_every_platform():
    """Rows whose first and last terms are ±9·10^17 and the rest about 30 (positive), and rows of normals: the two-level
    double sum (:func:`~epscert.matrix.shift_mixture.blocked_dot`) against the exact rational sum, within the bound
    :meth:`ShiftMixture.dots` returns, and that bound below 10^-12 Σ|η_k z_k|. On the first rows the sum does round
    (the outer blocks' partial sums near 9·10^17, whose ulp is 128, cannot carry the middle terms' fractions); no long
    double is involved, so the same holds where long double is double (Windows, arm64 macOS)."""
    from fractions import Fraction

    pair = pair_of(1000, 2.0, 8)
    mixture = sm.ShiftMixture(pair, 0.15)
    rng = np.random.default_rng(8)
    z = 30.0 * (1.0 + 0.1 * rng.random((4, pair.bins))) / mixture.eta
    z[:, 0] = 9e17 / mixture.eta[0]
    z[:, -1] = -9e17 / mixture.eta[-1]
    z = np.concatenate([z, rng.standard_normal((4, pair.bins))])
    dots, bound = mixture.dots(z)
    for i in range(z.shape[0]):
        exact = sum(Fraction(float(a)) * Fraction(float(c)) for a, c in zip(mixture.eta, z[i]))
        error = abs(Fraction(float(dots[i])) - exact)
        assert error <= Fraction(float(bound[i]))
        size = sum(abs(Fraction(float(a)) * Fraction(float(c))) for a, c in zip(mixture.eta, z[i]))
        assert Fraction(float(bound[i])) < Fraction(1, 10**12) * size
        if i < 4:
            assert error > 0  # the data rounds


def test_the_two_level_bound_is_a_few_hundred_units_at_ten_thousand_bins():
    """Γ = γ_64 + γ_156 (1 + γ_64) at b = 10^4 (157 blocks), raised by ROUND_UP: about 221 u, against the b u = 10^4 u
    of one sequential double sum (which put the n = b = 10^4 draw over the allowance where long double is double)."""
    u = 2.0**-53
    gamma = sm.blocked_gamma(10_000)
    assert gamma == pytest.approx(sm.ROUND_UP * (64 * u + 156 * u), rel=1e-9)
    assert sm.blocked_gamma(64) == pytest.approx(sm.ROUND_UP * 64 * u, rel=1e-12)  # one block: no second level
    padded = sm.blocked_dot(np.arange(1.0, 131.0)[None, :], np.ones(130))  # 130 terms: three blocks, zeros padding
    assert padded[0] == 130 * 131 / 2


def test_bad_reference_is_refused():
    with pytest.raises(ValueError, match="eps_ref"):
        sm.ShiftMixture(pair_of(50, 2.0, 4), math.inf)


def test_levels_and_log_values_at_the_edges():
    pair = pair_of(200, 2.0, 8)
    mixture = sm.ShiftMixture(pair, 0.1)
    g, e = mixture.draw(np.random.default_rng(2), 50)
    loss = mk.log_mean_exp(np, g - pair.half_diag)
    logs = mixture.log_values(g, e, [-1.0, float(np.max(loss)) + 1.0])
    assert np.all(np.isfinite(logs[0])) and np.all(logs[1] == -np.inf)  # L > -1 always; nothing above max L
    assert LEVELS == truncation_levels(8.0).size


def test_the_rule_takes_the_mixture_where_the_tilt_reaches_order_two_and_the_block_law_applies():
    """b = 3000, 64 bands (natural blocks of 65 bins: the block law applies; the tables reach θ = 2 and the cluster
    proposal does not form) takes it; b = 2000 with 16 bands (cluster orders up to 11) does not, nor does σ = 0.3
    (the block law's tail test fails there, so REMOVE's upper bound would be the range-8 values')."""
    assert sm.applies(pair_of(3000, 2.0, 64))
    assert not sm.applies(pair_of(3000, 2.0, 64), backend="jax")
    assert not sm.applies(pair_of(2000, 2.0, 16))
    assert not sm.applies(pair_of(3000, 0.3, 64))  # θ <= 2 and no clusters, but the block law does not apply


@pytest.mark.slow
def test_the_rows_where_the_mixture_applies():
    """b = 3000, 64 bands, σ = 2 (the rule takes the mixture): the certifying rows' REMOVE values are the mixture's
    (range 8, no slack), REMOVE's UCB takes the block law (its bound name), and at every ε the REMOVE LCB is below
    the UCB and below the mean, which sits within Z_CLT standard errors of this file's own shift-free
    estimate (the loss tilt at θ = 2, an independent stream and estimator) where that one resolves δ."""
    from epscert.results.tables import certify_config

    acc = epscert.Accountant(noise_multiplier=2.0, strategy=toeplitz_strategy(binomial_c_col(64), 3000), cycle_length=3000,
                             samples=20_000)
    eps = (0.05, 0.1, 0.15)
    config = dataclasses.replace(acc.config, methods=(Method.TILTED,), epsilons=eps)
    sampler = value_sampler(config, Method.TILTED)
    assert isinstance(sampler.shift, sm.ShiftMixture)
    rows = [r for r in certify_config(config).to_pylist() if r["direction"] == "remove"]
    assert len(rows) == len(eps)
    tilt = MatrixValueSampler(sampler.pair, "tilted", min(eps), order=2)
    rng = np.random.default_rng(77)
    yt = np.concatenate([tilt.draw(rng, 1000, Direction.REMOVE, eps) for _ in range(20)], axis=1)
    compared = 0
    for r, y in zip(rows, yt):
        assert "+block_law" in r["bound"]
        assert r["delta_lower"] <= r["delta"] and r["delta_lower"] <= r["delta_upper"]
        se_t = y.std() / math.sqrt(y.size)
        if se_t < 0.2 * y.mean():
            assert agree(r["delta"], r["std_error"], y.mean(), se_t), (r["epsilon"], r["delta"], y.mean())
            compared += 1
    assert compared >= 1
