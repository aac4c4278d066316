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
    pa.field("mechanism", pa.string()),
    pa.field("strategy", pa.string()),
    pa.field("iterations", pa.int64()),
    pa.field("backend", pa.string()),
    pa.field("device", pa.string()),
    pa.field("wall_seconds", pa.float64(), nullable=False),
    pa.field("epscert_version", pa.string(), nullable=False),
])

def _pandas_metadata(schema: pa.Schema) -> dict[bytes, bytes]:
    """pandas metadata asking ``to_pandas()`` / ``pandas.read_parquet`` for nullable ``Int64`` on every nullable
    integer column: without it a column such as ``samples`` (null on analytic rows) reads back as float64.
    Only those columns are described; pyarrow infers the others as usual."""
    columns = [{"name": f.name, "field_name": f.name, "pandas_type": "int64", "numpy_type": "Int64", "metadata": None}
               for f in schema if f.nullable and pa.types.is_integer(f.type)]
    meta = {"index_columns": [], "column_indexes": [], "columns": columns,
            "creator": {"library": "epscert", "version": "results schema"}}
    return {b"pandas": json.dumps(meta).encode()}


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
