"""Width of the Balls-and-Bins bracket at small δ, with the share of each allowance (issue 11).

    python -m benchmarks.bracket_width [--sigma 0.3,0.5,1,2] [--steps 1000,10000,100000,1000000]
        [--epochs 1,10,100] [--delta 1e-10,1e-8,1e-5] [--cells N] [--base-cells N]   (0: σ-dependent default)

For every (σ, T, E): one bracket at the given settings (default: the package defaults), then,
for each target δ, ε = eps_upper(δ) (so the upper bound is ≈ δ there) and the relative width
upper/lower − 1 of the δ bracket at that ε. The breakdown (all relative to the upper bound):

* ``value rel`` — the relative value allowance Γ, upper + lower (it moves e^ε; its share of the
  width is at most about this times ε·|d log δ/dε|, negligible at Γ <= 1e-7);
* ``mass rel`` — mass_rel_error upper + lower (relative allowances);
* ``cap`` — the cap term of the larger direction plus the excess moment over the top cap of the
  product grid, over δ (upper side only);
* ``grid`` — the rest: width − mass rel − value rel − cap (discretisation, contraction vs spread).

CPU seconds are ``time.process_time`` of building both chains (one process). Nothing here
asserts a timing.
"""

from __future__ import annotations

import argparse
import os
import platform
import time

from epscert.allocation import AllocationBracket


def _floats(text: str) -> list[float]:
    return [float(x) for x in text.split(",") if x]


def _ints(text: str) -> list[int]:
    return [int(float(x)) for x in text.split(",") if x]


def measure(sigma: float, steps: int, epochs: int, deltas: list[float], cells: int | None,
            base_cells: int) -> list[dict]:
    """One bracket; for each δ the width at eps_upper(δ) and its breakdown."""
    kwargs = {"base_cells": base_cells or None, "cells": cells or None}
    start = time.process_time()
    bracket = AllocationBracket(sigma, steps, epochs, **kwargs)
    bracket.delta([0.0])  # builds both chains
    cpu = time.process_time() - start
    diag = bracket.diagnostics
    rows = []
    for delta in deltas:
        eps = bracket.epsilon(delta)[0]
        up, lo = (float(v[0]) for v in bracket.delta([eps]))
        width = up / lo - 1.0 if lo > 0 else float("inf")
        mass_rel = diag["upper_mass_rel_error"] + diag["lower_mass_rel_error"]
        cap = (max(diag["cap_remove"], diag["cap_add"]) + diag.get("upper_excess_moment", 0.0)) / up
        value_rel = diag["upper_value_rel_error"] + diag["lower_value_rel_error"]
        rows.append({"sigma": sigma, "T": steps, "E": epochs, "delta": delta, "eps": eps, "upper": up,
                     "width": width, "mass_rel": mass_rel, "value_rel": value_rel, "cap": cap,
                     "grid": width - mass_rel - value_rel - cap, "cpu_s": cpu})
    return rows


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sigma", default="0.3,0.5,1,2")
    parser.add_argument("--steps", default="1000,10000,100000,1000000")
    parser.add_argument("--epochs", default="1,10,100")
    parser.add_argument("--delta", default="1e-10,1e-8,1e-5")
    parser.add_argument("--cells", type=int, default=0, help="cells per level (0: the default)")
    parser.add_argument("--base-cells", type=int, default=0, help="cells of the base law (0: the default)")
    args = parser.parse_args(argv)
    print(f"# machine: {platform.machine()} {os.cpu_count()} cpus, python {platform.python_version()}; "
          f"cells={args.cells or 'default'}, base_cells={args.base_cells or 'default'}")
    print("| σ | T | E | δ | ε upper | width | mass rel | value rel | cap | grid | CPU s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for sigma in _floats(args.sigma):
        for steps in _ints(args.steps):
            for epochs in _ints(args.epochs):
                try:
                    rows = measure(sigma, steps, epochs, _floats(args.delta), args.cells, args.base_cells)
                except (ValueError, IndexError, FloatingPointError) as exc:  # reported, not hidden
                    print(f"| {sigma:g} | {steps} | {epochs} | – | failed: {type(exc).__name__}: {exc} |", flush=True)
                    continue
                for r in rows:
                    print(f"| {r['sigma']:g} | {r['T']} | {r['E']} | {r['delta']:.0e} | {r['eps']:.4f} | "
                          f"{r['width']:.2%} | {r['mass_rel']:.1e} | {r['value_rel']:.1e} | {r['cap']:.1e} | "
                          f"{r['grid']:.2%} | {r['cpu_s']:.1f} |", flush=True)


if __name__ == "__main__":
    main()
