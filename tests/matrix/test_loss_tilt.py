"""The loss-tilted estimator (method ``tilted``, :mod:`epscert.matrix.loss_tilt`) piece by piece,
against values computed without it.

- Z_θ = E_Q[e^{θL}]: against the sum over all b^θ tuples in exact-rounding arithmetic (math.fsum of
  exp of the pair sums) for small b, and against a plain Monte Carlo mean of e^{θL} under Q.
- The tuple sampler: empirical frequencies of 200 000 draws against the exact tuple law w(k)/F_0.
- The values: every draw is in [0, B_θ(ε)], and the largest comes within a factor 2 of B_θ (a looser
  range fails); θ = 1 gives the naive P-form value.
- The choice of θ and the caps on it.

The certificates of the method (C = I against the bracket, b = 1 against the closed form, coverage,
agreement with the other estimators, numpy against JAX) are in the files that check every method.
Statistical checks use Z_CLT = 4.5 standard errors (6.8e-6 two-sided per check, CLT), or a count
bound stated where used.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest

import epscert
from epscert.allocation import bracket_for

from epscert.matrix import kernels as mk
from epscert.matrix.loss_tilt import (
    LossTilt, choose_order, last_weights, law_tv, log_bound, loss_tilt, max_order, remove_tilt_log_values,
)
from epscert.matrix.values import MatrixValueSampler
from epscert.matrix.pair import MatrixPair
from epscert.config import Direction
from epscert.rng import stream_generator
from epscert.matrix.strategies import toeplitz_strategy
from epscert.matrix.strategies.gram import mode_gram

from .helpers import Z_CLT, row

BANDED = [1.0, 0.5, 0.375, 0.3125]


def pair_of(c_col, n: int, b: int, sigma: float) -> MatrixPair:
    return MatrixPair(mode_gram(toeplitz_strategy(c_col, n), b), sigma)


def brute_force_log_z(g: np.ndarray, theta: int) -> float:
    """log of b^-θ Σ_k exp(Σ_{j<j'} G_{k_j k_j'}) over all ordered tuples, summed by math.fsum."""
    b = g.shape[0]
    terms = [math.exp(sum(g[k[a], k[c]] for a, c in itertools.combinations(range(theta), 2)))
             for k in itertools.product(range(b), repeat=theta)]
    return math.log(math.fsum(terms)) - theta * math.log(b)


@pytest.mark.parametrize("theta", [1, 2, 3, 4, 5])
def test_z_is_the_sum_over_every_tuple(theta):
    pair = pair_of(BANDED, 30, 6, 1.2)  # modes overlap (G has 3 nonzero diagonals on each side)
    assert np.count_nonzero(pair.g) > pair.bins
    tilt = LossTilt(pair, theta)
    assert abs(tilt.log_z - brute_force_log_z(pair.g, theta)) <= 1e-12 * max(1.0, abs(tilt.log_z))


def test_every_table_entry_is_its_sum_over_completions():
    """θ = 4, b = 4: F_m(k_1..k_m) = Σ over the completions k_{m+1}..k_4 of w(k), entry by entry (fsum)."""
    pair = pair_of(BANDED, 16, 4, 1.5)
    tilt = LossTilt(pair, 4)
    g = pair.g
    for m, table in enumerate(tilt.tables, start=1):
        for head in itertools.product(range(4), repeat=m):
            exact = math.fsum(math.exp(sum(g[k[a], k[c]] for a, c in itertools.combinations(range(4), 2)))
                              for tail in itertools.product(range(4), repeat=4 - m) for k in [head + tail])
            assert abs(table[head] - exact) <= 1e-13 * exact, (m, head, table[head], exact)


def test_every_row_wise_table_entry_is_its_sum_over_completions():
    """θ = 5 (row-wise: F_1..F_3 stored, F_4 formed per draw), b = 4: each stored entry and each per-draw
    row H ∘ (W H) of F_4 (up to the factor w(k_1..k_3) common to the row) against fsum over completions."""
    pair = pair_of(BANDED, 16, 4, 1.5)
    tilt = LossTilt(pair, 5)
    assert tilt.rowwise and len(tilt.tables) == 3
    g = pair.g

    def weight(k):
        return math.exp(sum(g[k[a], k[c]] for a, c in itertools.combinations(range(5), 2)))

    for m, table in enumerate(tilt.tables, start=1):
        for head in itertools.product(range(4), repeat=m):
            exact = math.fsum(weight(head + tail) for tail in itertools.product(range(4), repeat=5 - m))
            assert abs(table[head] - exact) <= 1e-13 * exact, (m, head, table[head], exact)
    for head in itertools.product(range(4), repeat=3):
        row = last_weights(np, tilt.weights, [np.array([k]) for k in head], True)[0]
        common = math.exp(sum(g[head[a], head[c]] for a, c in itertools.combinations(range(3), 2)))
        for last in range(4):
            exact = math.fsum(weight(head + (last, tail)) for tail in range(4))
            assert abs(common * row[last] - exact) <= 1e-13 * exact, (head, last)


@pytest.mark.parametrize("theta", [2, 3, 4])  # θ = 5: the sum over every tuple (above); e^{5L} is too heavy here
def test_z_is_the_moment_of_the_loss_under_q(theta):
    """A plain Monte Carlo mean of e^{θL}, g ~ Q, 400 000 draws (no tuple, no table)."""
    pair = pair_of(BANDED, 200, 20, 4.0)
    rng = stream_generator(21, theta)
    draws = []
    for _ in range(20):
        g = pair.noise(rng.standard_normal((20_000, pair.bins)))
        draws.append(np.exp(theta * mk.log_mean_exp(np, g - pair.half_diag)))
    y = np.concatenate(draws)
    mean, se = float(y.mean()), float(y.std(ddof=1) / math.sqrt(y.size))
    assert se < 0.02 * mean  # the check bites
    assert abs(mean - math.exp(LossTilt(pair, theta).log_z)) <= Z_CLT * se, (mean, se)


def exact_tuple_law(pair, theta: int) -> np.ndarray:
    """w(k)/F_0 over all b^θ ordered tuples, as a θ-dimensional array (no table)."""
    b, w = pair.bins, np.exp(pair.g)
    law = np.empty((b,) * theta)
    for k in itertools.product(range(b), repeat=theta):
        law[k] = math.prod(w[k[a], k[c]] for a, c in itertools.combinations(range(theta), 2))
    return law / law.sum()


def check_counts(tuples: np.ndarray, law: np.ndarray) -> None:
    """Every cell's count within 5 binomial standard deviations of n·p (normal approximation: false
    failure <= cells · 5.7e-7 < 2e-4 here)."""
    n = tuples.shape[0]
    counts = np.zeros(law.shape)
    np.add.at(counts, tuple(tuples[:, j] for j in range(tuples.shape[1])), 1)
    assert n * law.min() > 300
    sd = np.sqrt(n * law * (1 - law))
    assert np.all(np.abs(counts - n * law) <= 5 * sd), float(np.max(np.abs(counts - n * law) / sd))


@pytest.mark.parametrize("theta,b,sigma", [(3, 5, 2.0), (4, 4, 2.0), (5, 3, 4.0)])
def test_tuples_follow_the_exact_tuple_law(theta, b, sigma):
    """125, 256 and 243 cells, 200 000 draws (smallest expected counts above 300); θ = 5 is row-wise."""
    pair = pair_of(BANDED, 4 * b, b, sigma)
    tuples = LossTilt(pair, theta).draw_tuples(stream_generator(22, theta).random((200_000, theta)))
    check_counts(tuples, exact_tuple_law(pair, theta))


@pytest.mark.parametrize("order", ["random", "descending", "ascending"])
def test_the_rounded_inverse_cdf_law_is_within_law_tv(order):
    """The law an inverse CDF on float64 cumulative sums gives, computed in exact rational arithmetic
    (interval lengths of the computed partial sums over the computed total), against the exact law of the
    same weights: its total variation is below law_tv's bound. 300 weights spread over 30 decades; sorted
    descending, the small ones are added to a huge partial sum (the worst case for absorption)."""
    rng = stream_generator(31, 1)
    w = np.exp(rng.normal(0.0, 14.0, size=300))
    if order != "random":
        w = np.sort(w)[::-1] if order == "descending" else np.sort(w)
    cum = np.cumsum(w)
    total_exact = sum(Fraction(float(x)) for x in w)
    bounds = [Fraction(0)] + [Fraction(float(c)) for c in cum]
    drawn = [(bounds[k + 1] - bounds[k]) / bounds[-1] for k in range(w.size)]
    tv = sum(abs(p - Fraction(float(x)) / total_exact) for p, x in zip(drawn, w)) / 2
    assert 0 < float(tv) <= law_tv(w.size, 0.0), (float(tv), law_tv(w.size, 0.0))  # measured: 5e-18 .. 4e-15


@pytest.mark.parametrize("theta,b,sigma", [(4, 4, 2.0), (5, 3, 4.0)])
def test_jax_draws_the_same_tuple_law(theta, b, sigma):
    """The JAX kernel's categorical draws (θ = 4, b = 4; θ = 5 row-wise, b = 3) against the same exact law."""
    jax = pytest.importorskip("jax")
    from epscert.matrix import jax_kernels as jax_matrix  # noqa: PLC0415

    pair = pair_of(BANDED, 4 * b, b, sigma)
    sampler = MatrixValueSampler(pair, "tilted", 1.0, order=theta)
    tuples = jax_matrix.tilt_tuples(sampler, jax.random.PRNGKey(3), 200_000)
    check_counts(np.asarray(tuples), exact_tuple_law(pair, theta))


