"""``--dry-run`` and the CPU-hours cap: what a job would compute and its estimated cost, before any work.

Estimates come from :mod:`epscert.results.cost` (measured costs per sampled coordinate and per PLD
grid point, on one core of the development machine): they are estimates, not promises.
"""

from __future__ import annotations

from typing import Sequence, TextIO

from epscert.results.scaling import WallTime, wall_time
from epscert.config.samplers import estimated_seconds
from epscert.config import CertifyConfig
from epscert.results import cost as cost_mod
from epscert.results.cost import Cost, config_cost, format_bytes, format_seconds
from pipelines.strategy_flags import describe_strategy
from pipelines.parallelism import Parallelism

#: Default cap of ``sweep --max-cpu-hours``: a day of one core (a scheduled job never prompts).
DEFAULT_MAX_CPU_HOURS = 24.0


def total_cost(configs: Sequence[CertifyConfig]) -> Cost:
    """Seconds add up over configurations; memory is the largest of any one (one worker each)."""
    total = Cost()
    for config in configs:
        total = total + config_cost(config)
    return total


def describe(config: CertifyConfig, cost: Cost) -> str:
    methods = ",".join(m.value for m in config.resolved)
    work = (f"samples={config.samples} shards={config.shards}" if any(m.is_monte_carlo for m in config.resolved)
            else "analytic")
    peak = f"peak about {format_bytes(cost.peak_bytes)}" if cost.peak_bytes else "no large arrays"
    return (f"{config.sampler.value}{describe_strategy(config)} sigma={config.sigma:g} steps={config.steps} "
            f"epochs={config.epochs} "
            f"methods={methods} {work} epsilons={len(config.epsilons)}: "
            f"about {format_seconds(cost.seconds)} of one core, {peak}")


def expected_wall(configs: Sequence[CertifyConfig], workers: Parallelism) -> tuple[int, WallTime, float]:
    """(Monte Carlo shards, the model's wall time of the sampling (:func:`epscert.results.scaling.wall_time`,
    shards taken as equal), one-core seconds of the analytic work that shares the workers)."""
    mc_seconds = sum(estimated_seconds(c, m) for c in configs for m in c.resolved if m.is_monte_carlo)
    shards = sum(c.shards for c in configs for m in c.resolved if m.is_monte_carlo)
    analytic = total_cost(configs).seconds - mc_seconds
    wall = wall_time(mc_seconds, max(1, shards), workers.workers, workers.startup_seconds or 0.0)
    return shards, wall, max(0.0, analytic)


def print_workers(configs: Sequence[CertifyConfig], workers: Parallelism, stream: TextIO) -> None:
    """The shard plan, the workers it was sized for and the expected wall time, term by term."""
    shards, wall, analytic = expected_wall(configs, workers)
    total = wall.total + analytic / workers.workers
    startup = (f"start-up {format_seconds(wall.startup)} (measured for this runner)" if workers.startup_seconds
               is not None else "plus the runner's start-up (not measured here: minutes for a cluster's VMs)")
    print(f"planned: {shards} Monte Carlo shard(s) on {workers.workers} worker(s) ({workers.source}"
          f"{'' if workers.known else '; assumed 1: --shards auto sizes for one worker'}); expected wall time about "
          f"{format_seconds(total)}: sampling {format_seconds(wall.sampling)}, shard overhead "
          f"{format_seconds(wall.shard_overhead)}, merge {format_seconds(wall.merge)}, analytic "
          f"{format_seconds(analytic / workers.workers)}, {startup} (docs/scaling.md)", file=stream)


def print_plan(configs: Sequence[CertifyConfig], stream: TextIO, reused: int = 0, limit: int = 50,
               workers: Parallelism | None = None) -> Cost:
    """One line per configuration (the first ``limit``), then the estimated totals (and, given the
    runner's ``workers``, the shard plan and expected wall time); returns the total."""
    for config in configs[:limit]:
        print(describe(config, config_cost(config)), file=stream)
    if len(configs) > limit:
        print(f"... and {len(configs) - limit} more configurations", file=stream)
    total = total_cost(configs)
    samples = sum(c.samples for c in configs if any(m.is_monte_carlo for m in c.resolved))
    print(f"dry run: {len(configs)} configurations to compute ({reused} already complete), {samples} Monte Carlo "
          f"samples per direction, estimated CPU time {format_seconds(total.seconds)} "
          f"({total.seconds / 3600:.3g} CPU-hours), estimated peak memory {format_bytes(total.peak_bytes)} "
          "per worker (estimates from measured costs per coordinate and per PLD point); nothing was run",
          file=stream)
    if workers is not None:
        print_workers(configs, workers, stream)
    return total


def check_cpu_hours(configs: Sequence[CertifyConfig], max_cpu_hours: float) -> Cost:
    """ValueError naming ``max_cpu_hours`` when the estimated single-core time is past the cap."""
    total = total_cost(configs)
    cost_mod.check_cpu_hours(total, max_cpu_hours, f"the sweep's {len(configs)} configurations to compute",
                             "lower samples or the grid, or raise --max-cpu-hours (see the plan with --dry-run)")
    return total
