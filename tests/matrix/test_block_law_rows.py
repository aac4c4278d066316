"""The block-law bounds in the rows and the ε(δ) answers (epscert/results/rows.py, epscert/inverse): their shares
of β, the smaller bound taken and named, left out where the law does not apply, the upper side refined between grid
points, and :func:`~epscert.results.rows.matrix_law_upper` (law_seed included)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from benchmarks.matrix_rivals import binomial_c_col
from epscert.matrix import add_decoupled, block_law
from epscert.matrix.block_bound import band_and_blocks
from epscert.matrix.strategies import toeplitz_strategy

from tests.matrix.block_law_helpers import naive_add, naive_remove, one_participation


def test_rows_give_the_add_side_bounds_their_shares_of_beta(monkeypatch):
    """Where the block law applies, ADD's line UCB keeps β/2 and the decoupled and the block-law bound get β/4 each
    (recorded from the calls)."""
    from epscert import Accountant
    from epscert.results import rows as rows_module

    seen = {}

    def recording(name, original):
        def call(pair, samples, seed, error_prob, *rest):
            seen[name] = (error_prob, *rest)
            return original(pair, samples, seed, error_prob, *rest)
        return call

    monkeypatch.setattr(rows_module, "add_bound", recording("decoupled", rows_module.add_bound))
    monkeypatch.setattr(rows_module, "add_law_bound", recording("law", rows_module.add_law_bound))
    n = 128
    acc = Accountant(noise_multiplier=1.0, strategy=toeplitz_strategy(np.array(binomial_c_col(32)), n),
                     cycle_length=n, samples=1000, direction="add", error_prob=0.01)
    acc.get_delta(0.3)
    # the decoupled bound beside the block-law one: at the fallback flop cap (epscert.matrix.add_decoupled)
    assert seen == {"decoupled": (0.01 / 4, add_decoupled.FALLBACK_FLOPS), "law": (0.01 / 4,)}


def test_rows_take_the_smaller_add_bound_and_name_it():
    from epscert import Accountant

    n = 128
    # ADD alone: with REMOVE in the run the ADD side bounds are formed only where the line's UCB could bind
    acc = Accountant(noise_multiplier=1.0, strategy=toeplitz_strategy(np.array(binomial_c_col(32)), n),
                     cycle_length=n, samples=2000, direction="add")
    acc.get_delta(0.3)
    rows = acc.last_table.to_pylist()
    add = [r for r in rows if r["direction"] == "add" and r["bound"] and "block_law" in r["bound"]
           and "decoupled_chernoff" in r["bound"]]
    assert add, [(r["direction"], r["bound"]) for r in rows]
    pair = one_participation(n, 32, 1.0)
    est, err = naive_add(pair, 32, np.array([0.3]), 100_000, 14)
    for row in add:
        assert row["delta_upper"] >= est[0] - 4 * err[0]


def test_rows_take_the_smaller_remove_bound_and_name_it():
    from epscert import Accountant

    n = 128
    acc = Accountant(noise_multiplier=1.0, strategy=toeplitz_strategy(np.array(binomial_c_col(32)), n),
                     cycle_length=n, samples=2000)
    acc.get_delta(0.9)
    rows = acc.last_table.to_pylist()
    remove = [r for r in rows if r["direction"] == "remove" and r["bound"] and "block_law" in r["bound"]]
    assert remove, [r["bound"] for r in rows]
    pair = one_participation(n, 32, 1.0)
    est, err = naive_remove(pair, 32, np.array([0.9]), 100_000, 12)
    for row in remove:
        assert row["delta_upper"] >= est[0] - 4 * err[0]
    _, blocks = band_and_blocks(pair.gram, pair.sigma)
    assert blocks == 4


def test_rows_leave_the_block_law_out_where_it_does_not_apply(monkeypatch):
    """Where :func:`applies` is false the REMOVE rows carry no block law and the values' UCB keeps the whole β: it is
    at most the UCB of the same run with the block law forced in (β halved for the values, a useless bound beside)."""
    from epscert import Accountant
    from epscert.results import rows as rows_module

    n = 128
    assert block_law.fits(one_participation(n, 32, 0.7)) and not block_law.applies(one_participation(n, 32, 0.7))

    def remove_uppers():
        acc = Accountant(noise_multiplier=0.7, strategy=toeplitz_strategy(np.array(binomial_c_col(32)), n),
                         cycle_length=n, samples=1000)
        acc.get_delta(3.0)
        return [r for r in acc.last_table.to_pylist() if r["direction"] == "remove" and r["bound"]]

    plain = remove_uppers()
    assert plain and not any("block_law" in r["bound"] for r in plain)
    monkeypatch.setattr(rows_module, "block_law_applies", lambda pair: True)
    monkeypatch.setattr(rows_module, "remove_bound",
                        lambda pair, samples, seed, beta: block_law.BlockLawBound(pair, samples, seed, beta))
    forced = {(r["method"], r["epsilon"]): r for r in remove_uppers() if "block_law" in r["bound"]}
    assert forced, "no row took the forced block law"
    compared = [r for r in plain if (r["method"], r["epsilon"]) in forced]
    assert compared
    for r in compared:
        assert r["delta_upper"] <= forced[(r["method"], r["epsilon"])]["delta_upper"]
    assert any(r["delta_upper"] < forced[(r["method"], r["epsilon"])]["delta_upper"] for r in compared)


def test_epsilon_upper_refined_by_the_law_between_grid_points(monkeypatch):
    """:func:`epscert.inverse.epsilon_at_delta.refined_upper`: where the block law binds (n = b = 128, 32 bands,
    σ = 2, δ = 1e-6), the Accountant's upper side moves below its grid answer (the same run with the refinement off)
    by less than a grid step, to a point where the law-only bounds of both directions are <= δ; those bounds are the
    rows' own objects at the rows' shares of β (REMOVE β/2, ADD β/4 of each direction's β = error_prob/2),
    recomputed here from the shares."""
    import dataclasses

    from epscert import Accountant
    from epscert.config import Method
    from epscert.inverse import epsilon_at_delta as ead
    from epscert.results.rows import matrix_law_upper

    n, delta = 128, 1e-6

    def answer():
        acc = Accountant(noise_multiplier=2.0, strategy=toeplitz_strategy(np.array(binomial_c_col(32)), n),
                         cycle_length=n, samples=2000)
        upper = acc.get_epsilon(delta)
        row = next(r for r in acc.last_table.to_pylist() if r.get("quantity") == "epsilon_at_delta"
                   and r["method"] == "tilted" and r["direction"] == "both")
        return acc, upper, row

    acc, upper, row = answer()
    assert row["bound"] == ead.MATRIX_REFINED_BOUND and row["epsilon_upper"] == pytest.approx(upper)
    pair = one_participation(n, 32, 2.0)
    beta = 0.5 * row["error_prob"]
    remove = block_law.remove_bound(pair, 2000, int(row["seed"]), beta / 2.0)
    add = block_law.add_law_bound(pair, 2000, int(row["seed"]), beta / 4.0)
    at = np.array([upper, 0.5 * upper])
    both = np.maximum(remove.upper(at), add.upper(at))
    assert both[0] <= delta < both[1]
    tilted = dataclasses.replace(acc.config, methods=(Method.TILTED,))
    assert np.array_equal(matrix_law_upper(tilted, Method.TILTED, at), both)
    # against an independent value: the mode-tilted mixture's estimate of δ_remove (epscert.matrix.tilted, its own
    # stream and estimator) is at most δ at the refined point, and clearly above δ at ε = 1, so it would see an
    # upper side far too low
    from epscert.matrix.tilted import tilted_remove_estimate

    ref = tilted_remove_estimate(pair, [upper, 1.0], 100_000, seed=5)
    assert ref.delta[0] <= delta + 4 * ref.std_error[0]
    assert ref.delta[1] - 4 * ref.std_error[1] > delta
    monkeypatch.setattr(ead, "REFINE_POINTS", 1)  # no point between two grid points: the grid's own answer
    _, grid_upper, grid_row = answer()
    assert grid_row["bound"] == ead.MATRIX_GRID_BOUND
    assert upper < grid_upper < upper + 0.02 * grid_upper


def test_refined_upper_leaves_the_answer_where_it_cannot_apply(monkeypatch):
    from epscert.config import Method
    from epscert.inverse import epsilon_at_delta as ead

    grid = [0.5, 1.0, 1.5]
    monkeypatch.setattr(ead, "matrix_law_upper", lambda config, method, eps: None)
    assert ead.refined_upper(None, Method.TILTED, grid, 1.0, 1e-6) == 1.0
    monkeypatch.setattr(ead, "matrix_law_upper", lambda config, method, eps: np.zeros(len(eps)))
    assert ead.refined_upper(None, Method.TILTED, grid, 0.5, 1e-6) == 0.5  # the grid's first point
    assert ead.refined_upper(None, Method.TILTED, grid, math.inf, 1e-6) == math.inf
    got = ead.refined_upper(None, Method.TILTED, grid, 1.0, 1e-6)  # every point passes: the first above 0.5
    assert got == pytest.approx(0.5 + 0.5 / ead.REFINE_POINTS)
    monkeypatch.setattr(ead, "matrix_law_upper", lambda config, method, eps: np.ones(len(eps)))
    assert ead.refined_upper(None, Method.TILTED, grid, 1.0, 1e-6) == 1.0  # none passes


def test_matrix_law_upper_paths():
    """:func:`epscert.results.rows.matrix_law_upper`: REMOVE alone is the REMOVE block-law bound at the rows' share
    (:func:`~epscert.results.rows.law_betas` of the whole β, one direction); ADD alone the ADD one; None for a method
    whose rows set no β aside (naive) and where the block law does not apply."""
    import dataclasses

    from epscert import Accountant
    from epscert.config import Direction, Method
    from epscert.results.rows import law_betas, matrix_law_upper

    n = 128
    acc = Accountant(noise_multiplier=2.0, strategy=toeplitz_strategy(np.array(binomial_c_col(32)), n),
                     cycle_length=n, samples=2000)
    config = dataclasses.replace(acc.config, methods=(Method.TILTED,))
    pair = one_participation(n, 32, 2.0)
    eps = np.array([0.8, 1.2, 1.6])
    beta = config.error_prob
    assert law_betas(beta) == (beta / 2.0, beta / 4.0)
    remove = dataclasses.replace(config, direction=Direction.REMOVE)
    want = block_law.remove_bound(pair, config.samples, config.seed, beta / 2.0).upper(eps)
    assert np.array_equal(matrix_law_upper(remove, Method.TILTED, eps), want)
    add = dataclasses.replace(config, direction=Direction.ADD)
    want = block_law.add_law_bound(pair, config.samples, config.seed, beta / 4.0).upper(eps)
    assert np.array_equal(matrix_law_upper(add, Method.TILTED, eps), want)
    assert matrix_law_upper(dataclasses.replace(config, methods=(Method.NAIVE,)), Method.NAIVE, eps) is None
    # law_seed (the searches of an inversion): the bounds of that seed, not of ``seed``; another seed differs
    moved = dataclasses.replace(remove, seed=config.seed + 1, law_seed=config.seed)
    assert np.array_equal(matrix_law_upper(moved, Method.TILTED, eps),
                          block_law.remove_bound(pair, config.samples, config.seed, beta / 2.0).upper(eps))
    other = block_law.remove_bound(pair, config.samples, config.seed + 1, beta / 2.0).upper(eps)
    assert not np.array_equal(other, matrix_law_upper(moved, Method.TILTED, eps))
    assert moved.config_id != dataclasses.replace(moved, law_seed=None).config_id
    assert dataclasses.replace(remove, law_seed=None).config_id == remove.config_id
    small = Accountant(noise_multiplier=2.0, strategy=toeplitz_strategy(np.array(binomial_c_col(16)), 2000),
                       cycle_length=2000, samples=2000)  # blocks of 20: the block law does not apply
    assert matrix_law_upper(dataclasses.replace(small.config, methods=(Method.TILTED,)), Method.TILTED, eps) is None


def test_decoupled_add_bound_only_where_the_block_law_one_leaves_add_able_to_bind(monkeypatch):
    """Both directions: the block-law ADD bound is formed before the decoupled one, and the decoupled one only where
    ADD's UCB is still above REMOVE's at some ε. Where it is not formed, ADD's rows are at or below REMOVE's, and the
    'both' rows are those of a run that forms it whatever (their UCBs the same floats)."""
    from epscert import Accountant
    from epscert.results import rows as rows_module

    formed = []
    original = rows_module.add_bound
    monkeypatch.setattr(rows_module, "add_bound", lambda *args: formed.append(args) or original(*args))

    def run():
        out = []
        for eps in (0.3, 0.5, 0.7, 1.0):
            acc = Accountant(noise_multiplier=2.0, strategy=toeplitz_strategy(np.array(binomial_c_col(32)), 256),
                             cycle_length=256, samples=2000)
            formed.clear()
            acc.get_delta(eps)
            out.append((acc.last_table.to_pylist(), bool(formed)))
        return out

    plain = run()
    assert not all(f for _, f in plain)  # some ε where the block-law ADD bound settles ADD
    for rows, was_formed in plain:
        if not was_formed:
            by = {d: [r for r in rows if r["direction"] == d and r["method"] == rows[0]["method"]]
                  for d in ("add", "remove")}
            assert by["add"] and len(by["add"]) == len(by["remove"])
            assert all(a["delta_upper"] <= r["delta_upper"] for a, r in zip(by["add"], by["remove"]))
    monkeypatch.setattr(rows_module, "could_bind", lambda *args: True)
    forced = run()
    assert all(f for _, f in forced)
    for (rows, _), (again, _) in zip(plain, forced):
        both = [(r["method"], r["epsilon"], r["delta_upper"]) for r in rows if r["direction"] == "both"]
        assert both and both == [(r["method"], r["epsilon"], r["delta_upper"]) for r in again if r["direction"] == "both"]