def test_the_tuple_law_slack_is_tiny_and_required():
    """The rounding allowance of the tuple law is far below the range (b = 100, θ = 4: 5.5e-12 of it),
    and a tilted sampler refuses to guess its order."""
    pair = pair_of([1.0], 2000, 100, 4.0)
    sampler = MatrixValueSampler(pair, "tilted", 1.0, order=4)
    slack = sampler.value_slack(Direction.REMOVE, [1.0, 2.0])
    assert np.all(slack > 0) and np.all(slack <= 6e-12 * sampler.value_range(Direction.REMOVE, [1.0, 2.0]))
    assert np.all(sampler.value_slack(Direction.ADD, [1.0, 2.0]) == 0)
    with pytest.raises(ValueError, match="order"):
        MatrixValueSampler(pair, "tilted", 1.0)


@pytest.mark.parametrize("theta", [1, 2, 3, 4])
def test_values_lie_in_the_proven_range_and_reach_it(theta):
    """0 <= Y <= B_θ(ε) on 50 000 draws, and max Y > B_θ/2 (measured: within a few percent) at ε = 1, 2."""
    pair = pair_of(BANDED, 200, 20, 2.0)
    eps = [1.0, 2.0]
    sampler = MatrixValueSampler(pair, "tilted", 1.0, order=theta)
    assert sampler.order == theta
    values = sampler.draw(stream_generator(23, theta), 50_000, Direction.REMOVE, eps)
    ranges = sampler.value_range(Direction.REMOVE, eps)
    for i in range(len(eps)):
        assert np.all(values[i] >= 0) and np.all(values[i] <= ranges[i]), (theta, eps[i])
        assert values[i].max() > 0.5 * ranges[i], (theta, eps[i], values[i].max() / ranges[i])
    if theta == 1:
        assert np.all(ranges == pytest.approx(1.0))


