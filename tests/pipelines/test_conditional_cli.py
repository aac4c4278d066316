"""``epscert certify --method conditional``: the Beam job gives the API's rows (issue 13)."""

from __future__ import annotations

import os

import pyarrow.parquet as pq
import pytest

from epscert.api import certify_config
from pipeline_helpers import without_wall
from pipelines import certify
from transforms.certify import sort_rows

ARGS = ["--sigma", "0.5", "--steps", "40", "--epsilons", "2,4", "--method", "conditional,conditional_order_stats",
        "--orders", "1,10,1,10,39,5", "--samples", "900", "--shards", "3", "--seed", "4", "--no-baselines",
        "--no-progress", "--format", "json"]
MULTI_PROCESS = ["--direct_num_workers=2", "--direct_running_mode=multi_processing"]


@pytest.mark.parametrize("runner_args", [
    [], pytest.param(MULTI_PROCESS, marks=pytest.mark.slow)], ids=["in_memory", "multi_processing"])
def test_certify_conditional_equals_the_api(tmp_path, runner_args):
    out = tmp_path / "r.parquet"
    certify.run([*ARGS, "--output", str(out), *runner_args], stdout=open(os.devnull, "w"))
    job = certify.prepare([*ARGS, "--output", str(out)])
    rows = without_wall(pq.read_table(out).to_pylist())
    api = without_wall(sort_rows(r for c in job.configs for r in certify_config(c).to_pylist()))
    assert rows == api
    assert {r["method"] for r in rows} == {"conditional", "conditional_order_stats"}
    for r in rows:
        assert r["delta"] <= r["delta_upper"]
        if r["method"] == "conditional":
            assert r["delta_lower"] <= r["delta"]
        else:
            assert r["delta_lower"] is None
