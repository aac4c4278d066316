"""Dump every row of a 200-value ε grid (all analytic baselines and the default Monte Carlo method), for
comparing the rows before and after a change of the grid's code path (issue 35 item 5).

    PYTHONPATH=$PWD python -m benchmarks.dense_grid_rows OUT.json            # dump
    PYTHONPATH=$PWD python -m benchmarks.dense_grid_rows NEW.json --against OLD.json
"""

from __future__ import annotations

import argparse
import json
import math

import numpy as np

import epscert

SETTINGS = [
    dict(sampler="balls_and_bins", method="auto", sigma=1.0, steps=50, epochs=1, samples=1000),
    dict(sampler="deterministic", method="exact", sigma=1.0, steps=50, epochs=1),
    dict(sampler="poisson", method=["pld_upper", "pld_lower", "rdp_upper"], sigma=1.0, steps=50, epochs=1),
    dict(sampler="shuffle", method="cube_lower_bound", sigma=1.0, steps=50, epochs=1),
    dict(sampler="balls_and_bins", method="cube_lower_bound", sigma=1.0, steps=50, epochs=1),
    dict(sampler="poisson", method=["pld_upper", "pld_lower", "rdp_upper"], sigma=0.7, steps=10, epochs=3),
    dict(sampler="shuffle", method="cube_lower_bound", sigma=0.7, steps=10, epochs=1),
]
TIMING = {"wall_seconds"}


def rows(grid) -> list[dict]:
    out = []
    for s in SETTINGS:
        table = epscert.certify(epsilons=grid, **s)
        out.extend({k: v for k, v in r.items() if k not in TIMING} for r in table.to_pylist())
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--against")
    parser.add_argument("--points", type=int, default=200)
    args = parser.parse_args(argv)
    grid = np.linspace(0.0, 14.0, args.points).tolist()
    new = rows(grid)
    with open(args.out, "w") as fh:
        json.dump(new, fh)
    print(f"{len(new)} rows written to {args.out}")
    if args.against:
        with open(args.against) as fh:
            old = json.load(fh)
        compare(old, new)


def rel(a, b) -> float:
    if a is None or b is None:
        return 0.0 if a is b else math.inf
    return 0.0 if a == b else abs(b - a) / max(abs(a), abs(b))


def compare(old: list[dict], new: list[dict]) -> None:
    """Per (sampler, method): rows that differ, the largest relative change of each δ column, and
    whether every new [lower, upper] still overlaps the old one (both are certified)."""
    print(f"{len(old)} old rows, {len(new)} new rows")
    groups: dict = {}
    for a, b in zip(old, new):
        if (a["sampler"], a["method"], a["direction"], a["epsilon"]) != (b["sampler"], b["method"], b["direction"],
                                                                           b["epsilon"]):
            raise SystemExit("rows are not in the same order")
        g = groups.setdefault((a["sampler"], a["sigma"], a["steps"], a["epochs"], a["method"]),
                              dict(rows=0, differ=0, delta=0.0, upper=0.0, lower=0.0, other=set(), disjoint=0))
        g["rows"] += 1
        if a == b:
            continue
        g["differ"] += 1
        g["delta"] = max(g["delta"], rel(a["delta"], b["delta"]))
        g["upper"] = max(g["upper"], rel(a["delta_upper"], b["delta_upper"]))
        g["lower"] = max(g["lower"], rel(a["delta_lower"], b["delta_lower"]))
        g["other"] |= {k for k in a if a[k] != b[k] and k not in ("delta", "delta_upper", "delta_lower")}
        lo_a, up_a = a["delta_lower"] or 0.0, 1.0 if a["delta_upper"] is None else a["delta_upper"]
        lo_b, up_b = b["delta_lower"] or 0.0, 1.0 if b["delta_upper"] is None else b["delta_upper"]
        g["disjoint"] += not (lo_b <= up_a and lo_a <= up_b)
    for key, g in groups.items():
        print(f"{key}: {g['rows']} rows, {g['differ']} differ; max relative change delta {g['delta']:.2g}, "
              f"delta_upper {g['upper']:.2g}, delta_lower {g['lower']:.2g}; other columns {sorted(g['other'])}; "
              f"intervals disjoint from the old ones: {g['disjoint']}")


if __name__ == "__main__":
    main()
