"""The one results schema (long format): one row per (configuration, method, direction, ε).

Every writer and reader in epscert, transforms and pipelines uses ``RESULTS_SCHEMA``.
See the README's "Results schema" section for the meaning of each column.
"""

from __future__ import annotations

import json
from typing import Iterable, Mapping

import pyarrow as pa

#: Allowed values of the ``guarantee`` column.
GUARANTEES = ("exact", "upper_bound", "lower_bound", "mc_upper_confidence", "estimate", "conjecture")

RESULTS_SCHEMA = pa.schema([
    pa.field("config_id", pa.string(), nullable=False),
    pa.field("sampler", pa.string(), nullable=False),
    pa.field("sigma", pa.float64(), nullable=False),
    pa.field("steps", pa.int64(), nullable=False),
    pa.field("epochs", pa.int64(), nullable=False),
    pa.field("method", pa.string(), nullable=False),
    pa.field("direction", pa.string(), nullable=False),
    pa.field("epsilon", pa.float64(), nullable=False),
    pa.field("delta", pa.float64(), nullable=False),
    pa.field("delta_upper", pa.float64()),
    pa.field("delta_lower", pa.float64()),
    pa.field("std_error", pa.float64()),
    pa.field("samples", pa.int64()),
    pa.field("error_prob", pa.float64()),
    pa.field("seed", pa.string()),
    pa.field("orders", pa.string()),
    pa.field("scale", pa.float64()),
    pa.field("bound", pa.string()),
    pa.field("guarantee", pa.string(), nullable=False),
    pa.field("quantity", pa.string(), nullable=False),
    pa.field("target_delta", pa.float64()),
    pa.field("epsilon_upper", pa.float64()),
    pa.field("epsilon_lower", pa.float64()),
    pa.field("truncation_penalty", pa.float64()),
    pa.field("resolution", pa.float64()),
    pa.field("dataset_size", pa.int64()),
    pa.field("max_batch_size", pa.int64()),
    pa.field("batch_size", pa.int64()),
    pa.field("mechanism", pa.string()),
    pa.field("strategy", pa.string()),
    pa.field("iterations", pa.int64()),
    pa.field("backend", pa.string()),
    pa.field("device", pa.string()),
    pa.field("wall_seconds", pa.float64(), nullable=False),
    pa.field("epscert_version", pa.string(), nullable=False),
])

#: What each column means (the README's "Results schema" table, shortened): written into every Parquet file as
#: the fields' metadata (key ``description``), so that a file explains itself without this repository.
DESCRIPTIONS = {
    "config_id": "stable 16-hex-digit hash of the whole request (every field but the shard count)",
    "sampler": "batch sampler: balls_and_bins, poisson, deterministic, shuffle, shuffle_persistent, "
               "balls_and_bins_persistent (for baselines: the baseline's sampler)",
    "sigma": "noise multiplier sigma (Gaussian noise standard deviation over the clip norm)",
    "steps": "steps T per epoch (dataset_size // batch_size); for a matrix mechanism its cycle length b",
    "epochs": "epochs E",
    "method": "the resolved method that produced the row (auto never appears)",
    "direction": "adjacency direction: remove, add, or both (the max of the two)",
    "epsilon": "epsilon of the row (for epsilon_at_delta rows: the value reported)",
    "delta": "the method's value: Monte Carlo mean (scale times the hit frequency), or the exact or bound value",
    "delta_upper": "certified upper bound on delta: the UCB at error_prob for Monte Carlo, the value for exact and "
                   "upper-bound methods; null otherwise",
    "delta_lower": "certified lower bound on delta (the value for exact and lower-bound methods); null otherwise",
    "std_error": "standard error of the Monte Carlo mean (s * sample sd / sqrt(samples))",
    "samples": "Monte Carlo samples per direction",
    "error_prob": "failure probability beta of this row's delta_upper (beta/2 on per-direction rows of a both run)",
    "seed": "root seed (a string: seeds may exceed 64 bits)",
    "orders": "order-statistic ranks as start,stop,step triples",
    "scale": "importance-sampling scale s = Pr[event] (1 without importance sampling)",
    "bound": "name of the bound behind the value (kl_chernoff, pld_pessimistic, pld_optimistic, rdp, cube, ...)",
    "guarantee": "what the value guarantees: exact, upper_bound, lower_bound, mc_upper_confidence, estimate, conjecture",
    "quantity": "delta_at_epsilon (delta at the row's epsilon) or epsilon_at_delta (epsilon at target_delta)",
    "target_delta": "for epsilon_at_delta rows: the delta asked for",
    "epsilon_upper": "for epsilon_at_delta rows: certified upper bound on epsilon(delta)",
    "epsilon_lower": "for epsilon_at_delta rows: certified lower bound on epsilon(delta)",
    "truncation_penalty": "the delta penalty of truncated batches, already included in delta and delta_upper",
    "resolution": "analytic rows: the absolute part of the row's error allowance; below it a value says nothing",
    "dataset_size": "dataset size n, as the user gave it (with batch_size: steps = n // batch_size; with "
                    "max_batch_size: the n of truncated Binomial batches)",
    "max_batch_size": "largest batch B of a truncated-batch run (larger Binomial batches are truncated)",
    "batch_size": "batch size b, as the user gave it with dataset_size (steps = dataset_size // batch_size)",
    "mechanism": "matrix-mechanism rows: the mechanism (matrix); null for DP-SGD",
    "strategy": "matrix-mechanism rows: the strategy matrix C, described (banded Toeplitz by c_col, or dense)",
    "iterations": "matrix-mechanism rows: the iterations n of the strategy",
    "backend": "Monte Carlo rows: the sampling backend(s) that drew the samples (numpy, jax)",
    "device": "Monte Carlo rows: the device(s) the samples were drawn on (cpu, or JAX's platform:kind)",
    "wall_seconds": "seconds spent on this method (in Beam jobs the sum over its shards)",
    "epscert_version": "epscert version that wrote the row",
}


