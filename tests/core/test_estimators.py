"""Monte Carlo estimators against values they must match (issue 2, "Done means").

Statistical checks use fixed seeds. Each "within 4 standard errors" comparison would fail
with probability about 6.3e-5 for an unlucky seed; each UCB check runs at β = 1e-6.
"""

from __future__ import annotations

import math

import pytest

import epscert
from epscert.analytic.cube import cube_lower_bound
from epscert.analytic.deterministic import deterministic_delta, gaussian_delta
from epscert.analytic.poisson import poisson_pld_delta
from epscert.config import Direction

Z = 4.0
TIGHT_BETA = 1e-6


def _rows(table, method=None, direction=None):
    rows = table.to_pylist()
    return [r for r in rows if (method is None or r["method"] == method)
            and (direction is None or r["direction"] == direction)]


@pytest.mark.parametrize("method", ["naive", "importance"])
@pytest.mark.parametrize("sampler", ["balls_and_bins", "deterministic"])
def test_single_gaussian_cases_bracket_the_closed_form(method, sampler):
    # Balls-and-Bins with T = 1 is the deterministic pair N(1, σ²) vs N(0, σ²).
    sigma, eps = 0.6, [0.0, 0.5, 1.5, 3.0]
    table = epscert.certify(sampler=sampler, sigma=sigma, steps=1, epsilons=eps, method=method,
                            samples=200_000, error_prob=TIGHT_BETA, seed=11)
    truth = dict(zip(eps, gaussian_delta(sigma, eps)))
    for r in _rows(table, method):
        exact = truth[r["epsilon"]]
        assert abs(r["delta"] - exact) <= Z * r["std_error"] + 1e-12, r
        assert r["delta_upper"] >= exact, r


def test_deterministic_epochs_match_sigma_over_root_epochs():
    sigma, epochs, eps = 1.2, 4, [0.5, 1.0, 2.0]
    table = epscert.certify(sampler="deterministic", sigma=sigma, steps=7, epochs=epochs, epsilons=eps,
                            method=["naive", "exact"], samples=100_000, error_prob=TIGHT_BETA, seed=2)
    exact = dict(zip(eps, deterministic_delta(sigma, epochs, eps)))
    for r in _rows(table, "naive"):
        assert abs(r["delta"] - exact[r["epsilon"]]) <= Z * r["std_error"]
    for r in _rows(table, "exact"):
        assert r["delta"] == pytest.approx(exact[r["epsilon"]], rel=1e-12) and r["guarantee"] == "exact"


def test_balls_and_bins_multi_epoch_naive_with_one_step_is_gaussian():
    sigma, epochs, eps = 0.9, 3, [0.5, 1.0, 2.0]
    table = epscert.certify(sigma=sigma, steps=1, epochs=epochs, epsilons=eps, method="naive",
                            samples=100_000, error_prob=TIGHT_BETA, seed=5)
    truth = dict(zip(eps, deterministic_delta(sigma, epochs, eps)))
    for r in _rows(table, "naive"):
        assert abs(r["delta"] - truth[r["epsilon"]]) <= Z * r["std_error"]
        assert r["delta_upper"] >= truth[r["epsilon"]]


@pytest.mark.parametrize("direction", ["remove", "add"])
def test_poisson_pair_monte_carlo_matches_dp_accounting(direction):
    sigma, steps, epochs, eps = 0.8, 20, 2, [0.25, 0.5, 1.0]
    table = epscert.certify(sampler="poisson", sigma=sigma, steps=steps, epochs=epochs, epsilons=eps,
                            method="naive", samples=100_000, direction=direction, seed=3)
    d = Direction(direction)
    upper = poisson_pld_delta(sigma, steps, epochs, eps, d, 1e-4, pessimistic=True)
    lower = poisson_pld_delta(sigma, steps, epochs, eps, d, 1e-4, pessimistic=False)
    for r, lo, up in zip(_rows(table, "naive", direction), lower, upper):
        assert lo - Z * r["std_error"] <= r["delta"] <= up + Z * r["std_error"], (r, lo, up)


def test_all_methods_agree_where_order_statistics_are_tight():
    # T = 40: the default orders are all ranks 1..T-1, so the order-statistic bound is exact.
    eps = [0.5, 1.0, 2.0]
    methods = ["naive", "importance", "order_stats", "importance_order_stats"]
    table = epscert.certify(sigma=0.5, steps=40, epsilons=eps, method=methods, samples=60_000, seed=21)
    for direction in ("remove", "add"):
        by_method = {m: _rows(table, m, direction) for m in methods}
        for i in range(len(eps)):
            for a in methods:
                for b in methods:
                    ra, rb = by_method[a][i], by_method[b][i]
                    tol = Z * math.hypot(ra["std_error"], rb["std_error"]) + 1e-12
                    assert abs(ra["delta"] - rb["delta"]) <= tol, (direction, a, b, ra["epsilon"])


