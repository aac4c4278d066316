"""CPU seconds and width of the deterministic Balls-and-Bins bracket (epscert.allocation).

    python -m benchmarks.allocation [--steps 1000,10000,100000,1000000] [--epochs 1,10,100]
        [--sigma 1.0] [--delta 1e-5] [--cells N (0: the σ-dependent default)] [--base-cells N (0: the default)]

For every (T, E): one bracket (both chains, both directions), then ε(δ) from it. Prints a
Markdown table with the CPU seconds of the laws (``time.process_time``, one process, one
thread of numpy), the certified ε interval at ``--delta``, its relative width
eps_upper/eps_lower − 1, the relative width of the δ bracket upper/lower − 1 at ε = eps_upper,
and the resolution (cap terms + floating-point allowance). Nothing here asserts a timing.
"""

from __future__ import annotations

import argparse
import os
import platform
import time

from epscert.allocation import AllocationBracket


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def one(sigma: float, steps: int, epochs: int, delta: float, cells: int, base_cells: int) -> dict:
    start = time.process_time()
    bracket = AllocationBracket(sigma, steps, epochs, cells=cells or None, base_cells=base_cells or None)
    bracket.delta([0.0])  # builds both chains
    laws = time.process_time() - start
    eps_upper, eps_lower = bracket.epsilon(delta)
    up, lo = bracket.delta([eps_upper])
    return {
        "T": steps, "E": epochs, "cpu_s": laws, "cpu_eps_s": time.process_time() - start - laws,
        "eps_lower": eps_lower, "eps_upper": eps_upper,
        "eps_width": eps_upper / eps_lower - 1.0 if eps_lower > 0 else float("inf"),
        "delta_width": float(up[0] / lo[0] - 1.0) if lo[0] > 0 else float("inf"),
        "resolution": bracket.resolution,
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", default="1000,10000,100000,1000000")
    parser.add_argument("--epochs", default="1,10,100")
    parser.add_argument("--sigma", type=float, default=1.0)
    parser.add_argument("--delta", type=float, default=1e-5)
    parser.add_argument("--cells", type=int, default=0, help="cells per level (0: the default)")
    parser.add_argument("--base-cells", type=int, default=0, help="cells of the base law (0: the default)")
    args = parser.parse_args(argv)
    print(f"# machine: {platform.machine()} {platform.processor() or ''} {os.cpu_count()} cpus, "
          f"python {platform.python_version()}; sigma={args.sigma}, delta={args.delta:g}, "
          f"cells={args.cells or 'default'}, base_cells={args.base_cells or 'default'}")
    print("| T | E | CPU s (laws) | CPU s (ε search) | ε lower | ε upper | ε width | δ width at ε upper | resolution |")
    print("|---|---|---|---|---|---|---|---|---|")
    for steps in _ints(args.steps):
        for epochs in _ints(args.epochs):
            r = one(args.sigma, steps, epochs, args.delta, args.cells, args.base_cells)
            print(f"| {r['T']} | {r['E']} | {r['cpu_s']:.2f} | {r['cpu_eps_s']:.2f} | {r['eps_lower']:.5f} | "
                  f"{r['eps_upper']:.5f} | {r['eps_width']:.2e} | {r['delta_width']:.2e} | "
                  f"{r['resolution']:.1e} |", flush=True)


if __name__ == "__main__":
    main()
