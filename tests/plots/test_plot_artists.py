"""Figures show only computed numbers (issue 17 item 5): checked on the matplotlib artists."""

from __future__ import annotations

import math

import numpy as np
import pytest

from epscert.params import CertifyConfig, Direction, Method
from epscert.results.rows import base_row
from epscert.schema import to_table

pytest.importorskip("matplotlib")
from matplotlib.collections import PolyCollection  # noqa: E402

from pipelines import plot  # noqa: E402

EPS = [1.0, 2.0, 4.0, 8.0]


def _row(sampler, method, eps, sigma=1.0, **values):
    config = CertifyConfig(sampler, sigma, 10, (1.0,), methods=(method,), samples=1000)
    row = base_row(config, Method(method), Direction.BOTH, eps, 0.0)
    row.update(values)
    return row


def _mc(means, ucbs, sigma=1.0):
    return [_row("balls_and_bins", "naive", e, sigma, delta=m, delta_upper=u, std_error=m / 10,
                 error_prob=0.01, samples=1000, guarantee="mc_upper_confidence")
            for e, m, u in zip(EPS, means, ucbs)]


def _bands(ax):
    return [c for c in ax.collections if isinstance(c, PolyCollection)]


def test_no_lower_bound_no_band_and_floor_points_marked():
    table = to_table(_mc([1e-2, 1e-3, 0.0, 0.0], [2e-2, 3e-3, 4.6e-3, 4.6e-3]))
    fig, ax = plot.draw_delta_curves(table)
    assert not _bands(ax)  # the UCB alone
    labels = [line.get_label() for line in ax.get_lines()]
    floor = [line for line in ax.get_lines() if "sample-count floor" in line.get_label()]
    assert len(floor) == 1 and list(floor[0].get_xdata()) == [4.0, 8.0]
    ucb = next(line for line in ax.get_lines() if line.get_label().endswith("UCB (β=0.01)"))
    assert ucb.get_marker() == "o" and list(ucb.get_ydata()) == [2e-2, 3e-3, 4.6e-3, 4.6e-3]
    assert any("mean ± 2 SE" in t.get_label() for t in ax.containers)  # the mean has its error bar
    assert labels


def test_band_runs_between_the_real_lower_bound_and_the_ucb():
    lows = [5e-3, 1e-3, 1e-16, 0.0]  # 1e-16: round-off below the UCB's floor; 0: no lower bound there
    rows = _mc([1e-2, 2e-3, 0.0, 0.0], [2e-2, 3e-3, 4.6e-3, 4.6e-3])
    rows += [_row("balls_and_bins", "cube_lower_bound", e, delta=lo, delta_lower=lo, guarantee="lower_bound")
             for e, lo in zip(EPS, lows)]
    fig, ax = plot.draw_delta_curves(to_table(rows))
    (band,) = _bands(ax)
    ys = np.concatenate([p.vertices[:, 1] for p in band.get_paths()])
    assert ys.min() >= 1e-16 * 0.999 and ys.max() <= 2e-2 * 1.001
    assert not np.isclose(ys, 1e-5).any()  # never UCB/1000 or the mean as a stand-in edge
    bottom, top = ax.get_ylim()
    assert bottom >= 3e-3 / 10**plot.FLOOR_DECADES * 0.999  # the 1e-16 noise does not set the axis
    assert top <= 1.5


def test_sigma_figure_reads_certified_epsilon_rows_and_marks_grid_edges():
    rows = []
    for sigma, eps_up in ((0.6, 5.25), (0.8, 3.5), (1.0, 2.125)):
        r = _row("balls_and_bins", "naive", 1.0, sigma, quantity="epsilon_at_delta", target_delta=1e-3,
                 delta=1e-3, epsilon_upper=eps_up, guarantee="mc_upper_confidence")
        rows.append(r)
    # a Poisson configuration with only grid rows: every σ already meets δ at the smallest grid ε
    for sigma in (0.6, 0.8, 1.0):
        rows += [_row("poisson", "pld_upper", e, sigma, delta=1e-4, delta_upper=1e-4, guarantee="upper_bound")
                 for e in EPS]
    fig, ax = plot.draw_epsilon_vs_sigma(to_table(rows), 1e-3)
    bnb = next(line for line in ax.get_lines() if line.get_label().startswith("balls_and_bins naive"))
    assert list(bnb.get_ydata()) == [5.25, 3.5, 2.125]  # not snapped to a grid
    texts = [t.get_text() for t in ax.texts]
    assert texts.count("≤1") == 3  # grid-edge values are bounds, shown as such
    assert not math.isnan(ax.get_ylim()[0])


def test_sigma_figure_draws_the_pld_bracket_as_a_band():
    # a sweep over σ ∈ {0.6, 0.8, 1.0} at T = 100 with a coarse grid: the bracket's ε(δ) is computed at δ
    # itself (no grid floor), the band runs from its lower to its upper side
    from epscert.allocation import bracket_for

    rows = [_row("balls_and_bins", "naive", e, sigma, delta=1e-2, delta_upper=2e-2, std_error=1e-3,
                 guarantee="mc_upper_confidence") for sigma in (0.6, 0.8, 1.0) for e in EPS]
    for r in rows:
        r["steps"] = 100
    fig, ax = plot.draw_epsilon_vs_sigma(to_table(rows), 1e-3)
    line = next(x for x in ax.get_lines() if x.get_label().startswith("balls_and_bins PLD bracket, upper"))
    expected = [bracket_for(s, 100, 1).epsilon(1e-3) for s in (0.6, 0.8, 1.0)]
    assert list(line.get_ydata()) == pytest.approx([u for u, _ in expected])
    assert len(set(line.get_ydata())) == 3  # σ matters: no flat grid floor
    band = next(c for c in ax.collections if isinstance(c, PolyCollection))
    ys = band.get_paths()[0].vertices[:, 1]
    assert ys.min() == pytest.approx(min(lo for _, lo in expected)) and ys.max() == pytest.approx(expected[0][0])
