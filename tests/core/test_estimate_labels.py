"""No biased value is called an estimate (issue 35, item 1), for every Monte Carlo estimator.

The order-statistic estimators replace each sample's value by a larger one: their mean is an upper
bound's mean, biased upward by construction (issue 35: 0.1238 printed as the estimate where the truth
is 0.100). Pinned here, for each method of the Balls-and-Bins pair:
- ``Method.mean_is_unbiased`` is False exactly for the order-statistic methods;
- their rows carry no ``delta_lower``; the unbiased methods' rows carry a lower confidence bound, checked
  against the deterministic bracket (an independent value: no sampling);
- ``lower_and_estimate`` never takes an order-statistic mean as the estimate;
- ``Accountant.delta_interval`` shows an estimate only from an unbiased method, with a lower side;
- the ``certify`` table's note and ``compare``'s bracket check name the upper-bound mean as such.

Statistical checks: fixed seeds; each LCB/UCB holds at β = 1e-6 per statement, each 4-SE comparison fails
with probability about 6e-5 (false failure about 2e-3 in all).
"""

from __future__ import annotations

import io

import pytest

import epscert
from epscert.allocation import bracket_for
from epscert.compare import mean_in_bracket
from epscert.config import Method
from epscert.inverse.best import UNBIASED_COUNTERPART, lower_and_estimate
from pipelines.output import print_rows, upper_mean_note

SIGMA, STEPS, EPS = 0.7, 20, (0.5, 1.0)
BETA = 1e-6
MONTE_CARLO = ("naive", "importance", "order_stats", "importance_order_stats", "conditional",
               "conditional_order_stats")
ORDER_STATS = {"order_stats", "importance_order_stats", "conditional_order_stats"}


def test_mean_is_unbiased_exactly_where_no_order_statistics_are_used():
    for m in Method:
        assert m.mean_is_unbiased == (m.is_monte_carlo and m.value not in ORDER_STATS), m
    assert set(UNBIASED_COUNTERPART) == {Method(m) for m in ORDER_STATS}
    assert all(m.mean_is_unbiased for m in UNBIASED_COUNTERPART.values())


@pytest.fixture(scope="module")
def tables():
    return {m: epscert.certify(sampler="balls_and_bins", sigma=SIGMA, steps=STEPS, epsilons=list(EPS), method=m,
                               samples=20_000, error_prob=BETA, seed=35).to_pylist() for m in MONTE_CARLO}


@pytest.mark.parametrize("method", MONTE_CARLO)
def test_rows_lower_side_only_from_unbiased_values(tables, method):
    bracket = bracket_for(SIGMA, STEPS, 1)
    rows = tables[method]
    assert rows
    for r in rows:
        up, lo = bracket.delta([r["epsilon"]], r["direction"])
        assert r["delta_upper"] >= lo[0], r  # the certificate is above the truth (at β)
        if method in ORDER_STATS:
            assert r["delta_lower"] is None, r
            # an upper bound's mean sits above the truth, up to 4 SE (false failure about 6e-5 per row)
            assert r["delta"] >= lo[0] - 4 * r["std_error"], r
        else:
            assert r["delta_lower"] is not None, r
            assert r["delta_lower"] <= r["delta"] <= r["delta_upper"], r
            assert r["delta_lower"] <= up[0], r  # the lower confidence bound is below the truth (at β)
    lower, _, estimate = lower_and_estimate(rows, "delta", "both")
    if method in ORDER_STATS:
        assert estimate is None and lower == 0.0
    else:
        both = [r for r in rows if r["direction"] == "both"]
        assert estimate == max(r["delta"] for r in both)
        assert 0.0 < lower <= estimate


@pytest.mark.parametrize("method", MONTE_CARLO)
def test_accountant_interval_estimate_is_unbiased(method):
    acc = epscert.Accountant(SIGMA, steps=STEPS, method=method, samples=20_000, error_prob=BETA, seed=35)
    lower, estimate, upper = acc.delta_interval(1.0)
    up, lo = bracket_for(SIGMA, STEPS, 1).delta([1.0])
    assert estimate is not None and 0.0 < lower <= estimate <= upper
    assert lower <= up[0] and upper >= lo[0]  # each side holds at β against the deterministic bracket
    cert = acc.last_certificate
    unbiased = method if method not in ORDER_STATS else UNBIASED_COUNTERPART[Method(method)].value
    # the estimate is the unbiased method's mean, never the order-statistic one's
    means = {r["delta"] for r in cert.rows if r["method"] == unbiased and r["direction"] == "both"}
    assert estimate in means
    if method in ORDER_STATS:
        raised = [r["delta"] for r in cert.rows if r["method"] == method and r["direction"] == "both"]
        assert raised and estimate not in raised
        assert cert.method == method  # the upper side is still the order-statistic certificate


def test_printed_table_and_compare_name_the_upper_bound_mean(tables, capsys):
    rows = tables["importance_order_stats"] + tables["importance"]
    print_rows(rows, "table", io.StringIO())
    err = capsys.readouterr().err
    assert "importance_order_stats rows, delta is the mean of raised" in err and "not an estimate" in err
    assert upper_mean_note(tables["naive"]) is None
    # compare: an order-statistic mean is not called inside or outside the bracket, only checked from below
    bracket_rows = [dict(r, method=m, delta_lower=lo, delta_upper=up)
                    for r in tables["naive"] if r["direction"] == "both" and r["epsilon"] == 1.0
                    for m, up, lo in [("bracket_lower", None, 0.0), ("bracket_upper", 1e-9, None)]]
    mc = [r for r in tables["order_stats"] if r["direction"] == "both" and r["epsilon"] == 1.0]
    assert mean_in_bracket(mc + bracket_rows, "both", 1.0) == "upper-bound mean >= lower"
    plain = [r for r in tables["naive"] if r["direction"] == "both" and r["epsilon"] == 1.0]
    assert mean_in_bracket(plain + bracket_rows, "both", 1.0).startswith("OUTSIDE")  # above a (fake) 1e-9 upper
