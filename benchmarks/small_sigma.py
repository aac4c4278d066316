"""CPU seconds of δ(0) below σ = 0.3 through the Accountant (issue 35, item 1).

    python -m benchmarks.small_sigma [--points 0.297:100000:1,0.25:1000000:1000,0.1:1000:1000]
        [--baseline-samples 3000]

For every (σ, T, E): a fresh process-wide cache, ``Accountant(σ, steps=T, epochs=E).delta_interval(0.0)``
(the bracket since issue 35: both chains) with its CPU seconds (``time.process_time``, one process), the
interval, the method that answered and the bracket's relative width; then, for E = 1 and as a baseline
in the same run, the CPU seconds and mean ± SE of a naive Monte Carlo of ``--baseline-samples`` samples
per direction (the issue's reference: 0.0981 ± 0.0017 at σ = 0.297, T = 10^5 with 3,000 samples).
Nothing here asserts a timing.
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import epscert
from epscert.allocation.bracket import bracket_for


def _points(text: str) -> list[tuple[float, int, int]]:
    out = []
    for item in text.split(","):
        sigma, steps, epochs = item.split(":")
        out.append((float(sigma), int(steps), int(epochs)))
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", default="0.297:100000:1,0.25:1000000:1000,0.1:1000:1000")
    parser.add_argument("--baseline-samples", type=int, default=3000)
    args = parser.parse_args(argv)
    print(f"# {platform.machine()}, {os.cpu_count()} cores visible, one process")
    print("| σ | T | E | lower | estimate | upper | method | CPU s | naive mean ± SE (remove, add) | naive CPU s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for sigma, steps, epochs in _points(args.points):
        bracket_for.cache_clear()
        start = time.process_time()
        acc = epscert.Accountant(sigma, steps=steps, epochs=epochs)
        lower, estimate, upper = acc.delta_interval(0.0)
        cpu = time.process_time() - start
        naive, naive_cpu = "-", "-"
        if epochs == 1 and args.baseline_samples:
            start = time.process_time()
            rows = epscert.certify(sampler="balls_and_bins", sigma=sigma, steps=steps, epsilons=[0.0], method="naive",
                                   samples=args.baseline_samples, seed=1).to_pylist()
            naive_cpu = f"{time.process_time() - start:.1f}"
            naive = ", ".join(f"{r['delta']:.4f} ± {r['std_error']:.4f}" for r in rows
                              if r["direction"] in ("remove", "add"))
        shown = "-" if estimate is None else f"{estimate:.6g}"
        print(f"| {sigma:g} | {steps} | {epochs} | {lower:.6g} | {shown} | {upper:.6g} | "
              f"{acc.last_certificate.method} | {cpu:.1f} | {naive} | {naive_cpu} |")


if __name__ == "__main__":
    main()