def test_theta_one_value_is_the_naive_p_form():
    """θ = 1: log Y = log(1 - e^{ε-L}) at the loss of g = G e_k + noise, for the same g."""
    pair = pair_of(BANDED, 200, 20, 1.5)
    rng = stream_generator(24, 1)
    noise = pair.noise(rng.standard_normal((1000, pair.bins)))
    tuples = rng.integers(0, pair.bins, size=(1000, 1))
    logs = remove_tilt_log_values(np, noise.copy(), tuples, pair.g, pair.half_diag, 0.0, 1, [0.5])[0]
    loss = mk.log_mean_exp(np, noise + pair.g[tuples[:, 0]] - pair.half_diag)
    with np.errstate(divide="ignore"):
        expected = np.where(loss > 0.5, np.log1p(-np.exp(np.minimum(0.5 - loss, 0.0))), -np.inf)
    np.testing.assert_allclose(logs, expected, rtol=1e-12)


def test_the_order_is_the_tightest_renyi_bound_and_is_capped():
    pair = pair_of(BANDED, 200, 20, 4.0)
    assert max_order(pair) == 5
    for grid in ([0.5], [2.0, 3.0, 4.0], [6.0]):
        theta = choose_order(pair, grid)
        ref = float(np.median(grid))
        logs = {t: float(log_bound(loss_tilt(pair, t).log_z, t, ref)) for t in range(2, 6)}
        assert theta == 1 or logs[theta] == min(logs.values())
        assert theta > 1 or min(logs.values()) >= 0.0
    assert choose_order(pair, [6.0]) >= choose_order(pair, [0.5])
    big_b = pair_of([1.0], 400, 400, 4.0)  # b³ = 6.4e7 > MAX_TABLE_ENTRIES
    assert max_order(big_b) == 3
    assert max_order(pair_of([1.0], 180, 180, 4.0)) == 4  # b³ fits, the θ = 5 build exceeds MAX_BUILD_FLOPS
    assert max_order(pair_of([1.0], 150, 150, 4.0)) == 5
    assert max_order(pair_of([1.0], 200, 20, 0.3)) == 3  # G = 111: C(4, 2) · 111 > MAX_LOG_WEIGHT >= C(3, 2) · 111
    loud = pair_of([1.0], 200, 20, 0.2)  # G = 250: C(3, 2) · 250 > MAX_LOG_WEIGHT
    assert max_order(loud) == 2
    with pytest.raises(ValueError, match="theta"):
        LossTilt(loud, 3)


