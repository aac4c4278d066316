"""Mid-epoch certificates: CPU seconds per query of a training loop, and the bracket's width (issue 25).

    python -m benchmarks.midepoch [--runs 1,1000,3,50;1,10000,3,500;0.8,100000,2,5000] [--delta 1e-5]
        [--random 20] [--widths 1,1000,0,1;1,1000,0,500;...]

Loop: for each run "σ,T,E,L", one ``epscert.Accountant(noise_multiplier=σ, steps=T, epochs=E)`` is
asked ``get_epsilon(δ, steps_done=n)`` for n = L, 2L, ..., T·E, as a training loop that logs every L
steps would. Printed: the CPU seconds (``time.process_time``) of the first query (it builds the
first epoch's laws), of the first query of each later epoch (the laws of that epoch's run, which
also answer its end), and of every other query (median, 90th percentile, max). Then ``--random``
queries at random step counts of the last epoch (their laws warm, their prefixes not).

Widths: for each "σ,T,E',r" the bracket after E' whole epochs and r steps, ε(δ) upper and lower at
``--delta`` and 1e-10, and the relative width eps_upper/eps_lower − 1.

Nothing here asserts a timing.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

import numpy as np

import epscert
from epscert.allocation import AllocationBracket

DEFAULT_RUNS = "1,1000,3,50;1,10000,3,500;0.8,100000,2,5000"
DEFAULT_WIDTHS = "1,1000,0,1;1,1000,0,500;1,1000,2,500;0.5,1000,0,500;2,10000,9,5000;0.7,100000,1,30000"


def _runs(text: str) -> list[tuple]:
    return [tuple(float(v) if i == 0 else int(float(v)) for i, v in enumerate(item.split(",")))
            for item in text.split(";") if item]


def loop(sigma: float, steps: int, epochs: int, every: int, delta: float, random: int, seed: int = 0) -> dict:
    acc = epscert.Accountant(noise_multiplier=sigma, steps=steps, epochs=epochs)
    first, epoch_first, others = None, [], []
    seen_epochs = set()
    for n in range(every, steps * epochs + 1, every):
        start = time.process_time()
        acc.get_epsilon(delta, steps_done=n)
        cpu = time.process_time() - start
        epoch = (n - 1) // steps
        if first is None:
            first = cpu
        elif epoch not in seen_epochs:
            epoch_first.append(cpu)
        else:
            others.append(cpu)
        seen_epochs.add(epoch)
    rng = np.random.default_rng(seed)
    rand = []
    for r in rng.integers(1, steps, size=random):
        start = time.process_time()
        acc.get_epsilon(delta, steps_done=(epochs - 1) * steps + int(r))
        rand.append(time.process_time() - start)
    return {"first": first, "epoch_first": epoch_first, "others": others, "random": rand}


def _stats(values: list[float]) -> str:
    if not values:
        return "-"
    return (f"median {statistics.median(values):.2f}, p90 {float(np.quantile(values, 0.9)):.2f}, "
            f"max {max(values):.2f} ({len(values)})")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", default=DEFAULT_RUNS)
    parser.add_argument("--delta", type=float, default=1e-5)
    parser.add_argument("--random", type=int, default=20)
    parser.add_argument("--widths", default=DEFAULT_WIDTHS)
    args = parser.parse_args(argv)
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}; "
          f"CPU seconds per get_epsilon(δ={args.delta:g}, steps_done=n)")
    print("| σ | T | E | every L | first query | first of a later epoch | other queries | random r, warm |")
    print("|---|---|---|---|---|---|---|---|")
    for sigma, steps, epochs, every in _runs(args.runs):
        out = loop(sigma, steps, epochs, every, args.delta, args.random)
        print(f"| {sigma:g} | {steps} | {epochs} | {every} | {out['first']:.2f} | {_stats(out['epoch_first'])} | "
              f"{_stats(out['others'])} | {_stats(out['random'])} |", flush=True)
    print()
    print("| σ | T | E' | r | δ | ε upper | ε lower | relative width | CPU s (both chains) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for sigma, steps, full, r in _runs(args.widths):
        start = time.process_time()
        b = AllocationBracket(sigma, steps, full + 1, steps_done=full * steps + r)
        b.delta([0.0])
        cpu = time.process_time() - start
        for delta in (args.delta, 1e-10):
            up, lo = b.epsilon(delta)
            width = up / lo - 1.0 if lo > 0 else float("inf")
            print(f"| {sigma:g} | {steps} | {full} | {r} | {delta:g} | {up:.6g} | {lo:.6g} | {width:.2e} | "
                  f"{cpu:.2f} |", flush=True)


if __name__ == "__main__":
    main()
