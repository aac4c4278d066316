"""The one results schema (long format): one row per (configuration, method, direction, ε).

Every writer and reader in epscert, transforms and pipelines uses ``RESULTS_SCHEMA``.
See the README's "Results schema" section for the meaning of each column.
"""

from __future__ import annotations

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
    pa.field("wall_seconds", pa.float64(), nullable=False),
    pa.field("epscert_version", pa.string(), nullable=False),
])

COLUMNS = tuple(RESULTS_SCHEMA.names)


def to_table(rows: Iterable[Mapping]) -> pa.Table:
    """Rows (dicts with exactly the schema's columns) as a table in the results schema."""
    rows = list(rows)
    for row in rows:
        if set(row) != set(COLUMNS):
            extra, missing = set(row) - set(COLUMNS), set(COLUMNS) - set(row)
            raise ValueError(f"row does not match the results schema: extra={sorted(extra)}, missing={sorted(missing)}")
        if row["guarantee"] not in GUARANTEES:
            raise ValueError(f"guarantee must be one of {GUARANTEES}, got guarantee={row['guarantee']!r}")
    return pa.Table.from_pylist(rows, schema=RESULTS_SCHEMA)
