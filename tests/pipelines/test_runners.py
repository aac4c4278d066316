"""Same seed and shard layout => the same rows (every column but wall_seconds) on every runner.

Runners: Beam's FnApiRunner in memory, FnApiRunner with two worker processes, the Portable
runner against a local job service and an external worker pool, and the in-process API.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import pyarrow.parquet as pq
import pytest

from epscert.api import certify_config
from pipeline_helpers import ROOT, subprocess_env, without_wall
from pipelines import certify, spec as spec_mod, sweep
from transforms.certify import sort_rows

CERTIFY_ARGS = ["--sigma", "0.7", "--steps", "12", "--epsilons", "0.5,1,2", "--method", "importance,naive",
                "--samples", "1500", "--shards", "3", "--seed", "9", "--no-progress", "--format", "json"]
MULTI_PROCESS = ["--direct_num_workers=2", "--direct_running_mode=multi_processing"]
#: the worker processes' start-up is most of a multi-process case (about 7 s): the sweep's and the dense strategy's
#: run in the fast suite, the certify commands' (baselines, conditional, matrix) with the slow set
SLOW_MULTI_PROCESS = pytest.param(MULTI_PROCESS, marks=pytest.mark.slow)


def api_rows(configs) -> list[dict]:
    return without_wall(sort_rows(r for c in configs for r in certify_config(c).to_pylist()))


def sweep_rows(out) -> list[dict]:
    return without_wall(pq.read_table(out / "results.parquet").to_pylist())


@pytest.mark.parametrize("runner_args", [[], SLOW_MULTI_PROCESS], ids=["in_memory", "multi_processing"])
def test_certify_with_baselines_equals_the_api(tmp_path, runner_args):
    out = tmp_path / "r.parquet"
    certify.run([*CERTIFY_ARGS, "--output", str(out), *runner_args], stdout=open(os.devnull, "w"))
    job = certify.prepare([*CERTIFY_ARGS, "--output", str(out)])
    assert len(job.configs) == 6  # the configuration and its five baselines
    assert without_wall(pq.read_table(out).to_pylist()) == api_rows(job.configs)


def test_truncated_batches_equal_the_api(tmp_path):
    args = [*CERTIFY_ARGS, "--method", "naive", "--dataset-size", "600", "--max-batch-size", "70",
            "--no-baselines", "--output", str(tmp_path / "t.parquet")]
    certify.run(args, stdout=open(os.devnull, "w"))
    job = certify.prepare(args)
    assert job.config.truncated
    rows = pq.read_table(tmp_path / "t.parquet").to_pylist()
    assert all(r["truncation_penalty"] is not None and r["max_batch_size"] == 70 for r in rows)
    assert without_wall(rows) == api_rows(job.configs)


def test_sweep_multi_processing_equals_in_memory_and_api(tmp_path, small_spec):
    sweep.run([str(small_spec), "--output", str(tmp_path / "mem"), "--no-progress"])
    sweep.run([str(small_spec), "--output", str(tmp_path / "mp"), "--no-progress", *MULTI_PROCESS])
    expected = api_rows(spec_mod.load(str(small_spec)))
    assert sweep_rows(tmp_path / "mem") == expected
    assert sweep_rows(tmp_path / "mp") == expected


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, proc: subprocess.Popen, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"service on port {port} exited with status {proc.returncode}")
        with socket.socket() as s:
            if s.connect_ex(("localhost", port)) == 0:
                return
        time.sleep(0.1)
    raise TimeoutError(f"nothing listening on localhost:{port} after {timeout} s")


@pytest.fixture
def portable_services(tmp_path):
    """A local Beam job service and an external worker pool on free loopback ports; always stopped."""
    job_port, pool_port = free_port(), free_port()
    env = subprocess_env()
    logs = [open(tmp_path / name, "w") for name in ("job_service.log", "worker_pool.log")]
    commands = [
        [sys.executable, "-m", "apache_beam.runners.portability.local_job_service_main", "--port", str(job_port)],
        [sys.executable, "-m", "apache_beam.runners.worker.worker_pool_main", "--service_port", str(pool_port)],
    ]
    procs = []
    try:
        for command, log in zip(commands, logs):
            procs.append(subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                                          start_new_session=True))
        wait_for_port(job_port, procs[0])
        wait_for_port(pool_port, procs[1])
        yield ["--runner=PortableRunner", f"--job_endpoint=localhost:{job_port}", "--environment_type=EXTERNAL",
               f"--environment_config=localhost:{pool_port}"]
    finally:
        for proc in procs:  # the worker pool's SDK workers share its process group
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=15)
        for log in logs:
            log.close()


def test_sweep_on_the_portable_runner_equals_the_api(tmp_path, small_spec, portable_services):
    out = tmp_path / "portable"
    result = sweep.run([str(small_spec), "--output", str(out), *portable_services])
    assert result.state == "DONE"
    assert sweep_rows(out) == api_rows(spec_mod.load(str(small_spec)))


CONDITIONAL_ARGS = ["--sigma", "0.5", "--steps", "50", "--epsilons", "2,3", "--method",
                    "conditional,conditional_order_stats", "--orders", "1,11,1,11,49,6", "--samples", "600", "--shards", "2",
                    "--seed", "4", "--no-baselines", "--no-progress", "--format", "json"]


# the Portable runner's own start-up is most of its case: slow here (the sweep's portable test stays fast)
@pytest.mark.parametrize("runner_args", [[], SLOW_MULTI_PROCESS, pytest.param("portable", marks=pytest.mark.slow)],
                         ids=["in_memory", "multi_processing", "portable"])
def test_conditional_certify_on_every_runner_equals_the_api(tmp_path, runner_args, request):
    """Issue 13: `certify --method conditional` gives identical rows on the default, multi-process
    and Portable runners, and the same as the in-process API (certified UCBs included)."""
    if runner_args == "portable":
        runner_args = request.getfixturevalue("portable_services")
    out = tmp_path / "c.parquet"
    certify.run([*CONDITIONAL_ARGS, "--output", str(out), *runner_args], stdout=open(os.devnull, "w"))
    job = certify.prepare([*CONDITIONAL_ARGS, "--output", str(out)])
    rows = without_wall(pq.read_table(out).to_pylist())
    assert {r["method"] for r in rows} == {"conditional", "conditional_order_stats"}
    assert all(r["delta_upper"] >= r["delta"] for r in rows)
    assert rows == api_rows(job.configs)


MATRIX_ARGS = ["--c-col", "1,0.5,0.25", "--iterations", "10", "--cycle-length", "4", "--sigma", "1.2",
               "--epsilons", "0.5,1", "--method", "conditional,importance,naive", "--samples", "300", "--shards", "2",
               "--seed", "6", "--no-progress", "--format", "json"]


# the Portable runner's own start-up is most of its case: slow here (the sweep's portable test stays fast)
@pytest.mark.parametrize("runner_args", [[], SLOW_MULTI_PROCESS, pytest.param("portable", marks=pytest.mark.slow)],
                         ids=["in_memory", "multi_processing", "portable"])
def test_matrix_certify_on_every_runner_equals_the_api(tmp_path, runner_args, request):
    """Issue 23: a BandMF strategy (b = 4 not dividing n = 10) travels with the configuration; every
    runner gives the API's rows, its own deterministic bounds as baselines included."""
    if runner_args == "portable":
        runner_args = request.getfixturevalue("portable_services")
    out = tmp_path / "m.parquet"
    certify.run([*MATRIX_ARGS, "--output", str(out), *runner_args], stdout=open(os.devnull, "w"))
    job = certify.prepare([*MATRIX_ARGS, "--output", str(out)])
    rows = without_wall(pq.read_table(out).to_pylist())
    assert {r["method"] for r in rows} == {"conditional", "importance", "naive", "independent_lower_bound",
                                           "comonotone_upper_bound"}
    assert {r["strategy"] for r in rows} == {job.config.strategy.describe()}
    assert rows == api_rows(job.configs)


@pytest.mark.parametrize("runner_args", [[], MULTI_PROCESS], ids=["in_memory", "multi_processing"])
def test_dense_strategy_by_path_on_worker_processes(tmp_path, runner_args):
    """A dense C goes to the workers as path + SHA-256; they read the file themselves."""
    import numpy as np  # noqa: PLC0415

    path = tmp_path / "C.npy"
    np.save(path, np.tril(np.full((8, 8), 0.5)) + 0.5 * np.eye(8))
    args = ["--strategy-matrix", str(path), "--cycle-length", "3", "--sigma", "2", "--epsilons", "1",
            "--method", "naive", "--samples", "200", "--shards", "2", "--seed", "1", "--no-progress", "--format", "json",
            "--output", str(tmp_path / "d.parquet")]
    certify.run([*args, *runner_args], stdout=open(os.devnull, "w"))
    rows = without_wall(pq.read_table(tmp_path / "d.parquet").to_pylist())
    assert rows == api_rows(certify.prepare(args).configs)
