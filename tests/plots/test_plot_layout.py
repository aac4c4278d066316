"""What a reader of a figure can tell apart (issue 35, item 6): colours, marks below the axis, the σ plot's
legend and line styles. Checked on the matplotlib artists."""

from __future__ import annotations

import itertools
import math

import pytest

from epscert.config import CertifyConfig, Direction, Method
from epscert.results.rows import base_row
from epscert.schema import to_table

pytest.importorskip("matplotlib")
import matplotlib.colors as mcolors  # noqa: E402

from pipelines import plot  # noqa: E402

EPS = [1.0, 2.0, 4.0, 8.0]


def _row(sampler, method, eps, sigma=1.0, steps=10, epochs=1, **values):
    config = CertifyConfig(sampler, sigma, steps, (1.0,), methods=(method,), epochs=epochs)
    row = base_row(config, Method(method), Direction.BOTH, eps, 0.0)
    row.update(values)
    return row


def _lab(colour: str) -> tuple[float, float, float]:
    """CIELAB (D65) of an sRGB colour, from the published sRGB and CIE formulas."""
    def linear(c):
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (linear(c) for c in mcolors.to_rgb(colour))
    x = (0.4124 * r + 0.3576 * g + 0.1805 * b) / 0.95047
    y = 0.2126 * r + 0.7152 * g + 0.0722 * b
    z = (0.0193 * r + 0.1192 * g + 0.9505 * b) / 1.08883

    def f(t):
        return t ** (1 / 3) if t > 0.008856 else 7.787 * t + 16 / 116

    return 116 * f(y) - 16, 500 * (f(x) - f(y)), 200 * (f(y) - f(z))


def test_no_two_colours_look_alike():
    # issue 35: Dark2's orange (#d95f02) sat ΔE 14 from tab10's orange among the first 12 colours
    closest = min(math.dist(_lab(a), _lab(b)) for a, b in itertools.combinations(plot.COLOURS, 2))
    assert closest >= 25.0, closest  # tab10's own closest pair is ΔE ≈ 28


def test_marks_below_the_axis_of_several_configurations_stand_side_by_side():
    rows = []
    for sigma in (0.5, 0.6, 0.7):  # three configurations, each far below the axis at ε = 4 and 8
        rows += [_row("poisson", "pld_upper", e, sigma, delta=v, delta_upper=v, guarantee="upper_bound")
                 for e, v in zip(EPS, [1e-3, 1e-6, 1e-40, 1e-60])]
    fig, ax = plot.draw_delta_curves(to_table(rows))
    bottom = ax.get_ylim()[0]
    below = [line for line in ax.get_lines() if line.get_marker() == "v"
             and list(line.get_ydata()) == [pytest.approx(bottom)]]
    fig.canvas.draw()
    for eps in (4.0, 8.0):
        marks = [line for line in below if float(line.get_xdata()[0]) == eps]
        assert len(marks) == 3 and len({line.get_color() for line in marks}) == 3
        xs = sorted(line.get_transform().transform((eps, bottom))[0] for line in marks)  # display pixels
        assert min(b - a for a, b in zip(xs, xs[1:])) > 5  # apart, not on one spot


def _sigma_table():
    rows = []
    for sigma in (0.5, 0.8, 1.2):
        for sampler, up, lo, scale in (("balls_and_bins", "bracket_upper", "bracket_lower", 1.0),
                                       ("poisson", "pld_upper", "pld_lower", 1.05)):
            eps = scale / sigma
            for method, side in ((up, "epsilon_upper"), (lo, "epsilon_lower")):
                rows.append(_row(sampler, method, eps, sigma, quantity="epsilon_at_delta", target_delta=1e-5,
                                 delta=1e-5, guarantee="upper_bound" if side == "epsilon_upper" else "lower_bound",
                                 **{side: eps if side == "epsilon_upper" else eps * 0.99}))
    return to_table(rows)


