"""``CertifyConfigs``: configurations in, one complete, sorted row set per configuration out.

Flow (SPEC §3, issue 3)::

    configs -> PlanShards -> RunShards -> MergeShards (CombinePerKey) -> FinaliseMonteCarlo --+
            -> AnalyticMethods -> ComputeAnalytic ----------------------------------------------+-> CompleteConfigs

Analytic baselines are configurations too (:func:`epscert.results.baselines.baseline_tasks`); they take
the analytic branch, in parallel with the sampling.
"""

from __future__ import annotations

import pickle
from typing import Iterable, Mapping

import apache_beam as beam
import pyarrow as pa
import pyarrow.compute as pc

from epscert.results.rows import row_count
from epscert.config import CertifyConfig
from epscert.schema import to_table
from transforms.progress import ProgressReporter
from transforms.shards import (
    MergeAccumulatorsFn, RunShardFn, analytic_methods, compute_analytic, finalise_monte_carlo,
    monte_carlo_methods, shard_tasks,
)

#: Row order of every table epscert writes: deterministic, so Parquet bytes are too.
SORT_COLUMNS = ("config_id", "method", "direction", "epsilon")
#: Tie-breakers, used when present (rows of other quantities at the same ε).
TIE_COLUMNS = ("quantity", "target_delta")


def _sort_key(row: dict) -> tuple:
    return tuple((row.get(c) is None, row.get(c) if row.get(c) is not None else 0)
                 for c in SORT_COLUMNS + TIE_COLUMNS)


def sort_rows(rows: Iterable[dict]) -> list[dict]:
    """Rows sorted by (config_id, method, direction, epsilon), then the tie-breaker columns."""
    return sorted(rows, key=_sort_key)


def sort_table(table: pa.Table) -> pa.Table:
    """A results table in :func:`sort_rows`'s order, sorted by Arrow (stable, nulls last, strings by code
    point: UTF-8 byte order is code-point order), without a Python key per row (issue 35 item 5)."""
    keys = [c for c in SORT_COLUMNS + TIE_COLUMNS if c in table.column_names]
    try:  # pyarrow >= 25 takes the null placement per key
        order = pc.sort_indices(table, sort_keys=[(c, "ascending", "at_end") for c in keys])
    except (TypeError, ValueError, pa.ArrowInvalid):  # older pyarrow: one placement for every key
        order = pc.sort_indices(table, sort_keys=[(c, "ascending") for c in keys], null_placement="at_end")
    return table.take(order)


