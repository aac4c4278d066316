"""epscert/matrix/block_law.py and block_draws.py: the split and the dominating covariance by eigenvalues of dense
matrices built here, the exact moments against brute-force sums over all tuples, the raised covariance against
extended precision, the tuple law against the exact tilt, the tilted draws against plain ones, the REMOVE and ADD
bounds above this file's own naive estimates, their rows, and bad input refused."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import integrate, linalg

from benchmarks.matrix_rivals import binomial_c_col
from epscert.config.samplers import cached_pair
from epscert.matrix import block_draws, block_law, laws_from_bounds
from epscert.matrix.block_bound import band_and_blocks
from epscert.matrix.strategies import toeplitz_strategy


def random_band(b: int, h: int, seed: int) -> np.ndarray:
    """The band (band[d, k] = G_{k+d, k}) of G = L Lᵀ with L banded lower triangular (h sub-diagonals), entries >= 0."""
    rng = np.random.default_rng(seed)
    lower = np.zeros((b, b))
    for d in range(h + 1):
        lower[np.arange(d, b), np.arange(b - d)] = rng.uniform(0.2, 1.0, b - d) / (1 + d)
    g = lower @ lower.T
    return np.array([np.concatenate([np.diagonal(g, -d), np.zeros(d)]) for d in range(h + 1)]), g


@pytest.mark.parametrize("b, h, blocks, seed", [(60, 5, 6, 0), (96, 11, 8, 1), (40, 9, 4, 2), (48, 11, 2, 3)])
def test_split_dominates_g_and_every_block_is_below_the_covariance_drawn(b, h, blocks, seed):
    band, g = random_band(b, h, seed)
    parts, shift = block_law.split_blocks(band, blocks)
    size = b // blocks
    dense = np.zeros((b, b))
    for i, part in enumerate(parts):
        dense[i * size:(i + 1) * size, i * size:(i + 1) * size] = part
    assert np.min(np.linalg.eigvalsh(dense + shift * np.eye(b) - g)) >= 0.0
    # without the singular-vector additions the blocks alone do not dominate G (the test can fail)
    plain = np.zeros((b, b))
    for i in range(blocks):
        sl = slice(i * size, (i + 1) * size)
        plain[sl, sl] = g[sl, sl]
    assert np.min(np.linalg.eigvalsh(plain + shift * np.eye(b) - g)) < 0.0
    cov = block_law.dominating_covariance(parts, shift)
    for part in parts:
        assert np.min(np.linalg.eigvalsh(cov - part - shift * np.eye(size))) >= 0.0
    factor = block_law.dominating_factor(cov)
    assert np.min(np.linalg.eigvalsh(factor @ factor.T - cov)) >= 0.0


def test_raised_covariance_is_above_the_exact_product():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((40, 40))
    factor = np.linalg.cholesky(x @ x.T / 40 + np.eye(40))
    exact = factor.astype(np.longdouble) @ factor.T.astype(np.longdouble)
    raised = block_law.raised_covariance(factor)
    assert np.all(raised.astype(np.longdouble) >= exact)
    assert np.max(np.abs(raised - exact.astype(np.float64))) < 1e-12


@pytest.mark.parametrize("seed", [0, 1])
def test_moments_against_brute_force_over_all_tuples(seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((5, 5))
    cov = x @ x.T / 8.0
    moments = block_law.block_moments(cov)
    e = np.exp(cov)
    for p in block_law.MOMENTS:
        total = 0.0
        for tup in itertools.product(range(5), repeat=p):
            total += math.prod(e[tup[i], tup[j]] for i in range(p) for j in range(i + 1, p))
        exact = total / 5**p
        assert exact <= moments[p] <= exact * (1.0 + 2 * block_law.MOMENT_REL)


def test_moments_against_the_draws():
    """E[S^p] for p = 2, 3 within CLT limits of the sample moments of the drawn law (same covariance)."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((12, 12))
    cov = x @ x.T / 40.0
    factor = np.linalg.cholesky(cov)
    moments = block_law.block_moments(factor @ factor.T)
    means, rel = block_draws.draw_means(factor, 400_000, seed=3)
    assert rel < 1e-12
    assert abs(means.mean() - 1.0) < 5 * means.std() / math.sqrt(means.size)
    for p in (2, 3):
        vals = means**p
        assert abs(vals.mean() - moments[p]) < 5 * vals.std() / math.sqrt(vals.size)


def one_participation(n: int, bands: int, sigma: float):
    return cached_pair(toeplitz_strategy(np.array(binomial_c_col(bands)), n), n, sigma)


def toeplitz_matrix(n: int, bands: int) -> np.ndarray:
    """This file's own dense lower-triangular Toeplitz C with first column binomial_c_col(bands)."""
    col = np.zeros(n)
    col[:bands] = binomial_c_col(bands)
    return linalg.toeplitz(col, np.zeros(n))


