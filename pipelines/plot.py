"""``epscert plot RESULTS.parquet --out FIG.png``: figures from a results table (matplotlib, Agg).

What is drawn is what the file holds, and what is not is said so in the legend:

- ``--kind delta`` (default): δ(ε) per configuration (sampler, σ, T, E) and method, on a log axis.
  Each configuration has its own colour and marker (:func:`curve_styles`: 20 colours, then markers,
  so twelve configurations never share a colour; first legend); the line style is the sampler
  (:data:`SAMPLER_STYLES`, the same in every figure: Balls-and-Bins solid, Poisson dashed, ...), and
  what a line is shows in its markers and width (:data:`KIND_LOOK`, second legend: filled markers an
  exact value or upper bound, open markers a lower bound, a thin line the cube lower bound (open) or
  the RDP upper bound (filled), a thick line a Monte Carlo UCB). The two sides of a bracket
  (``bracket_upper``/``bracket_lower``, Poisson ``pld_upper``/``pld_lower``) are joined by a band.
  Monte Carlo: the UCB, and the mean only with its ±2 SE interval; a mean outside the configuration's
  certified bracket gets a ring: orange within 4 standard errors (sampling scatter), red beyond (a
  contradiction; the legend says how many standard errors). A value at its method's
  floor (an analytic bound at its ``resolution``, a UCB whose mean is 0: the sample-count floor) is a
  marker (open triangle), never part of a line. The axis follows the values that carry a guarantee
  (upper bounds, exact values, lower bounds above 0), floors left out, and spans at most
  ``MAX_DECADES`` decades; anything below it is a marker on the bottom edge ("below the axis").
- ``--kind sigma``: ε(δ) against σ per sampler, method, T and E. ε(δ) rows of the file
  (``quantity='epsilon_at_delta'`` at this δ) are read as they are. Where the file has only δ(ε) rows:
  an analytic method's ε(δ) is computed here at δ itself from (sampler, σ, T, E) with the same core
  functions (the legend says "computed by the plot"); a Monte Carlo method (and RDP, which has no ε(δ)
  curve here) is read off the file's ε grid
  (the smallest grid ε whose UCB is <= δ: an upper bound at the grid's resolution; at the grid's first
  point only "≤", marked), and the legend says "read off the ε grid". Bracket sides are joined by a band.
  The colour is the run (T, E), the line style the sampler (:data:`SAMPLER_STYLES`, as in ``--kind delta``,
  also when the file has one sampler), a lower side has open markers; the legend stands beside the axes,
  off the curves.

Marks below the δ axis of several configurations at one ε stand side by side on the bottom edge.
"""

from __future__ import annotations

import math
import os
import sys
from collections import defaultdict
from typing import Sequence

import pyarrow.parquet as pq

from pipelines.args import ArgumentParser, UsageError

#: Analytic methods whose ε(δ) the plot computes at δ where the file has only δ(ε) rows.
COMPUTED_METHODS = ("exact", "pld_upper", "pld_lower", "bracket_upper", "bracket_lower", "cube_lower_bound")
MC_METHODS = ("naive", "importance", "order_stats", "importance_order_stats", "conditional",
              "conditional_order_stats", "tilted")
#: The two sides of each bracket: upper method -> lower method.
BRACKET_PAIRS = {"bracket_upper": "bracket_lower", "pld_upper": "pld_lower"}
#: The δ axis spans at most this many decades (below: markers on the bottom edge).
MAX_DECADES = 16
#: Kept for callers of the previous module: the bottom is at most this many decades below the smallest
#: certified value when the values span less than MAX_DECADES.
FLOOR_DECADES = 3
#: 20 distinguishable colours, then the markers change: tab10, then ten picked greedily (each the farthest, in
#: CIELAB, from those before it; mid lightness, saturated), so no two are closer than tab10's own closest pair
#: (ΔE ≈ 28; the previous Dark2 orange was ΔE 14 from tab10's orange).
COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
           "#17becf", "#0000ff", "#ff00ff", "#3c4d03", "#0165fc", "#ffb07c", "#ff0789", "#8fb67b", "#0add08",
           "#750851", "#9932cc")
