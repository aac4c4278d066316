"""``--shards auto`` reads the runner's parallelism; the rows are the same on 1 and 2 workers (issue 26)."""

from __future__ import annotations

import dataclasses
import os

import pyarrow.parquet as pq
import pytest

from epscert.api import certify_config
from epscert.results import scaling
from pipeline_helpers import without_wall
from pipelines import certify, cli
from pipelines.parallelism import machine_vcpus, parallelism
from transforms.certify import sort_rows

MULTI_PROCESS = ["--direct_num_workers=2", "--direct_running_mode=multi_processing"]
#: About 30 s of one core by the estimate (10^6 samples, T = 1000, both directions).
BIG = ["--sigma", "0.35", "--steps", "1000", "--method", "importance", "--samples", "1000000", "--no-baselines"]


@pytest.mark.parametrize("flags,workers,known", [
    ([], 1, True),
    (MULTI_PROCESS, 2, True),
    (["--direct_num_workers=3", "--direct_running_mode=multi_threading"], 3, True),
    (["--direct_num_workers=4"], 1, True),  # in_memory runs one worker whatever the count
    (["--direct_num_workers=0", "--direct_running_mode=multi_processing"], os.cpu_count(), True),
    (["--runner=DataflowRunner", "--max_num_workers=50", "--machine_type=n1-standard-4"], 200, True),
    (["--runner=DataflowRunner", "--num_workers=7"], 7, True),  # default n1-standard-1
    (["--runner=DataflowRunner", "--num_workers=7", "--max_num_workers=20", "--machine_type=n2-custom-8-32768"],
     160, True),
    (["--runner=DataflowRunner", "--max_num_workers=5", "--machine_type=n1-standard-8",
      "--experiments=no_use_multiple_sdk_containers"], 5, True),
    (["--runner=DataflowRunner"], 1, False),
    (["--runner=FlinkRunner", "--parallelism=16"], 16, True),
    (["--runner=PortableRunner", "--job_endpoint=localhost:8099", "--parallelism=6"], 6, True),
    (["--runner=FlinkRunner"], 1, False),
    (["--runner=SparkRunner", "--spark_master_url=local[3]"], 3, True),
    (["--runner=SparkRunner", "--spark_master_url=local"], 1, True),
    (["--runner=SparkRunner", "--spark_master_url=spark://host:7077"], 1, False),
    (["--runner=PrismRunner"], 1, False),
])
def test_parallelism_from_the_pipeline_options(flags, workers, known):
    p = parallelism(flags)
    assert (p.workers, p.known) == (workers, known), p.source


def test_machine_vcpus():
    assert [machine_vcpus(t) for t in ("n1-standard-4", "c2-highcpu-60", "e2-highmem-16", "custom-6-23040",
                                       "n2-custom-8-32768-ext", "zones/x/machineTypes/n1-standard-2")] == \
        [4, 60, 16, 6, 8, 2]
    assert machine_vcpus("a2-highgpu-1g") is None and machine_vcpus(None) is None


def test_auto_gives_each_worker_several_shards():
    one = certify.prepare(BIG).config
    two = certify.prepare([*BIG, *MULTI_PROCESS]).config
    flow = certify.prepare([*BIG, "--runner=DataflowRunner", "--num_workers=3", "--output", "gs://b/o.parquet"]).config
    assert (one.shards, two.shards, flow.shards) == (4, 8, 12)  # auto_count(30 s, W): 4, 8, 12
    assert one.config_id == two.config_id == flow.config_id  # the shard count is not part of the identity
    assert certify.prepare([*BIG, "--shards", "7", *MULTI_PROCESS]).config.shards == 7


def test_dry_run_says_shards_workers_and_wall_time(capsys):
    assert cli.main(["certify", *BIG, *MULTI_PROCESS, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "planned: 8 Monte Carlo shard(s) on 2 worker(s) (--direct_num_workers=2 (multi_processing))" in out
    assert "expected wall time about" in out and "start-up" in out and "merge" in out
    assert cli.main(["certify", *BIG, "--runner=FlinkRunner", "--output", "/tmp/x.parquet", "--dry-run"]) == 0
    assert "assumed 1" in capsys.readouterr().out


def test_auto_rows_identical_on_one_and_two_workers(tmp_path, monkeypatch):
    """Default --shards auto picks 4 shards for 1 worker and 8 for 2 (MIN_SHARD_SECONDS lowered so a
    0.3 s job is cut as a 30 s one would be); both runs give the rows of the one-shard in-process run."""
    monkeypatch.setattr(scaling, "MIN_SHARD_SECONDS", 0.01)
    args = ["--sigma", "0.8", "--steps", "2000", "--epsilons", "0.5,1,2", "--method", "naive", "--samples", "5000",
            "--seed", "3", "--no-baselines", "--no-progress", "--format", "json"]
    runs = {}
    for name, flags in (("one", []), ("two", MULTI_PROCESS)):
        out = tmp_path / f"{name}.parquet"
        job = certify.prepare([*args, "--output", str(out), *flags])
        certify.run([*args, "--output", str(out), *flags], stdout=open(os.devnull, "w"))
        runs[name] = (job.config.shards, without_wall(sort_rows(pq.read_table(out).to_pylist())))
    assert (runs["one"][0], runs["two"][0]) == (4, 8)  # different layouts: the check below is not vacuous
    reference = certify_config(dataclasses.replace(certify.prepare(args).config, shards=1))
    assert runs["one"][1] == runs["two"][1] == without_wall(sort_rows(reference.to_pylist()))