def table_bytes_ipc(table: pa.Table) -> bytes:
    """``table`` as one Arrow IPC stream (exact: every float keeps its bits)."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def table_from_ipc(data: bytes) -> pa.Table:
    return pa.ipc.open_stream(pa.py_buffer(data)).read_all()


def as_table(rows) -> pa.Table:
    """A row set as a results table: packed (:func:`pack_rows`), a table already, or row dicts
    (validated by :func:`epscert.schema.to_table`)."""
    if isinstance(rows, bytes):
        return table_from_ipc(rows)
    if isinstance(rows, pa.Table):
        return rows
    return to_table(rows)


def expected_row_count(config: CertifyConfig) -> int:
    """Rows of a complete result for ``config`` (every resolved method)."""
    return sum(row_count(config, m) for m in config.resolved)


def pack_rows(item: tuple[str, list[dict]]) -> tuple[str, bytes]:
    """One method's row list as one bytes object before the grouping (issue 35 item 5): the rows
    validated into a results table (:func:`epscert.schema.to_table`, which fills the schema's defaults)
    and written as one Arrow IPC stream.

    A runner's state cache sizes what a GroupByKey hands on by walking every object in it (Beam's
    ``objsize``): a 14,001-ε grid's row dicts, tens of fields each, cost more CPU there than the
    certificates themselves. One bytes object per method is sized at once; :func:`complete_config`
    reads it back (:func:`as_table`; IPC keeps every float's bits). Columns, not a pickle of dicts:
    the table is built once, and no dict is pickled or unpickled."""
    config_id, rows = item
    return config_id, table_bytes_ipc(as_table(rows))


def unpack_value(value):
    """The side-input value of :func:`pack_value` (anything else passes through)."""
    return pickle.loads(value) if isinstance(value, bytes) else value


def pack_value(item: tuple):
    """(key, value) with the value pickled: side inputs hold configurations whose ε grids the state
    cache would otherwise walk float by float (:func:`pack_rows`)."""
    key, value = item
    return key, pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)


def complete_config(item: tuple[str, Iterable[list[dict] | bytes]],
                    configs: Mapping[str, CertifyConfig]) -> tuple[str, list[dict]]:
    """Join the per-method row lists (or packed lists, :func:`pack_rows`) of one configuration; refuse
    an incomplete or padded set.

    The rows come out with every column of the results schema (defaults filled in).
    """
    config_id, row_lists = item
    config = unpack_value(configs[config_id])
    tables = [as_table(rows) for rows in row_lists]  # every column of the schema, validated
    table = pa.concat_tables(tables) if tables else to_table([])
    methods = sorted(table.column("method").unique().to_pylist())
    want_methods = sorted(m.value for m in config.resolved)
    expected = expected_row_count(config)
    if methods != want_methods or table.num_rows != expected:
        raise RuntimeError(f"configuration {config_id}: got {table.num_rows} rows for methods {methods}, "
                           f"expected {expected} rows for methods {want_methods}")
    return config_id, sort_table(table).to_pylist()


def finalise_packed(item, methods) -> tuple[str, bytes]:
    """:func:`~transforms.shards.finalise_monte_carlo`, its rows packed (:func:`pack_rows`) in the same step: a
    method's row dicts live only inside this call and never cross a step (issue 35 item 5: memory)."""
    return pack_rows(finalise_monte_carlo(item, methods))


def analytic_packed(item) -> tuple[str, bytes]:
    """:func:`~transforms.shards.compute_analytic`, its rows packed in the same step (see :func:`finalise_packed`)."""
    return pack_rows(compute_analytic(item))


class CertifyConfigs(beam.PTransform):
    """PCollection[CertifyConfig] -> PCollection[(config_id, rows)], one element per configuration.

    ``rows`` are complete (every resolved method, direction and ε of the configuration) and
    sorted by :data:`SORT_COLUMNS`. Configurations must have distinct ``config_id``.
    """

    def __init__(self, progress: ProgressReporter | None = None, label: str | None = None) -> None:
        super().__init__(label)
        self._progress = progress

    def expand(self, configs):
        by_key = (configs | "MonteCarloMethods" >> beam.FlatMap(monte_carlo_methods)
                  | "PackMethods" >> beam.Map(pack_value))
        by_id = configs | "ConfigsById" >> beam.Map(lambda c: pack_value((c.config_id, c)))
        monte_carlo = (
            configs
            | "PlanShards" >> beam.FlatMap(shard_tasks)
            | "SpreadShards" >> beam.Reshuffle()
            | "RunShards" >> beam.ParDo(RunShardFn(self._progress))
            | "MergeShards" >> beam.CombinePerKey(MergeAccumulatorsFn())
            | "FinaliseMonteCarlo" >> beam.Map(finalise_packed, beam.pvalue.AsDict(by_key))
        )
        analytic = (
            configs
            | "AnalyticMethods" >> beam.FlatMap(analytic_methods)
            | "SpreadAnalytic" >> beam.Reshuffle()
            | "ComputeAnalytic" >> beam.Map(analytic_packed)
        )
        return (
            (monte_carlo, analytic)
            | "AllMethods" >> beam.Flatten()
            | "GroupByConfig" >> beam.GroupByKey()
            | "CompleteConfigs" >> beam.Map(complete_config, beam.pvalue.AsDict(by_id))
        )
