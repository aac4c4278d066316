"""``epscert certify --target-rel-width W``: doubling waves, each wave one Beam job (issue 13).

The wave schedule, the streams and shards and β_k = β·2^{-(k+1)} are those of
:mod:`epscert.results.waves` (the API's ``certify(target_rel_width=...)``); only where a wave's
shards run differs. Per Monte Carlo method, wave k is one Beam job::

    Create(wave k's ShardTasks) -> SpreadShards -> RunShards -> MergeShards -> WriteAccumulator

which writes the merged exact sums of the wave to ``<output>.waves/`` (a path every runner that
can write ``--output`` can write). The driver reads them back, merges them with the earlier waves
(exact, order independent), computes the rows and the width, and prints
``epscert: <method> wave k: n samples, width ...``. A last job writes the Monte Carlo rows, the
analytic methods and the baselines to ``--output``. Rows equal the API's bit for bit (wall
seconds aside), on every runner, because a sample depends only on (seed, configuration, stream = the wave,
direction, its place in the stream), never on the shard layout (SPEC §10).
"""

from __future__ import annotations

import pickle
import sys
from typing import Callable

import apache_beam as beam
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from epscert.montecarlo import accumulator as acc_mod
from epscert.montecarlo.shard import ShardTask
from epscert.results.waves import waves_rows
from pipelines.options import run_pipeline
from transforms.certify import CertifyConfigs
from transforms.progress import ProgressReporter
from transforms.shards import MergeAccumulatorsFn, RunShardFn, analytic_methods, compute_analytic
from transforms.sinks import WriteResults, exists, is_local, join, write_atomic

WAVES_SUFFIX = ".waves"


def write_accumulator(item: tuple[str, tuple[acc_mod.Accumulator, float]], path: str) -> str:
    """Write one merged (accumulator, seconds) to ``path`` (pickled, atomically); returns the path."""
    write_atomic(path, pickle.dumps(item[1][0], protocol=4))
    return path


def read_accumulator(path: str) -> acc_mod.Accumulator:
    """Read back what :func:`write_accumulator` wrote (a file this job wrote itself)."""
    with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as handle:
        return pickle.loads(handle.read())


def remove_tree(path: str) -> None:
    if is_local(path):
        import shutil
        shutil.rmtree(path, ignore_errors=True)
    elif exists(path):
        FileSystems.delete([path])


def wave_runner(job, make_pipeline: Callable[[], beam.Pipeline], workdir: str, method_name: str):
    """``run_wave(k, tasks)`` for :func:`epscert.results.waves.waves_rows`: one Beam job per wave."""

    def run_wave(k: int, tasks: list[ShardTask]) -> acc_mod.Accumulator:
        path = join(workdir, f"{method_name}-wave{k}.pkl")
        progress = None
        if job.progress and job.choice.progress_mode != "off":
            per_direction = sum(t.samples for t in tasks)
            progress = ProgressReporter(job.choice.progress_mode, per_direction * len(job.config.direction.parts()))
        pipeline = make_pipeline()
        _ = (
            pipeline
            | "WaveShards" >> beam.Create(tasks)
            | "SpreadShards" >> beam.Reshuffle()
            | "RunShards" >> beam.ParDo(RunShardFn(progress))
            | "MergeShards" >> beam.CombinePerKey(MergeAccumulatorsFn())
            | "WriteAccumulator" >> beam.Map(write_accumulator, path)
        )
        run_pipeline(pipeline, job.choice).wait_until_finish()
        return read_accumulator(path)

    return run_wave


def run_waves(job, make_pipeline: Callable[[], beam.Pipeline], output: str) -> beam.Pipeline:
    """Run every wave of every Monte Carlo method, then build (not run) the job writing ``output``."""
    config = job.config
    workdir = output + WAVES_SUFFIX
    mc_rows = []
    try:
        for method in config.resolved:
            if not method.is_monte_carlo:
                continue

            def say(line: str, name: str = method.value) -> None:
                if job.progress:
                    print(f"epscert: {name} {line}", file=sys.stderr, flush=True)

            runner = wave_runner(job, make_pipeline, workdir, method.value)
            mc_rows.extend(waves_rows(config, method, job.target_rel_width, job.max_samples, say, runner))
    finally:
        remove_tree(workdir)
    pipeline = make_pipeline()
    computed = pipeline | "WaveRows" >> beam.Create([(config.config_id, mc_rows)])
    analytic = (pipeline | "AnalyticMethods" >> beam.Create(analytic_methods(config))
                | "ComputeAnalytic" >> beam.Map(compute_analytic))
    baselines = [c for c in job.configs if c.config_id != config.config_id]
    parts = [computed, analytic]
    if baselines:
        parts.append(pipeline | "Baselines" >> beam.Create(baselines) | "Certify" >> CertifyConfigs())
    _ = tuple(parts) | "AllRows" >> beam.Flatten() | "WriteResults" >> WriteResults(output)
    return pipeline
