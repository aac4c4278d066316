"""``epscert plot RESULTS.parquet --out FIG.png``: figures from a results table (matplotlib, Agg).

- ``--kind delta`` (default): δ(ε) per sampler and method on a log axis. Monte Carlo methods are
  drawn as their mean with a band from the sampler's lower bound (when the table has one) up to
  the UCB; exact values and upper bounds are solid lines, lower bounds dashed.
- ``--kind sigma``: from a sweep over σ, ε(δ) against σ per sampler and method (as in the
  papers' figures). For each σ, ε(δ) is the smallest grid ε whose certified value (UCB for Monte
  Carlo, the bound itself for analytic methods) is <= δ: the shared-grid rule of SPEC §8.
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


def plot_delta_curves(table, out: str, direction: str = "both") -> str:
    """δ(ε) curves with bands; returns the path written."""
    plt = _pyplot()
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in _rows(table, direction):
        groups[(r["sampler"], r["method"], r["sigma"], r["steps"], r["epochs"])].append(r)
    if not groups:
        raise ValueError(f"the table has no delta_at_epsilon rows with direction={direction!r}")
    lower = {k[:1] + k[2:]: sorted(v, key=lambda r: r["epsilon"]) for k, v in groups.items()
             if k[1] == "cube_lower_bound"}
    fig, ax = plt.subplots(figsize=(7, 4.5))
    positive: list[float] = []

    def pos(values):  # zeros cannot sit on a log axis: leave gaps
        out = [v if v is not None and v > 0 else math.nan for v in values]
        positive.extend(v for v in out if v == v)
        return out

    for key, rows in sorted(groups.items()):
        rows.sort(key=lambda r: r["epsilon"])
        eps = [r["epsilon"] for r in rows]
        label = f"{key[0]} {key[1]} (σ={key[2]:g}, T={key[3]}, E={key[4]})"
        if key[1] in MC_METHODS:
            (line,) = ax.plot(eps, pos([r["delta"] for r in rows]), label=label + ": mean")
            low_rows = lower.get(key[:1] + key[2:])
            low = low_rows if low_rows and len(low_rows) == len(rows) else rows
            ucb = pos([r["delta_upper"] for r in rows])
            floor = [min(u, v) if v > 0 else u * 1e-3 for u, v in zip(ucb, [r["delta"] for r in low])]
            ax.fill_between(eps, floor, ucb, color=line.get_color(), alpha=0.25,
                            label=label + ": lower bound – UCB")
        else:
            dashed = rows[0]["guarantee"] == "lower_bound"
            ax.plot(eps, pos([r["delta"] for r in rows]), linestyle="--" if dashed else "-", label=label)
    ax.set_yscale("log")
    if positive:
        ax.set_ylim(max(min(positive) / 3.0, 1e-300), min(1.5, max(positive) * 3.0))
    ax.set_xlabel("ε")
    ax.set_ylabel("δ(ε)")
    ax.set_title(f"δ(ε), direction={direction}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=6)
    return _save(fig, out)


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


def plot_epsilon_vs_sigma(table, out: str, delta: float, direction: str = "both") -> str:
    """ε(δ) against σ per sampler and method, from a sweep table."""
    plt = _pyplot()
    curves: dict[tuple, dict[float, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for r in _rows(table, direction):
        curves[(r["sampler"], r["method"], r["steps"], r["epochs"])][r["sigma"]].append(r)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    drawn = 0
    for key, by_sigma in sorted(curves.items()):
        sigmas = sorted(by_sigma)
        eps = [epsilon_at(by_sigma[s], delta) for s in sigmas]
        finite = [(s, e) for s, e in zip(sigmas, eps) if math.isfinite(e)]
        if not finite:
            continue
        dashed = by_sigma[sigmas[0]][0]["guarantee"] == "lower_bound"
        ax.plot(*zip(*finite), marker="o", linestyle="--" if dashed else "-",
                label=f"{key[0]} {key[1]} (T={key[2]}, E={key[3]})")
        drawn += 1
    if not drawn:
        raise ValueError(f"no configuration of the table reaches delta={delta} on its ε grid")
    ax.set_xlabel("σ (noise multiplier)")
    ax.set_ylabel(f"ε at δ={delta:g}")
    ax.set_yscale("log")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=6)
    return _save(fig, out)


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
