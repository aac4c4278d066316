"""The Monte Carlo half of a certification as Beam steps: plan shards, run them, merge the sums.

Each function or DoFn here is a thin wrapper around :mod:`epscert.montecarlo.shard` and
:mod:`epscert.montecarlo.accumulator`; this module only adds Beam plumbing, labels and metrics.
"""

from __future__ import annotations

import pickle
import time
from typing import Iterable, Iterator, Mapping

import apache_beam as beam
from apache_beam.metrics import Metrics

from epscert.montecarlo import accumulator as acc_mod
from epscert.results.rows import analytic_rows, mc_rows
from epscert.config import CertifyConfig, Method
from epscert.montecarlo.shard import ShardTask, plan_shards, run_shard
from epscert.matrix.strategies import Strategy
from transforms.progress import ProgressReporter

#: Namespace of every Beam metric epscert reports.
NAMESPACE = "epscert"

#: What the merge step carries per (configuration, method): exact sums, summed shard seconds.
Merged = tuple[acc_mod.Accumulator, float]


def check_strategy(config: CertifyConfig) -> CertifyConfig:
    """``config``, after checking on this worker that a dense strategy file is the one the job was built with.

    A configuration carries a Toeplitz strategy by value (its c_col) and a dense one by path and
    SHA-256. Rebuilding the :class:`~epscert.matrix.strategies.Strategy` here reads the worker's file and
    compares its digest: a missing, unreadable or changed file raises ValueError naming the path,
    before any sampling on it.
    """
    strategy = config.strategy
    if strategy is not None and strategy.kind == "dense":
        Strategy(kind="dense", iterations=strategy.iterations, path=strategy.path, sha256=strategy.sha256)
    return config


def method_key(config: CertifyConfig, method: Method) -> str:
    """Grouping key of one (configuration, method); the same string as :attr:`ShardTask.key`."""
    return f"{config.config_id}/{method.value}"


def shard_tasks(config: CertifyConfig) -> list[ShardTask]:
    """Every shard of every Monte Carlo method of ``config`` (layout from ``config.shards``)."""
    return [task for method in config.resolved if method.is_monte_carlo
            for task in plan_shards(config, method)]


def monte_carlo_methods(config: CertifyConfig) -> list[tuple[str, tuple[CertifyConfig, Method]]]:
    """(key, (configuration, method)) for the Monte Carlo methods: the finalise step's lookup table."""
    return [(method_key(config, m), (config, m)) for m in config.resolved if m.is_monte_carlo]


def analytic_methods(config: CertifyConfig) -> list[tuple[CertifyConfig, Method]]:
    """(configuration, method) for the analytic (closed-form or PLD) methods of ``config``."""
    return [(config, m) for m in config.resolved if not m.is_monte_carlo]


def total_samples(configs: Iterable[CertifyConfig]) -> int:
    """Samples the shard stage will report in total (per direction, as ``run_shard`` counts them)."""
    return sum(len(c.direction.parts()) * c.samples
               for c in configs for m in c.resolved if m.is_monte_carlo)


@beam.typehints.with_input_types(ShardTask)
@beam.typehints.with_output_types(tuple[str, tuple[acc_mod.Accumulator, float]])
class RunShardFn(beam.DoFn):
    """Runs one shard (:func:`epscert.montecarlo.shard.run_shard`) and emits ``(key, (accumulator, seconds))``.

    Metrics: counters ``samples_done`` (per block, per direction) and ``shards_done``.
    """

    def __init__(self, progress: ProgressReporter | None = None) -> None:
        self._progress = progress

    def setup(self) -> None:
        self._samples_done = Metrics.counter(NAMESPACE, "samples_done")
        self._shards_done = Metrics.counter(NAMESPACE, "shards_done")

    def _on_block(self, count: int) -> None:
        self._samples_done.inc(count)
        if self._progress is not None:
            self._progress.samples(count)

    def process(self, task: ShardTask) -> Iterator[tuple[str, Merged]]:
        check_strategy(task.config)
        start = time.perf_counter()
        acc = run_shard(task, self._on_block)
        seconds = time.perf_counter() - start
        self._shards_done.inc()
        if self._progress is not None:
            self._progress.shard_done(task, seconds)
        yield task.key, (acc, seconds)


class MergeAccumulatorsFn(beam.CombineFn):
    """CombineFn over ``(accumulator, seconds)``: :func:`epscert.montecarlo.accumulator.merge` on the sums.

    The merge is exact and order independent, so any combiner tree a runner builds gives the
    same bits; the seconds are only summed for the ``wall_seconds`` column.
    """

    def create_accumulator(self) -> Merged:
        return acc_mod.merge(()), 0.0

    def add_input(self, mutable_accumulator: Merged, element: Merged) -> Merged:
        return self.merge_accumulators((mutable_accumulator, element))

    def merge_accumulators(self, accumulators: Iterable[Merged]) -> Merged:
        accumulators = list(accumulators)
        return (acc_mod.merge(a for a, _ in accumulators), sum(s for _, s in accumulators))

    def extract_output(self, accumulator: Merged) -> Merged:
        return accumulator


def finalise_monte_carlo(item: tuple[str, Merged],
                         methods: Mapping[str, tuple[CertifyConfig, Method]]) -> tuple[str, list[dict]]:
    """Merged sums -> rows (:func:`epscert.results.rows.mc_rows`), after checking no shard was lost.

    The merged count per direction must equal ``config.samples``: a shard missing or counted
    twice by a runner would otherwise go unnoticed.
    """
    key, (acc, seconds) = item
    value = methods[key]
    config, method = pickle.loads(value) if isinstance(value, bytes) else value  # transforms.certify.pack_value
    check_strategy(config)
    for direction in config.direction.parts():
        count = acc[direction].count
        if count != config.samples:
            raise RuntimeError(f"merged {count} samples for {key} ({direction.value}), expected "
                               f"samples={config.samples}: a shard was lost or counted twice")
    return config.config_id, mc_rows(config, method, acc, seconds)


def compute_analytic(item: tuple[CertifyConfig, Method]) -> tuple[str, list[dict]]:
    """Rows of one analytic method (:func:`epscert.results.rows.analytic_rows`), timed."""
    config, method = item
    check_strategy(config)
    start = time.perf_counter()
    rows = analytic_rows(config, method)
    wall = time.perf_counter() - start
    return config.config_id, [dict(row, wall_seconds=wall) for row in rows]
