"""Ye & Shokri's last-iterate bound: direct formula, monotonicity and limit in K, never above
composition, stability at ηλ -> 0 and ηλ -> 1, conversions, validation, rows and command."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import logsumexp

from epscert import schema
from epscert.analytic.hidden_state import (
    ORDERS, Conversion, HiddenStateConfig, cli_hidden_state, compare_at_delta, composition_rdp, hidden_state_rdp,
    rdp_to_delta, rdp_to_epsilon, to_rows,
)

BASE = dict(dataset_size=6000, batch_size=100, epochs=5, step_size=0.5, sigma=0.05, strong_convexity=0.02,
            smoothness=1.0, grad_sensitivity=2.0)
ALPHAS = np.array([1.01, 1.5, 2.0, 4.0, 10.0, 64.0, 1000.0])


def cfg(**kw) -> HiddenStateConfig:
    return HiddenStateConfig(**{**BASE, **kw})


def _direct(config: HiddenStateConfig, alpha: float) -> float:
    """The theorem's formula with plain sums (no logs), for moderate parameters."""
    m, k, a = config.batches, config.epochs, config.unit_rdp
    c = (1.0 - config.step_size * config.strong_convexity) ** 2

    def eps0(j):
        return alpha * a * c ** (j - 1) / sum(c**s for s in range(j))

    h = m // 2
    g = m - h
    first = eps0(h) * (1 - c ** ((k - 1) * g)) / (1 - c**g)
    second = (logsumexp([(alpha - 1) * eps0(m - j0) for j0 in range(m)]) - math.log(m)) / (alpha - 1)
    return first + second


@pytest.mark.parametrize("epochs", [1, 2, 7])
def test_matches_the_direct_formula(epochs):
    config = cfg(epochs=epochs)
    got = hidden_state_rdp(config, ALPHAS)
    want = [_direct(config, a) for a in ALPHAS]
    np.testing.assert_allclose(got, want, rtol=1e-10)


def test_k1_is_the_position_average_alone():
    """K = 1: ε(α) = 1/(α-1) log mean_j exp((α-1) ε₀^j(α)), the first term vanishes."""
    config = cfg(epochs=1, dataset_size=300, batch_size=100)  # m = 3: w = (1, c/(1+c), c²/(1+c+c²))
    c = (1 - 0.5 * 0.02) ** 2
    w = np.array([1.0, c / (1 + c), c**2 / (1 + c + c**2)])
    for alpha in ALPHAS:
        e0 = alpha * config.unit_rdp * w
        want = (logsumexp((alpha - 1) * e0) - math.log(3)) / (alpha - 1)
        assert hidden_state_rdp(config, [alpha])[0] == pytest.approx(want, rel=1e-12)


