"""One honest answer (issue 17, item 2): the tightest certified method per sampler, in the user's terms."""

from __future__ import annotations

import math
import warnings

import dp_accounting
import pytest
from scipy.optimize import brentq
from scipy.stats import norm

import epscert
from epscert.accountant import NotCertifiedWarning
from epscert.bounds.kl import kl_ucb
from epscert.inverse.best import auto_methods, best_certificate, certified_methods, samples_needed
from epscert.config import CertifyConfig, Method, Sampler

MNIST = dict(noise_multiplier=1.0, dataset_size=60000, batch_size=256, epochs=10)


def gaussian_epsilon(sigma: float, delta: float) -> float:
    """ε(δ) of one Gaussian of sensitivity 1 and noise σ (Balle & Wang closed form), by root finding."""
    def excess(eps):
        return norm.cdf(0.5 / sigma - eps * sigma) - math.exp(eps) * norm.cdf(-0.5 / sigma - eps * sigma) - delta
    return brentq(excess, 0.0, 200.0, xtol=1e-12)


def test_poisson_accountant_takes_dataset_and_batch_size_and_matches_dp_accounting():
    acc = epscert.Accountant(sampler="poisson", **MNIST)
    assert acc.config.steps == 60000 // 256 == 234
    eps = acc.get_epsilon(1e-5)
    ref = dp_accounting.pld.PLDAccountant(value_discretization_interval=1e-4)
    ref.compose(dp_accounting.PoissonSampledDpEvent(1 / 234, dp_accounting.GaussianDpEvent(1.0)), 234 * 10)
    assert eps == pytest.approx(ref.get_epsilon(1e-5), rel=2e-3)
    assert eps == pytest.approx(1.101, abs=1e-3)  # the number
    assert acc.last_certificate.method == "pld_upper" and acc.last_certificate.guarantee == "upper_bound"


def test_deterministic_accountant_is_the_exact_gaussian():
    acc = epscert.Accountant(sampler="deterministic", **MNIST)
    eps = acc.get_epsilon(1e-5)
    assert eps == pytest.approx(gaussian_epsilon(1.0 / math.sqrt(10), 1e-5), abs=1e-4)
    assert eps == pytest.approx(17.86, abs=5e-3)
    ref = dp_accounting.pld.PLDAccountant(value_discretization_interval=1e-4)
    ref.compose(dp_accounting.GaussianDpEvent(1.0), 10)
    assert eps == pytest.approx(ref.get_epsilon(1e-5), rel=1e-3)
    assert acc.get_delta(eps) == pytest.approx(1e-5, rel=1e-4)


@pytest.mark.parametrize("sampler", ["shuffle", "shuffle_persistent"])
def test_shuffle_never_answers_a_bare_inf(sampler):
    # the MNIST run: the shuffle Monte Carlo pair certifies nothing; domination by deterministic
    # batches (one participation per epoch) still certifies the exact Gaussian ε
    acc = epscert.Accountant(sampler=sampler, samples=500, **MNIST)
    with warnings.catch_warnings():
        warnings.simplefilter("error", NotCertifiedWarning)
        eps = acc.get_epsilon(1e-5)
    cert = acc.last_certificate
    assert eps == pytest.approx(gaussian_epsilon(1.0 / math.sqrt(10), 1e-5), abs=1e-4)
    assert cert.bound == "deterministic_domination" and cert.guarantee == "upper_bound"


