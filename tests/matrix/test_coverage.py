"""Coverage of the matrix mechanism's certificates over seeded repetitions (issue 23, item 4).

Each run is an independent certify() (its own seed); RUNS = 100 (fast) or 300 (slow). A certified UCB at level β fails (falls below
the truth) with probability at most β, and so does the truncated LCB (above the truth). Over RUNS
runs the number of failures is then stochastically below Binomial(RUNS, β): the test fails when it
reaches LIMIT, the smallest k with P(Bin(RUNS, β) >= k) <= ALPHA. Each (method, direction, ε,
side) is one such test; its false-failure probability is <= ALPHA = 1e-5 (exact binomial tail, no
approximation), so <= 2e-4 for the 20 checks of a file.

The mean of the RUNS estimates must also lie within Z_CLT standard errors (their spread / √RUNS) of
the truth: it checks that the reference and the estimators agree, so a failure count of zero means
a valid bound, not a wrong reference.

Fast: C = I (n = 40, b = 10, σ = 2), truth from the allocation bracket at σ/√k (width ~1e-9
relative, so 'below the truth' is counted as below its upper side: stricter). Slow: a banded
strategy, truth from a large conditional run (its relative standard error is printed in the assertion;
it is far below the spread of one run).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

import epscert
from epscert.allocation import bracket_for
from epscert.matrix.strategies import toeplitz_strategy

from benchmarks.matrix_rivals import binomial_c_col

from .helpers import Z_CLT, row

ALPHA = 1e-5
ERROR_PROB = 0.2  # split over the two directions: each direction's bounds hold at β = 0.1
BETA = ERROR_PROB / 2


def limit(runs: int, beta: float) -> int:
    """Smallest k with P(Bin(runs, β) >= k) <= ALPHA."""
    k = int(stats.binom.isf(ALPHA, runs, beta)) + 1
    assert stats.binom.sf(k - 1, runs, beta) <= ALPHA
    return k


def run_coverage(strategy, sigma, b, eps, method, samples, runs, truth_lower, truth_upper, seed0, truth_se=None):
    """Failure counts per (direction, ε, side) and the mean estimate's check, over ``runs`` seeds.

    ``truth_lower``/``truth_upper``: {direction: array over ε} bracketing the true δ; ``truth_se``: the
    standard error of a Monte Carlo reference (added to the mean check's allowance)."""
    failures = {}
    estimates = {d: np.zeros((runs, len(eps))) for d in ("remove", "add")}
    for k in range(runs):
        table = epscert.certify(sampler="balls_and_bins_persistent", sigma=sigma, steps=b, epsilons=list(eps),
                                method=method, samples=samples, seed=seed0 + k, error_prob=ERROR_PROB,
                                strategy=strategy)
        for direction in ("remove", "add"):
            for i, e in enumerate(eps):
                r = row(table, method=method, direction=direction, epsilon=e)
                assert r["error_prob"] == BETA
                estimates[direction][k, i] = r["delta"]
                key = (direction, e)
                ucb_fail = r["delta_upper"] < truth_upper[direction][i]
                lcb_fail = r["delta_lower"] is not None and r["delta_lower"] > truth_lower[direction][i]
                failures.setdefault(key + ("ucb",), 0)
                failures[key + ("ucb",)] += ucb_fail
                if r["delta_lower"] is not None:
                    failures.setdefault(key + ("lcb",), 0)
                    failures[key + ("lcb",)] += lcb_fail
    cap = limit(runs, BETA)
    bad = {k: v for k, v in failures.items() if v >= cap}
    assert not bad, f"{method}: failures {bad} reach {cap} of {runs} runs at β = {BETA}"
    for direction in ("remove", "add"):
        mean = estimates[direction].mean(axis=0)
        se = estimates[direction].std(axis=0, ddof=1) / math.sqrt(runs)
        if truth_se is not None:
            se = np.hypot(se, truth_se[direction])
        for i, e in enumerate(eps):
            lo, up = truth_lower[direction][i], truth_upper[direction][i]
            assert lo - Z_CLT * se[i] <= mean[i] <= up + Z_CLT * se[i], (method, direction, e, mean[i], se[i], lo, up)
    return failures


FAST = {"naive": 4000, "importance": 2000, "conditional": 400, "tilted": 2000}


@pytest.mark.parametrize("method", sorted(FAST))
def test_identity_strategy_coverage(method):
    sigma, n, b, eps = 2.0, 40, 10, (0.5, 1.0)
    bracket = bracket_for(sigma / math.sqrt(n // b), b, 1)
    upper = {d: bracket.delta(list(eps), d)[0] for d in ("remove", "add")}
    lower = {d: bracket.delta(list(eps), d)[1] for d in ("remove", "add")}
    failures = run_coverage(toeplitz_strategy([1.0], n), sigma, b, eps, method, FAST[method], 100, lower, upper,
                            seed0=1000)
    assert len(failures) == (4 if method == "naive" else 8)


SLOW = {"naive": 5000, "importance": 5000, "conditional": 800, "tilted": 5000}
BANDED = dict(sigma=3.0, n=200, b=20, eps=(1.0, 2.0), bands=8)


@pytest.fixture(scope="module")
def banded_reference():
    """(strategy, truth, truth_se): a 100 000-sample conditional run on the banded strategy."""
    strategy = toeplitz_strategy(binomial_c_col(BANDED["bands"]), BANDED["n"])
    eps = BANDED["eps"]
    reference = epscert.certify(sampler="balls_and_bins_persistent", sigma=BANDED["sigma"], steps=BANDED["b"],
                                epsilons=list(eps), method="conditional", samples=100_000, seed=99, strategy=strategy)
    truth, truth_se, rse = {}, {}, []
    for d in ("remove", "add"):
        rows = [row(reference, method="conditional", direction=d, epsilon=e) for e in eps]
        truth[d] = np.array([r["delta"] for r in rows])
        truth_se[d] = np.array([r["std_error"] for r in rows])
        rse += [r["std_error"] / r["delta"] for r in rows]
    assert max(rse) < 0.005, rse  # the reference's own error is small against one run's spread
    return strategy, truth, truth_se


@pytest.mark.slow
@pytest.mark.parametrize("method", sorted(SLOW))
def test_banded_strategy_coverage(method, banded_reference):
    strategy, truth, truth_se = banded_reference
    run_coverage(strategy, BANDED["sigma"], BANDED["b"], BANDED["eps"], method, SLOW[method], 300, truth, truth,
                 seed0=5000, truth_se=truth_se)