def test_non_decreasing_in_epochs_and_converges():
    values = np.array([hidden_state_rdp(cfg(epochs=k), ALPHAS) for k in (1, 2, 3, 5, 10, 100, 1000, 10**6)])
    assert np.all(np.diff(values, axis=0) >= 0)
    # limit K -> ∞: first term -> ε₀^{⌊m/2⌋} / (1 - c^{m - ⌊m/2⌋})
    config = cfg(epochs=10**6)
    c = (1 - 0.5 * 0.02) ** 2
    m = config.batches
    g = m - m // 2
    eps_h = ALPHAS * config.unit_rdp * c ** (m // 2 - 1) * (1 - c) / (1 - c ** (m // 2))
    limit = eps_h / (1 - c**g) + hidden_state_rdp(cfg(epochs=1), ALPHAS)
    np.testing.assert_allclose(values[-1], limit, rtol=1e-9)
    assert np.all(values[-2] <= limit * (1 + 1e-12))


def test_never_above_composition():
    for k in (1, 3, 50):
        config = cfg(epochs=k)
        assert np.all(hidden_state_rdp(config, ORDERS) <= composition_rdp(config, ORDERS) * (1 + 1e-12))


@settings(max_examples=60, deadline=None)
@given(batches=st.integers(2, 400), b=st.integers(1, 64), k=st.integers(1, 10**5),
       eta_frac=st.floats(1e-9, 0.999), lam=st.floats(1e-8, 10.0), ratio=st.floats(1.0, 1e4),
       sigma=st.floats(1e-3, 1e2), s_g=st.floats(1e-3, 10.0))
def test_properties_hold_on_random_valid_configs(batches, b, k, eta_frac, lam, ratio, sigma, s_g):
    beta = lam * ratio
    config = HiddenStateConfig(batches * b, b, k, eta_frac * 2 / (lam + beta), sigma, lam, beta, s_g)
    hidden = hidden_state_rdp(config, ALPHAS)
    assert np.all(np.isfinite(hidden)) and np.all(hidden >= 0)
    assert np.all(hidden <= composition_rdp(config, ALPHAS) * (1 + 1e-12))
    more = hidden_state_rdp(HiddenStateConfig(batches * b, b, k + 1, config.step_size, sigma, lam, beta, s_g),
                            ALPHAS)
    assert np.all(more >= hidden * (1 - 1e-12))


def test_stable_as_eta_lambda_goes_to_zero():
    """ηλ -> 0: w_j -> 1/j and the first term -> (K-1)·ε₀^{⌊m/2⌋} (no contraction)."""
    for lam in (1e-9, 1e-14, 1e-300):
        config = cfg(strong_convexity=lam, epochs=4)
        got = hidden_state_rdp(config, ALPHAS)
        m = config.batches
        e0 = np.outer(ALPHAS * config.unit_rdp, 1.0 / np.arange(1, m + 1))
        second = (logsumexp((ALPHAS[:, None] - 1) * e0, axis=1) - math.log(m)) / (ALPHAS - 1)
        want = 3 * e0[:, m // 2 - 1] + second
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_stable_as_eta_lambda_goes_to_one():
    """β = λ, η -> 2/(λ+β) = 1/λ: c -> 0, only the record's own last step counts (w_1 = 1)."""
    for gap in (1e-3, 1e-9, 1e-15):
        config = cfg(strong_convexity=1.0, smoothness=1.0, step_size=1.0 - gap, epochs=1000)
        got = hidden_state_rdp(config, ALPHAS)
        assert np.all(np.isfinite(got))
        m, a = config.batches, config.unit_rdp
        want = (np.logaddexp((ALPHAS - 1) * ALPHAS * a, math.log(m - 1)) - math.log(m)) / (ALPHAS - 1)
        np.testing.assert_allclose(got, want, rtol=1e-2 if gap > 1e-6 else 1e-9)


def test_long_runs_do_not_underflow():
    config = cfg(epochs=10**9, dataset_size=10**6, batch_size=1, strong_convexity=0.5, step_size=1.0)
    got = hidden_state_rdp(config, ALPHAS)
    assert np.all(np.isfinite(got)) and np.all(got > 0)


def test_conversions():
    config = cfg(epochs=20)
    rdp = composition_rdp(config, ORDERS)
    improved, _ = rdp_to_epsilon(rdp, ORDERS, 1e-5, Conversion.IMPROVED)
    classic, _ = rdp_to_epsilon(rdp, ORDERS, 1e-5, Conversion.CLASSIC)
    assert improved < classic
    # classic on a linear curve r = cα: ε* = c + 2 sqrt(c log(1/δ)) at α* = 1 + sqrt(log(1/δ)/c)
    c = config.epochs * config.unit_rdp
    assert classic == pytest.approx(c + 2 * math.sqrt(c * math.log(1e5)), rel=1e-4)
    # δ(ε(δ)) <= δ: the two conversions are inverse to each other up to the α grid
    for conv in Conversion:
        eps, _ = rdp_to_epsilon(rdp, ORDERS, 1e-5, conv)
        assert rdp_to_delta(rdp, ORDERS, eps, conv) <= 1e-5 * (1 + 1e-9)


def test_compare_uses_one_conversion_for_both():
    r = compare_at_delta(cfg(epochs=20), 1e-5, conversion="classic")
    assert r.conversion is Conversion.CLASSIC
    assert 0 < r.hidden < r.composition


@pytest.mark.parametrize("kw, field", [
    (dict(step_size=2 / 1.02), "step_size"), (dict(step_size=3.0), "step_size"),
    (dict(batch_size=6000), "dataset_size/batch_size"), (dict(batch_size=7), "batch_size must divide"),
    (dict(smoothness=0.01), "smoothness"), (dict(strong_convexity=0.0), "strong_convexity"),
    (dict(sigma=-1.0), "sigma"), (dict(epochs=0), "epochs"), (dict(grad_sensitivity=float("inf")), "grad_sensitivity"),
])
def test_assumptions_are_validated(kw, field):
    with pytest.raises(ValueError, match=re_escape(field)):
        cfg(**kw)


def re_escape(text: str) -> str:
    import re
    return re.escape(text)


def test_rows_match_the_results_schema():
    rows = to_rows(cfg(), deltas=[1e-5, 1e-6], epsilons=[1.0, 4.0])
    table = schema.to_table(rows)
    assert table.num_rows == 2 * 4
    assert all(set(r) == set(schema.COLUMNS) for r in rows)
    methods = {(r["method"], r["bound"]) for r in rows}
    assert methods == {("hidden_state_rdp", "hidden_state_ye_shokri"), ("rdp_composition", "rdp_standard_composition")}
    at = {(r["method"], r["target_delta"]): r for r in rows if r["quantity"] == "epsilon_at_delta"}
    assert at[("hidden_state_rdp", 1e-5)]["epsilon"] <= at[("rdp_composition", 1e-5)]["epsilon"]
    r = rows[0]
    assert (r["sampler"], r["steps"], r["epochs"], r["guarantee"]) == ("noisy_sgd_last_iterate", 300, 5, "upper_bound")


def test_cli(capsys):
    argv = ["--dataset-size", "6000", "--batch-size", "100", "--epochs", "1,10", "--step-size", "0.5",
            "--sigma", "0.05", "--strong-convexity", "0.02", "--smoothness", "1", "--grad-sensitivity", "2"]
    assert cli_hidden_state(argv) == 0
    out = capsys.readouterr().out
    assert "| 10 | 600 |" in out
    assert cli_hidden_state([*argv[:-2], "--grad-sensitivity", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "grad_sensitivity" in err
    assert cli_hidden_state(argv + ["--step-size", "5"]) == 2
    assert "step_size must be < 2/(strong_convexity + smoothness)" in capsys.readouterr().err
    assert cli_hidden_state(argv + ["--epochs", "1,x"]) == 2
    assert "--epochs" in capsys.readouterr().err
