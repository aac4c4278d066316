"""``epscert plot RESULTS.parquet --out FIG.png``: figures from a results table (matplotlib, Agg).

- ``--kind delta`` (default): δ(ε) per sampler and method on a log axis. Monte Carlo methods are
  drawn as their UCB, their mean with a ±2 SE bar, and a band only from a real lower bound (when
  the table has one) up to the UCB; UCBs at the sample-count floor are marked; exact values and
  upper bounds are solid lines, lower bounds dashed; every data point has a marker.
- ``--kind sigma``: from a sweep over σ, ε(δ) against σ per sampler and method, and for
  Balls-and-Bins the deterministic PLD bracket's ε(δ) at that δ (upper line, band down to the
  lower side) (as in the
  papers' figures), read from the certified ε(δ) rows where the table has them, else from the
  ε grid (smallest grid ε whose certified δ is <= δ, SPEC §8), a grid-edge value marked ≤.
"""

from __future__ import annotations

import math
import os
import sys
from collections import defaultdict
from typing import Sequence

import pyarrow.parquet as pq

from pipelines.options import ArgumentParser, UsageError, check_writable_file

MC_METHODS = ("naive", "importance", "order_stats", "importance_order_stats")
#: The δ axis reaches at most this many decades below the smallest certified value.
FLOOR_DECADES = 3


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise UsageError("epscert plot needs matplotlib, which is not installed: "
                         "pip install 'epscert[plot]' (the plot extra)") from None

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _rows(table, direction: str) -> list[dict]:
    return [r for r in table.to_pylist()
            if r["direction"] == direction and r.get("quantity", "delta_at_epsilon") == "delta_at_epsilon"]


def _positive(values) -> list[float]:
    """Zeros and missing values cannot sit on a log axis: gaps (nan)."""
    return [v if v is not None and v > 0 else math.nan for v in values]


def y_limits(upper: Sequence[float], others: Sequence[float]) -> tuple[float, float] | None:
    """Log-axis limits that follow the certified values (UCBs, upper bounds, exact values).

    Means and lower bounds far below every certified value (float round-off such as 1e-14 of an
    FFT composition, or a mean of a few samples) do not stretch the axis: the bottom is at most
    ``FLOOR_DECADES`` decades below the smallest certified value.
    """
    up = [v for v in upper if v == v and v > 0]
    every = up + [v for v in others if v == v and v > 0]
    if not every:
        return None
    bottom = min(every) / 3.0
    if up:
        bottom = max(bottom, min(up) / 10.0**FLOOR_DECADES)
    return max(bottom, 1e-300), min(1.5, max(every) * 3.0)


def plot_delta_curves(table, out: str, direction: str = "both") -> str:
    """δ(ε) curves; returns the path written.

    Monte Carlo: the UCB (line with markers), the mean with a ±2 standard-error bar, and a band
    only from a real lower bound (the sampler's ``cube_lower_bound`` rows at the same ε) up to the
    UCB; with no lower bound the UCB is drawn alone. A UCB whose mean is 0 sits at the
    sample-count floor (1 - β^{1/m} times the scale): such points get an open triangle.
    """
    fig, ax = draw_delta_curves(table, direction)
    return _save(fig, out)


