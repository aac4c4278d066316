"""epscert/matrix/block_law.py and laws_from_bounds.py, the laws and the bounds (steps 4-6, 4'-6', 5*, 5'*): the
REMOVE and ADD bounds above this package's own naive estimates, the mean-one laws against an independent convex
minorant and fresh draws, the fallback where their check fails, the β split, the chain against the exact mean of
four copies, and bad input refused."""

from __future__ import annotations

import math

import numpy as np
import pytest

from epscert.matrix import block_draws, block_law, laws_from_bounds

from tests.matrix.block_law_helpers import convex_minorant, drawn_factor, naive_add, naive_remove, one_participation


@pytest.mark.parametrize("sigma, power, eps", [pytest.param(1.0, 1.0, (0.3, 0.6, 0.9, 1.2), marks=pytest.mark.slow),
                                               (2.0, 1.5, (0.2, 0.4, 0.6, 0.8, 1.0))])
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


def built_mean_one(kind):
    """(the pair, the bound, its base law, its survival grid, c = the grid's end) of ``kind`` (the REMOVE or ADD
    block-law bound) at n = b = 128, 32 bands, σ = 1, where its mean-one law passes its check."""
    pair = one_participation(128, 32, 1.0)
    bound = kind(pair, 1000, 0, 0.01)
    assert bound.mean_one
    return pair, bound, bound._bracket._base, bound.grid, float(bound.grid[-1])


def test_the_mean_one_law_dominates_in_stop_loss_and_fresh_draws():
    """Step 5*: E(Y* - t)_+ (atoms, and Y's tail beyond c) is at least min(π_U, π_L) at every knot (recomputed here
    in long double from P_j and L_j), at least the stop-loss of fresh draws of the block mean (the drawn covariance's
    own factor, another seed) within their sampling error, at most Y's π_U (so never looser than Y), and well below
    it near the mean, where the LCBs bind; E[Y*] lies in [1, 1 + 10^-8]."""
    pair, bound, law, grid, c = built_mean_one(block_law.BlockLawBound)
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
    pair, bound, law, grid, c = built_mean_one(block_law.BlockLawAddBound)
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