def test_an_order_five_certificate_brackets_the_allocation_bracket():
    """C = I, n = 40, b = 10, σ = 2 (one Balls-and-Bins epoch of 10 steps at σ/2, deterministic and independent
    of every matrix code path): the order chosen is 5 (row-wise), and the certified [LCB, UCB] of δ_remove
    overlaps the bracket at ε = 3 and 4 (δ about 1.6e-7 and 5e-10) while the UCB stays within 30% of the bracket's
    upper end (the certificate bites). Each side fails with probability <= β = 1e-3 (KL/Bernstein)."""
    sigma, n, b, eps = 2.0, 40, 10, [3.0, 4.0]
    strategy = toeplitz_strategy([1.0], n)
    pair = pair_of([1.0], n, b, sigma)
    assert choose_order(pair, eps) == 5 and loss_tilt(pair, 5).rowwise
    table = epscert.certify(sampler="balls_and_bins_persistent", sigma=sigma, steps=b, epsilons=eps,
                            method="tilted", samples=40_000, seed=7, strategy=strategy, direction="remove",
                            error_prob=1e-3)
    upper, lower = bracket_for(sigma / math.sqrt(n // b), b, 1).delta(eps, "remove")
    for i, e in enumerate(eps):
        r = row(table, epsilon=e)
        assert r["delta_lower"] <= upper[i] and r["delta_upper"] >= lower[i], (e, r, lower[i], upper[i])
        assert r["delta_upper"] <= 1.3 * upper[i], (e, r["delta_upper"], upper[i])


@pytest.mark.parametrize("c_col", [[1.0], BANDED])
def test_the_renyi_floor_is_z_of_the_diagonal_and_below_the_tables(c_col):
    """benchmarks/matrix_renyi_floor.py's Z_θ^diag (a polynomial product, no table): equal to the tables' Z_θ
    when G is diagonal (C = I: distinct sites do not interact) and below it when G >= 0 has off-diagonal
    entries (the floor the issue-33 evidence rests on), θ = 2..5."""
    from benchmarks.matrix_renyi_floor import log_z_diag  # noqa: PLC0415

    pair = pair_of(c_col, 24, 6, 1.5)
    floor = log_z_diag(pair.diag, 5)
    for theta in range(2, 6):
        exact = LossTilt(pair, theta).log_z
        if len(c_col) == 1:
            assert abs(floor[theta] - exact) <= 1e-12 * abs(exact), (theta, floor[theta], exact)
        else:
            assert np.min(pair.g) >= 0 and floor[theta] < exact - 1e-3, (theta, floor[theta], exact)
