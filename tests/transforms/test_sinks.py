"""Atomic Parquet writes, per-configuration parts, their validation and assembly."""

from __future__ import annotations

import os

import apache_beam as beam
import pyarrow.parquet as pq
import pytest
from apache_beam.runners.portability.fn_api_runner import FnApiRunner
from apache_beam.testing.test_pipeline import TestPipeline as BeamTestPipeline

from epscert.api import certify_config
from epscert.config import CertifyConfig
from epscert.schema import RESULTS_SCHEMA
from transforms import sinks
from transforms.certify import sort_rows


def config(sigma: float) -> CertifyConfig:
    return CertifyConfig(sampler="balls_and_bins", sigma=sigma, steps=8, epsilons=(1.0, 2.0),
                         methods=("naive",), samples=400, shards=2)


CONFIGS = [config(s) for s in (0.6, 0.8, 1.0, 1.2, 1.5)]
ROWS = {c.config_id: certify_config(c).to_pylist() for c in CONFIGS}


def test_write_rows_is_sorted_atomic_and_deterministic(tmp_path):
    rows = [r for rs in ROWS.values() for r in rs]
    a, b = tmp_path / "a.parquet", tmp_path / "b.parquet"
    assert sinks.write_rows(rows[::-1], str(a)) == len(rows)
    sinks.write_rows(rows, str(b))
    assert a.read_bytes() == b.read_bytes()
    assert sorted(os.listdir(tmp_path)) == ["a.parquet", "b.parquet"]  # no temporary left behind
    table = pq.read_table(a)
    assert table.schema.equals(RESULTS_SCHEMA) and table.to_pylist() == sort_rows(rows)


def test_write_atomic_replaces_whole_file_and_cleans_up_on_failure(tmp_path, monkeypatch):
    path = tmp_path / "x.bin"
    sinks.write_atomic(str(path), b"old")

    def broken_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(sinks.os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk full"):
        sinks.write_atomic(str(path), b"new contents")
    assert path.read_bytes() == b"old" and os.listdir(tmp_path) == ["x.bin"]


def test_read_part_accepts_only_complete_parts(tmp_path):
    c = CONFIGS[0]
    out = str(tmp_path)
    assert sinks.read_part(out, c) is None
    path = sinks.part_path(out, c.config_id)
    sinks.write_rows(ROWS[c.config_id][:-1], path)  # one row short
    assert sinks.read_part(out, c) is None
    sinks.write_rows(ROWS[CONFIGS[1].config_id], path)  # another configuration's rows
    assert sinks.read_part(out, c) is None
    with open(path, "wb") as handle:  # truncated file
        handle.write(b"PAR1 not really")
    assert sinks.read_part(out, c) is None
    sinks.write_rows(ROWS[c.config_id], path)
    assert sinks.read_part(out, c).num_rows == len(ROWS[c.config_id])


def test_results_paths():
    assert sinks.results_paths("/d") == ["/d/results.parquet"]
    assert sinks.results_paths("/d", 3)[2] == "/d/results-00002-of-00003.parquet"
    assert sinks.results_paths("gs://b/x", 2)[0] == "gs://b/x/results-00000-of-00002.parquet"


@pytest.mark.parametrize("shards", [1, 2, 7])
def test_write_parts_then_assemble(tmp_path, shards):
    out = str(tmp_path)
    done, todo = CONFIGS[:2], CONFIGS[2:]
    for c in done:  # parts from an earlier run
        sinks.write_rows(ROWS[c.config_id], sinks.part_path(out, c.config_id))
    with BeamTestPipeline(runner=FnApiRunner()) as p:
        written = (p | beam.Create([(c.config_id, ROWS[c.config_id]) for c in todo])
                   | beam.ParDo(sinks.WritePartFn(out)))
        _ = written | sinks.AssembleResults(out, CONFIGS, shards)
    tables = [pq.read_table(path) for path in sinks.results_paths(out, shards)]
    rows = [r for t in tables for r in t.to_pylist()]
    assert rows == sort_rows(r for rs in ROWS.values() for r in rs)
    assert len({r["config_id"] for r in rows}) == len(CONFIGS)


def test_assemble_refuses_a_missing_part(tmp_path):
    with pytest.raises(RuntimeError, match="missing or incomplete"):
        sinks.assemble_chunk(0, str(tmp_path), CONFIGS[:1], 1)
