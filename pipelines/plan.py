"""``--dry-run`` and the CPU-hours cap: what a job would compute and its estimated cost, before any work.

Estimates come from :mod:`epscert.results.cost` (measured costs per sampled coordinate and per PLD
grid point, on one core of the development machine): they are estimates, not promises.
"""

from __future__ import annotations

from typing import Sequence, TextIO

from epscert.params import CertifyConfig
from epscert.results import cost as cost_mod
from epscert.results.cost import Cost, config_cost, format_bytes, format_seconds

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
    return (f"{config.sampler.value} sigma={config.sigma:g} steps={config.steps} epochs={config.epochs} "
            f"methods={methods} {work} epsilons={len(config.epsilons)}: "
            f"about {format_seconds(cost.seconds)} of one core, {peak}")


def print_plan(configs: Sequence[CertifyConfig], stream: TextIO, reused: int = 0, limit: int = 50) -> Cost:
    """One line per configuration (the first ``limit``), then the estimated totals; returns the total."""
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
    return total


def check_cpu_hours(configs: Sequence[CertifyConfig], max_cpu_hours: float) -> Cost:
    """ValueError naming ``max_cpu_hours`` when the estimated single-core time is past the cap."""
    total = total_cost(configs)
    cost_mod.check_cpu_hours(total, max_cpu_hours, f"the sweep's {len(configs)} configurations to compute",
                             "lower samples or the grid, or raise --max-cpu-hours (see the plan with --dry-run)")
    return total
