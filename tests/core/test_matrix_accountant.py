"""Issue 23 item 3: epscert.Accountant(noise_multiplier=..., strategy=..., cycle_length=...) for a matrix
mechanism, checked against independent values: the Balls-and-Bins accountant (C = c·I), the Gaussian
closed form (b = 1) and a naive Monte Carlo estimate on another stream (banded C)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from scipy import optimize
from scipy.stats import norm

import epscert
from epscert.inverse import epsilon_at_delta as ead
from epscert.inverse.epsilon_at_delta import lower_epsilon, mc_epsilon_rows
from epscert.config import Method
from epscert.matrix.strategies import toeplitz_strategy

C_COL = [1.0, 0.5, 0.25]
#: Two-sided z for comparisons of two Monte Carlo estimates: false failure <= 1e-6 per assertion.
Z = 4.9


def gaussian_delta(eps: float, mu: float) -> float:
    """δ(ε) of the Gaussian mechanism with sensitivity/σ = μ (Balle & Wang 2018), written out here."""
    return norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2)


def test_c_times_identity_is_the_persistent_balls_and_bins_accountant():
    """C = c·I with b | n: the pair is Balls-and-Bins of b steps at σ/(c√k), k = n/b cycles, which the
    DP-SGD accountant certifies as balls_and_bins_persistent at σ/c with k epochs (its own code path)."""
    c, n, b, sigma, delta = 2.0, 24, 6, 1.6, 1e-4
    matrix = epscert.Accountant(noise_multiplier=sigma, strategy=toeplitz_strategy([c], n), cycle_length=b,
                                samples=2000)
    dpsgd = epscert.Accountant(noise_multiplier=sigma / c, steps=b, epochs=n // b,
                               sampler="balls_and_bins_persistent", samples=2000)
    lower, estimate, upper = matrix.epsilon_interval(delta)
    cert = matrix.last_certificate
    assert cert.method == "bracket_upper" and cert.lower_method == "bracket_lower"
    assert upper == pytest.approx(dpsgd.get_epsilon(delta), rel=1e-9)
    assert dpsgd.last_certificate.method == "bracket_upper"
    assert lower <= upper <= lower * 1.01  # the bracket is tight here
    assert estimate is None  # the bracket answered: no Monte Carlo run beside it (issue 25 item 6)
    d_lower, _, d_upper = matrix.delta_interval(1.0)
    assert d_upper == pytest.approx(dpsgd.get_delta(1.0), rel=1e-9) and d_lower <= d_upper


def test_one_bin_is_the_gaussian_mechanism_with_sensitivity_norm_of_c_ones():
    n, sigma, delta = 6, 3.0, 1e-5
    st = toeplitz_strategy(C_COL, n)
    mu = float(np.linalg.norm(st.matrix() @ np.ones(n))) / sigma
    truth = optimize.brentq(lambda e: gaussian_delta(e, mu) - delta, 0.0, 50.0, xtol=1e-12)
    acc = epscert.Accountant(noise_multiplier=sigma, strategy=st, cycle_length=1, samples=2000)
    lower, _, upper = acc.epsilon_interval(delta)
    assert acc.last_certificate.method == "comonotone_upper_bound"  # b = 1: the closed form itself
    assert lower <= truth <= upper and upper == pytest.approx(truth, rel=1e-6)
    d_lower, _, d_upper = acc.delta_interval(1.0)
    assert d_lower <= gaussian_delta(1.0, mu) <= d_upper == pytest.approx(gaussian_delta(1.0, mu), rel=1e-6)


def test_banded_interval_holds_a_naive_estimate_on_another_stream():
    """The certified δ(ε) interval of the loss-tilted estimator (the auto Monte Carlo method) against
    naive Monte Carlo with another seed (b = 4 does not divide n = 10). False failure <= 2e-6."""
    st = toeplitz_strategy(C_COL, 10)
    acc = epscert.Accountant(noise_multiplier=1.5, strategy=st, cycle_length=4, samples=3000, seed=1)
    lower, estimate, upper = acc.delta_interval(1.0)
    assert acc.last_certificate.method == "tilted" and lower <= estimate <= upper
    table = epscert.certify(sampler="balls_and_bins_persistent", sigma=1.5, steps=4, epsilons=[1.0], method="naive",
                            samples=200_000, seed=7, strategy=st)
    naive = next(r for r in table.to_pylist() if r["direction"] == "both")
    assert lower <= naive["delta"] + Z * naive["std_error"] and naive["delta"] - Z * naive["std_error"] <= upper
    bounds = {r["method"]: r for r in acc.last_certificate.rows if r["direction"] == "both"}
    assert bounds["independent_lower_bound"]["delta_lower"] <= lower  # the lower is the best of both
    assert upper <= bounds["comonotone_upper_bound"]["delta_upper"]


def test_epsilon_interval_brackets_the_delta_interval_inverse():
    """ε(δ) two-sided: the δ interval at the certified ε ends straddles δ (same pair, independent runs)."""
    st = toeplitz_strategy(C_COL, 10)
    acc = epscert.Accountant(noise_multiplier=1.5, strategy=st, cycle_length=4, samples=3000, seed=2)
    lower, estimate, upper = acc.epsilon_interval(1e-3)
    assert 0.0 < lower <= estimate <= upper < math.inf
    row = next(r for r in acc.last_certificate.rows if r["method"] == "tilted")
    assert row["epsilon_lower"] == lower and row["epsilon_upper"] == upper and row["bound"] == ead.MATRIX_GRID_BOUND
    assert epscert.Accountant(noise_multiplier=1.5, strategy=st, cycle_length=4, samples=3000,
                              seed=3).get_delta(upper) <= 1e-3 * 1.5  # a fresh run at ε̂ is near δ or below
    check = epscert.Accountant(noise_multiplier=1.5, strategy=st, cycle_length=4, method="comonotone_upper_bound")
    assert check.get_epsilon(1e-3) >= upper


def test_lower_epsilon_on_a_fixed_grid():
    eps = np.array([1.0, 2.0, 3.0, 4.0])
    assert lower_epsilon(eps, np.array([0.5, 0.2, 0.05, 0.01]), 0.1) == 2.0
    assert lower_epsilon(eps, np.array([0.5, 0.05, 0.2, 0.01]), 0.1) == 1.0  # a running minimum: no jump back
    assert lower_epsilon(eps, np.array([0.05, 0.5, 0.2, 0.3]), 0.1) is None
    assert lower_epsilon(eps, np.array([0.5, 0.4, 0.3, 0.2]), 0.1) == 4.0


def test_fine_pass_alone_certifies_when_its_samples_differ(monkeypatch):
    """A coarse pass on another sampling key is a different sample set: its points must not join the
    fine pass's (that would need a union bound). Conditional DP-SGD, whose key holds the grid's smallest ε."""
    config = epscert.CertifyConfig(sampler="balls_and_bins", sigma=0.7, steps=8, epsilons=(1.0,),
                                   methods=("conditional",), samples=1500, seed=3)
    passes = []
    real = ead.certify_config

    def spy(cfg, progress=None):
        passes.append(cfg)
        return real(cfg, progress)

    monkeypatch.setattr(ead, "certify_config", spy)
    # (a coarse grid to ε = 64 makes the conditional DP-SGD estimator's range underflow: reported)
    (row,) = mc_epsilon_rows(config, Method.CONDITIONAL, [1e-2], coarse=(0.0, 0.5, 1.0, 2.0, 3.0, 4.0))
    coarse, fine = passes
    assert fine.sampling_key(Method.CONDITIONAL) != coarse.sampling_key(Method.CONDITIONAL)
    assert row["epsilon_upper"] in fine.epsilons


def test_matrix_accountant_refuses_bad_input():
    st = toeplitz_strategy(C_COL, 10)
    cases = [
        (dict(strategy=st, cycle_length=4, sampler="poisson"), "sampler='poisson' conflicts"),
        (dict(strategy=st), "cycle_length is required"),
        (dict(strategy=st, cycle_length=11), "cycle_length must be <= iterations=10"),
        (dict(strategy=st, cycle_length=4, steps=5), "give it once"),
        (dict(strategy=st, cycle_length=4, dataset_size=100, batch_size=25), "not both"),
        (dict(strategy=st, cycle_length=4, method="order_stats"), "does not apply to a matrix mechanism"),
        (dict(strategy=st, cycle_length=4, method="independent_lower_bound"), "upper bound"),
        (dict(strategy=[1.0, 0.5], cycle_length=4), "strategy must be an epscert.matrix.strategies.Strategy"),
        (dict(cycle_length=4), "cycle_length applies to a matrix mechanism"),
    ]
    for kwargs, needle in cases:
        with pytest.raises(ValueError, match=needle):
            epscert.Accountant(noise_multiplier=1.0, **kwargs)


def test_a_named_method_and_the_interval_of_its_rows():
    st = toeplitz_strategy(C_COL, 10)
    naive = epscert.Accountant(noise_multiplier=1.5, strategy=st, cycle_length=4, method="naive", samples=2000)
    lower, estimate, upper = naive.delta_interval(1.0)
    # naive rows carry no lower bound: the lower side is the deterministic independent-modes bound's row
    independent = next(r["delta_lower"] for r in naive.last_certificate.rows
                       if r["method"] == "independent_lower_bound" and r["direction"] == "both")
    assert naive.last_certificate.lower_method == "independent_lower_bound"
    assert 0.0 < lower == independent and 0.0 < estimate < upper
    upper_only = epscert.Accountant(noise_multiplier=1.5, strategy=st, cycle_length=4,
                                    method="comonotone_upper_bound")
    assert upper_only.delta_interval(1.0) == (independent, None, upper_only.get_delta(1.0))
    config = dataclasses.replace(naive.config, methods=("comonotone_upper_bound",))
    assert upper_only.get_delta(1.0) == next(r["delta_upper"] for r in epscert.certify_config(
        dataclasses.replace(config, epsilons=(1.0,))).to_pylist() if r["direction"] == "both")


def test_one_method_keeps_the_mechanism_name_and_the_deterministic_lower_bound():
    """method='naive' (no Monte Carlo LCB) on a banded C: the two-sided answer still takes the
    independent-modes lower bound, which is the Balls-and-Bins bracket's lower side for b orthogonal
    modes of the smallest mode variance v (sensitivity √v per step, T = b, one epoch): computed here by
    the DP-SGD accountant, another code path."""
    n, b, sigma, delta = 24, 6, 1.0, 1e-3
    st = toeplitz_strategy(C_COL, n)
    acc = epscert.Accountant(noise_multiplier=sigma, strategy=st, cycle_length=b, samples=20_000, method="naive")
    lower, estimate, upper = acc.epsilon_interval(delta)
    cert = acc.last_certificate
    assert cert.method == "naive" and cert.lower_method == "independent_lower_bound"
    assert cert.sampler.startswith("bandmf ") and st.describe() in cert.summary()
    v_min = float(np.min(np.diag(st.gram(b).scaled(sigma))))
    modes = epscert.Accountant(noise_multiplier=1.0 / math.sqrt(v_min), steps=b, epochs=1,
                               sampler="balls_and_bins_persistent")
    modes_lower, _, _ = modes.epsilon_interval(delta)
    assert modes.last_certificate.lower_method == "bracket_lower"
    assert 0.0 < lower == pytest.approx(modes_lower, rel=1e-9)
    assert lower <= estimate <= upper < math.inf
    d_lower, _, d_upper = acc.delta_interval(upper)
    assert acc.last_certificate.lower_method == "independent_lower_bound" and 0.0 < d_lower <= d_upper
