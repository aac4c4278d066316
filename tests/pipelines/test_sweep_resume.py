"""Sweeps: complete results, resume after a failure or a kill, no row lost or duplicated."""

from __future__ import annotations

import datetime
import json
import os
import signal
import subprocess
import sys
import time
import types

import pyarrow.parquet as pq
import pytest

from epscert.api import certify_config
from pipeline_helpers import ROOT, subprocess_env, without_wall
from pipelines import spec as spec_mod
from pipelines import sweep
from transforms import shards as shards_mod
from transforms import sinks
from transforms.certify import sort_rows

KEY = ("config_id", "method", "direction", "epsilon")


def reference(spec_path) -> list[dict]:
    """The in-process API's rows for every configuration of the spec."""
    return without_wall(sort_rows(r for c in spec_mod.load(str(spec_path)) for r in certify_config(c).to_pylist()))


def parts(out) -> dict[str, bytes]:
    folder = out / "parts"
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.name.endswith(".parquet")
            and not p.name.startswith(".")} if folder.exists() else {}


def results(out) -> list[dict]:
    rows = pq.read_table(out / "results.parquet").to_pylist()
    assert len({tuple(r[k] for k in KEY) for r in rows}) == len(rows), "duplicated rows"
    return rows


def test_sweep_equals_the_api_and_rerun_reuses_everything(tmp_path, small_spec, capsys):
    out = tmp_path / "out"
    sweep.run([str(small_spec), "--output", str(out), "--no-progress"])
    assert without_wall(results(out)) == reference(small_spec)
    before = parts(out)
    assert len(before) == 4
    sweep.run([str(small_spec), "--output", str(out)])
    captured = capsys.readouterr()
    assert "4 complete" in captured.err and "0 to compute" in captured.err
    assert "4 configurations (4 reused, 0 computed), 36 rows" in captured.out
    assert parts(out) == before


@pytest.mark.parametrize("wave_seconds", ["0", "1e-9"], ids=["one-pipeline", "one-wave-per-config"])
def test_resume_after_a_failure_computes_only_the_rest(tmp_path, small_spec, monkeypatch, capsys, wave_seconds):
    out = tmp_path / "out"
    real_write = sinks.write_atomic
    writes = []

    def crash_on_third_part(path, data):
        if f"{os.sep}parts{os.sep}" in path:
            writes.append(path)
            if len(writes) == 3:
                raise RuntimeError("injected crash while writing a part")
        real_write(path, data)

    monkeypatch.setattr(sinks, "write_atomic", crash_on_third_part)
    with pytest.raises(Exception, match="injected crash"):
        sweep.run([str(small_spec), "--output", str(out), "--wave-seconds", wave_seconds, "--no-progress"])
    done = parts(out)
    assert len(done) == 2 and not (out / "results.parquet").exists()

    monkeypatch.setattr(sinks, "write_atomic", real_write)
    capsys.readouterr()
    sweep.run([str(small_spec), "--output", str(out), "--wave-seconds", wave_seconds, "--no-progress"])
    assert "2 complete" in capsys.readouterr().err
    after = parts(out)
    assert len(after) == 4 and all(after[name] == data for name, data in done.items())  # not recomputed
    assert without_wall(results(out)) == reference(small_spec)


def test_incomplete_part_is_recomputed(tmp_path, small_spec):
    out = tmp_path / "out"
    sweep.run([str(small_spec), "--output", str(out), "--no-progress"])
    victim = sorted((out / "parts").iterdir())[0]
    table = pq.read_table(victim)
    pq.write_table(table.slice(0, table.num_rows - 1), victim)  # a part missing a row
    stale = out / "parts" / f".{victim.name}.tmp-deadbeef"  # a temporary left by a killed writer
    stale.write_bytes(b"garbage")
    sweep.run([str(small_spec), "--output", str(out), "--no-progress"])
    assert pq.read_table(victim).num_rows == table.num_rows
    assert without_wall(results(out)) == reference(small_spec)


def test_resume_after_kill_9(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text("sigma: [0.5, 0.6, 0.7, 0.8, 0.9, 1.0]\nsteps: 10\nmethod: naive\nsamples: 3000\n"
                    "epsilons: [1, 2]\nshards: 2\nseed: 2\n")
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, "-m", "pipelines.sweep", str(spec), "--output", str(out), "--wave-seconds", "1e-9"],
        cwd=ROOT, env=subprocess_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True)
    try:
        deadline = time.monotonic() + 90
        while len(parts(out)) < 2 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    done = parts(out)
    assert 2 <= len(done) < 6, "the kill should land mid-sweep"
    assert not (out / "results.parquet").exists()
    sweep.run([str(spec), "--output", str(out), "--no-progress"])
    after = parts(out)
    assert len(after) == 6 and all(after[name] == data for name, data in done.items())
    assert without_wall(results(out)) == reference(spec)


def test_results_bytes_are_deterministic_across_wave_layouts(tmp_path, small_spec, monkeypatch):
    """With wall time pinned to 0, two runs with different pipeline layouts give identical bytes."""
    monkeypatch.setattr(shards_mod, "time", types.SimpleNamespace(perf_counter=lambda: 0.0))
    a, b = tmp_path / "a", tmp_path / "b"
    sweep.run([str(small_spec), "--output", str(a), "--wave-seconds", "0", "--no-progress"])
    sweep.run([str(small_spec), "--output", str(b), "--wave-seconds", "1e-9", "--no-progress"])
    assert (a / "results.parquet").read_bytes() == (b / "results.parquet").read_bytes()
    assert parts(a) == parts(b)


def test_sharded_output_and_dated_directory(tmp_path, small_spec, capsys):
    sweep.run([str(small_spec), "--output", str(tmp_path / "run-{date}"), "--output-shards", "3",
               "--format", "json", "--no-progress"])
    today = datetime.datetime.now(datetime.timezone.utc).date().isoformat()
    out = tmp_path / f"run-{today}"
    files = sinks.results_paths(str(out), 3)
    rows = [r for f in files for r in pq.read_table(f).to_pylist()]
    assert without_wall(rows) == reference(small_spec)
    printed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert without_wall(printed) == without_wall(rows)


def test_expand_output_date():
    assert sweep.expand_output("gs://b/sweeps/{date}/x", datetime.date(2031, 2, 3)) == "gs://b/sweeps/2031-02-03/x"


def test_waves_group_by_estimated_seconds():
    configs = spec_mod.expand({"sigma": [0.5, 0.6, 0.7], "steps": 10, "epsilons": [1], "samples": 100,
                               "method": "naive", "shards": 1})
    assert sweep.waves(configs, 0) == [configs]
    assert sweep.waves(configs, 1e-12) == [[c] for c in configs]
    assert sweep.waves([], 5) == [[]]
    assert [len(w) for w in sweep.waves(configs, 1e9)] == [3]
