"""δ_B(ε) per method for one configuration: mean, UCB, lower bound, samples, seconds.

    python -m benchmarks.method_table [--samples N] [--sigma S] [--steps T]

Prints a Markdown table (the one in the issue-2 closing note and the README).
"""

from __future__ import annotations

import argparse
import platform
import time

import epscert

METHODS = ("naive", "importance", "order_stats", "importance_order_stats")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=1_000_000)
    parser.add_argument("--sigma", type=float, default=0.35)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--epsilons", default="1,2,4,8")
    parser.add_argument("--orders", default="1,100,1,100,1000,50")
    args = parser.parse_args(argv)
    eps = [float(e) for e in args.epsilons.split(",")]
    lower = epscert.certify(sigma=args.sigma, steps=args.steps, epsilons=eps, method="cube_lower_bound")
    lower_by_eps = {r["epsilon"]: r["delta"] for r in lower.to_pylist() if r["direction"] == "both"}
    print(f"# δ_B(ε), σ={args.sigma}, T={args.steps}, both directions (β=0.01: each direction at 0.005)")
    print(f"# machine: {platform.machine()} {platform.processor() or ''} python {platform.python_version()}")
    print("| method | ε | mean | UCB | lower bound | samples | seconds |")
    print("|---|---|---|---|---|---|---|")
    for method in METHODS:
        start = time.perf_counter()
        kwargs = {"orders": args.orders} if "order" in method else {}
        table = epscert.certify(sigma=args.sigma, steps=args.steps, epsilons=eps, method=method,
                                samples=args.samples, seed=0, **kwargs)
        seconds = time.perf_counter() - start
        for r in table.to_pylist():
            if r["direction"] != "both":
                continue
            print(f"| {method} | {r['epsilon']:g} | {r['delta']:.4e} | {r['delta_upper']:.4e} | "
                  f"{lower_by_eps[r['epsilon']]:.4e} | {r['samples']} | {seconds:.1f} |")


if __name__ == "__main__":
    main()
