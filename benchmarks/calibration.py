"""Calibrated σ for Balls-and-Bins against Poisson (and deterministic) at one target (ε, δ).

    python -m benchmarks.calibration [--epsilon 8] [--delta 1e-5] [--steps 1000] [--samples 200000]

Prints the search, the fresh-seed certificate, the Poisson σ (dp_accounting PLD) and the
deterministic σ (exact), with wall times.
"""

from __future__ import annotations

import argparse
import platform
import time

from epscert.inverse.calibrate import calibrate_sigma
from epscert.params import CertifyConfig


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epsilon", type=float, default=8.0)
    parser.add_argument("--delta", type=float, default=1e-5)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--samples", type=int, default=200_000)
    parser.add_argument("--method", default="importance")
    args = parser.parse_args(argv)
    config = CertifyConfig("balls_and_bins", 1.0, args.steps, (args.epsilon,), methods=(args.method,),
                           epochs=args.epochs, samples=args.samples, error_prob=0.01, seed=0)
    start = time.perf_counter()
    result = calibrate_sigma(config, args.epsilon, args.delta)
    total = time.perf_counter() - start
    print(f"# target ε={args.epsilon:g}, δ={args.delta:g}, T={args.steps}, E={args.epochs}, "
          f"method={args.method}, samples={args.samples} (search {args.samples // 4}), β=0.01; "
          f"{platform.machine()} python {platform.python_version()}")
    print(f"Balls-and-Bins σ = {result.sigma:.4f}  certified={result.certified}  "
          f"UCB δ({args.epsilon:g}) = {result.delta_upper:.3e} (fresh seed 1)")
    print(f"Poisson σ (dp_accounting PLD upper) = {result.poisson_sigma:.4f}")
    print(f"Deterministic σ (exact) = {result.deterministic_sigma:.4f}")
    print(f"search: {len(result.search_sigmas)} σ values in {result.search_seconds:.1f} s; "
          f"certificate {result.certify_seconds:.1f} s; total with baselines {total:.1f} s")


if __name__ == "__main__":
    main()