def naive_add(pair, bands: int, eps: np.ndarray, draws: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """This file's own estimate of δ_add(ε) = E_Q[(1 - e^ε S)_+] with its standard error, drawn as in
    :func:`naive_remove`."""
    return naive_remove(pair, bands, eps, draws, seed, add=True)


def naive_remove(pair, bands: int, eps: np.ndarray, draws: int, seed: int, add: bool = False
                 ) -> tuple[np.ndarray, np.ndarray]:
    """This file's own estimate of δ_remove(ε) = E_Q[(S - e^ε)_+] (with ``add`` δ_add(ε) = E_Q[(1 - e^ε S)_+])
    with its standard error. One participation: mode j is C e_j, so g = Cᵀ w / σ with w ~ N(0, I) has covariance
    G = CᵀC/σ² (no factorisation of G, which may be ill-conditioned); the strategy is rebuilt here from its first
    column, not taken from the pair."""
    n = pair.bins
    c = toeplitz_matrix(n, bands) / pair.sigma
    half = 0.5 * np.sum(c * c, axis=0)
    rng = np.random.default_rng(seed)
    sums = np.zeros(eps.size)
    squares = np.zeros(eps.size)
    for _ in range(draws // 20_000):
        x = rng.standard_normal((20_000, n)) @ c - half
        s = np.exp(x).mean(axis=1)
        if add:
            vals = np.maximum(1.0 - np.exp(eps)[None, :] * s[:, None], 0.0)
        else:
            vals = np.maximum(s[:, None] - np.exp(eps)[None, :], 0.0)
        sums += vals.sum(axis=0)
        squares += (vals * vals).sum(axis=0)
    mean = sums / draws
    return mean, np.sqrt(np.maximum(squares / draws - mean * mean, 0.0) / draws)


def drawn_factor(pair):
    band, natural = band_and_blocks(pair.gram, pair.sigma)
    blocks = block_law.law_block_count(band.shape[1], natural)
    return block_law.dominating_factor(block_law.dominating_covariance(*block_law.split_blocks(band, blocks)))


def tuple_gammas(factor: np.ndarray, power: float) -> np.ndarray:
    """γ_t = a² c_t + (a² - a)/2 Σ_i v_{k_i} for every t in [m]^4 in long double (c_t = Σ_{i<j} Σ_{k_i k_j},
    Σ = F Fᵀ, v its diagonal), by brute force: log E[Π_i W_{k_i}^a], written out here from the lognormal moments,
    not from the module's log-weights."""
    f = factor.astype(np.longdouble)
    cov = f @ f.T
    m = factor.shape[0]
    idx = np.indices((m,) * 4).reshape(4, -1)
    c = sum(cov[idx[i], idx[j]] for i, j in itertools.combinations(range(4), 2))
    v = sum(cov[idx[i], idx[i]] for i in range(4))
    a = np.longdouble(power)
    return a * a * c + (a * a - a) / 2 * v


def exact_tuple_law(factor: np.ndarray, power: float = block_draws.TILT_POWER) -> np.ndarray:
    """π_t = e^{γ_t}/Z over [m]^4 in long double (:func:`tuple_gammas`)."""
    gamma = tuple_gammas(factor, power)
    w = np.exp(gamma - gamma.max())
    return (w / w.sum()).reshape((factor.shape[0],) * 4)


def power_moment_brute(factor: np.ndarray, power: float) -> float:
    """E[M_a^4] = m^{-4} Σ_t E[Π_i W_{k_i}^a] = m^{-4} Σ_t e^{γ_t} in long double over all tuples."""
    return float(np.exp(tuple_gammas(factor, power)).sum() / factor.shape[0] ** 4)


def sampler_tuple_law(tuples: block_draws.TupleLaw) -> np.ndarray:
    """π'_t of the sampler from its integer weights (exact integers; the quotients in long double)."""
    m = tuples.size
    first = np.diff(np.concatenate([[0], tuples.first_cum])).astype(np.longdouble) / tuples.first_cum[-1]
    out = np.empty((m * m, m * m), dtype=np.longdouble)
    for code in range(m * m):
        cum = tuples.second_cumulative(code)
        out[code] = first[code] * np.diff(np.concatenate([[0], cum])).astype(np.longdouble) / cum[-1]
    return out.reshape((m,) * 4)


UNEQUAL = np.linalg.cholesky(np.diag(np.linspace(0.2, 3.0, 32)) + 0.3)


@pytest.mark.parametrize("size, power", [(3, 1.5), (6, 1.5), (6, 1.0), (4, 2.0)])
def test_tuple_law_is_within_rho_of_the_exact_tilt(size, power):
    """:class:`TupleLaw`: every π'_t (its integer weights, read exactly) at least ρ times π_t computed by brute force
    in long double, ρ close to 1, and π' not far above π either; unequal site variances, so a uniform or
    site-by-site law would be far off, and a power a != 1 without its site terms too."""
    factor = np.linalg.cholesky(np.diag(np.linspace(0.3, 2.0, size)) + 0.4 * np.ones((size, size)))
    tuples = block_draws.TupleLaw(factor, power)
    exact = exact_tuple_law(factor, power)
    drawn = sampler_tuple_law(tuples)
    ratio = drawn / exact
    assert 1.0 - 1e-6 < tuples.rho < 1.0
    assert float(ratio.min()) >= tuples.rho
    # and π' not far above π: the +1 of each integer weight lifts only the smallest cells (below 2^-40 of the
    # largest in one stage) by much
    assert float(ratio[exact > 1e-4].max()) <= 1.0 + 1e-6
    assert float(np.abs(drawn - exact).sum()) < 1e-7
    assert float(exact.max() / exact.min()) > 100.0  # the tilt is far from uniform here


def test_tuple_draws_have_the_tuple_law():
    """:meth:`TupleLaw.draw`: 10^6 tuples on [3]^4 (81 cells) against π' (the counts within 5 standard errors), and
    the draws in their own order i.i.d.: the first half's and the second half's frequencies agree alike."""
    factor = np.linalg.cholesky(np.diag([0.3, 1.0, 2.0]) + 0.4)
    tuples = block_draws.TupleLaw(factor)
    law = sampler_tuple_law(tuples).ravel().astype(float)
    picked = tuples.draw(np.random.default_rng(3), 1_000_000)
    codes = ((picked[:, 0] * 3 + picked[:, 1]) * 3 + picked[:, 2]) * 3 + picked[:, 3]
    counts = np.bincount(codes, minlength=81)
    err = np.sqrt(law * (1 - law) * codes.size)
    assert np.all(np.abs(counts - law * codes.size) < 5 * err + 1)
    half = np.bincount(codes[:500_000], minlength=81) - np.bincount(codes[500_000:], minlength=81)
    assert np.all(np.abs(half) < 5 * np.sqrt(2 * law * 500_000) + 1)


def own_plain_draws(factor: np.ndarray, draws: int, power: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """This file's own plain draws of (S, M_a): x = F z, z ~ N(0, I), y = x - v/2, S = mean e^y, M_a = mean e^{a y}."""
    rng = np.random.default_rng(seed)
    half = 0.5 * (factor * factor).sum(axis=1)
    out_s, out_m = [], []
    for _ in range(draws // 50_000):
        y = rng.standard_normal((50_000, factor.shape[0])) @ factor.T - half
        out_s.append(np.exp(y).mean(axis=1))
        out_m.append(np.exp(power * y).mean(axis=1))
    return np.concatenate(out_s), np.concatenate(out_m)


def tilt_factor(kind: str) -> np.ndarray:
    return {"block": lambda: drawn_factor(one_participation(128, 32, 1.0)),
            "block2": lambda: drawn_factor(one_participation(128, 32, 2.0)),
            "unequal": lambda: UNEQUAL, "unequal2": lambda: UNEQUAL / 2.0}[kind]()


@pytest.mark.parametrize("kind, power, points, edge, grid", [
    ("block", 1.0, (1.5, 3.0, 20.0, 30.0), 10.0, (1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 20.0, 30.0)),
    ("unequal", 1.0, (1.5, 3.0, 6.0, 10.0), 5.0, (1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 20.0, 30.0)),
    ("block2", 1.5, (1.5, 2.5, 3.5, 5.0), 3.0, (1.5, 2.0, 2.5, 3.5, 4.0, 5.0, 6.0)),
    ("unequal2", 1.5, (1.2, 1.4, 1.8, 2.2), 1.45, (1.2, 1.4, 1.6, 2.0, 2.5, 3.0)),
])
def test_tilted_draws_give_the_plain_survival(kind, power, points, edge, grid):
    """Step 4's change of measure: E_q'[1{S > s} κ/M_a^4] from the tilted draws of order 4 and power a (κ =
    E[M_a^4]/ρ) is within ρ of P(S > s) from this file's own plain draws, within CLT limits (5 standard errors of
    the difference), where the same values on the plain draws are off by more than 5 of them; the tilted UCBs lie
    above the plain reference. Factors: blocks of the split (nearly stationary) and ones with unequal site
    variances, where a wrong tuple law (or a power without its site terms) would show; a = 1 where the sites'
    log-variances are large (what :func:`tilt_plan` picks there), 1.5 where they are small."""
    factor = tilt_factor(kind)
    tuples = block_draws.TupleLaw(factor, power)
    weight = block_law.power_moment(factor, power) / tuples.rho
    plain, plain_m = own_plain_draws(factor, 400_000, power, seed=21)
    tilted, tilted_m, rel_t, rel_a = block_draws.draw_tilted(factor, 400_000, 21, tuples)
    assert rel_t < 1e-12 and rel_a < 1e-12 and np.all(np.diff(tilted) >= 0.0)
    assert tilted.mean() > 1.5 * plain.mean()  # the tilt moves the law
    assert np.all(tilted_m >= tilted**power * (1.0 - 1e-12))  # the power mean (a >= 1)
    # where BlockLawBound takes the tilted draws (s^{4a} > κ) and below it
    for s in points:
        assert (weight / s ** (4 * power) < 1.0) == (s > edge)
        frac = plain > s
        values = np.where(tilted > s, weight / tilted_m**4, 0.0)
        untilted = np.where(plain > s, weight / plain_m**4, 0.0)
        err = math.sqrt(frac.var() / frac.size + values.var() / values.size)
        assert abs(values.mean() - frac.mean()) < 5 * err
        assert abs(untilted.mean() - frac.mean()) > 5 * err  # the values alone, without the tilt, are not it
    grid = np.array(grid)
    ucb = block_draws.tilted_survival_ucbs(tilted, tilted_m, rel_t, rel_a, grid, 0.01 / grid.size, weight, power)
    ref = np.array([(plain > s).mean() for s in grid])
    assert np.all(ucb >= ref - 4.0 * np.sqrt(ref * (1 - ref) / plain.size))
    used = weight / grid ** (4 * power) < 1.0  # where BlockLawBound takes them (their range below the plain draws')
    assert used.sum() >= 2 and np.all(ucb[used] <= 1.5 * ref[used] + 1e-3)  # and not vacuous there


@pytest.mark.parametrize("kind, power", [("block", 1.0), ("block2", 1.5)])
def test_tilted_means_within_their_two_sided_error_of_extended_precision(kind, power):
    """r and r_a of :func:`draw_tilted` bound the computed S's and M_a's relative errors both ways: one chunk
    redrawn from the same stream (the same tuples and normals, in draw_tilted's order) and recomputed in long
    double, the shifts a w_k exact there."""
    from epscert.rng import stream_generator

    factor = tilt_factor(kind)
    size = factor.shape[0]
    tuples = block_draws.TupleLaw(factor, power)
    means, powers, rel, rel_a = block_draws.draw_tilted(factor, 4096, 5, tuples)
    rng = stream_generator(5, block_draws.TILTED_STREAM_KEY)
    picked = tuples.draw(rng, 4096)
    f = factor.astype(np.longdouble)
    z = rng.standard_normal((4096, size)).astype(np.longdouble) + np.longdouble(power) * f[picked].sum(axis=1)
    y = z @ f.T - 0.5 * (f * f).sum(axis=1)
    exact_s = np.exp(y).mean(axis=1)
    order = np.argsort(exact_s)
    exact_m = np.exp(np.longdouble(power) * y).mean(axis=1)[order]
    for computed, exact, r in ((means, exact_s[order], rel), (powers, exact_m, rel_a)):
        ratio = computed.astype(np.longdouble) / exact
        assert np.all(ratio <= 1 + r) and np.all(1 / ratio <= 1 + r)
        assert float(np.max(np.abs(ratio - 1))) > 0.0  # the float computation does round


@pytest.mark.parametrize("power", [1.0, 1.5, 2.0])
def test_power_moment_against_brute_force(power):
    """E[M_a^4] over all 4^4 tuples in long double (the lognormal moments written out here) below the bound, and
    within 10^-8 of it; a = 1 is the block's fourth moment."""
    factor = np.linalg.cholesky(np.diag([0.3, 0.7, 1.1, 0.5]) + 0.2)
    exact = power_moment_brute(factor, power)
    bound = block_law.power_moment(factor, power)
    assert exact <= bound <= exact * (1.0 + 1e-8)
    if power == 1.0:
        assert bound == pytest.approx(block_law.block_moments(factor @ factor.T, (4,))[4], rel=1e-9)


def test_tilted_ucbs_against_kl_at_the_range_of_power_a():
    """:func:`tilted_survival_ucbs` without chance: draws built here, the UCB at each s against this file's own
    kl_ucb at the range κ/s^{4a} of the mean of κ (1 + r_a)^4/M̂^4 over the counted draws (within 10^-9 above it);
    draws whose values all sit at the range give the range itself; a mean a hair below s is counted (the threshold
    lowered by r), one a hair above s (1 + 2r) is not below it."""
    from epscert.bounds.kl import kl_ucb

    power, kappa, share, r = 1.5, 40.0, 1e-3, 1e-13
    means = np.sort(np.array([0.5, 1.0, 2.0, 2.5, 3.0, 4.0, 6.0, 9.0]))
    powers = means**power * 1.1  # the power mean above S^a
    for s in (1.5, 2.2, 3.5, 5.0):
        counted = means > s
        mean = float(np.sum(kappa * (1 + r) ** 4 / powers[counted] ** 4)) / means.size
        scale = kappa / s ** (4 * power)
        expected = kl_ucb(min(mean, scale), means.size, share, scale=scale)
        got = block_draws.tilted_survival_ucbs(means, powers, r, r, np.array([s]), share, kappa, power)[0]
        assert expected <= got <= expected * (1 + 1e-9)
    s = 2.0
    at_range = np.full(64, s * (1 + 1e-9))  # every value at the range κ/s^{4a}
    got = block_draws.tilted_survival_ucbs(at_range, at_range**power, 0.0, 0.0, np.array([s]), share, kappa, power)
    assert got[0] >= kappa / s ** (4 * power) * (1 - 1e-12)
    scale = kappa / s ** (4 * power)
    edge = np.full(1000, s * (1 - 1e-14))  # below s, but within r of it: an exact mean above s is possible
    got = block_draws.tilted_survival_ucbs(edge, edge**power, r, r, np.array([s]), share, kappa, power)
    low = np.full(1000, 0.1)
    empty = block_draws.tilted_survival_ucbs(low, low, r, r, np.array([s]), share, kappa, power)
    assert got[0] >= 0.99 * scale and empty[0] <= 0.1 * scale


def test_raised_log_weights_above_the_exact_ones():
    """L̄ of :func:`raised_log_weights` >= L = a² Σ + (a² - a)/6 (v_j + v_k) of the exact Σ = F Fᵀ (long double)
    entrywise, negative and cancelling entries of Σ included, and within 10^-12 of it."""
    rng = np.random.default_rng(8)
    for power in (1.0, 1.5, 2.0, 1.7):
        factor = np.tril(rng.standard_normal((12, 12))) / 3.0 + 0.5 * np.eye(12)  # mixed signs
        assert np.min(factor @ factor.T) < -0.3
        f = factor.astype(np.longdouble)
        exact_cov = f @ f.T
        v = np.diag(exact_cov)
        a = np.longdouble(power)
        exact = a * a * exact_cov + (a * a - a) / 6 * (v[:, None] + v[None, :])
        raised = block_law.raised_log_weights(factor, power)
        assert np.all(raised.astype(np.longdouble) >= exact)
        assert float(np.max(np.abs(raised - exact.astype(float)))) < 1e-12


@pytest.mark.parametrize("b", [96, 128, 360, 1000, 2310])
def test_law_block_count_divides_b_and_keeps_blocks_at_least_h_plus_one(b):
    """:func:`law_block_count` for every h with a natural split (block_count): J >= 2 divides b, and the law's blocks
    are at least the natural ones (so >= h + 1) and at most LAW_MAX_SIZE unless the natural ones are larger."""
    from epscert.matrix.block_bound import block_count

    for h in range(1, b // 2):
        natural = block_count(b, h)
        if natural < 2:
            continue
        blocks = block_law.law_block_count(b, natural)
        assert blocks >= 2 and b % blocks == 0
        assert b // blocks >= b // natural >= h + 1
        assert b // blocks <= max(block_law.LAW_MAX_SIZE, b // natural)
    assert block_law.law_block_count(128, 2) == 2  # b/4 below the natural block: nothing larger is taken


def test_tilt_plan_picks_the_power_and_the_law_blocks():
    """:func:`tilt_plan`: power 1 where the sites' log-variances are large (σ = 1), 1.5 where small (σ = 2); and
    :func:`law_block_count` against hand-worked cases."""
    assert block_law.tilt_plan(one_participation(128, 32, 1.0))[0].power == 1.0
    tuples, weight, tilted = block_law.tilt_plan(one_participation(128, 32, 2.0))
    assert tuples.power == 1.5 and weight > 100.0
    grid = block_law.survival_grid()
    assert np.array_equal(tilted, weight / grid**6 < 1.0)
    assert block_law.law_block_count(10_000, 125) == 50  # blocks of 80 -> 200
    assert block_law.law_block_count(128, 4) == 4  # at most b/4
    assert block_law.law_block_count(1000, 20) == 5  # blocks of 50 -> 200
    assert block_law.law_block_count(1010, 10) == 10  # blocks of 101: no divisor of 1010 in [101, 200] but 101
    assert block_law.law_block_count(1030, 10) == 10  # 103 is prime and b/4 < 206: the natural blocks stay
    with pytest.raises(ValueError, match="orders"):
        block_law.block_moments(np.eye(2), (5,))


def test_tuple_law_refuses_weights_out_of_range_and_the_bound_falls_back_to_plain_draws(monkeypatch):
    with pytest.raises(ValueError, match="within ±100"):
        block_draws.TupleLaw(np.diag([1.0, 30.0]))  # e^{6·900} would overflow
    pair = one_participation(128, 32, 1.0)
    monkeypatch.setattr(block_draws, "MAX_LOG_WEIGHT", 1e-3)
    block_law.tilt_plan.cache_clear()
    try:
        tuples, weight, tilted = block_law.tilt_plan(pair)
        assert tuples is None and not np.any(tilted)
        bound = block_law.BlockLawBound(pair, 1000, 0, 0.01)  # all draws plain
        assert np.all(np.isfinite(bound.survival)) and bound.upper(np.array([1.0]))[0] < 1.0
    finally:
        block_law.tilt_plan.cache_clear()


def test_locate_gives_each_cell_exactly_its_integers():
    """A uniform integer r < Σ ω lands in cell i exactly when cum[i-1] <= r < cum[i]: each cell's first and last
    integer, with cells of one integer among them (ω = 1, the smallest weight the sampler forms)."""
    omega = np.array([1, 3, 1, 1, 5, 1], dtype=np.int64)
    cum = np.cumsum(omega)
    first = np.concatenate([[0], cum[:-1]])
    assert np.array_equal(block_draws.TupleLaw.locate(cum, first), np.arange(omega.size))
    assert np.array_equal(block_draws.TupleLaw.locate(cum, cum - 1), np.arange(omega.size))
    counts = np.bincount(block_draws.TupleLaw.locate(cum, np.arange(cum[-1])), minlength=omega.size)
    assert np.array_equal(counts, omega)


@pytest.mark.parametrize("sigma, power, eps", [(1.0, 1.0, (0.3, 0.6, 0.9, 1.2)), (2.0, 1.5, (0.2, 0.4, 0.6, 0.8, 1.0))])
def test_remove_bound_lies_above_an_independent_naive_estimate(sigma, power, eps):
    """The REMOVE bound above this file's own naive δ_remove (4 standard errors), with the tilt at power 1 (σ = 1)
    and at 1.5 (σ = 2, where the tilted draws bound the blocks' tail beyond about 2.9)."""
    pair = one_participation(128, 32, sigma)  # h = 31: four blocks of 32
    assert block_law.applies(pair) and block_law.tilt_plan(pair)[0].power == power
    bound = block_law.BlockLawBound(pair, 2000, 0, 0.01)
    assert bound.blocks == 4 and bound.draws == block_law.DRAWS_PER_SAMPLE * 2000
    eps = np.array(eps)
    est, err = naive_remove(pair, 32, eps, 200_000, 11)
    upper = bound.upper(eps)
    assert np.all(np.diff(upper) <= 0.0)
    assert np.all(upper >= est - 4 * err)
    # and it is a bound that says something: within 20 times the estimate where δ is above 10^-3
    big = est > 1e-3
    assert big.any() and np.all(upper[big] <= 20 * est[big])


def stop_loss_bounds(grid, upper, lower, tail_int):
    """(x, π_U, π_L) at the knots 0, s_1, .., s_K, recomputed here in long double: π_U(x) = ∫_x^∞ of Y's survival
    (1 on [0, s_1), P_j on [s_j, s_{j+1}), T beyond c), π_L(x) = 1 - ∫_0^x of Y_low's (L_1 on [0, s_1), L_{j+1} on
    [s_j, s_{j+1}))."""
    x = np.concatenate([[0.0], grid]).astype(np.longdouble)
    w = np.diff(x)
    seg_u = np.concatenate([[1.0], upper[:-1]]).astype(np.longdouble)
    pi_u = np.concatenate([np.cumsum((seg_u * w)[::-1])[::-1], [0.0]]) + np.longdouble(tail_int)
    pi_l = 1 - np.concatenate([[0.0], np.cumsum(lower.astype(np.longdouble) * w)])
    return x, pi_u, pi_l


def convex_minorant(x, y):
    """The greatest convex minorant of the points (x_k, y_k) at every x_k (long double; a monotone chain written
    here, independent of the module's): every convex function below the points at the knots lies below it."""
    hull = [0]
    for k in range(1, x.size):
        while len(hull) >= 2:
            i, j = hull[-2], hull[-1]
            if (y[j] - y[i]) * (x[k] - x[i]) >= (y[k] - y[i]) * (x[j] - x[i]):
                hull.pop()
            else:
                break
        hull.append(k)
    return _chords(x, y, np.array(hull))


def _chords(x, y, idx):
    """The piecewise-linear function through (x_i, y_i), i in ``idx``, at every knot (long double)."""
    out = np.empty(x.size, dtype=np.longdouble)
    for a, b in zip(idx[:-1], idx[1:]):
        t = (x[a:b + 1] - x[a]) / (x[b] - x[a])
        out[a:b + 1] = y[a] + t * (y[b] - y[a])
    return out


def test_the_mean_one_law_dominates_in_stop_loss_and_fresh_draws():
    """Step 5*: E(Y* - t)_+ (atoms, and Y's tail beyond c) is at least min(π_U, π_L) at every knot (recomputed here
    in long double from P_j and L_j), at least the stop-loss of fresh draws of the block mean (the drawn covariance's
    own factor, another seed) within their sampling error, at most Y's π_U (so never looser than Y), and well below
    it near the mean, where the LCBs bind; E[Y*] lies in [1, 1 + 10^-8]."""
    pair = one_participation(128, 32, 1.0)
    bound = block_law.BlockLawBound(pair, 1000, 0, 0.01)
    assert bound.mean_one
    law = bound._bracket._base
    grid = bound.grid
    c = float(grid[-1])
    tail_int = block_law.tail_integral(c, bound.tail, bound.moments)
    vals, mass = law.values.astype(np.longdouble), law.masses.astype(np.longdouble)
    assert np.all(law.masses >= 0.0) and vals[0] == 0.0 and vals[-1] == c

    def stop_loss(t):
        t = np.longdouble(t)
        return float(np.sum(mass * np.maximum(vals - t, 0)) + (c - t) * bound.tail + tail_int)

    x, pi_u, pi_l = stop_loss_bounds(grid, bound.survival, bound.lower_survival, tail_int)
    phi = np.array([stop_loss(t) for t in x])
    # the greatest convex minorant of min(π_U, π_L) lies above π (a convex function below both)
    assert np.all(phi >= convex_minorant(x, np.minimum(pi_u, pi_l)) * (1 - 1e-12))
    assert np.all(phi <= pi_u * (1 + 1e-8))
    near = (x > 0.5) & (x < 1.5)
    assert np.all(phi[near] < pi_u[near] - 1e-4)  # the LCBs cut below Y's stop-loss there
    assert 1.0 <= stop_loss(0.0) <= 1.0 + 1e-8
    assert stop_loss(0.0) <= bound.mean <= stop_loss(0.0) * (1 + 1e-9)  # the cap's E[Y*], its tail above c included
    fresh, _ = block_draws.draw_means(drawn_factor(pair), 200_000, seed=99)
    for t in (0.5, 1.0, 1.5, 2.0, 4.0, 8.0):
        gaps = np.maximum(fresh - t, 0.0)
        assert stop_loss(t) >= gaps.mean() - 4.0 * gaps.std() / math.sqrt(fresh.size)


def test_the_law_y_is_kept_where_the_check_fails(monkeypatch):
    """The check of step 5* decides: with the hull's points lowered (a negative slack) it fails and the bound keeps
    Y, whose survival P(Y > s) >= P_j on [s_j, s_{j+1}) (checked at both ends) and >= that of fresh draws; the slack
    at 0 fails it too (the cumulative sums' roundings), so the slack is what lets it pass."""
    pair = one_participation(128, 32, 1.0)
    monkeypatch.setattr(laws_from_bounds, "HULL_SLACK", -1e-6)
    bound = block_law.BlockLawBound(pair, 1000, 0, 0.01)
    assert not bound.mean_one
    law = bound._bracket._base
    grid, survival = bound.grid, bound.survival

    def y_above(s):
        return float(law.masses[law.values > s].sum()) + (bound.tail if s < grid[-1] else 0.0)

    for j in range(grid.size - 1):
        for s in (grid[j], np.nextafter(grid[j + 1], 0.0)):
            assert y_above(s) >= survival[j] * (1.0 - 1e-12)
    assert law.values[0] == grid[0] and abs(law.mass + 0.0 - 1.0) < 1e-9
    fresh, _ = block_draws.draw_means(drawn_factor(pair), 200_000, seed=99)
    for s in (0.5, 1.0, 2.0, 4.0, 8.0):
        frac = float(np.mean(fresh > s))
        assert y_above(s) >= frac - 4.0 * math.sqrt(frac * (1 - frac) / fresh.size)
    monkeypatch.setattr(laws_from_bounds, "HULL_SLACK", 0.0)
    assert laws_from_bounds.mean_one_remove_law(grid, survival, bound.lower_survival, bound.tail) is None
    assert laws_from_bounds.mean_one_add_law(grid, survival, bound.lower_survival, 0.0) is None


def test_the_mean_one_law_is_tighter_than_y():
    """Step 5* against step 5 on the same draws: the REMOVE bound with Y* lies at or below the one with Y (which the
    failed check gives) at every ε, and clearly below somewhere."""
    pair = one_participation(128, 32, 1.0)
    eps = np.array([0.1, 0.2, 0.4, 0.6, 0.9])
    tight = block_law.BlockLawBound(pair, 2000, 0, 0.01).upper(eps)
    saved = laws_from_bounds.HULL_SLACK
    laws_from_bounds.HULL_SLACK = -1e-6
    try:
        loose = block_law.BlockLawBound(pair, 2000, 0, 0.01).upper(eps)
    finally:
        laws_from_bounds.HULL_SLACK = saved
    assert np.all(tight <= loose * (1 + 1e-9)) and np.any(tight < 0.9 * loose)


def test_remove_bound_refuses_bad_input_before_any_draw():
    pair = one_participation(128, 32, 1.0)
    with pytest.raises(ValueError, match="samples"):
        block_law.BlockLawBound(pair, 0, 0, 0.01)
    with pytest.raises(ValueError, match="error_prob"):
        block_law.BlockLawBound(pair, 100, 0, 1.5)
    narrow = one_participation(200, 8, 1.0)  # blocks of 8 bins: below MIN_SIZE
    assert not block_law.applies(narrow)
    with pytest.raises(ValueError, match="blocks of"):
        block_law.BlockLawBound(narrow, 100, 0, 0.01)
    assert block_law.remove_bound(narrow, 100, 0, 0.01) is None


def test_the_bound_never_claims_add():
    bound = block_law.BlockLawBound(one_participation(128, 32, 1.0), 100, 0, 0.01)
    with pytest.raises(ValueError, match="δ_remove from above only"):
        bound._bracket.delta_side(np.array([0.5]), "add", "upper")
    with pytest.raises(ValueError, match="δ_remove from above only"):
        bound._bracket.delta_side(np.array([0.5]), "remove", "lower")


def test_add_bound_lies_above_an_independent_naive_estimate():
    pair = one_participation(128, 32, 1.0)
    bound = block_law.BlockLawAddBound(pair, 2000, 0, 0.01)
    assert bound.blocks == 4
    eps = np.array([0.1, 0.2, 0.4, 0.6])
    est, err = naive_add(pair, 32, eps, 200_000, 13)
    upper = bound.upper(eps)
    assert np.all(np.diff(upper) <= 0.0)
    assert np.all(upper >= est - 4 * err)
    big = est > 1e-3
    assert big.any() and np.all(upper[big] <= 20 * est[big])  # and it says something


def test_each_bound_spends_half_its_beta_on_ucbs_and_half_on_lcbs():
    """Steps 4, 4', 5* and 5'*: the REMOVE bound's LCBs and the ADD bound's LCBs and UCBs are the KL bounds of the
    plain draws at β/(2K) each (K grid points), recomputed here; at β/K they would be tighter (the test can fail)."""
    from epscert.matrix.laws_from_bounds import plain_lower, plain_upper

    pair = one_participation(128, 32, 1.0)
    beta = 0.01
    remove = block_law.BlockLawBound(pair, 1000, 0, beta)
    add = block_law.BlockLawAddBound(pair, 1000, 0, beta)
    means, rel = block_law.plain_means(pair, block_law.plain_count(add.draws, block_law.tilt_plan(pair)[2]), 0)
    grid = add.grid
    share = beta / 2.0 / grid.size
    assert np.array_equal(remove.lower_survival, plain_lower(means, rel, grid, share))
    assert np.array_equal(add.survival, plain_lower(means, rel, grid, share))
    moments = block_law.dominating_law(pair)[3]
    upper = np.minimum.accumulate(np.minimum(np.minimum(plain_upper(means, rel, grid, share),
                                                        block_law.markov(grid, moments)), 1.0))
    assert np.array_equal(add.upper_survival, upper)
    assert np.any(plain_lower(means, rel, grid, 2.0 * share) > add.survival)


def test_the_mean_one_law_on_synthetic_bounds_keeps_a_law():
    """mean_one_remove_law on a small synthetic grid where the hull's first slope is 1 + HULL_SLACK (the first two
    UCBs 1: the survival is capped at 1) and the tail level lies above the last piece's slope (the survival is raised
    to it from the right): the masses are non-negative and the survival just left of c is the tail level at least;
    the stop-loss without T lies above the greatest convex minorant of min(A, π_L) at every knot."""
    grid = np.array([0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0])
    upper = np.array([1.0, 1.0, 0.6, 0.3, 0.15, 0.05, 0.02])
    lower = np.array([1.0, 0.95, 0.5, 0.25, 0.1, 0.03, 0.0])
    tail = 0.2  # above the last piece's slope (0.05)
    values, masses = laws_from_bounds.mean_one_remove_law(grid, upper, lower, tail)
    assert np.all(masses >= 0.0) and values[0] == 0.0 and values[-1] == grid[-1]
    assert masses[-1] >= 0.0 and abs(float(masses.sum()) + tail - 1.0) < 1e-9
    x, pi_u, pi_l = stop_loss_bounds(grid, upper, lower, 0.0)
    vals, mass = values.astype(np.longdouble), masses.astype(np.longdouble)
    phi = np.array([np.sum(mass * np.maximum(vals - t, 0)) + (x[-1] - t) * tail for t in x])
    assert np.all(phi >= convex_minorant(x, np.minimum(pi_u, pi_l)) * (1 - 1e-12))
    add_law = laws_from_bounds.mean_one_add_law(grid, upper, lower, 0.0)
    assert add_law is not None and np.all(add_law[1] >= 0.0) and abs(float(add_law[1].sum()) - 1.0) < 1e-9


def test_the_add_law_dominates_in_the_decreasing_convex_order_and_is_refused_for_remove():
    """Step 5'*: ψ*(t) = E(t - Y*_add)_+ is at least min(ψ_L, t - 1 + π_U) at every knot (recomputed here in long
    double), at least E(t - S)_+ of fresh draws of the block mean (another seed) within their sampling error, and at
    most ψ_L (never looser than Y_low); all mass lies in [0, c] and sums to 1 (up to its rounding up). With the check
    failed (a negative slack) the bound keeps Y_low: atoms 0 and the grid, P(Y_low > s) at or below the fresh
    draws' survival. The ADD bracket refuses REMOVE and the lower side."""
    pair = one_participation(128, 32, 1.0)
    bound = block_law.BlockLawAddBound(pair, 1000, 0, 0.01)
    assert bound.mean_one
    law = bound._bracket._base
    grid = bound.grid
    c = float(grid[-1])
    assert law.values[0] == 0.0 and law.values[-1] == c and np.all(law.masses >= 0.0)
    assert abs(float(law.masses.sum()) - 1.0) < 1e-9
    vals, mass = law.values.astype(np.longdouble), law.masses.astype(np.longdouble)

    def psi(t):
        return float(np.sum(mass * np.maximum(np.longdouble(t) - vals, 0)))

    tail_int = block_law.tail_integral(c, float(bound.upper_survival[-1]), block_law.dominating_law(pair)[3])
    x, pi_u, pi_l = stop_loss_bounds(grid, bound.upper_survival, bound.survival, tail_int)
    psi_l = x - 1 + pi_l
    star = np.array([psi(t) for t in x])
    assert np.all(star >= convex_minorant(x, np.minimum(psi_l, x - 1 + pi_u)) * (1 - 1e-12) - 1e-15)
    assert np.all(star <= psi_l * (1 + 1e-8) + 1e-15)
    fresh, _ = block_draws.draw_means(drawn_factor(pair), 200_000, seed=98)
    for t in (0.3, 0.5, 0.8, 1.0, 1.5, 3.0):
        gaps = np.maximum(t - fresh, 0.0)
        assert psi(t) >= gaps.mean() - 4.0 * gaps.std() / math.sqrt(fresh.size)
    with pytest.raises(ValueError, match="δ_add from above only"):
        bound._bracket.delta_side(np.array([0.5]), "remove", "upper")
    with pytest.raises(ValueError, match="δ_add from above only"):
        bound._bracket.delta_side(np.array([0.5]), "add", "lower")
    saved = laws_from_bounds.HULL_SLACK
    laws_from_bounds.HULL_SLACK = -1e-6
    try:
        kept = block_law.BlockLawAddBound(pair, 1000, 0, 0.01)
    finally:
        laws_from_bounds.HULL_SLACK = saved
    assert not kept.mean_one
    low = kept._bracket._base
    assert low.values[0] == 0.0 and np.array_equal(low.values[1:], grid)
    for s in (0.3, 0.5, 1.0, 2.0, 4.0):
        y_above = float(low.masses[low.values > s].sum())
        frac = float(np.mean(fresh > s))
        sd = math.sqrt(frac * (1 - frac) / fresh.size)
        assert frac + 4.0 * sd >= y_above >= frac - 0.02


def test_add_lcbs_lie_below_the_draws_own_fractions():
    """Step 4' without chance: every L_j is at most the plain draws' own fraction above s_j, and at least one
    standard error below it where that fraction is in (0.01, 0.99) (an LCB at β/K, not the empirical value)."""
    pair = one_participation(128, 32, 1.0)
    bound = block_law.BlockLawAddBound(pair, 1000, 0, 0.01)
    plain = block_law.plain_count(bound.draws, block_law.tilt_plan(pair)[2])
    means, _ = block_law.plain_means(pair, plain, 0)
    frac = (means.size - np.searchsorted(means, bound.grid, side="right")) / means.size
    assert np.all(bound.survival <= frac)
    inside = (frac > 0.01) & (frac < 0.99)
    sd = np.sqrt(frac * (1.0 - frac) / means.size)
    assert inside.sum() > 100 and np.all(frac[inside] - bound.survival[inside] >= sd[inside])


def test_add_chain_lies_above_the_exact_mean_of_four_copies(monkeypatch):
    """Step 6': with J = 4 the law of the mean of four i.i.d. copies of Y*_add is computed exactly here (all pairs of
    pair sums, long double): the chain's upper value lies above E(1 - e^ε mean)_+ and within 1% of it. On a survival
    grid of 801 points (steps of 0.01 to 4, then the module's; any grid is sound) so that the pairs stay few."""
    fine = block_law.survival_grid()
    monkeypatch.setattr(block_law, "survival_grid", lambda: np.concatenate([np.arange(1, 401) * 0.01, fine[8000:]]))
    block_law.tilt_plan.cache_clear()  # its tilted mask is on the grid
    pair = one_participation(128, 32, 1.0)
    try:
        bound = block_law.BlockLawAddBound(pair, 2000, 0, 0.01)
    finally:
        block_law.tilt_plan.cache_clear()
    assert bound.blocks == 4 and bound.mean_one
    law = bound._bracket._base
    x, w = law.values.astype(np.longdouble), law.masses.astype(np.longdouble)
    pairs = (x[:, None] + x[None, :]).ravel()
    mass = (w[:, None] * w[None, :]).ravel()
    order = np.argsort(pairs, kind="stable")
    pairs, mass = pairs[order], mass[order]
    cum_mass = np.concatenate([[0], np.cumsum(mass)])
    cum_moment = np.concatenate([[0], np.cumsum(mass * pairs)])
    eps = np.array([0.2, 0.6, 1.0, 1.4, 1.8])
    upper = bound.upper(eps)
    for e, up in zip(eps, upper):
        k = np.longdouble(math.exp(e))
        below = pairs < 4 / k
        idx = np.searchsorted(pairs, 4 / k - pairs[below], side="left")  # the other pair sum v < 4/K - u
        exact = float(np.sum(mass[below] * (cum_mass[idx] * (1 - k * pairs[below] / 4) - k / 4 * cum_moment[idx])))
        assert exact > 0.0 and exact <= up <= 1.01 * exact


def test_rows_give_the_add_side_bounds_their_shares_of_beta(monkeypatch):
    """Where the block law applies, ADD's line UCB keeps β/2 and the decoupled and the block-law bound get β/4 each
    (recorded from the calls)."""
    from epscert import Accountant
    from epscert.results import rows as rows_module

    seen = {}

    def recording(name, original):
        def call(pair, samples, seed, error_prob):
            seen[name] = error_prob
            return original(pair, samples, seed, error_prob)
        return call

    monkeypatch.setattr(rows_module, "add_bound", recording("decoupled", rows_module.add_bound))
    monkeypatch.setattr(rows_module, "add_law_bound", recording("law", rows_module.add_law_bound))
    n = 128
    acc = Accountant(noise_multiplier=1.0, strategy=toeplitz_strategy(np.array(binomial_c_col(32)), n),
                     cycle_length=n, samples=1000, direction="add", error_prob=0.01)
    acc.get_delta(0.3)
    assert seen == {"decoupled": 0.01 / 4, "law": 0.01 / 4}


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


@pytest.mark.slow
@pytest.mark.parametrize("sigma, power", [(1.0, 1.0), (2.0, 1.5)])
def test_survival_ucbs_cover_over_seeds(sigma, power):
    """Step 4's coverage: over 20 seeds at β = 0.1, the number of runs in which some P_j falls below the survival of
    a 4·10^6-draw reference (less 4 of its standard errors) is at most 5. Each run fails with probability <= 0.1, so
    the test fails falsely with probability <= P(Bin(20, 0.1) >= 6) ≈ 0.011 (for each of the two settings: the
    tilt at power 1 and at 1.5)."""
    pair = one_participation(128, 32, sigma)
    assert block_law.tilt_plan(pair)[0].power == power
    factor = drawn_factor(pair)
    ref, _ = block_draws.draw_means(factor, 4_000_000, seed=12345)
    grid = block_law.survival_grid()
    frac = (ref.size - np.searchsorted(ref, grid, side="right")) / ref.size
    floor = frac - 4.0 * np.sqrt(frac * (1.0 - frac) / ref.size)
    misses = sum(bool(np.any(block_law.BlockLawBound(pair, 1000, seed, 0.1).survival < floor)) for seed in range(20))
    assert misses <= 5


@pytest.mark.slow
def test_survival_lcbs_cover_over_seeds():
    """Step 4''s coverage: over 20 seeds at β = 0.1, the number of runs in which some L_j lies above the survival of a
    4·10^6-draw reference (plus 4 of its standard errors) is at most 5 (false failure <= P(Bin(20, 0.1) >= 6)
    ≈ 0.011). The seeds' plain draws are the REMOVE bound's too (one cache entry each)."""
    pair = one_participation(128, 32, 1.0)
    ref, _ = block_draws.draw_means(drawn_factor(pair), 4_000_000, seed=12346)
    grid = block_law.survival_grid()
    frac = (ref.size - np.searchsorted(ref, grid, side="right")) / ref.size
    ceiling = frac + 4.0 * np.sqrt(frac * (1.0 - frac) / ref.size)
    misses = sum(bool(np.any(block_law.BlockLawAddBound(pair, 1000, seed, 0.1).survival > ceiling))
                 for seed in range(20))
    assert misses <= 5


@pytest.mark.parametrize("size, a, b", [(64, 3.0, 1.0), (32, 0.5, 2.0), (96, 1e-3, 0.0)])
def test_certified_top_against_an_exact_spectrum(size, a, b):
    """D = a 11ᵀ/m - b I (m a power of two or a·/m exact enough: its entries are formed here) has λ_max = a - b
    exactly; the certified value lies above it and within 10^-12 of the scale."""
    diff = np.full((size, size), a / size) - b * np.eye(size)
    top = block_law.certified_top(diff)
    assert top >= a - b
    assert top <= a - b + 1e-12 * (abs(a) + abs(b))


def hadamard_spectrum(size: int, values: np.ndarray) -> np.ndarray:
    """H diag(values) Hᵀ / m with H the Sylvester Hadamard matrix (H Hᵀ = m I): for integer values and m a power of
    two every entry is a small integer sum divided by m, exact in floating point, and the spectrum is ``values``."""
    h = linalg.hadamard(size).astype(float)
    return (h * values) @ h.T / size


@pytest.mark.parametrize("scale", [2.0**-1040, 2.0**-600, 1.0, 2.0**600])
def test_certified_top_against_hadamard_spectra(scale):
    """Exact spectra at every scale, subnormal entries included (there the scaled copy is exact as well, the
    integers being small): the certified value lies above the exact top and within 10^-12 of the scale."""
    rng = np.random.default_rng(4)
    for size in (16, 64):
        values = rng.integers(-20, 21, size).astype(float)
        diff = hadamard_spectrum(size, values) * scale
        assert np.all(diff == hadamard_spectrum(size, values * scale))  # the scaling is exact
        exact = float(values.max()) * scale
        top = block_law.certified_top(diff)
        assert exact <= top <= exact + 1e-12 * 20 * size * scale + 2.0**-1070
    assert block_law.certified_top(np.zeros((8, 8))) == 0.0
    with pytest.raises(ValueError, match="finite"):
        block_law.certified_top(np.full((4, 4), np.nan))


def test_certified_top_when_the_solver_starts_too_low(monkeypatch):
    """The a posteriori check, not the solver, makes the bound: with the eigenvalues reported 10 scales too low the
    Cholesky factorisation fails and t is raised until it succeeds, and the result still lies above the exact top
    (and far above where the solver pointed)."""
    values = np.arange(-16.0, 16.0)
    diff = hadamard_spectrum(32, values)
    true_eigvalsh = np.linalg.eigvalsh
    monkeypatch.setattr(np.linalg, "eigvalsh", lambda a: true_eigvalsh(a) - 10.0 * float(np.abs(a).sum(axis=1).max()))
    top = block_law.certified_top(diff)
    assert top >= 15.0


def test_tail_integral_against_quadrature():
    """∫_c^∞ min(level, M(s)) ds by adaptive quadrature: the bound lies above it and within 3 % (the best single
    Markov order against the minimum over orders), for a level at M(c) and far below it."""
    bound = block_law.BlockLawBound(one_participation(128, 32, 1.0), 1000, 0, 0.01)
    c = float(block_law.survival_grid()[-1])
    for level in (bound.tail, 1e-12, 1e-14, 1e-16):
        def integrand(s):
            return min(level, float(block_law.markov(np.array([s]), bound.moments)[0]))
        quad = (integrate.quad(integrand, c, 1e6, limit=500, points=[1.0001 * c, 2 * c, 10 * c, 1e5])[0]
                + integrate.quad(integrand, 1e6, np.inf, limit=500)[0])
        value = block_law.tail_integral(c, level, bound.moments)
        assert quad <= value <= 1.03 * quad


def test_heavy_tail_forms_a_bound_but_is_not_applied():
    """Where the moments put M(c) above the sampled P_{K-1} (σ = 0.5), the bound still forms (P(Y > c) = P_K, the
    flat level beyond c); :func:`applies` (deterministic, moments of order <= 4) keeps it out of the rows there."""
    pair = one_participation(128, 32, 0.5)
    assert block_law.fits(pair) and not block_law.applies(pair)
    assert block_law.remove_bound(pair, 1000, 0, 0.01) is None
    bound = block_law.BlockLawBound(pair, 1000, 0, 0.01)
    c = float(bound.grid[-1])
    m_c = float(block_law.markov(np.array([c]), bound.moments)[0])
    assert m_c > bound.survival[-2]  # the case the earlier version refused
    assert np.all(bound.upper(np.array([0.5, 1.0])) >= min(1.0, c * bound.tail))  # the cap holds c P_K at least


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
