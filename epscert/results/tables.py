"""One configuration, in process, into a results table.

It runs exactly the functions the Beam job distributes: plan shards, run each shard, merge
the accumulators (:mod:`epscert.montecarlo.shard`), and turn sums and analytic values into
rows (:mod:`epscert.results.rows`).
"""

from __future__ import annotations

import time
from typing import Callable

import pyarrow as pa

from epscert.montecarlo import accumulator as acc_mod
from epscert.montecarlo.shard import plan_shards, run_shard
from epscert.config import CertifyConfig
from epscert.results.rows import analytic_rows, mc_rows
from epscert.schema import to_table


def certify_config(config: CertifyConfig, progress: Callable[[int], None] | None = None) -> pa.Table:
    """All rows of an already validated configuration (see :func:`epscert.certify`)."""
    rows: list[dict] = []
    for method in config.resolved:
        start = time.perf_counter()
        if method.is_monte_carlo:
            acc = acc_mod.merge(run_shard(task, progress) for task in plan_shards(config, method))
            rows.extend(mc_rows(config, method, acc, time.perf_counter() - start))
        else:
            new = analytic_rows(config, method)
            wall = time.perf_counter() - start
            rows.extend(dict(r, wall_seconds=wall) for r in new)
    return to_table(rows)