def draw_delta_curves(table, direction: str = "both"):
    """(figure, axes) of :func:`plot_delta_curves`, for inspection."""
    plt = _pyplot()
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in _rows(table, direction):
        groups[(r["sampler"], r["method"], r["sigma"], r["steps"], r["epochs"])].append(r)
    if not groups:
        raise ValueError(f"the table has no delta_at_epsilon rows with direction={direction!r}")
    lower = {k[:1] + k[2:]: sorted(v, key=lambda r: r["epsilon"]) for k, v in groups.items()
             if k[1] == "cube_lower_bound"}
    fig, ax = plt.subplots(figsize=(7, 4.5))
    upper_values: list[float] = []
    other_values: list[float] = []
    for key, rows in sorted(groups.items()):
        rows.sort(key=lambda r: r["epsilon"])
        eps = [r["epsilon"] for r in rows]
        label = f"{key[0]} {key[1]} (σ={key[2]:g}, T={key[3]}, E={key[4]})"
        if key[1] in MC_METHODS:
            ucb = _positive([r["delta_upper"] for r in rows])
            upper_values.extend(ucb)
            (line,) = ax.plot(eps, ucb, marker="o", label=f"{label}: UCB (β={rows[0]['error_prob']:g})")
            color = line.get_color()
            shown = [(e, r["delta"], 2.0 * (r["std_error"] or 0.0)) for e, r in zip(eps, rows) if r["delta"] > 0]
            if shown:
                xs, ms, bars = zip(*shown)
                other_values.extend(ms)
                below = [min(b, 0.999 * m) for m, b in zip(ms, bars)]  # a log axis cannot show <= 0
                ax.errorbar(xs, ms, yerr=[below, list(bars)], fmt="x", color=color, capsize=2,
                            label=f"{label}: mean ± 2 SE")
            floor = [(e, u) for e, u, r in zip(eps, ucb, rows) if r["delta"] == 0 and u == u]
            if floor:
                ax.plot(*zip(*floor), linestyle="none", marker="v", markersize=9, markerfacecolor="none",
                        color=color, label=f"{label}: UCB at the sample-count floor (mean 0)")
            low_rows = lower.get(key[:1] + key[2:])
            if low_rows and [r["epsilon"] for r in low_rows] == eps:
                low = _positive([r["delta_lower"] if r["delta_lower"] is not None else r["delta"] for r in low_rows])
                ok = [lo == lo and u == u and lo <= u for lo, u in zip(low, ucb)]
                ax.fill_between(eps, [lo if k else math.nan for lo, k in zip(low, ok)],
                                [u if k else math.nan for u, k in zip(ucb, ok)], color=color, alpha=0.25,
                                label=f"{label}: lower bound – UCB")
        else:
            dashed = rows[0]["guarantee"] == "lower_bound"
            values = _positive([r["delta"] for r in rows])
            (other_values if dashed else upper_values).extend(values)
            ax.plot(eps, values, marker="o", markersize=3, linestyle="--" if dashed else "-", label=label)
    ax.set_yscale("log")
    limits = y_limits(upper_values, other_values)
    if limits:
        ax.set_ylim(*limits)
    ax.set_xlabel("ε")
    ax.set_ylabel("δ(ε)")
    ax.set_title(f"δ(ε), direction={direction}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=6)
    return fig, ax


def epsilon_at(rows: Sequence[dict], delta: float) -> float:
    """Smallest grid ε whose certified value is <= δ (inf if none)."""
    best = math.inf
    for r in rows:
        value = r["delta_upper"] if r["delta_upper"] is not None else r["delta"]
        if r["guarantee"] == "lower_bound":
            value = r["delta"]
        if value <= delta:
            best = min(best, r["epsilon"])
    return best


def certified_epsilons(table, delta: float, direction: str = "both") -> dict[tuple, dict[float, tuple[float, str]]]:
    """Per (sampler, method, T, E): σ -> (ε, mark), mark '=' for a value, '≤' or '≥' at a grid edge.

    ε(δ) rows (``quantity='epsilon_at_delta'`` at this δ) are read first: their ε is the certified
    value (upper bound, lower bound or exact). Where a configuration has none, the δ(ε) grid
    gives the smallest grid ε whose certified δ is <= δ: an upper bound at grid resolution, and
    at the smallest grid ε only '≤' (the true crossing may lie anywhere below it).
    """
    out: dict[tuple, dict[float, tuple[float, str]]] = defaultdict(dict)
    rows = [r for r in table.to_pylist() if r["direction"] == direction]
    for r in rows:
        if r.get("quantity") == "epsilon_at_delta" and r["target_delta"] is not None \
                and math.isclose(r["target_delta"], delta, rel_tol=1e-12):
            value = r["epsilon_upper"] if r["epsilon_upper"] is not None else r["epsilon_lower"]
            if value is not None and math.isfinite(value):
                out[(r["sampler"], r["method"], r["steps"], r["epochs"])][r["sigma"]] = (value, "=")
    grid: dict[tuple, dict[float, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        key = (r["sampler"], r["method"], r["steps"], r["epochs"])
        if r.get("quantity", "delta_at_epsilon") == "delta_at_epsilon" and key not in out:
            grid[key][r["sigma"]].append(r)
    for key, by_sigma in grid.items():
        for sigma, group in by_sigma.items():
            value = epsilon_at(group, delta)
            if math.isfinite(value):
                edge = value == min(r["epsilon"] for r in group)
                out[key][sigma] = (value, "≤" if edge else "=")
    return out


def bracket_epsilons(table, delta: float, direction: str = "both") -> dict[tuple, dict[float, tuple[float, float]]]:
    """Per (T, E) of the table's Balls-and-Bins configurations: σ -> (ε lower, ε upper) at ``delta``.

    Computed from the deterministic PLD bracket (:mod:`epscert.allocation`) at this δ itself, not
    read off an ε grid: both sides are certified (the true ε(δ) lies between them). Configurations
    outside the bracket's range (σ < 0.3, T > 10^6, E > 1000) are left out.
    """
    from epscert.allocation import bracket_for  # noqa: PLC0415 (plotting only)
    from epscert.params import BRACKET_MAX_EPOCHS, BRACKET_MAX_STEPS, BRACKET_MIN_SIGMA  # noqa: PLC0415

    out: dict[tuple, dict[float, tuple[float, float]]] = defaultdict(dict)
    seen = {(r["sigma"], r["steps"], r["epochs"]) for r in table.to_pylist() if r["sampler"] == "balls_and_bins"}
    for sigma, steps, epochs in sorted(seen):
        if sigma >= BRACKET_MIN_SIGMA and steps <= BRACKET_MAX_STEPS and epochs <= BRACKET_MAX_EPOCHS:
            upper, lower = bracket_for(sigma, steps, epochs).epsilon(delta, direction)
            if math.isfinite(upper):
                out[(steps, epochs)][sigma] = (lower, upper)
    return out


def plot_epsilon_vs_sigma(table, out: str, delta: float, direction: str = "both") -> str:
    """ε(δ) against σ per sampler and method, from a sweep table (see :func:`certified_epsilons`)."""
    fig, ax = draw_epsilon_vs_sigma(table, delta, direction)
    return _save(fig, out)


def draw_epsilon_vs_sigma(table, delta: float, direction: str = "both"):
    """(figure, axes) of :func:`plot_epsilon_vs_sigma`, for inspection."""
    plt = _pyplot()
    lower_methods = {r["method"] for r in table.to_pylist() if r["guarantee"] == "lower_bound"}
    fig, ax = plt.subplots(figsize=(7, 4.5))
    drawn = 0
    for key, by_sigma in sorted(certified_epsilons(table, delta, direction).items()):
        sigmas = sorted(by_sigma)
        if not sigmas:
            continue
        values = [by_sigma[s][0] for s in sigmas]
        (line,) = ax.plot(sigmas, values, marker="o", linestyle="--" if key[1] in lower_methods else "-",
                          label=f"{key[0]} {key[1]} (T={key[2]}, E={key[3]})")
        for s, (value, mark) in by_sigma.items():
            if mark != "=":
                ax.plot([s], [value], linestyle="none", marker="v" if mark == "≤" else "^", markersize=9,
                        markerfacecolor="none", color=line.get_color())
                ax.annotate(f"{mark}{value:g}", (s, value), textcoords="offset points", xytext=(4, 4), fontsize=7)
        drawn += 1
    for (steps, epochs), by_sigma in sorted(bracket_epsilons(table, delta, direction).items()):
        sigmas = sorted(by_sigma)
        lows, ups = [by_sigma[s][0] for s in sigmas], [by_sigma[s][1] for s in sigmas]
        (line,) = ax.plot(sigmas, ups, marker="s", label=f"balls_and_bins PLD bracket, upper (T={steps}, E={epochs})")
        ax.fill_between(sigmas, lows, ups, alpha=0.3, color=line.get_color(),
                        label=f"balls_and_bins PLD bracket, lower to upper (T={steps}, E={epochs})")
        drawn += 1
    if not drawn:
        raise ValueError(f"no configuration of the table reaches delta={delta} on its ε grid or ε(δ) rows")
    ax.set_xlabel("σ (noise multiplier)")
    ax.set_ylabel(f"ε at δ={delta:g}")
    ax.set_yscale("log")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=6)
    return fig, ax


def _save(fig, out: str) -> str:
    tmp = f"{out}.tmp-{os.getpid()}.png"
    fig.savefig(tmp, dpi=120, bbox_inches="tight")
    fig.clf()
    os.replace(tmp, out)  # atomic: no half-written figure under the final name
    return out


def main(argv: Sequence[str] | None = None) -> int:
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
