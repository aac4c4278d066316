"""epscert/matrix/block_draws.py and the tilt plan of block_law.py (step 4): the tuple law against the exact tilt,
the tilted draws against plain ones and against extended precision, the power moment and the raised log-weights
against brute force, the tilted UCBs against KL at their range, and the coverage of the survival UCBs and LCBs over
seeds (slow)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from epscert.matrix import block_draws, block_law

from tests.matrix.block_law_helpers import drawn_factor, one_participation


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
    pytest.param("unequal", 1.0, (1.5, 3.0, 6.0, 10.0), 5.0, (1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 20.0, 30.0),
                 marks=pytest.mark.slow),
    pytest.param("block2", 1.5, (1.5, 2.5, 3.5, 5.0), 3.0, (1.5, 2.0, 2.5, 3.5, 4.0, 5.0, 6.0),
                 marks=pytest.mark.slow),
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