def test_sigma_plot_shows_the_sampler_by_line_style_and_keeps_its_legend_off_the_curves():
    fig, ax = plot.draw_epsilon_vs_sigma(_sigma_table(), 1e-5)
    lines = {line.get_label().split(" (")[0]: line for line in ax.get_lines() if not line.get_label().startswith("_")}
    bb, po = lines["balls_and_bins bracket_upper"], lines["poisson pld_upper"]
    assert bb.get_color() == po.get_color()  # the same run (T, E): one colour
    assert bb.get_linestyle() != po.get_linestyle()  # the sampler: the line style
    assert lines["balls_and_bins bracket_lower"].get_markerfacecolor() == "none"  # a lower side: open markers
    fig.canvas.draw()
    legend = ax.get_legend().get_window_extent()
    axes = ax.get_window_extent()
    assert legend.x0 >= axes.x1  # beside the axes, so it covers no curve
    assert ax.get_legend() in fig.epscert_legends  # and kept in the saved image


def test_delta_plot_shows_the_sampler_by_line_style_the_same_as_the_sigma_plot():
    # issue 35 item 6: the sampler is the line style (one per sampler, the same in both figures), the
    # configuration the colour; what a line is (upper, lower, cube, UCB) is in its markers and width
    rows = []
    for e, v in zip(EPS, [1e-2, 1e-3, 1e-4, 1e-5]):
        rows.append(_row("balls_and_bins", "naive", e, delta=v / 2, delta_upper=v, std_error=v / 20,
                         error_prob=0.01, samples=1000, guarantee="mc_upper_confidence"))
        rows.append(_row("balls_and_bins", "cube_lower_bound", e, delta=v / 4, delta_lower=v / 4,
                         guarantee="lower_bound"))
        rows.append(_row("poisson", "pld_upper", e, delta=v * 2, delta_upper=v * 2, guarantee="upper_bound"))
        rows.append(_row("poisson", "pld_lower", e, delta=v, delta_lower=v, guarantee="lower_bound"))
        rows.append(_row("deterministic", "exact", e, delta=v / 3, delta_upper=v / 3, delta_lower=v / 3,
                         guarantee="exact"))
        rows.append(_row("shuffle", "cube_lower_bound", e, delta=v / 5, delta_lower=v / 5, guarantee="lower_bound"))
    fig, ax = plot.draw_delta_curves(to_table(rows))
    curves = [line for line in ax.get_lines() if ": " in line.get_label() and " SE" not in line.get_label()]
    by_sampler = {}
    for line in curves:
        by_sampler.setdefault(line.get_label().split(" ")[0], set()).add(line.get_linestyle())
    assert set(by_sampler) == {"balls_and_bins", "poisson", "deterministic", "shuffle"}
    assert all(len(styles) == 1 for styles in by_sampler.values())  # one style per sampler
    assert len({next(iter(s)) for s in by_sampler.values()}) == 4  # and a different one for each
    # the same style as the σ figure gives each sampler
    fig2, ax2 = plot.draw_epsilon_vs_sigma(_sigma_table(), 1e-5)
    sigma_styles = {line.get_label().split(" ")[0]: line.get_linestyle() for line in ax2.get_lines()
                    if not line.get_label().startswith("_")}
    for sampler in ("balls_and_bins", "poisson"):
        assert by_sampler[sampler] == {sigma_styles[sampler]}
    # configurations by colour: each (sampler, σ, T, E) its own
    colours = {}
    for line in curves:
        colours.setdefault(line.get_label().split(":")[0], set()).add(line.get_color())
    assert all(len(c) == 1 for c in colours.values()) and len({next(iter(c)) for c in colours.values()}) == 4
    # the kind: a lower side has open markers, an upper side filled ones
    lower = next(line for line in curves if line.get_label().endswith("pld_lower"))
    upper = next(line for line in curves if line.get_label().endswith("pld_upper"))
    assert lower.get_markerfacecolor() == "none" and upper.get_markerfacecolor() != "none"
    texts = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "poisson (line style)" in texts and any(t.startswith("lower bound") for t in texts)


def test_one_sampler_keeps_its_line_style_in_the_sigma_plot():
    import pyarrow.compute as pc  # noqa: PLC0415

    table = _sigma_table()
    fig, ax = plot.draw_epsilon_vs_sigma(table.filter(pc.equal(table.column("sampler"), "poisson")), 1e-5)
    styles = {line.get_linestyle() for line in ax.get_lines() if line.get_label().startswith("poisson pld")}
    assert styles == {plot.SAMPLER_STYLES["poisson"]}  # dashed, as with other samplers beside it
