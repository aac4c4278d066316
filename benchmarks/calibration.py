"""Calibrated σ for Balls-and-Bins against Poisson (and deterministic) at one target (ε, δ), with CPU seconds.

    python -m benchmarks.calibration [--epsilon 8] [--delta 1e-7] [--steps 1563] [--method auto]

``auto`` calibrates on the deterministic PLD bracket (:mod:`epscert.inverse.sigma_search`); a Monte Carlo
method (``--method importance --samples 200000``) on sampled UCBs with a fresh-seed certificate. Prints
the σ, its accuracy checked on both sides of the bracket (the default bracket's upper side certifies σ,
its lower side shows that σ/(1 + 0.1%) fails), the Poisson σ (dp_accounting PLD) and the deterministic
σ (exact), the evaluations, and CPU seconds (``time.process_time``, this process) and wall seconds.
"""

from __future__ import annotations

import argparse
import platform
import time

from epscert.allocation import bracket_for
from epscert.inverse.calibrate import calibrate_sigma
from epscert.inverse.sigma_search import ACCURACY
from epscert.config import CertifyConfig


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epsilon", type=float, nargs="+", default=[8.0, 8.5])
    parser.add_argument("--delta", type=float, default=1e-7)
    parser.add_argument("--steps", type=int, default=1563)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--samples", type=int, default=200_000)
    parser.add_argument("--method", default="auto")
    args = parser.parse_args(argv)
    print(f"# target δ={args.delta:g}, T={args.steps}, E={args.epochs}, method={args.method}; "
          f"{platform.machine()} python {platform.python_version()}; CPU s of this process (time.process_time)")
    for eps in args.epsilon:
        config = CertifyConfig("balls_and_bins", 1.0, args.steps, (eps,), methods=(args.method,),
                               epochs=args.epochs, samples=args.samples, error_prob=0.01, seed=0)
        cpu, wall = time.process_time(), time.perf_counter()
        result = calibrate_sigma(config, eps, args.delta)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        print(f"ε={eps:g}: Balls-and-Bins σ = {result.sigma:.6g}  certified={result.certified}  "
              f"δ_upper({eps:g}) = {result.delta_upper:.4e}  ({result.method or args.method})")
        if result.sigma_accuracy is not None:
            below = result.sigma / (1 + ACCURACY)
            lower = bracket_for(below, args.steps, args.epochs).delta_side([eps], "both", "lower")[0]
            print(f"  both sides: the default bracket's lower side at σ/(1 + {ACCURACY:g}) = {below:.6g} is "
                  f"{lower:.4e} > δ: {lower > args.delta}; proven accuracy {100 * result.sigma_accuracy:.3g}%")
        print(f"  Poisson σ (dp_accounting PLD upper) = {result.poisson_sigma:.5g}; deterministic σ (exact) = "
              f"{result.deterministic_sigma:.5g}")
        print(f"  {len(result.search_sigmas)} evaluations; search {result.search_seconds:.1f} s wall, certificate "
              f"{result.certify_seconds:.1f} s wall; total {cpu:.2f} CPU s, {wall:.1f} s wall (Poisson σ included)")


if __name__ == "__main__":
    main()
