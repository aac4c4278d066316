"""Figures show only computed numbers (issue 17 item 5): checked on the matplotlib artists."""

from __future__ import annotations

import math

import numpy as np
import pytest

from epscert.config import CertifyConfig, Direction, Method
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
    ucb = next(line for line in ax.get_lines() if line.get_label().endswith("UCB (β=0.01)"))
    # floors are markers, never part of the line (issue 25 row 4)
    assert ucb.get_marker() == "o" and list(ucb.get_ydata())[:2] == [2e-2, 3e-3]
    assert all(math.isnan(y) for y in list(ucb.get_ydata())[2:])
    floor = [line for line in ax.get_lines() if line.get_marker() == "v" and line.get_markerfacecolor() == "none"]
    assert len(floor) == 1 and list(floor[0].get_xdata()) == [4.0, 8.0]
    assert any("mean ± 2 SE" in t.get_label() for t in ax.containers)  # the mean has its error bar
    marks = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any("floor" in t for t in marks)


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


def test_sigma_figure_reads_rows_computes_analytic_values_at_delta_and_marks_grid_edges():
    import dp_accounting

    rows = []
    for sigma, eps_up in ((0.6, 5.25), (0.8, 3.5), (1.0, 2.125)):
        r = _row("balls_and_bins", "naive", 1.0, sigma, quantity="epsilon_at_delta", target_delta=1e-3,
                 delta=1e-3, epsilon_upper=eps_up, guarantee="mc_upper_confidence")
        rows.append(r)
    # a Poisson PLD with only δ(ε) grid rows: its ε(δ) is computed at δ itself, never snapped to the grid
    for sigma in (0.6, 0.8, 1.0):
        rows += [_row("poisson", "pld_upper", e, sigma, delta=1e-4, delta_upper=1e-4, guarantee="upper_bound")
                 for e in EPS]
    # Monte Carlo with only grid rows, already below δ at the grid's first ε: "≤ 1", marked
    for sigma in (0.6, 0.8, 1.0):
        rows += [_row("deterministic", "naive", e, sigma, delta=1e-4, delta_upper=2e-4, std_error=1e-5,
                      guarantee="mc_upper_confidence", error_prob=0.01, samples=1000) for e in EPS]
    fig, ax = plot.draw_epsilon_vs_sigma(to_table(rows), 1e-3)
    bnb = next(line for line in ax.get_lines() if line.get_label().startswith("balls_and_bins naive"))
    assert list(bnb.get_ydata()) == [5.25, 3.5, 2.125] and "ε(δ) rows of the file" in bnb.get_label()
    pois = next(line for line in ax.get_lines() if line.get_label().startswith("poisson pld_upper"))
    assert "computed by the plot" in pois.get_label()
    for sigma, value in zip(pois.get_xdata(), pois.get_ydata()):  # against dp_accounting's own ε(δ)
        ref = dp_accounting.pld.PLDAccountant(value_discretization_interval=1e-4)
        ref.compose(dp_accounting.PoissonSampledDpEvent(0.1, dp_accounting.GaussianDpEvent(sigma)), 10)
        assert value == pytest.approx(ref.get_epsilon(1e-3), rel=2e-3)
    det = next(line for line in ax.get_lines() if line.get_label().startswith("deterministic naive"))
    assert "read off the file's ε grid" in det.get_label()
    texts = [t.get_text() for t in ax.texts]
    assert texts.count("≤1") == 3  # grid-edge values are bounds, shown as such
    assert not math.isnan(ax.get_ylim()[0])


