"""The matrix-mechanism methods against each other on a banded strategy (issue 23, item 4).

Four Monte Carlo estimators with different sampling laws (naive draws of the loss; importance
draws conditioned on an exceedance; conditional integrals along kriging lines; draws from the
loss-tilted law with values within the Rényi bound), on independent
seeds, must agree within CLT limits (Z_CLT standard errors of the difference: a false failure has
probability 6.8e-6 per comparison). The deterministic bounds of :mod:`epscert.matrix.bracket`
(no sampling) must bracket every estimate within CLT limits. Certified UCBs and LCBs (β = 1e-3 in
all) must contain the estimate, and every curve must be non-increasing in ε.
"""

from __future__ import annotations

import itertools

import pytest

import epscert
from epscert.matrix.strategies import toeplitz_strategy

from benchmarks.matrix_rivals import binomial_c_col

from .helpers import Z_CLT, agree, row, rows_by

N, B, BANDS, SIGMA = 200, 20, 8, 3.0
EPS = [0.5, 1.0, 2.0, 3.0]
MC = {"naive": (60_000, 1), "importance": (40_000, 2), "conditional": (4_000, 3), "tilted": (40_000, 4)}  # samples, seed
BETA = 1e-3


@pytest.fixture(scope="module")
def tables():
    strategy = toeplitz_strategy(binomial_c_col(BANDS), N)
    common = dict(sampler="balls_and_bins_persistent", sigma=SIGMA, steps=B, epsilons=EPS, strategy=strategy,
                  error_prob=BETA)
    out = {m: epscert.certify(method=m, samples=s, seed=seed, **common) for m, (s, seed) in MC.items()}
    out["bounds"] = epscert.certify(method=["independent_lower_bound", "comonotone_upper_bound"], **common)
    return out


def test_the_setting_is_banded_with_overlapping_modes():
    gram = toeplitz_strategy(binomial_c_col(BANDS), N).gram(B)
    assert gram.half_width == BANDS - 1 and gram.factor(SIGMA).kind == "dense"  # 2w + 2 > b/4


@pytest.mark.parametrize("direction", ["remove", "add"])
def test_estimators_agree_within_clt(tables, direction):
    compared = 0
    for a, b in itertools.combinations(MC, 2):
        for eps in EPS:
            ra = row(tables[a], method=a, direction=direction, epsilon=eps)
            rb = row(tables[b], method=b, direction=direction, epsilon=eps)
            if ra["std_error"] == 0 or rb["std_error"] == 0:
                continue
            assert agree(ra["delta"], ra["std_error"], rb["delta"], rb["std_error"]), (a, b, eps, ra["delta"],
                                                                                     ra["std_error"], rb["delta"],
                                                                                     rb["std_error"])
            compared += 1
    assert compared >= 8


@pytest.mark.parametrize("direction", ["remove", "add"])
def test_the_conditional_estimate_resolves_delta(tables, direction):
    """The comparisons bite: the conditional estimator's relative error is small at every ε."""
    for eps in EPS:
        r = row(tables["conditional"], method="conditional", direction=direction, epsilon=eps)
        assert 0 < r["std_error"] < 0.03 * r["delta"], (eps, r)


@pytest.mark.parametrize("direction", ["remove", "add", "both"])
def test_deterministic_bounds_bracket_every_estimate(tables, direction):
    for eps in EPS:
        lower = row(tables["bounds"], method="independent_lower_bound", direction=direction, epsilon=eps)
        upper = row(tables["bounds"], method="comonotone_upper_bound", direction=direction, epsilon=eps)
        assert 0 <= lower["delta_lower"] <= upper["delta_upper"] <= 1
        for m in MC:
            r = row(tables[m], method=m, direction=direction, epsilon=eps)
            assert lower["delta_lower"] <= r["delta"] + Z_CLT * r["std_error"], (m, eps, lower["delta_lower"], r)
            assert r["delta"] - Z_CLT * r["std_error"] <= upper["delta_upper"], (m, eps, upper["delta_upper"], r)
            assert r["delta_upper"] >= lower["delta_lower"]
            if r["delta_lower"] is not None:
                assert r["delta_lower"] <= upper["delta_upper"]


def test_the_independent_modes_bound_is_strictly_inside(tables):
    """Correlation raises δ here: the independent-modes bound sits clearly below the estimate (REMOVE)."""
    for eps in EPS:
        lower = row(tables["bounds"], method="independent_lower_bound", direction="remove", epsilon=eps)
        r = row(tables["conditional"], method="conditional", direction="remove", epsilon=eps)
        assert lower["delta_lower"] < r["delta"] - Z_CLT * r["std_error"]


@pytest.mark.parametrize("method", sorted(MC))
def test_certified_bounds_contain_the_estimate(tables, method):
    for r in rows_by(tables[method], method=method):
        assert r["delta_upper"] >= r["delta"], r
        if r["delta_lower"] is not None:
            assert r["delta_lower"] <= r["delta"], r
        assert r["samples"] == MC[method][0] and r["error_prob"] in (BETA, BETA / 2)


@pytest.mark.parametrize("method", sorted(MC) + ["independent_lower_bound", "comonotone_upper_bound"])
@pytest.mark.parametrize("direction", ["remove", "add", "both"])
def test_curves_are_non_increasing_in_epsilon(tables, method, direction):
    table = tables["bounds"] if method not in MC else tables[method]
    rows = sorted(rows_by(table, method=method, direction=direction), key=lambda r: r["epsilon"])
    assert len(rows) == len(EPS)
    for column in ("delta", "delta_upper", "delta_lower"):
        values = [r[column] for r in rows]
        if values[0] is None:
            continue
        assert all(later <= earlier for earlier, later in zip(values, values[1:])), (column, values)


def test_both_rows_are_the_larger_direction(tables):
    for m in MC:
        for eps in EPS:
            parts = [row(tables[m], method=m, direction=d, epsilon=eps) for d in ("remove", "add")]
            both = row(tables[m], method=m, direction="both", epsilon=eps)
            assert both["delta"] == max(p["delta"] for p in parts)
            assert both["delta_upper"] == max(p["delta_upper"] for p in parts)
