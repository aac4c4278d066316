"""The cluster proposal of the loss-tilted estimator (:mod:`epscert.matrix.cluster_tilt`), against values computed
without it.

- The cluster weights a_m: against the sum over every shape (all gap sequences), in exact-rounding arithmetic.
- The proposal law π: computed here from its definition (cluster decomposition, compositions, stars and bars) for
  every multiset of a small pair; it sums to 1, the draws follow it, and every draw's weight Z̄ρκ is
  (θ!/Π s!) w(s)/(b^θ π(s)) (the unbiasedness identity), so Σ_s π(s) Z̄ρκ(s) is the brute-force Z_θ.
- The mean weight E_π[Z̄ρκ] against the tables' exact Z_θ on a larger banded pair (Monte Carlo, CLT).
- The values: in [0, B̄_θ(ε)], reaching half of it, and their mean against the table orders' estimate.
- Coverage of the certificate at a cluster order against the allocation bracket (C = I, one participation).

Statistical checks use Z_CLT = 4.5 standard errors (6.8e-6 two-sided per check), or a count bound stated where used.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

import epscert
from benchmarks.matrix_rivals import binomial_c_col
from epscert.allocation import bracket_for
from epscert.config import Direction, Method
from epscert.matrix.cluster_tilt import (
    ClusterGas, ClusterTilt, band_profile, choose_order, cluster_order_range, cluster_tilt, compositions, tilt_for,
)
from epscert.matrix.loss_tilt import LossTilt, max_order
from epscert.matrix.pair import MatrixPair
from epscert.matrix.strategies import toeplitz_strategy
from epscert.matrix.strategies.gram import mode_gram
from epscert.matrix.values import MatrixValueSampler
from epscert.rng import stream_generator

from .helpers import Z_CLT, row
from .test_coverage import limit, run_coverage

BANDED = [1.0, 0.5, 0.375, 0.3125]


def pair_of(c_col, n: int, b: int, sigma: float) -> MatrixPair:
    return MatrixPair(mode_gram(toeplitz_strategy(c_col, n), b), sigma)


def shape_weight(offsets, p) -> float:
    """ω of one shape: exp(Σ_{pairs} p_{|Δ|}) / Π (count at a site)!, p_d = 0 for d >= len(p)."""
    pairs = sum(p[abs(a - c)] if abs(a - c) < len(p) else 0.0 for a, c in itertools.combinations(offsets, 2))
    counts = np.bincount(np.asarray(offsets) - min(offsets))
    return math.exp(pairs) / math.prod(math.factorial(int(c)) for c in counts)


def brute_cluster_weights(p, m_max: int) -> list[float]:
    """a_m = Σ over every gap sequence in [0, w)^{m-1} of ω (math.fsum)."""
    w = len(p)
    out = [0.0, 1.0]
    for m in range(2, m_max + 1):
        terms = [shape_weight(np.concatenate([[0], np.cumsum(gaps)]), p) for gaps in itertools.product(range(w), repeat=m - 1)]
        out.append(math.fsum(terms))
    return out


def test_cluster_weights_are_the_sum_over_every_shape():
    """w = 3 and w = 1 (no neighbours: a_m = e^{p_0 m(m-1)/2}/m!), m up to 6, relative 1e-12."""
    for p in ([1.3, 0.7, 0.2], [0.9]):
        gas = ClusterGas(len(p), np.array(p), 6)
        exact = brute_cluster_weights(p, 6)
        np.testing.assert_allclose(gas.a[1:], exact[1:], rtol=1e-12)
    np.testing.assert_allclose(ClusterGas(1, np.array([0.9]), 6).a[1:],
                               [math.exp(0.9 * m * (m - 1) / 2) / math.factorial(m) for m in range(1, 7)], rtol=1e-12)


def clusters_of(sorted_sites, w: int) -> list[list[int]]:
    out = [[sorted_sites[0]]]
    for k in sorted_sites[1:]:
        if k - out[-1][-1] < w:
            out[-1].append(k)
        else:
            out.append([k])
    return out


def proposal_law(pair, theta: int) -> dict[tuple[int, ...], float]:
    """π(s) for every multiset s of θ sites, from the definition (module docstring), with a_m by brute force."""
    b = pair.bins
    w, p = band_profile(pair.g)
    a = brute_cluster_weights(list(p), theta)

    def c_max(r):
        return math.comb(b - 1 - w * (r - 1) + r, r) if b - 1 - w * (r - 1) >= 0 else 0

    total = math.fsum(c_max(len(c)) * math.prod(a[m] for m in c) for c in compositions(theta))
    law = {}
    for s in itertools.combinations_with_replacement(range(b), theta):
        parts = clusters_of(list(s), w)
        r = len(parts)
        u = sum(c[-1] - c[0] for c in parts) + w * (r - 1)
        omega = math.prod(shape_weight(c, p) for c in parts)
        law[s] = c_max(r) * omega / (total * math.comb(b - 1 - u + r, r)) if b - 1 - u >= 0 else 0.0
    return law


def tuple_weight(pair, s) -> float:
    return math.exp(sum(pair.g[i, j] for i, j in itertools.combinations(s, 2)))


@pytest.mark.parametrize("c_col,b,sigma,theta", [(BANDED[:3], 9, 1.0, 3), (BANDED[:3], 8, 1.5, 4), ([1.0], 7, 1.0, 4)])
def test_the_proposal_law_is_its_definition_and_every_weight_is_unbiased(c_col, b, sigma, theta):
    """One participation (n = b): π sums to 1 less the mass of the proposals whose clusters do not fit in b sites
    (κ = 0: weight 0, no multiset); 200 000 draws follow π cell by cell, and that mass (5 binomial standard
    deviations, false failure <= cells · 5.7e-7); every drawn multiset carries the weight (θ!/Π s!) w(s)/(b^θ π(s))
    (relative 1e-9); and Σ_s π(s) · that weight is the brute-force Z_θ (the tables' exact one)."""
    pair = pair_of(c_col, b, b, sigma)
    tilt = ClusterTilt(pair, theta, ClusterGas(*band_profile(pair.g), theta))
    law = proposal_law(pair, theta)
    unplaced = 1.0 - math.fsum(law.values())
    assert -1e-12 <= unplaced < 0.05
    def weight(s):
        return (math.factorial(theta) / math.prod(math.factorial(s.count(k)) for k in set(s))
                * tuple_weight(pair, s) / (b**theta * law[s]))
    z_exact = math.exp(LossTilt(pair, theta).log_z) if theta <= max_order(pair) else None
    z_brute = math.fsum(law[s] * weight(s) for s in law if law[s] > 0)
    brute = math.fsum(tuple_weight(pair, k) for k in itertools.product(range(b), repeat=theta)) / b**theta
    assert z_brute == pytest.approx(brute, rel=1e-10)
    if z_exact is not None:
        assert z_brute == pytest.approx(z_exact, rel=1e-10)
    tuples, log_w = tilt.draw(stream_generator(41, theta), 200_000)
    placed = np.isfinite(log_w)
    n = placed.size
    sd = math.sqrt(n * max(unplaced, 1e-300) * (1 - unplaced))
    assert abs(np.count_nonzero(~placed) - n * unplaced) <= 5 * sd + 1e-9
    tuples, log_w = tuples[placed], log_w[placed]
    keys = [tuple(sorted(t)) for t in tuples.tolist()]
    counts = {}
    for k, lw in zip(keys, log_w):
        counts[k] = counts.get(k, 0) + 1
        if counts[k] <= 3:  # the weight of a draw depends on its multiset only
            assert math.exp(tilt.log_z + lw) == pytest.approx(weight(k), rel=1e-9), k
    for s, prob in law.items():
        sd = math.sqrt(n * prob * (1 - prob))
        assert abs(counts.get(s, 0) - n * prob) <= 5 * sd + 1e-9, (s, counts.get(s, 0), n * prob)
    assert min(n * q for q in law.values() if q > 0) > 30


@pytest.mark.slow  # 9 s; the tilt's coverage and naive containment below stay fast
def test_the_mean_weight_is_z_of_the_tables():
    """n = b = 150 (one participation), 4 bands, σ = 1: E_π[Z̄ρκ] from 400 000 draws against the tables' exact Z_θ,
    θ = 2..5; Z̄ is above Z_θ and within 5% of it (3% at θ = 5: the placements' and the end's share at this small b)."""
    pair = pair_of(BANDED, 150, 150, 1.0)
    top, gas = cluster_order_range(pair)
    assert top >= 5 and gas.w == 4
    for theta in range(2, 6):
        tilt = ClusterTilt(pair, theta, gas)
        _, log_w = tilt.draw(stream_generator(42, theta), 400_000)
        y = np.exp(tilt.log_z + log_w)
        mean, se = float(y.mean()), float(y.std(ddof=1) / math.sqrt(y.size))
        z = math.exp(LossTilt(pair, theta).log_z)
        assert abs(mean - z) <= Z_CLT * se, (theta, mean, se, z)
        assert z <= math.exp(tilt.log_z) <= 1.05 * z


def test_values_lie_in_the_range_and_agree_with_the_tables():
    """n = b = 60, 4 bands, σ = 1, ε = 1.5, 2: the order chosen is a cluster order (above the tables' 5); its
    values lie in [0, B̄] and reach half of it, and their mean agrees with order 3's (tables) within Z_CLT."""
    pair = pair_of(BANDED, 60, 60, 1.0)
    eps = [1.5, 2.0]
    theta = choose_order(pair, eps)
    assert theta > max_order(pair) == 5 and isinstance(tilt_for(pair, theta), ClusterTilt)
    assert choose_order(pair, eps, clusters=False) <= 5
    means = {}
    for order, seed in ((theta, 43), (3, 44)):
        sampler = MatrixValueSampler(pair, "tilted", 1.0, order=order)
        values = sampler.draw(stream_generator(seed, order), 100_000, Direction.REMOVE, eps)
        ranges = sampler.value_range(Direction.REMOVE, eps)
        assert np.all(values >= 0) and np.all(values <= ranges[:, None])
        means[order] = (values.mean(axis=1), values.std(axis=1, ddof=1) / math.sqrt(values.shape[1]))
        if order == theta:
            assert np.all(values.max(axis=1) > 0.5 * ranges), values.max(axis=1) / ranges
            slack = sampler.value_slack(Direction.REMOVE, eps)
            assert np.all(slack > 0) and np.all(slack <= 1e-9 * ranges)
    (m1, s1), (m2, s2) = means[theta], means[3]
    assert np.all(np.abs(m1 - m2) <= Z_CLT * np.hypot(s1, s2)), (m1, s1, m2, s2)
    assert np.all(s1 < s2)  # the higher order is the sharper proposal here


def test_no_cluster_order_without_a_band():
    """More than one participation (b < n) makes G cyclically banded: no cluster order; JAX refuses a cluster order."""
    assert band_profile(pair_of(BANDED, 40, 10, 2.0).g) is None
    assert cluster_order_range(pair_of(BANDED, 40, 10, 2.0)) == (0, None)
    with pytest.raises(ValueError, match="theta"):
        cluster_tilt(pair_of(BANDED, 40, 10, 2.0), 6)
    pair = pair_of(BANDED, 60, 60, 0.8)
    sampler = MatrixValueSampler(pair, "tilted", 1.0, order=8)
    pytest.importorskip("jax")
    from epscert.matrix import jax_kernels  # noqa: PLC0415

    with pytest.raises(ValueError, match="clusters"):
        jax_kernels.check_supported(sampler, Method.TILTED)


def test_cluster_order_coverage_against_the_bracket():
    """C = I, one participation (n = b = 20, σ = 1: one Balls-and-Bins epoch of 20 steps), ε = 1, 2 (δ_remove about
    3.2e-4 and 1.2e-6; δ_add about 5.2e-6 and 3.7e-17, where the bracket still resolves it): the order chosen is 6, drawn
    by clusters. 60 seeded certificates of 2000 samples; each side fails
    with probability <= β = 0.1, and a count of failures reaching the binomial limit (false failure <= 1e-5) fails."""
    sigma, b, eps = 1.0, 20, (1.0, 2.0)
    assert choose_order(pair_of([1.0], b, b, sigma), eps) == 6
    bracket = bracket_for(sigma, b, 1)
    upper = {d: bracket.delta(list(eps), d)[0] for d in ("remove", "add")}
    lower = {d: bracket.delta(list(eps), d)[1] for d in ("remove", "add")}
    failures = run_coverage(toeplitz_strategy([1.0], b), sigma, b, eps, "tilted", 2000, 60, lower, upper, seed0=3000)
    assert limit(60, 0.1) > max(failures.values())


def test_the_band_rows_add_the_same_shift_as_the_full_rows():
    """ClusterTilt.shifted (each index's band row, in a padded copy) against g_noise + Σ_j G e_{k_j} with G's full
    rows (loss_tilt's sum), on draws that reach both ends of the bins: equal to rounding."""
    pair = pair_of(BANDED, 30, 30, 1.0)
    tilt = cluster_tilt(pair, 7)
    rng = stream_generator(45, 7)
    tuples, _ = tilt.draw(rng, 5000)
    assert tuples.min() == 0 and tuples.max() == pair.bins - 1
    noise = rng.standard_normal((5000, pair.bins))
    full = noise + sum(pair.g[tuples[:, j]] for j in range(7))
    np.testing.assert_allclose(tilt.shifted(noise, tuples), full, rtol=0, atol=1e-12)


@pytest.mark.slow
def test_banded_one_participation_coverage_against_a_conditional_reference():
    """n = b = 60, 4 bands, σ = 1, ε = 1.5, 2 (a cluster order, above the tables' 5): 100 seeded certificates of 5000
    samples against a 200 000-sample conditional run (its standard error enters the mean check); each side fails
    with probability <= β = 0.1, and a failure count reaching the binomial limit (false failure <= 1e-5) fails."""
    sigma, b, eps = 1.0, 60, (1.5, 2.0)
    assert choose_order(pair_of(BANDED, b, b, sigma), eps) > max_order(pair_of(BANDED, b, b, sigma))
    strategy = toeplitz_strategy(BANDED, b)
    reference = epscert.certify(sampler="balls_and_bins_persistent", sigma=sigma, steps=b, epsilons=list(eps),
                                method="conditional", samples=200_000, seed=98, strategy=strategy)
    truth, truth_se = {}, {}
    for d in ("remove", "add"):
        rows = [row(reference, method="conditional", direction=d, epsilon=e) for e in eps]
        truth[d] = np.array([r["delta"] for r in rows])
        truth_se[d] = np.array([r["std_error"] for r in rows])
    assert np.all(truth_se["remove"] < 0.01 * truth["remove"]), truth_se
    failures = run_coverage(strategy, sigma, b, eps, "tilted", 5000, 100, truth, truth, seed0=7000, truth_se=truth_se)
    assert limit(100, 0.1) > max(failures.values())


def one_participation_losses(c_col, n: int, sigma: float, remove: bool, count: int, rng, chunk: int = 4000):
    """An independent naive sampler of the one-participation pair (no epscert code): L = log (1/n) Σ_k
    exp(<a_k, w> - |a_k|²/2), a_k = C e_k/σ (column k of the banded Toeplitz C: c_i at row k + i < n), w = a_K + z
    (REMOVE, K uniform) or z (ADD); every <a_k, w> at once as a correlation of w with c, O(n · bands) a draw."""
    c = np.asarray(c_col, dtype=np.float64) / sigma
    p = c.size
    norms = np.array([np.sum(c[: min(p, n - k)] ** 2) for k in range(n)])
    out = []
    for start in range(0, count, chunk):
        m = min(chunk, count - start)
        w = rng.standard_normal((m, n + p))
        w[:, n:] = 0.0  # rows past n do not exist
        if remove:
            k = rng.integers(0, n, size=m)
            for i in range(p):
                inside = k + i < n
                w[np.flatnonzero(inside), (k + i)[inside]] += c[i]
        dots = np.zeros((m, n))
        for i in range(p):
            dots += c[i] * w[:, i : i + n]
        x = dots - norms / 2
        top = x.max(axis=1)
        out.append(top + np.log(np.mean(np.exp(x - top[:, None]), axis=1)))
    return np.concatenate(out)


def test_certificates_contain_an_independent_naive_estimate_at_one_participation():
    """n = b = 300, 16 bands of binom(2i, i)/4^i, σ = 1.2, ε = 0.5 and 0.6 (δ about 3e-3 and 1e-3): the tilted
    certificate (a cluster order: the tables stop at 3 for b = 300) and the conditional one contain the naive
    estimate of 100 000 draws per direction (this file's own sampler), widened by Z_CLT of its standard errors."""
    n, sigma, eps = 300, 1.2, [0.5, 0.6]
    c_col = binomial_c_col(16)
    assert choose_order(pair_of(c_col, n, n, sigma), eps) > max_order(pair_of(c_col, n, n, sigma)) == 3
    rng = stream_generator(46, 1)
    naive = {}
    for direction, remove in (("remove", True), ("add", False)):
        loss = one_participation_losses(c_col, n, sigma, remove, 100_000, rng)
        loss = loss if remove else -loss
        vals = np.stack([-np.expm1(np.minimum(e - loss, 0.0)) for e in eps])
        naive[direction] = (vals.mean(axis=1), vals.std(axis=1, ddof=1) / math.sqrt(loss.size))
    assert np.all(naive["remove"][0] > 5e-4) and np.all(naive["add"][0] > 2e-4)  # the check resolves δ
    for method, samples in (("tilted", 20_000), ("conditional", 2000)):
        table = epscert.certify(sampler="balls_and_bins_persistent", sigma=sigma, steps=n, epsilons=eps, method=method,
                                samples=samples, seed=11, strategy=toeplitz_strategy(c_col, n), error_prob=1e-3)
        for direction in ("remove", "add"):
            for i, e in enumerate(eps):
                r = row(table, method=method, direction=direction, epsilon=e)
                mean, se = naive[direction][0][i], naive[direction][1][i]
                assert r["delta_lower"] - Z_CLT * se <= mean <= r["delta_upper"] + Z_CLT * se, (method, direction, e, r, mean)


@pytest.mark.slow
def test_the_production_pair_weight_is_its_exact_z():
    """n = b = 2000, 16 bands, σ = 1.2 (issue 33's one-participation row): θ_max is 11 (the state cap at w = 16);
    at θ = 3 the tables' exact Z_3 lies in [Z̄/1.001, Z̄] (docs: Z̄/Z_3 = 1.0005) and E_π[Z̄ρκ] from 200 000
    draws agrees with it within Z_CLT."""
    pair = pair_of(binomial_c_col(16), 2000, 2000, 1.2)
    top, gas = cluster_order_range(pair)
    assert top == 11 and gas.w == 16
    tilt = ClusterTilt(pair, 3, gas)
    z = math.exp(LossTilt(pair, 3).log_z)
    assert z <= math.exp(tilt.log_z) <= 1.001 * z
    _, log_w = tilt.draw(stream_generator(47, 3), 200_000)
    y = np.exp(tilt.log_z + log_w)
    assert abs(float(y.mean()) - z) <= Z_CLT * float(y.std(ddof=1)) / math.sqrt(y.size)