def test_partial_orders_are_pessimistic():
    eps = [0.5, 1.0, 2.0]
    table = epscert.certify(sigma=0.5, steps=200, epsilons=eps, method=["naive", "order_stats"],
                            orders="1,10,1,10,190,20", samples=30_000, seed=4)
    # the bound may only raise δ: the order-statistic mean is never meaningfully below naive
    for direction in ("remove", "add"):
        for rn, ro in zip(_rows(table, "naive", direction), _rows(table, "order_stats", direction)):
            tol = Z * math.hypot(rn["std_error"], ro["std_error"])
            assert ro["delta"] >= rn["delta"] - tol


def test_sanity_chain_lower_bound_mean_ucb_on_a_grid():
    sigma, steps, eps = 0.35, 1000, [1.0, 2.0, 4.0, 8.0]
    table = epscert.certify(sigma=sigma, steps=steps, epsilons=eps,
                            method=["importance", "cube_lower_bound"], samples=20_000, seed=8)
    for direction in ("remove", "add"):
        lower = cube_lower_bound(sigma, steps, eps, "balls_and_bins", Direction(direction))
        for r, lo in zip(_rows(table, "importance", direction), lower):
            assert lo <= r["delta"] + Z * r["std_error"] + 1e-15, (r, lo)
            assert r["delta"] <= r["delta_upper"]
            assert r["delta_upper"] <= float(deterministic_delta(sigma, 1, r["epsilon"])) + 1e-3 or \
                r["delta_upper"] <= 1.0


def test_importance_sampling_tightens_the_bound():
    # same budget, ε grid starting at 10: the event {max y >= C(10)} has s < 5% (σ=0.35, T=1000),
    # and the UCB shrinks with it
    common = dict(sigma=0.35, steps=1000, epsilons=[10.0, 12.0], samples=5_000, seed=1, direction="remove")
    naive = _rows(epscert.certify(method="naive", **common))
    imp = _rows(epscert.certify(method="importance", **common))
    assert imp[0]["scale"] < 0.05
    for rn, ri in zip(naive, imp):
        assert ri["delta_upper"] < rn["delta_upper"]


def test_shuffle_pair_is_labelled_conjecture_and_brackets():
    sigma, steps, eps = 0.8, 10, [0.5, 1.0, 2.0]
    table = epscert.certify(sampler="shuffle", sigma=sigma, steps=steps, epsilons=eps,
                            method=["naive", "cube_lower_bound"], samples=50_000, seed=6)
    mc = _rows(table, "naive", "both")
    assert {r["guarantee"] for r in _rows(table, "naive")} == {"conjecture"}
    lower = _rows(table, "cube_lower_bound", "both")
    exact = deterministic_delta(sigma, 1, eps)
    for r, lo, ex in zip(mc, lower, exact):
        assert lo["delta"] <= r["delta"] + Z * r["std_error"]
        assert r["delta"] <= ex + Z * r["std_error"]


def test_same_seed_same_table_other_seed_other_numbers():
    kw = dict(sigma=0.5, steps=30, epsilons=[0.5, 1.0], method=["naive", "importance_order_stats"],
              samples=3000, shards=3)
    a = epscert.certify(seed=7, **kw).drop(["wall_seconds"])
    b = epscert.certify(seed=7, **kw).drop(["wall_seconds"])
    c = epscert.certify(seed=8, **kw).drop(["wall_seconds"])
    assert a.equals(b)
    assert not a.column("delta").equals(c.column("delta"))


def test_shard_layout_does_not_change_the_numbers():
    """40 000 samples at T = 30 are 2 blocks of 34 952 samples: 1, 2 (whole blocks) and 4 shards (split
    blocks) draw the same samples (SPEC §10), so the rows are identical."""
    kw = dict(sigma=0.5, steps=30, epsilons=[1.0], method="naive", samples=40_000, seed=3, direction="remove")
    one, two, four = (epscert.certify(shards=s, **kw).drop(["wall_seconds"]) for s in (1, 2, 4))
    assert one.equals(two) and one.equals(four)
    assert _rows(one)[0]["samples"] == 40_000


def test_both_direction_takes_the_max_at_half_beta():
    table = epscert.certify(sigma=0.5, steps=20, epsilons=[1.0], method="naive", samples=5000, seed=0,
                            error_prob=0.02)
    rows = {r["direction"]: r for r in table.to_pylist()}
    assert rows["remove"]["error_prob"] == rows["add"]["error_prob"] == 0.01
    assert rows["both"]["error_prob"] == 0.02
    assert rows["both"]["delta_upper"] == max(rows["remove"]["delta_upper"], rows["add"]["delta_upper"])
    assert rows["both"]["delta"] == max(rows["remove"]["delta"], rows["add"]["delta"])


def test_result_values_are_in_range_and_labelled():
    table = epscert.certify(sigma=0.7, steps=50, epsilons=[0.0, 1.0, 5.0], method=["auto", "cube_lower_bound"],
                            samples=2000, seed=0)
    for r in table.to_pylist():
        assert 0.0 <= r["delta"] <= 1.0
        if r["delta_upper"] is not None:
            assert r["delta"] <= r["delta_upper"] <= 1.0
        assert r["guarantee"] in ("mc_upper_confidence", "lower_bound")
        assert len(r["config_id"]) == 16
