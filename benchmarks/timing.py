"""Timing helpers of :mod:`benchmarks.run`: best-of timers, shard throughput, RSS, time-to-certify."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

from epscert.montecarlo import accumulator as acc_mod
from epscert.results.rows import mc_rows
from epscert.config import CertifyConfig, Direction, Method
from epscert.rng import block_generator
from epscert.config.samplers import loss_sampler
from epscert.montecarlo.shard import ShardTask, run_shard

#: Elements of the arrays the RNG + exp limit is measured on (one block: 8 MiB of float64).
LIMIT_ELEMENTS = 2**20
ROOT = Path(__file__).resolve().parents[1]


def best_of(fn: Callable[[], object], reps: int) -> float:
    """Smallest wall time of ``reps`` calls (seconds): the least disturbed by other jobs."""
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def _config(case: dict, eps_grid, samples: int) -> CertifyConfig:
    return CertifyConfig(sampler="balls_and_bins", sigma=case["sigma"], steps=case["steps"],
                         epsilons=eps_grid, methods=(case["method"],), epochs=case["epochs"],
                         samples=samples, direction="both")


def _figures(case: dict, samples: int, secs: float, ranks: int) -> dict:
    coords = samples * 2 * case["steps"] * case["epochs"]
    return dict(samples=samples, seconds=secs, samples_per_s=samples / secs,
                ns_per_coord=secs / coords * 1e9, us_per_sample_dir=secs / (2 * samples) * 1e6, ranks=ranks)


def _sized(run_one: Callable[[int], object], block: int, seconds: float) -> int:
    """A sample count (whole blocks) that takes about ``seconds``, from a one-block probe."""
    t0 = time.perf_counter()
    run_one(block)
    per_block = max(time.perf_counter() - t0, 1e-6)
    return block * max(1, round(seconds / per_block))


def shard_throughput(case: dict, eps_grid, seconds: float, reps: int) -> dict:
    """Best-of wall time of ``run_shard`` (draws + exact accumulation, both directions)."""
    method = Method(case["method"])
    probe = _config(case, eps_grid, 1)
    block = loss_sampler(probe, method).block_size()
    run = lambda m: run_shard(ShardTask(_config(case, eps_grid, m), method, 0, m))  # noqa: E731
    samples = _sized(run, block, seconds)
    secs = best_of(lambda: run(samples), reps)
    return _figures(case, samples, secs, len(probe.ranks or ()))


def reference_throughput(case: dict, kernel, eps_grid, seconds: float, reps: int) -> dict:
    """The scipy reference kernel in the same block loop and accumulator as ``run_shard``."""
    sigma, steps = case["sigma"], case["steps"]
    block = max(1, LIMIT_ELEMENTS // steps)
    extra = (min(eps_grid),) if case["method"] == "importance" else ()

    def run(m: int) -> None:
        acc = acc_mod.create((Direction.REMOVE, Direction.ADD), len(eps_grid))
        for d_index, direction in enumerate((Direction.REMOVE, Direction.ADD)):
            for b, start in enumerate(range(0, m, block)):
                rng = block_generator(0, 1, 0, d_index, b)
                losses = kernel(rng, sigma, steps, min(block, m - start), direction, *extra)
                acc = acc_mod.add(acc, direction, losses, eps_grid)

    samples = _sized(run, block, seconds)
    secs = best_of(lambda: run(samples), reps)
    return _figures(case, samples, secs, 0)


# -- peak RSS ----------------------------------------------------------------------------------
def child_rss(args: list[str]) -> tuple[float, float, float]:
    """(peak RSS MiB from os.wait4, peak RSS MiB of the shard alone, seconds) of a child process.

    The child resets its high-water mark after the imports (``/proc/self/clear_refs`` = 5)
    and reports VmHWM at the end, so the second figure is the peak while sampling.
    """
    proc = subprocess.Popen([sys.executable, "-m", "benchmarks.run", *args], cwd=ROOT,
                            stdout=subprocess.PIPE, env=dict(os.environ))
    out = proc.stdout.read().decode()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise RuntimeError(f"RSS child {args} failed with {proc.returncode}")
    secs, hwm = out.strip().splitlines()[-1].split()
    return usage.ru_maxrss / 1024.0, float(hwm), float(secs)


def _vm_kib(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return float(line.split()[1])
    return float("nan")


def rss_child(method: str, orders: str, samples: str) -> None:
    """Body of the RSS child: one REMOVE shard at T = 1000, σ = 0.35; prints seconds and peak MiB."""
    m = int(samples)
    try:
        Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM to the current RSS
    except OSError:
        pass
    t0 = time.perf_counter()
    if method != "none":
        kw = {} if orders == "-" else {"orders": orders}
        config = CertifyConfig(sampler="balls_and_bins", sigma=0.35, steps=1000,
                               epsilons=(1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0), methods=(method,),
                               samples=m, direction="remove", **kw)
        run_shard(ShardTask(config, Method(method), 0, m))
    print(f"{time.perf_counter() - t0:.3f} {_vm_kib('VmHWM') / 1024.0:.1f}")


# -- time to certify ---------------------------------------------------------------------------
#: The stop rule of the time-to-certify benchmark: UCB <= (1 + RELATIVE_WIDTH) * mean.
RELATIVE_WIDTH = 0.10


def time_to_certify(sigma: float, steps: int, eps: float, method: str, cap_seconds: float) -> dict:
    """Add shards (fresh streams, doubling the total) until the 'both' UCB <= 1.1 mean, or the cap.

    This is a benchmark of cost, not a certificate: stopping on the data would need a
    sequential correction for the final UCB to keep its level.
    """
    m_method = Method(method)
    config = CertifyConfig(sampler="balls_and_bins", sigma=sigma, steps=steps, epsilons=(eps,),
                           methods=(method,), samples=2**40, direction="both")
    block = loss_sampler(config, m_method).block_size()
    acc = acc_mod.create(config.direction.parts(), 1)
    t0 = time.perf_counter()
    total, index, size = 0, 0, block
    row = None
    while True:
        acc = acc_mod.merge([acc, run_shard(ShardTask(config, m_method, index, size, stream=index))])  # fresh samples
        total, index = total + size, index + 1
        elapsed = time.perf_counter() - t0
        row = [r for r in mc_rows(config, m_method, acc, elapsed) if r["direction"] == "both"][0]
        if row["delta"] > 0 and row["delta_upper"] <= (1 + RELATIVE_WIDTH) * row["delta"]:
            outcome = "reached"
            break
        if elapsed >= cap_seconds:
            outcome = f"not reached by {total:.3g} samples in {elapsed:.0f} s"
            break
        size = total  # doubles the running total
        # do not start a shard that would overshoot the cap by far: shrink it to the time left
        per_sample = elapsed / total
        size = int(max(block, min(size, (cap_seconds - elapsed) / per_sample + block)))
    return dict(delta=row["delta"], ucb=row["delta_upper"], samples=total,
                seconds=time.perf_counter() - t0, outcome=outcome)