def test_sigma_figure_draws_only_the_brackets_the_file_holds():
    from epscert.allocation import bracket_for

    mc = [_row("balls_and_bins", "naive", e, sigma, delta=1e-2, delta_upper=2e-2, std_error=1e-3,
               guarantee="mc_upper_confidence") for sigma in (0.6, 0.8, 1.0) for e in EPS]
    for r in mc:
        r["steps"] = 100
    with pytest.raises(ValueError, match="no configuration"):  # no bracket rows: no bracket made up
        plot.draw_epsilon_vs_sigma(to_table(mc), 1e-3)
    rows = list(mc)
    for sigma in (0.6, 0.8, 1.0):
        for method, side in (("bracket_upper", "upper_bound"), ("bracket_lower", "lower_bound")):
            for e in EPS:
                r = _row("balls_and_bins", method, e, sigma, delta=1e-2, guarantee=side)
                r["steps"] = 100
                rows.append(r)
    fig, ax = plot.draw_epsilon_vs_sigma(to_table(rows), 1e-3)
    line = next(x for x in ax.get_lines() if x.get_label().startswith("balls_and_bins bracket_upper"))
    expected = [bracket_for(s, 100, 1).epsilon(1e-3) for s in (0.6, 0.8, 1.0)]
    # the same bracket's ε(δ), bisected to 1e-6 (epscert.inverse.search) rather than to 1e-13
    assert list(line.get_ydata()) == pytest.approx([u for u, _ in expected], abs=2e-6)
    assert all(y >= u for y, (u, _) in zip(line.get_ydata(), expected))  # from the safe side
    assert "computed by the plot" in line.get_label()
    band = next(c for c in ax.collections if isinstance(c, PolyCollection))
    ys = band.get_paths()[0].vertices[:, 1]
    assert ys.min() == pytest.approx(min(lo for _, lo in expected), abs=2e-6)
    assert ys.max() == pytest.approx(expected[0][0], abs=2e-6)


def test_twelve_configurations_never_share_a_colour_and_marker():
    rows = []
    for sigma in (0.5, 0.6, 0.7, 0.8, 0.9, 1.0):
        for sampler, method in (("poisson", "pld_upper"), ("deterministic", "exact")):
            rows += [_row(sampler, method, e, sigma, delta=1e-3 / sigma, delta_upper=1e-3 / sigma,
                          guarantee="upper_bound") for e in EPS]
    fig, ax = plot.draw_delta_curves(to_table(rows))
    curves = [(line.get_color(), line.get_marker()) for line in ax.get_lines() if line.get_label().endswith(
        ("pld_upper", "exact"))]
    assert len(curves) == 12 and len(set(curves)) == 12 and len({c for c, _ in curves}) == 12
    styles = plot.curve_styles(range(25))
    assert len(set(styles.values())) == 25 and styles[20][1] != styles[0][1]  # past 20 colours: new markers


def test_axis_follows_certified_values_and_marks_what_lies_below():
    rows = [_row("poisson", "pld_upper", e, 1.2, delta=v, delta_upper=v, guarantee="upper_bound", resolution=1e-10)
            for e, v in zip(EPS, [1e-3, 1e-10, 1e-34, 1e-67])]  # 1e-10: the resolution floor; below: RDP values
    fig, ax = plot.draw_delta_curves(to_table(rows))
    bottom, top = ax.get_ylim()
    assert bottom >= top / 10.0**plot.MAX_DECADES * 0.999  # never 1e-67
    line = next(x for x in ax.get_lines() if x.get_label().endswith("pld_upper"))
    assert math.isnan(list(line.get_ydata())[1])  # the floor is not part of the line
    below = [x for x in ax.get_lines() if x.get_marker() == "v" and x.get_ydata()[0] == pytest.approx(bottom)]
    assert {float(x.get_xdata()[0]) for x in below} == {4.0, 8.0}
    marks = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any(t.startswith("below the axis") for t in marks) and any("floor" in t for t in marks)


def test_a_mean_outside_the_bracket_is_ringed():
    rows = _mc([1.005e-2, 1.3e-3, 1e-4, 5e-4], [2e-2, 3e-3, 4.6e-3, 4.6e-3])  # SE = mean/10
    for e, lo, up in zip(EPS, [1e-2, 1e-3, 2e-4, 1e-4], [1.01e-2, 1.1e-3, 2.1e-4, 1.1e-4]):
        rows.append(_row("balls_and_bins", "bracket_lower", e, delta=lo, delta_lower=lo, guarantee="lower_bound"))
        rows.append(_row("balls_and_bins", "bracket_upper", e, delta=up, delta_upper=up, guarantee="upper_bound"))
    fig, ax = plot.draw_delta_curves(to_table(rows))
    rings = {line.get_markeredgecolor(): list(line.get_xdata()) for line in ax.get_lines()
             if line.get_marker() == "o" and line.get_linestyle() == "None" and line.get_markerfacecolor() == "none"}
    # ε=1 inside; ε=2 1.5 SE above; ε=4 1e-4 vs 2e-4 (10 SE below); ε=8 5e-4 vs 1.1e-4 (7.8 SE above)
    assert rings == {"orange": [2.0], "red": [4.0, 8.0]}
    marks = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any("a contradiction" in t for t in marks)


