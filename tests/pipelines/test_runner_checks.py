"""A runner that cannot run is refused in one line before any job is built (issue 35, item 6).

No test here touches the network: the job endpoint is a closed port on 127.0.0.1 (bound, then
released, so nothing listens there), and the job-server jar download is simulated.
"""

from __future__ import annotations

import importlib
import socket

import pytest

from pipelines import cli
from pipelines.options import (
    JAR_FETCH_ERROR, UsageError, check_job_endpoint, choose_runner, run_pipeline, split_endpoint,
)

SPEC = "sampler: [poisson]\nsigma: [1.0]\nsteps: [100]\nmethod: [auto]\nepsilons: [1]\n"


@pytest.fixture
def closed_port() -> int:
    """A loopback port nothing listens on: bound by this process, then closed."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def spec(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text(SPEC)
    return path


def test_closed_job_endpoint_is_refused_by_sweep_and_certify(closed_port, spec, tmp_path, capsys):
    endpoint = f"127.0.0.1:{closed_port}"
    runner = ["--runner", "PortableRunner", "--job_endpoint", endpoint]
    assert cli.main(["sweep", str(spec), "--output", str(tmp_path / "out"), *runner]) == 2
    assert cli.main(["certify", "--sigma", "1", "--steps", "100", "--no-progress", *runner]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 2, lines  # one line each, no traceback
    for line, prog in zip(lines, ("epscert sweep", "epscert certify")):
        assert line.startswith(f"{prog}: error: no job service answers at job_endpoint='{endpoint}'")
        assert "deploy/flink/README.md" in line
    assert not (tmp_path / "out" / "parts").exists() or not list((tmp_path / "out" / "parts").iterdir())


def test_listening_job_endpoint_passes(closed_port):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        port = server.getsockname()[1]
        check_job_endpoint(choose_runner(["--runner=PortableRunner", f"--job_endpoint=127.0.0.1:{port}"]))
    with pytest.raises(UsageError, match="job_endpoint"):
        check_job_endpoint(choose_runner(["--runner=PortableRunner", f"--job_endpoint=127.0.0.1:{closed_port}"]))
    check_job_endpoint(choose_runner(["--runner=PortableRunner", "--job_endpoint=embed"]))  # in process: no probe


@pytest.mark.parametrize("endpoint", ["localhost", "localhost:", ":8099", "localhost:port", "localhost:70000"])
def test_malformed_job_endpoint_is_named(endpoint):
    with pytest.raises(UsageError, match=f"job_endpoint must be host:port, got job_endpoint='{endpoint}'"):
        split_endpoint(endpoint)


def test_ipv6_endpoint_is_split():
    assert split_endpoint("[::1]:8099") == ("::1", 8099)


class _JarlessPipeline:
    """Stands in for a pipeline whose FlinkRunner cannot download its job-server jar (Beam's message)."""

    def run(self):
        raise RuntimeError(f"{JAR_FETCH_ERROR} at https://repo.example/beam-runners-flink-job-server.jar: "
                           "<urlopen error [Errno -2] Name or service not known>. If no Internet access at "
                           "runtime, stage the jar at /cache/jars/flink-job-server.jar")


class _BrokenPipeline:
    def run(self):
        raise RuntimeError("something else")


def test_job_server_jar_failure_points_to_the_deploy_recipes():
    choice = choose_runner(["--runner=FlinkRunner"])
    with pytest.raises(UsageError) as info:
        run_pipeline(_JarlessPipeline(), choice)
    message = str(info.value)
    assert "FlinkRunner" in message and "deploy/flink/README.md" in message and "deploy/spark/README.md" in message
    assert "--flink_job_server_jar" in message and "/cache/jars/flink-job-server.jar" in message
    with pytest.raises(RuntimeError, match="something else"):  # other failures are not disguised
        run_pipeline(_BrokenPipeline(), choice)


def _gcp_installed() -> bool:
    try:
        importlib.import_module("apache_beam.runners.dataflow.internal.apiclient")
    except ImportError:
        return False
    return True


@pytest.mark.skipif(_gcp_installed(), reason="the gcp extra is installed: nothing to refuse")
@pytest.mark.parametrize("dry_run", [[], ["--dry-run"]])
def test_dataflow_without_gcp_gives_sweep_the_line_certify_gives(spec, capsys, dry_run):
    dataflow = ["--runner", "DataflowRunner", "--project", "p", "--region", "us-central1",
                "--temp_location", "gs://b/t"]
    assert cli.main(["sweep", str(spec), "--output", "gs://b/sweep", *dataflow, *dry_run]) == 2
    assert cli.main(["certify", "--sigma", "1", "--steps", "100", "--output", "gs://b/o.parquet", *dataflow]) == 2
    sweep_line, certify_line = capsys.readouterr().err.strip().splitlines()
    assert sweep_line.split(": error: ")[1] == certify_line.split(": error: ")[1]
    assert "pip install 'epscert[gcp]'" in sweep_line