def test_balls_and_bins_answers_with_the_pld_bracket():
    # the MNIST run (issue 11's first line): finite, below Poisson's 1.101, above the lower bounds
    acc = epscert.Accountant(samples=500, **MNIST)
    with warnings.catch_warnings():
        warnings.simplefilter("error", NotCertifiedWarning)
        eps = acc.get_epsilon(1e-5)
    cert = acc.last_certificate
    assert cert.method == "bracket_upper" and cert.bound == "allocation_bracket_upper"
    assert cert.guarantee == "upper_bound" and cert.error_prob is None
    assert eps < 1.101 < gaussian_epsilon(1.0 / math.sqrt(10), 1e-5)
    low = epscert.inverse.epsilon_at_delta.analytic_epsilon_rows(
        CertifyConfig("balls_and_bins", 1.0, 234, (1.0,), epochs=10, methods=("pld_lower",)),
        Method.BRACKET_LOWER, [1e-5])[0]["epsilon_lower"]
    assert 0.6 < low <= eps <= low * 1.01
    # the bracket answered, so Monte Carlo was not run (issue 25 item 6): no Monte Carlo row, no note about it
    assert not any(Method(r["method"]).is_monte_carlo for r in cert.rows)
    assert not any("Monte Carlo" in note for note in cert.notes)


def test_the_tightest_candidate_wins_and_monte_carlo_runs_only_where_nothing_analytic_answers():
    # T = 10, one epoch, δ = 1e-2: the bracket answers, so Monte Carlo is not run; domination is evaluated
    # too (closed form) and the smaller of the two is returned
    config = CertifyConfig("balls_and_bins", 1.0, 10, (1.0,), methods=("naive",), samples=20_000)
    cert = best_certificate(config, delta=1e-2)
    values = {}
    for r in cert.rows:
        if r["direction"] == "both" and r["epsilon_upper"] is not None:
            values[(r["method"], r["bound"])] = max(values.get((r["method"], r["bound"]), 0.0), r["epsilon_upper"])
    assert set(values) == {("bracket_upper", "allocation_bracket_upper"), ("exact", "deterministic_domination")}
    assert cert.value == min(values.values()) == values[("bracket_upper", "allocation_bracket_upper")]
    assert cert.value < gaussian_epsilon(1.0, 1e-2)  # the bracket beats deterministic batches
    low = epscert.inverse.epsilon_at_delta.analytic_epsilon_rows(
        CertifyConfig("balls_and_bins", 1.0, 10, (1.0,), methods=("cube_lower_bound",)),
        Method.CUBE_LOWER_BOUND, [1e-2])[0]["epsilon_lower"]
    assert low <= cert.value  # an upper bound sits above the analytic lower bound
    # σ = 0.25 is inside the bracket's range since issue 35 (floor 0.05): the bracket answers, no sampling
    config = CertifyConfig("balls_and_bins", 0.25, 10, (1.0,), methods=("naive",), samples=20_000)
    cert = best_certificate(config, delta=1e-2)
    methods = {r["method"] for r in cert.rows if r["direction"] == "both"}
    assert methods == {"bracket_upper", "exact"} and cert.method == "bracket_upper"
    assert cert.value < gaussian_epsilon(0.25, 1e-2)
    # below the bracket's σ range Monte Carlo runs, and the smaller of it and domination wins
    config = CertifyConfig("balls_and_bins", 0.04, 10, (1.0,), methods=("naive",), samples=2_000)
    cert = best_certificate(config, delta=1e-2)
    values = {r["method"]: r["epsilon_upper"] for r in cert.rows if r["direction"] == "both"}
    assert set(values) == {"naive", "exact"}
    assert cert.value == min(values.values())  # naive reaches no ε <= 64 at σ = 0.04: domination wins
    assert any("BRACKET_MIN_SIGMA" in note for note in cert.notes)  # the limit that stopped the bracket, named


def test_nothing_certifiable_is_inf_with_a_warning_that_says_why():
    # truncated batches: no domination; σ = 0.04 is below the PLD bracket's range; 200 samples cannot
    # reach δ = 1e-6
    acc = epscert.Accountant(noise_multiplier=0.04, steps=5, dataset_size=500, max_batch_size=300, samples=200)
    with pytest.warns(NotCertifiedWarning, match="samples per direction"):
        assert acc.get_epsilon(1e-6) == math.inf
    assert acc.last_certificate.samples_needed == samples_needed(1e-6, 0.01, 2)


