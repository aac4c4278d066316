"""``epscert certify --target-rel-width``: each wave one Beam job, rows equal the API's (issue 13)."""

from __future__ import annotations

import io
import os

import pyarrow.parquet as pq
import pytest

from epscert.api import certify as api_certify
from epscert.config import DEFAULT_ERROR_PROB
from pipeline_helpers import without_wall
from pipelines import certify
from pipelines.options import UsageError
from transforms.certify import sort_rows

ARGS = ["--sigma", "0.8", "--steps", "3", "--epsilons", "0.5,1", "--method", "conditional,cube_lower_bound",
        "--samples", "64", "--shards", "2", "--seed", "5", "--direction", "add", "--no-baselines",
        "--format", "json", "--target-rel-width", "0.2", "--max-samples", "1000"]


def test_cli_waves_equal_the_api_waves(tmp_path, capfd):
    out = tmp_path / "r.parquet"
    certify.run([*ARGS, "--output", str(out)], stdout=io.StringIO())
    err = capfd.readouterr().err
    rows = without_wall(pq.read_table(out).to_pylist())
    api = without_wall(sort_rows(api_certify(
        sigma=0.8, steps=3, epsilons=(0.5, 1.0), method=("conditional", "cube_lower_bound"), samples=64, shards=2, seed=5,
        direction="add", target_rel_width=0.2, max_samples=1000).to_pylist()))
    assert rows == api
    mc = [r for r in rows if r["method"] == "conditional"]
    assert mc and {r["method"] for r in rows} == {"conditional", "cube_lower_bound"}
    waves = [line for line in err.splitlines() if "conditional wave" in line and "width" in line]
    assert len(waves) >= 2  # 64 samples cannot reach width 1.2 here; the progress line shows each width
    assert mc[0]["samples"] == 64 * (2 ** len(waves) - 1)
    assert mc[0]["error_prob"] == pytest.approx(DEFAULT_ERROR_PROB * 2.0 ** -len(waves))  # β_k, k = waves - 1
    assert not os.path.exists(str(out) + ".waves")  # the wave sums are cleaned up


def test_cli_waves_refuse_bad_values_before_any_work(tmp_path):
    with pytest.raises(UsageError, match="target_rel_width"):
        certify.prepare([*ARGS[:-4], "--target-rel-width", "-1"])
    with pytest.raises(UsageError, match="max_samples"):
        certify.prepare([*ARGS[:-4], "--max-samples", "100"])
