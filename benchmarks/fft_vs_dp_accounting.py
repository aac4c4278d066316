"""FFT accountant bracket vs dp_accounting's PLD on a heterogeneous Poisson schedule.

    python -m benchmarks.fft_vs_dp_accounting [--steps 10000] [--blocks 10] [--q 0.01]
        [--sigma-start 1.2] [--sigma-end 0.8] [--sizes 65536,262144] [--dp-intervals 1e-4]

Schedule: ``steps`` Poisson-subsampled Gaussian steps with rate q, in ``blocks`` equal blocks
whose σ steps linearly from ``sigma-start`` to ``sigma-end`` (blocks = steps: per-step σ).
Both directions (the max). Prints a Markdown table: for each method, per ε, the lower and
upper value on δ(ε), the ratio upper/lower, the width, and the CPU seconds of the whole method
(all ε; time.process_time, this process). dp_accounting: the pessimistic PLD (connect-the-dots)
is the upper value, the optimistic PLD the lower one (each certified only up to dp_accounting's
own floating point). L is the a-priori choice unless given.
"""

from __future__ import annotations

import argparse
import platform
import time

import numpy as np
from dp_accounting.pld import privacy_loss_distribution as pld_lib

from epscert.fft.choose import choose_grid
from epscert.fft.compose import fft_bounds
from epscert.fft.grid import Grid
from epscert.fft.mechanisms import Schedule, SubsampledGaussian
from epscert.fft.plancherel import running_bounds
from epscert.config import Direction


def schedule_of(steps: int, blocks: int, q: float, sigma_start: float, sigma_end: float) -> Schedule:
    sizes = np.full(blocks, steps // blocks)
    sizes[: steps % blocks] += 1
    sigmas = np.linspace(sigma_start, sigma_end, blocks)
    return Schedule.of([(SubsampledGaussian(q, float(s)), int(c)) for s, c in zip(sigmas, sizes)])


def dp_accounting_delta(schedule: Schedule, epsilons, interval: float, pessimistic: bool) -> np.ndarray:
    pld = None
    for mech, count in schedule.entries:
        one = pld_lib.from_gaussian_mechanism(
            standard_deviation=mech.sigma, sensitivity=1.0, sampling_prob=mech.q,
            pessimistic_estimate=pessimistic, value_discretization_interval=interval,
            use_connect_dots=pessimistic).self_compose(count)
        pld = one if pld is None else pld.compose(one)
    return np.asarray(pld.get_delta_for_epsilon([float(e) for e in epsilons]))


def _ratio(upper: float, lower: float) -> str:
    return f"{upper / lower:.4f}" if lower > 0.0 else "inf"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--blocks", type=int, default=10)
    parser.add_argument("--q", type=float, default=0.01)
    parser.add_argument("--sigma-start", type=float, default=1.2)
    parser.add_argument("--sigma-end", type=float, default=0.8)
    parser.add_argument("--epsilons", default="1,2,4")
    parser.add_argument("--sizes", default=f"{2**16},{2**18}")
    parser.add_argument("--half-width", type=float, default=None, help="default: the a-priori choice")
    parser.add_argument("--dp-intervals", default="1e-4")
    parser.add_argument("--running-every", type=int, default=1000,
                        help="Plancherel checkpoints on the smallest grid (0: skip)")
    args = parser.parse_args(argv)
    eps = [float(e) for e in args.epsilons.split(",")]
    sched = schedule_of(args.steps, args.blocks, args.q, args.sigma_start, args.sigma_end)
    half_width = args.half_width or choose_grid(sched, eps, 1e-6, "both", max_size=2**24).grid.half_width
    print(f"# δ(ε), both directions: {args.steps} Poisson-subsampled Gaussian steps, q={args.q}, σ linear "
          f"{args.sigma_start} -> {args.sigma_end} in {args.blocks} blocks")
    print(f"# machine: {platform.machine()} {platform.processor() or ''} python {platform.python_version()}")
    print("| method | ε | lower | upper | upper/lower | width | CPU s |")
    print("|---|---|---|---|---|---|---|")
    sizes = [int(s) for s in args.sizes.split(",")]
    parts = (Direction.REMOVE, Direction.ADD)
    notes: list[str] = []
    for size in sizes:
        grid = Grid(half_width, size)
        start = time.process_time()
        result = fft_bounds(sched, eps, grid, "both")
        seconds = time.process_time() - start
        b = result.result
        name = f"fft L={half_width:.3g} n=2^{int(np.log2(size))} (dx={grid.dx:.2g})"
        for i, e in enumerate(eps):
            print(f"| {name} | {e:g} | {b.lower[i]:.4e} | {b.upper[i]:.4e} | {_ratio(b.upper[i], b.lower[i])} | "
                  f"{b.upper[i] - b.lower[i]:.2e} | {seconds:.1f} |")
        notes.append(f"# n=2^{int(np.log2(size))}: tilts λ = "
                     + ", ".join(f"{lam:.3g}" for lam in result.brackets[parts[0]].lam)
                     + f"; absolute allowances <= {max(float(np.max(result.brackets[d].absolute_up)) for d in parts):.1e}"
                     + f" (up), {max(float(np.max(result.brackets[d].absolute_down)) for d in parts):.1e} (down)")
    for interval in [float(v) for v in args.dp_intervals.split(",")]:
        start = time.process_time()
        hi = dp_accounting_delta(sched, eps, interval, True)
        lo = dp_accounting_delta(sched, eps, interval, False)
        seconds = time.process_time() - start
        for i, e in enumerate(eps):
            print(f"| dp_accounting PLD Δ={interval:g} (opt, pess) | {e:g} | {lo[i]:.4e} | {hi[i]:.4e} | "
                  f"{_ratio(hi[i], lo[i])} | {hi[i] - lo[i]:.2e} | {seconds:.1f} |")
    print("\n".join(["", *notes]))
    if args.running_every:
        grid = Grid(half_width, min(sizes))
        marks = list(range(args.running_every, args.steps + 1, args.running_every))
        start = time.process_time()
        run = running_bounds(sched, eps[:2], grid, "both", marks)
        print(f"\n# running bracket (Plancherel), n={grid.size}, {len(marks)} checkpoints, "
              f"{time.process_time() - start:.1f} CPU s")
        print("| step | ε | lower | upper |")
        print("|---|---|---|---|")
        for t, step in enumerate(run.steps.tolist()):
            for i, e in enumerate(run.epsilons.tolist()):
                print(f"| {step} | {e:g} | {run.lower[t, i]:.4e} | {run.upper[t, i]:.4e} |")


if __name__ == "__main__":
    main()
