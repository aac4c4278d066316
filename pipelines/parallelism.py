"""How many shards a runner runs at once, read from its pipeline options (for ``--shards auto``).

- FnApiRunner / DirectRunner: ``--direct_num_workers`` (0 = every core) in ``multi_processing`` or
  ``multi_threading`` mode; ``in_memory`` runs one worker whatever the count.
- Dataflow: ``--max_num_workers`` (the autoscaling ceiling), else ``--num_workers``, times the vCPUs
  of ``--machine_type`` (Dataflow starts one Python SDK process per vCPU; 1 with the experiment
  ``no_use_multiple_sdk_containers``). Without either count the pool size is unknown.
- Flink (FlinkRunner or a Flink job server): ``--parallelism`` when set (> 0).
- Spark: the default parallelism of ``--spark_master_url`` ``local[N]`` (N), ``local[*]`` (the cores
  here), ``local`` (1); a cluster master's parallelism is not known here.
Where nothing says, the plan assumes one worker and says so (``known`` is False): the rows do not
depend on it, only the balance of the work does.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Sequence

from apache_beam.options.pipeline_options import (
    DebugOptions, DirectOptions, FlinkRunnerOptions, PipelineOptions, SparkRunnerOptions, StandardOptions,
    WorkerOptions,
)

from epscert.results.scaling import STARTUP_SECONDS


@dataclass(frozen=True)
class Parallelism:
    """Shards the runner runs at once, where that figure comes from, and the local start-up (if measured)."""

    workers: int
    source: str
    known: bool
    startup_seconds: float | None = None


def machine_vcpus(machine_type: str | None) -> int | None:
    """vCPUs of a Compute Engine machine type name (n1-standard-4 -> 4, custom-8-32768 -> 8), else None."""
    if not machine_type:
        return None
    name = machine_type.strip().lower().rsplit("/", 1)[-1]
    custom = re.fullmatch(r"(?:[a-z0-9]+-)?custom-(\d+)-\d+(?:-ext)?", name)
    if custom:
        return int(custom.group(1))
    plain = re.fullmatch(r"[a-z0-9]+-(?:standard|highmem|highcpu|megamem|ultramem|hpc)-(\d+)(?:-lssd)?", name)
    return int(plain.group(1)) if plain else None


def runner_name(options: PipelineOptions) -> str:
    named = options.view_as(StandardOptions).runner
    if named is None:
        return "fnapirunner"
    if not isinstance(named, str):
        named = type(named).__name__
    return named.rsplit(".", 1)[-1].lower()


def parallelism(pipeline_args: Sequence[str]) -> Parallelism:
    """The :class:`Parallelism` the runner named by ``pipeline_args`` offers (module docstring)."""
    options = PipelineOptions(list(pipeline_args))
    name = runner_name(options)
    if name in ("fnapirunner", "directrunner", "switchingdirectrunner", "bundlebaseddirectrunner"):
        direct = options.view_as(DirectOptions)
        mode = direct.direct_running_mode or "in_memory"
        count = direct.direct_num_workers
        count = (os.cpu_count() or 1) if count == 0 else (1 if count is None else count)
        if mode == "in_memory" or count <= 1:
            return Parallelism(1, "in_memory FnApiRunner (one worker)", True, STARTUP_SECONDS["in_memory"])
        startup = STARTUP_SECONDS["multi_processing"] if mode == "multi_processing" else None
        return Parallelism(count, f"--direct_num_workers={count} ({mode})", True, startup)
    if "dataflow" in name:
        worker = options.view_as(WorkerOptions)
        vms = worker.max_num_workers or worker.num_workers
        if not vms:
            return Parallelism(1, "Dataflow without --num_workers or --max_num_workers (pool size unknown)", False)
        flag = "--max_num_workers" if worker.max_num_workers else "--num_workers"
        experiments = options.view_as(DebugOptions).experiments or []
        vcpus = machine_vcpus(worker.machine_type)
        if "no_use_multiple_sdk_containers" in experiments:
            per_vm, what = 1, "1 SDK process per VM (no_use_multiple_sdk_containers)"
        elif vcpus:
            per_vm, what = vcpus, f"{vcpus} vCPUs of {worker.machine_type}"
        else:
            per_vm, what = 1, "1 vCPU per VM (the default n1-standard-1; machine type not given or not recognised)"
        return Parallelism(vms * per_vm, f"Dataflow {flag}={vms} x {what}", True)
    flink = options.view_as(FlinkRunnerOptions).parallelism
    if flink is not None and flink > 0 and ("flink" in name or name == "portablerunner"):
        return Parallelism(flink, f"Flink --parallelism={flink}", True)
    if "flink" in name:
        return Parallelism(1, "Flink without --parallelism (the cluster default is not known here)", False)
    if "spark" in name:
        master = (options.view_as(SparkRunnerOptions).spark_master_url or "").strip()
        local = re.fullmatch(r"local(?:\[(\d+|\*)\])?", master)
        if local:
            count = (os.cpu_count() or 1) if local.group(1) == "*" else int(local.group(1) or 1)
            return Parallelism(max(1, count), f"Spark default parallelism of --spark_master_url={master}", True)
        return Parallelism(1, f"Spark master {master!r} (its default parallelism is not known here)", False)
    return Parallelism(1, f"runner {name} (its parallelism is not known here)", False)