#: The line style of each sampler, in every figure (``--kind delta``: the colour is the configuration;
#: ``--kind sigma``: the colour is the run's T and E; the two sides of a bracket share both, with the band
#: between them). A sampler not listed here (none today) is drawn with :data:`OTHER_SAMPLER_STYLE`.
SAMPLER_STYLES = {"balls_and_bins": "-", "poisson": "--", "deterministic": ":", "shuffle": "-.",
                  "shuffle_persistent": (0, (5, 2, 1, 2, 1, 2)), "balls_and_bins_persistent": (0, (1, 1))}
OTHER_SAMPLER_STYLE = (0, (8, 2, 2, 2))


def sampler_style(sampler: str):
    """The line style of ``sampler`` (:data:`SAMPLER_STYLES`)."""
    return SAMPLER_STYLES.get(sampler, OTHER_SAMPLER_STYLE)
#: Points between the "below the axis" marks of different configurations at one ε (side by side, not stacked).
BELOW_SPACING_POINTS = 7.0
MARKERS = ("o", "s", "^", "D", "P", "X", "*", "h", "<", ">")
#: Monte Carlo means further than this many standard errors outside the bracket are a contradiction.
OUTSIDE_SE = 4.0


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise UsageError("epscert plot needs matplotlib, which is not installed: "
                         "pip install 'epscert[plot]' (the plot extra)") from None

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def curve_styles(keys: Sequence) -> dict:
    """A distinct (colour, marker) per key, in order: 20 colours with circles, then 20 with squares, ..."""
    out = {}
    for i, key in enumerate(dict.fromkeys(keys)):
        out[key] = (COLOURS[i % len(COLOURS)], MARKERS[(i // len(COLOURS)) % len(MARKERS)])
    return out


def _rows(table, direction: str) -> list[dict]:
    return [r for r in table.to_pylist()
            if r["direction"] == direction and r.get("quantity", "delta_at_epsilon") == "delta_at_epsilon"]


def _positive(values) -> list[float]:
    """Zeros and missing values cannot sit on a log axis: gaps (nan)."""
    return [v if v is not None and v > 0 else math.nan for v in values]


def at_floor(row: dict) -> bool:
    """Whether the row's value is its method's floor: an analytic upper bound at its ``resolution`` (δ below it
    is not resolved), or a Monte Carlo UCB with mean 0 (the sample-count floor 1 - β^{1/m}, times the scale)."""
    if row["method"] in MC_METHODS:
        return row["delta"] == 0 and row["delta_upper"] is not None
    res = row.get("resolution")
    value = row["delta_upper"] if row["delta_upper"] is not None else row["delta"]
    # an upper bound reports its resolution where it cannot resolve δ (a smaller value, e.g. the RDP bound
    # a Poisson PLD falls back to, is a real certified value, not a floor)
    return (bool(res) and row["guarantee"] != "lower_bound" and value is not None
            and abs(value - res) <= 1e-9 * res)


def y_limits(upper: Sequence[float], others: Sequence[float]) -> tuple[float, float] | None:
    """Log-axis limits from the values that carry a guarantee (``upper``: upper bounds, exact values and
    UCBs off their floors; ``others``: lower bounds above 0).

    The top is 3 times the largest value (at most 1.5); the bottom a third of the smallest, but at most
    ``MAX_DECADES`` below the top and ``FLOOR_DECADES`` below the smallest upper value, so that round-off
    (1e-14 of an FFT) or a far tail (1e-67 of a Poisson RDP bound) does not flatten the figure.
    """
    up = [v for v in upper if v == v and v > 0]
    every = up + [v for v in others if v == v and v > 0]
    if not every:
        return None
    top = min(1.5, max(every) * 3.0)
    bottom = min(every) / 3.0
    if up:
        bottom = max(bottom, min(up) / 10.0**FLOOR_DECADES)
    return max(bottom, top / 10.0**MAX_DECADES, 1e-300), top


#: What each mark of a δ(ε) figure means (the second legend). The line kinds (upper ... ucb) are drawn in
#: their sampler's line style; their legend entry shows their markers' fill and line width (:data:`KIND_LOOK`).
KINDS = {
    "upper": ("-", "o", "upper bound or exact value (filled markers)"),
    "lower": ("-", "o", "lower bound (open markers)"),
    "cube": ("-", "o", "cube lower bound, max statistic (thin line, open markers)"),
    "rdp": ("-", "o", "RDP upper bound (thin line)"),
    "ucb": ("-", "o", "Monte Carlo UCB, failure probability β (thick line)"),
    "mean": ("none", "x", "Monte Carlo mean ± 2 SE"),
    "band": (None, None, "bracket: lower to upper side"),
    "mcband": (None, None, "lower bound to Monte Carlo UCB"),
    "floor": ("none", "v", "at the method's floor (resolution, or UCB of mean 0): not resolved below"),
    "below": ("none", "v", "below the axis"),
    "scatter": ("none", "o", "Monte Carlo mean just outside the certified bracket"),
    "outside": ("none", "o", "Monte Carlo mean outside the certified bracket"),
}


#: Line kind -> (filled markers, line width): what a line is, now that its style is its sampler's.
KIND_LOOK = {"upper": (True, 1.5), "lower": (False, 1.5), "cube": (False, 0.8), "rdp": (True, 0.8),
             "ucb": (True, 2.6)}


def _kind(method: str, guarantee: str) -> str:
    if method in MC_METHODS:
        return "ucb"
    if method == "cube_lower_bound":
        return "cube"
    if method == "rdp_upper":
        return "rdp"
    return "lower" if guarantee == "lower_bound" else "upper"


class _Figure:
    """Lines with the floor, off-axis and legend bookkeeping shared by both kinds of figure."""

    def __init__(self, plt):
        self.plt = plt
        self.fig, self.ax = plt.subplots(figsize=(8.0, 4.8))
        self.upper: list[float] = []
        self.other: list[float] = []
        self.points: list[tuple[list, list, str]] = []  # every drawn series, for off-axis marks
        self.configs: dict[str, tuple[str, str]] = {}  # legend 1: name -> (colour, marker)
        self.kinds: dict[str, str] = {}  # legend 2: kind -> extra text
        self.samplers: dict[str, object] = {}  # legend 2: sampler -> line style

    def line(self, xs, ys, colour, marker, kind, certified="upper", label=None, sampler=None, **kw):
        """One curve: drawn in ``sampler``'s line style (:func:`sampler_style`), its kind in its markers'
        fill and its width (:data:`KIND_LOOK`); without a sampler, the kind's own style."""
        if certified == "upper":
            self.upper.extend(ys)
        elif certified == "other":
            self.other.extend(ys)
        self.points.append((list(xs), list(ys), colour))
        self.kinds.setdefault(kind, "")
        style = KINDS[kind][0]
        if sampler is not None:
            style = self.samplers.setdefault(sampler, sampler_style(sampler))
            filled, width = KIND_LOOK.get(kind, (True, 1.5))
            kw.setdefault("linewidth", width)
            if not filled:
                kw.setdefault("markerfacecolor", "none")
        (line,) = self.ax.plot(xs, ys, color=colour, marker=marker, linestyle=style, label=label, **kw)
        return line

    def floor_marks(self, points, colour):
        if points:
            xs, ys = zip(*points)
            self.ax.plot(xs, ys, linestyle="none", marker="v", markersize=9, markerfacecolor="none", color=colour)
            self.points.append((list(xs), list(ys), colour))
            self.kinds.setdefault("floor", "")

    def below_marks(self, below, bottom):
        """One mark on the bottom edge per configuration (colour) and ε below the axis; the marks of several
        configurations at one ε stand side by side (offset in points: the data x stays the ε), not on one spot."""
        from matplotlib.transforms import offset_copy  # noqa: PLC0415

        at: dict[float, list[str]] = defaultdict(list)
        for x, colour in below:
            if colour not in at[x]:
                at[x].append(colour)
        for x, colours in at.items():
            for k, colour in enumerate(colours):
                shift = (k - (len(colours) - 1) / 2) * BELOW_SPACING_POINTS
                where = offset_copy(self.ax.transData, fig=self.fig, x=shift, y=0.0, units="points")
                self.ax.plot([x], [bottom], linestyle="none", marker="v", markersize=7, color=colour, clip_on=False,
                             transform=where)

    def finish(self, log: bool = True, legend_lines: bool = False):
        ax = self.ax
        if log:
            ax.set_yscale("log")
            limits = y_limits(self.upper, self.other)
            if limits:
                ax.set_ylim(*limits)
                bottom = limits[0]
                below = [(x, colour) for xs, ys, colour in self.points for x, y in zip(xs, ys)
                         if y == y and 0 < y < bottom]
                self.below_marks(below, bottom)
                if below:
                    self.kinds["below"] = f" (δ < {bottom:.1e})"
        ax.grid(True, which="both", alpha=0.3)
        from matplotlib.lines import Line2D  # noqa: PLC0415
        from matplotlib.patches import Patch  # noqa: PLC0415

        if legend_lines:  # few curves, each labelled with how its values were obtained: beside the axes, never on them
            legend = ax.legend(fontsize=6.5, loc="upper left", bbox_to_anchor=(1.01, 1.0), title="curve",
                               title_fontsize=7)
            self.fig.epscert_legends = [legend]  # for the saved bounding box
            return self.fig, ax
        else:
            handles = [Line2D([], [], color=c, marker=m, linestyle="-", label=name) for name, (c, m) in self.configs.items()]
            first = ax.legend(handles=handles, fontsize=6.5, loc="upper left", bbox_to_anchor=(1.01, 1.0),
                              title="configuration", title_fontsize=7)
        ax.add_artist(first)
        marks = [Line2D([], [], color="black", linestyle=style, label=f"{sampler} (line style)")
                 for sampler, style in sorted(self.samplers.items())]
        for kind in KINDS:
            if kind not in self.kinds:
                continue
            style, marker, text = KINDS[kind]
            text += self.kinds[kind]
            if kind in ("band", "mcband"):
                marks.append(Patch(color="grey", alpha=0.25 if kind == "band" else 0.15, label=text))
            elif kind in ("outside", "scatter"):
                marks.append(Line2D([], [], linestyle="none", marker="o", markersize=9, markerfacecolor="none",
                                    markeredgecolor="red" if kind == "outside" else "orange", label=text))
            elif kind in KIND_LOOK:
                filled, width = KIND_LOOK[kind]
                marks.append(Line2D([], [], color="black", linestyle="-", linewidth=width, marker=marker,
                                    markerfacecolor="black" if filled else "none", label=text))
            else:
                filled = "none" if kind == "floor" else "black"
                marks.append(Line2D([], [], color="black", linestyle=style or "none", marker=marker,
                                    markerfacecolor=filled, label=text))
        second = None
        if marks:
            second = ax.legend(handles=marks, fontsize=6.5, loc="lower left", bbox_to_anchor=(1.01, 0.0),
                               title="marks", title_fontsize=7)
        self.fig.epscert_legends = [x for x in (first, second) if x is not None]  # for the saved bounding box
        return self.fig, ax


def plot_delta_curves(table, out: str, direction: str = "both") -> str:
    """δ(ε) curves (module docstring); returns the path written."""
    fig, _ = draw_delta_curves(table, direction)
    return _save(fig, out)


def draw_delta_curves(table, direction: str = "both"):
    """(figure, axes) of :func:`plot_delta_curves`, for inspection."""
    plt = _pyplot()
    groups: dict[tuple, dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for r in _rows(table, direction):
        groups[(r["sampler"], r["sigma"], r["steps"], r["epochs"])][r["method"]].append(r)
    if not groups:
        raise ValueError(f"the table has no delta_at_epsilon rows with direction={direction!r}")
    styles = curve_styles(sorted(groups))
    f = _Figure(plt)
    for key in sorted(groups):
        colour, marker = styles[key]
        name = f"{key[0]} σ={key[1]:g} T={key[2]} E={key[3]}"
        methods = {m: sorted(rows, key=lambda r: r["epsilon"]) for m, rows in groups[key].items()}
        f.configs[name + ": " + ", ".join(sorted(methods))] = (colour, marker)
        bracket = _bracket_sides(methods)
        for method, rows in sorted(methods.items()):
            eps = [r["epsilon"] for r in rows]
            if method in MC_METHODS:
                _draw_mc(f, name, method, rows, colour, marker, bracket)
                continue
            lower = rows[0]["guarantee"] == "lower_bound"
            value = [(r["delta_lower"] if lower else (r["delta_upper"] if r["delta_upper"] is not None
                      else r["delta"])) for r in rows]
            floor = [at_floor(r) for r in rows]
            ys = _positive([v if not fl else None for v, fl in zip(value, floor)])
            f.line(eps, ys, colour, marker, _kind(method, rows[0]["guarantee"]),
                   certified="other" if lower else "upper", label=f"{name}: {method}", sampler=key[0], markersize=3)
            f.floor_marks([(e, v) for e, v, fl in zip(eps, value, floor) if fl and v and v > 0], colour)
        for upper, lower in BRACKET_PAIRS.items():
            if upper in methods and lower in methods and _band(f.ax, methods[upper], methods[lower], colour):
                f.kinds.setdefault("band", "")
    f.ax.set_xlabel("ε")
    f.ax.set_ylabel("δ(ε)")
    f.ax.set_title(f"δ(ε), direction={direction}")
    return f.finish()


def _bracket_sides(methods: dict[str, list[dict]]) -> dict[float, tuple[float, float]]:
    """ε -> (certified lower, certified upper) of the configuration, from its analytic rows (empty if none)."""
    lows: dict[float, float] = {}
    ups: dict[float, float] = {}
    for method, rows in methods.items():
        if method in MC_METHODS:
            continue
        for r in rows:
            if r["delta_lower"] is not None:
                lows[r["epsilon"]] = max(lows.get(r["epsilon"], 0.0), r["delta_lower"])
            if r["delta_upper"] is not None:
                ups[r["epsilon"]] = min(ups.get(r["epsilon"], math.inf), r["delta_upper"])
    return {e: (lows.get(e, 0.0), ups.get(e, math.inf)) for e in set(lows) | set(ups)}


def _band(ax, upper_rows, lower_rows, colour) -> bool:
    ups = {r["epsilon"]: r["delta_upper"] for r in upper_rows if not at_floor(r)}
    lows = {r["epsilon"]: r["delta_lower"] for r in lower_rows}
    eps = sorted(e for e in ups if e in lows and ups[e] and lows[e] and 0 < lows[e] <= ups[e])
    if eps:
        ax.fill_between(eps, [lows[e] for e in eps], [ups[e] for e in eps], color=colour, alpha=0.25)
    return bool(eps)


def _draw_mc(f: _Figure, name, method, rows, colour, marker, bracket) -> None:
    """A Monte Carlo method: its UCB (floors as markers), the mean with its ±2 SE interval, a band from the
    real lower bound to the UCB, and a red ring on a mean outside the certified bracket."""
    eps = [r["epsilon"] for r in rows]
    floor = [at_floor(r) for r in rows]
    ucb = _positive([r["delta_upper"] if not fl else None for r, fl in zip(rows, floor)])
    f.line(eps, ucb, colour, marker, "ucb", label=f"{name}: {method} UCB (β={rows[0]['error_prob']:g})",
           sampler=rows[0]["sampler"])
    f.floor_marks([(e, r["delta_upper"]) for e, r, fl in zip(eps, rows, floor) if fl], colour)
    shown = [(e, r["delta"], 2.0 * (r["std_error"] or 0.0)) for e, r in zip(eps, rows) if r["delta"] > 0]
    if shown:
        xs, ms, bars = zip(*shown)
        below = [min(b, 0.999 * m) for m, b in zip(ms, bars)]  # a log axis cannot show <= 0
        f.ax.errorbar(xs, ms, yerr=[below, list(bars)], fmt="x", color=colour, capsize=2,
                      label=f"{name}: {method} mean ± 2 SE")
        f.points.append((list(xs), list(ms), colour))
        f.kinds.setdefault("mean", "")
        outside = []
        for e, m, b in shown:
            lo, up = bracket.get(e, (0.0, math.inf))
            if m < lo or m > up:
                se = b / 2
                outside.append((e, m, (lo - m if m < lo else m - up) / se if se > 0 else math.inf))
        if outside:
            worst = max(k for _, _, k in outside)
            scatter = [(e, m) for e, m, k in outside if k <= OUTSIDE_SE]
            if scatter:
                f.ax.plot([e for e, _ in scatter], [m for _, m in scatter], linestyle="none", marker="o",
                          markersize=9, markerfacecolor="none", markeredgecolor="orange")
                f.kinds["scatter"] = f" (up to {min(worst, OUTSIDE_SE):.1f} SE: sampling scatter)"
            far = [(e, m, k) for e, m, k in outside if k > OUTSIDE_SE]
            if far:
                f.ax.plot([e for e, _, _ in far], [m for _, m, _ in far], linestyle="none", marker="o",
                          markersize=12, markerfacecolor="none", markeredgecolor="red")
                f.kinds["outside"] = f" by more than {OUTSIDE_SE:g} SE (up to {worst:.1f}): a contradiction"
    lows = {e: lo for e, (lo, _) in bracket.items() if lo > 0}
    band = [(e, lows[e], u) for e, u in zip(eps, ucb) if e in lows and u == u and lows[e] <= u]
    if band:
        f.ax.fill_between([b[0] for b in band], [b[1] for b in band], [b[2] for b in band], color=colour,
                          alpha=0.15)
        f.kinds.setdefault("mcband", "")


# ---- ε(δ) against σ ------------------------------------------------------------------------------

def epsilon_at(rows: Sequence[dict], delta: float) -> float:
    """Smallest grid ε whose certified value is <= δ (inf if none); lower-bound rows use their value."""
    best = math.inf
    for r in rows:
        value = r["delta_upper"] if r["delta_upper"] is not None else r["delta"]
        if r["guarantee"] == "lower_bound":
            value = r["delta"]
        if value <= delta:
            best = min(best, r["epsilon"])
    return best


def _computed_epsilon(r: dict, delta: float, direction: str) -> tuple[float, str]:
    """ε(δ) of an analytic row's method at (sampler, σ, T, E), computed at δ itself (core functions)."""
    from epscert.inverse.epsilon_at_delta import analytic_epsilon_rows  # noqa: PLC0415 (plotting only)
    from epscert.config import CertifyConfig, Method  # noqa: PLC0415

    config = CertifyConfig(r["sampler"], r["sigma"], r["steps"], (1.0,), epochs=r["epochs"], methods=(r["method"],),
                           direction=direction, dataset_size=r.get("dataset_size"),
                           max_batch_size=r.get("max_batch_size"))
    (row,) = analytic_epsilon_rows(config, Method(r["method"]), [delta])
    value = row["epsilon_upper"] if row["epsilon_upper"] is not None else row["epsilon_lower"]
    return value, "computed"


def certified_epsilons(table, delta: float, direction: str = "both") -> dict[tuple, dict[float, tuple[float, str]]]:
    """Per (sampler, method, T, E): σ -> (ε, how), how = 'read' (an ε(δ) row of the file), 'computed' (an
    analytic method at δ, computed here), 'grid' (off the ε grid) or 'grid≤' (the grid's first point: ε <= it)."""
    out: dict[tuple, dict[float, tuple[float, str]]] = defaultdict(dict)
    rows = [r for r in table.to_pylist() if r["direction"] == direction]
    for r in rows:
        if r.get("quantity") == "epsilon_at_delta" and r["target_delta"] is not None \
                and math.isclose(r["target_delta"], delta, rel_tol=1e-12):
            value = r["epsilon_upper"] if r["epsilon_upper"] is not None else r["epsilon_lower"]
            if value is not None and math.isfinite(value):
                out[(r["sampler"], r["method"], r["steps"], r["epochs"])][r["sigma"]] = (value, "read")
    grid: dict[tuple, dict[float, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        key = (r["sampler"], r["method"], r["steps"], r["epochs"])
        if r.get("quantity", "delta_at_epsilon") == "delta_at_epsilon" and r["sigma"] not in out.get(key, {}):
            grid[key][r["sigma"]].append(r)
    for key, by_sigma in grid.items():
        for sigma, group in by_sigma.items():
            if key[1] not in COMPUTED_METHODS:  # Monte Carlo, and RDP (no ε(δ) curve in the core)
                value = epsilon_at(group, delta)
                how = "grid≤" if value == min(r["epsilon"] for r in group) else "grid"
            else:
                value, how = _computed_epsilon(group[0], delta, direction)
            if math.isfinite(value):
                out[key][sigma] = (value, how)
    return out


HOW = {"read": "ε(δ) rows of the file", "computed": "computed by the plot at δ (not in the file)",
       "grid": "read off the file's ε grid (upper bound at grid resolution)"}


def plot_epsilon_vs_sigma(table, out: str, delta: float, direction: str = "both") -> str:
    """ε(δ) against σ per sampler and method, from a sweep table (see :func:`certified_epsilons`)."""
    fig, _ = draw_epsilon_vs_sigma(table, delta, direction)
    return _save(fig, out)


def draw_epsilon_vs_sigma(table, delta: float, direction: str = "both"):
    """(figure, axes) of :func:`plot_epsilon_vs_sigma`, for inspection."""
    plt = _pyplot()
    guarantees = {(r["sampler"], r["method"]): r["guarantee"] for r in table.to_pylist()}
    curves = {k: v for k, v in certified_epsilons(table, delta, direction).items() if v}
    if not curves:
        raise ValueError(f"no configuration of the table reaches delta={delta} on its ε grid or ε(δ) rows")
    runs = curve_styles(sorted({(k[2], k[3]) for k in curves}))  # colour: the run (T, E)
    styles = {(sampler, steps, epochs): runs[(steps, epochs)] for sampler, _, steps, epochs in curves}
    f = _Figure(plt)
    for key, by_sigma in sorted(curves.items()):
        sampler, method, steps, epochs = key
        colour, marker = styles[(sampler, steps, epochs)]
        sigmas = sorted(by_sigma)
        values = [by_sigma[s][0] for s in sigmas]
        hows = {by_sigma[s][1].rstrip("≤") for s in sigmas}
        lower = guarantees.get((sampler, method)) == "lower_bound" or method.endswith("_lower")
        how = "; ".join(HOW[h] for h in sorted(hows))
        f.line(sigmas, values, colour, marker, "lower" if lower else "upper",
               certified="other" if lower else "upper", label=f"{sampler} {method} (T={steps}, E={epochs}): {how}",
               sampler=sampler, markerfacecolor="none" if lower else colour, linewidth=1.5)
        for s in sigmas:
            value, mark = by_sigma[s]
            if mark == "grid≤":
                f.ax.plot([s], [value], linestyle="none", marker="v", markersize=9, markerfacecolor="none",
                          color=colour)
                f.ax.annotate(f"≤{value:g}", (s, value), textcoords="offset points", xytext=(4, 4), fontsize=7)
    for (sampler, method, steps, epochs), by_sigma in sorted(curves.items()):
        partner = BRACKET_PAIRS.get(method)
        other = curves.get((sampler, partner, steps, epochs)) if partner else None
        if other:
            sigmas = sorted(s for s in by_sigma if s in other)
            colour, _ = styles[(sampler, steps, epochs)]
            f.ax.fill_between(sigmas, [other[s][0] for s in sigmas], [by_sigma[s][0] for s in sigmas],
                              color=colour, alpha=0.2, label=f"{sampler} {method}–{partner} (T={steps}, E={epochs})")
    f.ax.set_xlabel("σ (noise multiplier)")
    f.ax.set_ylabel(f"ε at δ={delta:g}")
    f.ax.set_title(f"ε(δ={delta:g}) against σ, direction={direction}")
    fig, ax = f.finish(log=False, legend_lines=True)
    ax.set_yscale("log")
    return fig, ax


def _save(fig, out: str) -> str:
    tmp = f"{out}.tmp-{os.getpid()}.png"
    fig.savefig(tmp, dpi=120, bbox_inches="tight", bbox_extra_artists=getattr(fig, "epscert_legends", None))
    fig.clf()
    os.replace(tmp, out)  # atomic: no half-written figure under the final name
    return out


def main(argv: Sequence[str] | None = None) -> int:
    from pipelines.options import check_writable_file  # noqa: PLC0415

    parser = ArgumentParser(prog="epscert plot", description=__doc__.splitlines()[0])
    parser.add_argument("results", help="a results Parquet file (certify or sweep output)")
    parser.add_argument("--out", required=True, help="PNG file to write")
    parser.add_argument("--kind", choices=("delta", "sigma"), default="delta",
                        help="delta: δ(ε) curves; sigma: ε(δ) against σ from a sweep")
    parser.add_argument("--delta", type=float, default=1e-5, help="target δ for --kind sigma")
    parser.add_argument("--direction", choices=("both", "remove", "add"), default="both")
    try:
        args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
        if not os.path.isfile(args.results):
            raise ValueError(f"results must be an existing Parquet file, got results={args.results!r}")
        if not 0.0 < args.delta < 1.0:
            raise ValueError(f"delta must be in (0, 1), got delta={args.delta}")
        check_writable_file("out", args.out)
        table = pq.read_table(args.results)
        if args.kind == "delta":
            path = plot_delta_curves(table, args.out, args.direction)
        else:
            path = plot_epsilon_vs_sigma(table, args.out, args.delta, args.direction)
    except (ValueError, OSError) as exc:  # UsageError is a ValueError
        print(f"epscert plot: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
