"""Poisson ε(δ): the certified PLD bracket (tilted FFT) against dp_accounting's PLD, same run.

    python -m benchmarks.poisson_pld [--configs 0.8:1000:1,1.0:234:10] [--deltas 1e-5,1e-8,1e-12,1e-15]
        [--dp-intervals 1e-4,2e-5]

For each (σ, T, E) and δ: epscert's certified upper and lower ε (both directions, one call each
side, caches cleared per configuration and δ), their relative width, the CPU seconds of the two
(time.process_time, this process); dp_accounting 0.6.0's ``PLDAccountant`` (pessimistic,
connect-the-dots) ε at each loss step with its CPU seconds per ε (composition included), whether it
is stable (its first two steps agree to 0.1%) and our upper's distance to it in %. Nothing here
asserts a timing.
"""

from __future__ import annotations

import argparse
import math
import platform
import time

import dp_accounting
from dp_accounting.pld import pld_privacy_accountant

import epscert.analytic.poisson as poisson
from epscert.config import Direction

ISSUE_24 = "0.8:1000:1,1.0:234:10,0.8:10000:10,0.5:100000:1,1.5:97:50"


def clear_caches() -> None:
    for cache in (poisson.bracket, poisson.step_masses, poisson.delta_pair, poisson.epsilon_pair,
                  poisson.rdp_accountant):
        cache.cache_clear()


def ours(sigma: float, steps: int, epochs: int, delta: float, interval: float) -> tuple[float, float, str, float]:
    """(upper ε, lower ε, bound name, CPU s) from a cold start."""
    clear_caches()
    start = time.process_time()
    up, name = poisson.poisson_pld_epsilon(sigma, steps, epochs, delta, Direction.BOTH, interval, True)
    lo, _ = poisson.poisson_pld_epsilon(sigma, steps, epochs, delta, Direction.BOTH, interval, False)
    return up, lo, name, time.process_time() - start


def dp(sigma: float, steps: int, epochs: int, delta: float, interval: float) -> tuple[float, float]:
    """(ε, CPU s) of dp_accounting's PLDAccountant at one loss step, composition included."""
    start = time.process_time()
    acc = pld_privacy_accountant.PLDAccountant(value_discretization_interval=interval)
    acc.compose(dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(1.0 / steps, dp_accounting.GaussianDpEvent(sigma)), steps * epochs))
    eps = float(acc.get_epsilon(delta))
    return eps, time.process_time() - start


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", default=ISSUE_24, help="σ:T:E, comma-separated")
    parser.add_argument("--deltas", default="1e-5,1e-8,1e-10,1e-12,1e-15")
    parser.add_argument("--discretization", type=float, default=1e-4, help="epscert's loss step (default 1e-4)")
    parser.add_argument("--dp-intervals", default="1e-4,2e-5", help="dp_accounting loss steps; '' to skip")
    args = parser.parse_args(argv)
    configs = [tuple(c.split(":")) for c in args.configs.split(",") if c]
    deltas = [float(d) for d in args.deltas.split(",") if d]
    intervals = [float(v) for v in args.dp_intervals.split(",") if v]
    print(f"# Poisson ε(δ), both directions; machine: {platform.machine()} {platform.processor() or ''} "
          f"python {platform.python_version()}; CPU s = time.process_time")
    head = "| σ, T, E | δ | ε upper | ε lower | width | bound | CPU s |"
    rule = "|---|---|---|---|---|---|---|"
    for interval in intervals:
        head += f" dp Δ={interval:g} | dp CPU s |"
        rule += "---|---|"
    if intervals:
        head += " dp stable | upper vs dp |"
        rule += "---|---|"
    print(head)
    print(rule)
    for s, t, e in configs:
        sigma, steps, epochs = float(s), int(t), int(e)
        for delta in deltas:
            up, lo, name, seconds = ours(sigma, steps, epochs, delta, args.discretization)
            width = (up - lo) / up if math.isfinite(up) and up > 0 else math.inf
            line = f"| {s}, {t}, {e} | {delta:g} | {up:.5f} | {lo:.5f} | {width:.2%} | {name} | {seconds:.2f} |"
            ref = []
            for interval in intervals:
                eps, dp_seconds = dp(sigma, steps, epochs, delta, interval)
                ref.append(eps)
                line += f" {eps:.5f} | {dp_seconds:.2f} |"
            if intervals:
                stable = len(ref) > 1 and math.isfinite(ref[1]) and abs(ref[0] - ref[1]) <= 1e-3 * ref[1]
                gap = (up - ref[0]) / ref[0] if math.isfinite(ref[0]) and ref[0] > 0 else math.nan
                line += f" {'yes' if stable else 'no'} | {gap:+.2%} |"
            print(line, flush=True)


if __name__ == "__main__":
    main()
