"""epscert.inverse.epsilon_at_delta._brackets: a two-sided inversion keeps a bracket for the lower side when the
coarse grid stops before the Monte Carlo UCB reaches δ (issue 33: the grid is cut at a deterministic upper bound
that the sampled UCB does not reach, and the certified lower side was lost)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from epscert.inverse.epsilon_at_delta import _brackets, lower_epsilon

GRID = np.array([0.0, 0.125, 0.25, 0.5, 0.75, 1.0])


def test_a_ucb_crossing_brackets_as_before():
    ucb = np.array([1.0, 0.5, 0.1, 1e-3, 1e-7, 1e-9])
    lcb = np.array([0.9, 0.4, 1e-5, 1e-8, 0.0, 0.0])
    out = _brackets(GRID, ucb, [1e-6], lcb)
    assert out == {1e-6: (0.5, 1.0, 0.25)}  # UCB first <= δ at 0.75; LCB last > δ at 0.25


def test_no_ucb_crossing_keeps_the_lower_side():
    ucb = np.full(GRID.size, 1e-2)  # the sampled UCB never reaches δ on the (cut) grid
    lcb = np.array([1.0, 1e-4, 2e-6, 1e-8, 0.0, 0.0])
    out = _brackets(GRID, ucb, [1e-6], lcb)
    assert out == {1e-6: (0.25, 0.5, 0.25)}
    assert lower_epsilon(GRID, lcb, 1e-6) == 0.25  # the same point the bracket starts from


def test_no_crossing_on_either_side_or_one_sided_gives_no_bracket():
    ucb = np.full(GRID.size, 1e-2)
    assert _brackets(GRID, ucb, [1e-6], np.zeros(GRID.size)) == {}
    assert _brackets(GRID, ucb, [1e-6], None) == {}  # one-sided inversions are unchanged


def test_log_crossing_is_exact_on_an_exponential_curve_and_falls_back_elsewhere():
    from epscert.inverse.epsilon_at_delta import log_crossing

    eps = np.linspace(0.1, 0.5, 9)
    curve = 3e-5 * np.exp(-60.0 * (eps - 0.1))  # δ = 1e-6 at 0.1 + log(30)/60
    i = int(np.flatnonzero(curve <= 1e-6)[0])
    assert abs(log_crossing(eps, curve, 1e-6, i) - (0.1 + np.log(30.0) / 60.0)) < 1e-12
    assert log_crossing(eps, curve, 1e-6, 0) == eps[0]  # no point before it
    assert log_crossing(eps, curve, 1e-6, i + 1) == eps[i + 1]  # not a crossing there
    zero = curve.copy()
    zero[i] = 0.0
    assert log_crossing(eps, zero, 1e-6, i) == eps[i]  # no log of 0


def test_the_certifying_grid_is_fine_around_the_interpolated_crossings(monkeypatch):
    """Synthetic search curves (exponential, UCB 3x the LCB): the grid has steps of at most h/16 around both
    crossings, where one span across [l - h, u + h] had (3h)/32, and of h/256 within h/16 of the lower one; the wide
    span and the coarse points stay."""
    import dataclasses

    from epscert.inverse import epsilon_at_delta as ead

    search_eps = np.linspace(0.125, 0.5, 9)  # the search's h = 0.046875
    ucb = 1e-4 * np.exp(-80.0 * (search_eps - 0.125))
    lcb = ucb / 3.0
    monkeypatch.setattr(ead, "sampled", lambda config, progress, passes: None)
    monkeypatch.setattr(ead, "_curve", lambda table, direction: (search_eps, ucb / 2, ucb, lcb))

    class Search:
        epsilons = (0.0, 0.125, 0.25, 0.5, 0.75)

    monkeypatch.setattr(dataclasses, "replace", lambda config, **kw: config)
    grid = np.array(ead.two_sided_grid(Search(), {1e-6: (0.125, 0.5, 0.125)}, "both", 32))
    h = (0.5 - 0.125) / 8
    for crossing in (0.125 + np.log(100.0) / 80.0, 0.125 + np.log(100.0 / 3.0) / 80.0):
        below, above = grid[grid <= crossing].max(), grid[grid > crossing].min()
        assert above - below <= h / 16 + 1e-12, (crossing, below, above)
    # the lower side is read at grid points: within h/16 of the LCB's interpolated crossing, steps of h/256
    low = 0.125 + np.log(100.0 / 3.0) / 80.0
    near = grid[np.abs(grid - low) <= h / 16 + 1e-12]
    assert near.size >= 33 and np.max(np.diff(near)) <= h / 256 + 1e-12
    assert {0.125, 0.25, 0.5} <= set(grid.tolist())  # coarse fallbacks of [low, top]
    assert grid.min() <= 0.125 + np.log(100.0 / 3.0) / 80.0 - h  # the wide span from l - h


def test_only_the_certifying_pass_draws_on_the_user_seed(monkeypatch):
    """The coarse pass and the second search (which place the certifying grid) run on seed + 1; the certifying pass,
    whose rows give both sides, on the user's seed, with the grid the searches fixed. The searches' block-law and
    decoupled bounds take the user's seed and sample count (law_seed, law_samples), so those are drawn once; a large
    run's two searches draw a quarter of its samples."""
    import dataclasses

    import epscert
    from epscert.config import Method
    from epscert.inverse import epsilon_at_delta as ead
    from epscert.matrix.strategies import toeplitz_strategy

    acc = epscert.Accountant(noise_multiplier=2.0, strategy=toeplitz_strategy([1.0, 0.5], 40), cycle_length=10,
                             samples=2000, seed=5)
    config = dataclasses.replace(acc.config, methods=(Method.TILTED,))
    from epscert.results.rows import law_samples

    calls, sizes = [], []
    real = ead.sampled

    def recording(cfg, progress, passes=None):
        calls.append((cfg.seed, tuple(cfg.epsilons), cfg.law_seed))
        sizes.append((cfg.samples, law_samples(cfg)))
        return real(cfg, progress, passes)

    monkeypatch.setattr(ead, "sampled", recording)
    rows = ead.mc_epsilon_rows(config, Method.TILTED, [1e-3])
    assert len(calls) == 3
    assert [seed for seed, _, _ in calls] == [6, 6, 5]
    # the bounds that hold for every ε at once (block law, decoupled) are drawn on the user's seed in every pass
    assert [law for _, _, law in calls] == [5, 5, None]
    assert sizes == [(2000, 2000)] * 3  # a small run: both searches draw them all (SEARCH_MIN)
    calls.clear(), sizes.clear()
    monkeypatch.setattr(ead, "SEARCH_MIN", 100)
    ead.mc_epsilon_rows(config, Method.TILTED, [1e-3])
    quarter = (2000 // ead.SEARCH_SHARE, 2000)
    assert sizes == [quarter, quarter, (2000, 2000)]  # both searches at a quarter, the certifying pass at all
    assert calls[1][1] != calls[0][1] and calls[2][1] not in (calls[0][1], calls[1][1])
    assert math.isfinite(rows[0]["epsilon_upper"]) and rows[0]["epsilon_lower"] is not None


def test_a_search_curve_without_a_crossing_keeps_the_bracket(monkeypatch):
    """No UCB <= δ in the second search (the sampled upper side did not reach δ there) and no LCB > δ: the grid still
    spans the bracket [low - h, top + h] around the coarse points, with no interpolated span outside it."""
    import dataclasses

    from epscert.inverse import epsilon_at_delta as ead

    search_eps = np.linspace(0.125, 0.5, 9)
    ucb = np.full(9, 1e-2)
    lcb = np.full(9, 1e-9)
    monkeypatch.setattr(ead, "sampled", lambda config, progress, passes: None)
    monkeypatch.setattr(ead, "_curve", lambda table, direction: (search_eps, ucb, ucb, lcb))

    class Search:
        epsilons = (0.0, 0.125, 0.25, 0.5, 0.75)

    monkeypatch.setattr(dataclasses, "replace", lambda config, **kw: config)
    grid = np.array(ead.two_sided_grid(Search(), {1e-6: (0.125, 0.5, 0.125)}, "both", 32))
    h = (0.5 - 0.125) / 8
    assert grid.min() >= 0.125 - h - 1e-12 and grid.max() <= 0.5 + h + 1e-12
    assert {0.125, 0.25, 0.5} <= set(grid.tolist())


def test_predicted_sides_shrink_by_the_root_of_the_sample_ratio():
    from epscert.inverse.epsilon_at_delta import predicted_sides

    mean, ucb, lcb = np.array([1e-3, 2e-6, 0.0]), np.array([2e-3, 3e-6, 1e-9]), np.array([5e-4, 1e-6, 0.0])
    up, low = predicted_sides(mean, ucb, lcb, 4.0)
    assert np.allclose(up, [1.5e-3, 2.5e-6, 5e-10], rtol=1e-12, atol=0.0)
    assert np.allclose(low, [7.5e-4, 1.5e-6, 0.0], rtol=1e-12, atol=0.0)
    assert np.array_equal(predicted_sides(mean, ucb, lcb, 1.0)[0], ucb)


def test_law_samples_is_checked_and_keys_the_configuration():
    import dataclasses

    import epscert
    from epscert.matrix.strategies import toeplitz_strategy
    from epscert.results.rows import law_samples

    config = epscert.Accountant(noise_multiplier=2.0, strategy=toeplitz_strategy([1.0, 0.5], 40), cycle_length=10,
                                samples=2000).config
    assert law_samples(config) == 2000 and law_samples(dataclasses.replace(config, law_samples=7)) == 7
    assert dataclasses.replace(config, law_samples=7).config_id != config.config_id
    assert dataclasses.replace(config, law_samples=None).config_id == config.config_id
    with pytest.raises(ValueError, match="law_samples"):
        dataclasses.replace(config, law_samples=0)


def test_the_coarse_search_falls_back_to_all_samples_where_a_quarter_finds_no_crossing(monkeypatch):
    """A δ whose UCB crossing the quarter-size coarse pass does not find (its UCB floor is above δ) is bracketed by a
    coarse pass at the run's own count, and only that δ: another δ keeps the quarter pass's bracket (here its answer
    is the one a call for it alone gives). Curves stand in for the passes (placement only is under test)."""
    import dataclasses

    import epscert
    from epscert.config import Method
    from epscert.inverse import epsilon_at_delta as ead
    from epscert.matrix.strategies import toeplitz_strategy

    acc = epscert.Accountant(noise_multiplier=2.0, strategy=toeplitz_strategy([1.0, 0.5], 40), cycle_length=10,
                             samples=2000, seed=5)
    config = dataclasses.replace(acc.config, methods=(Method.TILTED,))
    monkeypatch.setattr(ead, "SEARCH_MIN", 100)
    passes = []

    def curve(cfg, direction):
        eps = np.asarray(cfg.epsilons)
        floor = 1e-3 if cfg.samples < 2000 and cfg.seed != 5 else 1e-9  # a quarter-size search cannot see 1e-4
        ucb = np.maximum(np.exp(-4.0 * eps), floor)
        return eps, ucb / 2, ucb, ucb / 4

    def recording(cfg, progress, passes_=None):
        passes.append((cfg.samples, cfg.seed, len(cfg.epsilons)))
        return cfg

    monkeypatch.setattr(ead, "sampled", recording)
    monkeypatch.setattr(ead, "_curve", curve)
    rows = ead.mc_epsilon_rows(config, Method.TILTED, [1e-2])
    assert [p[:2] for p in passes] == [(500, 6), (500, 6), (2000, 5)]  # found at a quarter: no fallback
    alone = (rows[0]["epsilon_lower"], rows[0]["epsilon_upper"])
    passes.clear()
    rows = ead.mc_epsilon_rows(config, Method.TILTED, [1e-2, 1e-4])
    assert [p[:2] for p in passes] == [(500, 6), (2000, 6), (500, 6), (2000, 5)]
    assert (rows[0]["epsilon_lower"], rows[0]["epsilon_upper"]) == alone
    # the fallback's bracket holds the crossing of e^{-4ε} = 1e-4 (ε = 2.30) that the certifying pass sees
    assert rows[1]["epsilon_lower"] <= np.log(1e4) / 4 <= rows[1]["epsilon_upper"] < np.inf
