"""Samples and CPU seconds to a 5% relative width at δ ≈ 1e-4, 1e-6, 1e-8 (issue 13).

σ = 0.5, T = 1000 and T = 10^5, REMOVE direction (the one that sets δ here), one epoch.
Each method runs waves of doubling sample counts (fresh shard indices, merged exactly) until
its criterion holds or its budget runs out:

- every method stops when its certified UCB is within 5% of its estimate (UCB / mean <= 1.05);
  ``conditional`` / ``conditional_order_stats`` (T = 10^5) use the UCB of
  epscert.dpsgd.conditional_ucb, and the plain conditional also has a lower bound (UCB / LCB
  is printed); the relative standard error ("rse") is printed for every method.

Prints CPU seconds (time.process_time), samples, and whether the target was reached.
Usage: python -m benchmarks.conditional [--quick]
"""

from __future__ import annotations

import sys
import time

from epscert.montecarlo import accumulator as acc_mod
from epscert.montecarlo.shard import ShardTask, run_shard
from epscert.config import CertifyConfig, Method
from epscert.results.rows import mc_rows

TARGETS = (1e-4, 1e-6, 1e-8)
EPS_GRID = [x / 4 for x in range(1, 49)]  # 0.25 .. 12.0


def config(steps: int, eps: float, method: str, samples: int) -> CertifyConfig:
    return CertifyConfig(sampler="balls_and_bins", sigma=0.5, steps=steps, epsilons=(eps,),
                         methods=(method,), samples=samples, direction="remove", seed=1)


def pick_epsilons(steps: int, method: str) -> dict[float, float]:
    """ε of the grid whose conditional estimate is nearest each target δ (pilot run, 2000 samples)."""
    c = CertifyConfig(sampler="balls_and_bins", sigma=0.5, steps=steps, epsilons=EPS_GRID,
                      methods=(method,), samples=2000, direction="remove", seed=99)
    m = Method(method)
    rows = mc_rows(c, m, run_shard(ShardTask(c, m, 0, 2000)), 0.0)
    est = {r["epsilon"]: r["delta"] for r in rows}
    import math
    return {t: min(est, key=lambda e: abs(math.log(max(est[e], 1e-300)) - math.log(t))) for t in TARGETS}


def waves(steps: int, eps: float, method: str, start: int, budget: int) -> dict:
    m = Method(method)
    acc, n, shard, cpu = None, 0, 0, 0.0
    size = start
    while True:
        c = config(steps, eps, method, max(n + size, 1))
        t0 = time.process_time()
        part = run_shard(ShardTask(c, m, shard, size, stream=shard))  # fresh samples: stream = shard
        cpu += time.process_time() - t0
        acc = part if acc is None else acc_mod.merge([acc, part])
        n, shard = n + size, shard + 1
        row = mc_rows(c, m, acc, 0.0)[0]
        rse = row["std_error"] / row["delta"] if row["delta"] > 0 else float("inf")
        done = row["delta"] > 0 and row["delta_upper"] / row["delta"] <= 1.05
        if done or n + 2 * size > budget:
            ratio = (row["delta_upper"] / row["delta_lower"]) if row["delta_lower"] else float("inf")
            return dict(samples=n, cpu=cpu, delta=row["delta"], rse=rse, ucb=row["delta_upper"],
                        ucb_over_lcb=ratio, reached=done)
        size *= 2


def main(argv: list[str] | None = None) -> None:
    quick = "--quick" in (argv if argv is not None else sys.argv[1:])
    cap = 10**4 if quick else 10**5
    print("| T | target δ | ε | method | samples | CPU s | estimate | rel. SE | UCB | UCB/estimate | UCB/LCB | reached |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for steps, cond, base in ((1000, "conditional", 4 * cap), (100_000, "conditional_order_stats", cap // 2)):
        chosen = pick_epsilons(steps, cond)
        for target, eps in chosen.items():
            plan = [(cond, 1000, 10**6 if not quick else 2 * 10**5), ("importance_order_stats", 4000, base)]
            if steps == 1000:
                plan.append(("naive", 2000, cap // 2))
            for method, start, budget in plan:
                r = waves(steps, eps, method, start, budget)
                print(f"| {steps} | {target:.0e} | {eps:g} | {method} | {r['samples']} | {r['cpu']:.1f} | "
                      f"{r['delta']:.4e} | {r['rse']:.2e} | {r['ucb']:.3e} | {r['ucb'] / r['delta'] if r['delta'] else float('inf'):.4g} | "
                      f"{r['ucb_over_lcb']:.3g} | "
                      f"{'yes' if r['reached'] else 'no'} |", flush=True)


if __name__ == "__main__":
    main()