def test_samples_needed_is_the_kl_floor():
    for delta, beta in ((1e-5, 0.01), (1e-3, 1e-6), (0.2, 0.05)):
        m = samples_needed(delta, beta * 2, 2)
        assert kl_ucb(0.0, m, beta) <= delta * (1 + 1e-9)
        assert kl_ucb(0.0, m - 1, beta) > delta
        assert m == pytest.approx(math.log(1 / beta) / delta, rel=delta + 1e-6)


@pytest.mark.parametrize("kwargs,field", [
    (dict(noise_multiplier=1.0), "steps"),
    (dict(noise_multiplier=1.0, steps=10, dataset_size=100, batch_size=10), "not both"),
    (dict(noise_multiplier=1.0, batch_size=10), "dataset_size"),
    (dict(noise_multiplier=1.0, dataset_size=10, batch_size=20), "batch_size=20"),
    (dict(noise_multiplier=1.0, dataset_size=100, batch_size=0), "batch_size"),
])
def test_accountant_steps_or_dataset_and_batch_size(kwargs, field):
    with pytest.raises(ValueError, match=field):
        epscert.Accountant(**kwargs)


def test_candidates_and_sweep_auto():
    assert certified_methods("poisson")[0] is Method.PLD_UPPER
    assert certified_methods(Sampler.DETERMINISTIC) == (Method.EXACT,)
    config = lambda sampler, sigma=1.0, epochs=1: CertifyConfig(sampler, sigma, 100, (1.0,), epochs=epochs)  # noqa: E731
    assert auto_methods(config("poisson")) == (Method.PLD_UPPER, Method.PLD_LOWER)
    assert auto_methods(config("deterministic")) == (Method.EXACT,)
    assert auto_methods(config("balls_and_bins")) == (Method.BRACKET_UPPER, Method.BRACKET_LOWER)
    assert auto_methods(config("balls_and_bins_persistent", 1.0, 4)) == (Method.BRACKET_UPPER, Method.BRACKET_LOWER)
    # outside the bracket's range (σ < 0.05; the persistent reduction σ/√E counts) and for shuffling: Monte Carlo
    assert auto_methods(config("balls_and_bins", 0.25)) == (Method.BRACKET_UPPER, Method.BRACKET_LOWER)
    assert auto_methods(config("balls_and_bins", 0.04)) == (Method.AUTO,)
    assert auto_methods(config("balls_and_bins_persistent", 0.2, 25)) == (Method.AUTO,)  # σ/√E = 0.04
    assert auto_methods(config("shuffle")) == (Method.AUTO,)
    with pytest.raises(ValueError, match="sampler"):
        certified_methods("bogus")


@pytest.mark.parametrize("sampler, upper, lower", [("balls_and_bins", "bracket_upper", "bracket_lower"),
                                                   ("poisson", "pld_upper", "pld_lower")])
def test_the_two_sided_answer_takes_the_other_side_of_the_bracket(sampler, upper, lower):
    """epsilon_interval / delta_interval: the lower side is the winning bracket's own lower side (computed
    by another method: its ε(δ) rows), not 0; the upper side is get_epsilon's."""
    from epscert.inverse.epsilon_at_delta import analytic_epsilon_rows  # noqa: PLC0415

    acc = epscert.Accountant(noise_multiplier=1.0, steps=50, epochs=2, sampler=sampler)
    lo, estimate, up = acc.epsilon_interval(1e-5)
    assert acc.last_certificate.method == upper and acc.last_certificate.lower_method == lower
    cfg = CertifyConfig(sampler=sampler, sigma=1.0, steps=50, epochs=2, epsilons=(1.0,), methods=(lower,))
    assert lo == analytic_epsilon_rows(cfg, Method(lower), [1e-5])[0]["epsilon_lower"]
    assert up == acc.get_epsilon(1e-5) and 0 < lo <= up <= 1.01 * lo and estimate is None
    d_lo, _, d_up = acc.delta_interval(2.0)
    assert 0 < d_lo <= d_up == acc.get_delta(2.0)