def _pandas_metadata(schema: pa.Schema) -> dict[bytes, bytes]:
    """pandas metadata asking ``to_pandas()`` / ``pandas.read_parquet`` for nullable ``Int64`` on every nullable
    integer column: without it a column such as ``samples`` (null on analytic rows) reads back as float64.
    Only those columns are described; pyarrow infers the others as usual."""
    columns = [{"name": f.name, "field_name": f.name, "pandas_type": "int64", "numpy_type": "Int64", "metadata": None}
               for f in schema if f.nullable and pa.types.is_integer(f.type)]
    meta = {"index_columns": [], "column_indexes": [], "columns": columns,
            "creator": {"library": "epscert", "version": "results schema"}}
    return {b"pandas": json.dumps(meta).encode()}


def _described(schema: pa.Schema) -> pa.Schema:
    """``schema`` with each field's description (:data:`DESCRIPTIONS`) in its metadata; every column has one."""
    missing = [f.name for f in schema if f.name not in DESCRIPTIONS]
    if missing or set(DESCRIPTIONS) - set(schema.names):
        raise AssertionError(f"DESCRIPTIONS must describe exactly the schema's columns, missing={missing}, "
                             f"extra={sorted(set(DESCRIPTIONS) - set(schema.names))}")
    return pa.schema([f.with_metadata({b"description": DESCRIPTIONS[f.name].encode()}) for f in schema])


RESULTS_SCHEMA = _described(RESULTS_SCHEMA)
RESULTS_SCHEMA = RESULTS_SCHEMA.with_metadata(_pandas_metadata(RESULTS_SCHEMA))
COLUMNS = tuple(RESULTS_SCHEMA.names)
NULLABLE = frozenset(f.name for f in RESULTS_SCHEMA if f.nullable)
#: Values of ``quantity``: δ at a given ε (the default) or ε at a target δ (SPEC §8).
QUANTITIES = ("delta_at_epsilon", "epsilon_at_delta")
#: Columns with a default when a row leaves them out.
DEFAULTS = {"quantity": "delta_at_epsilon"}


_COLUMN_SET = frozenset(COLUMNS)
_REQUIRED = _COLUMN_SET - NULLABLE - set(DEFAULTS)
_FILL = {**DEFAULTS, **{c: None for c in NULLABLE if c not in DEFAULTS}}


def to_table(rows: Iterable[Mapping]) -> pa.Table:
    """Rows as a table in the results schema.

    A row may leave out nullable columns (they become null) and ``quantity``; any
    unknown column, or a missing required one, is an error.
    """
    full = []
    for row in rows:
        keys = row.keys()
        extra = keys - _COLUMN_SET
        missing = _REQUIRED - keys
        if extra or missing:
            raise ValueError(f"row does not match the results schema: extra={sorted(extra)}, missing={sorted(missing)}")
        row = {**_FILL, **row}  # defaults, then nulls, then the row's own values (a dense grid: 10^5 rows)
        if row["guarantee"] not in GUARANTEES:
            raise ValueError(f"guarantee must be one of {GUARANTEES}, got guarantee={row['guarantee']!r}")
        if row["quantity"] not in QUANTITIES:
            raise ValueError(f"quantity must be one of {QUANTITIES}, got quantity={row['quantity']!r}")
        full.append(row)
    return pa.Table.from_pylist(full, schema=RESULTS_SCHEMA)
