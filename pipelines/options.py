"""What every epscert job shares: flag splitting, runner choice, output checks, usage errors.

``parse_known_args`` splits the job's own flags from runner flags; the rest go to Beam's
``PipelineOptions`` untouched. With no ``--runner`` the job runs on Beam's pure-Python
FnApiRunner, which needs no network (Beam's default DirectRunner first tries to download
the Prism runner).
"""

from __future__ import annotations

import importlib
import os
import socket
import sys
import tempfile
from dataclasses import dataclass
from typing import Sequence

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import DirectOptions, PipelineOptions, PortableOptions, StandardOptions
from apache_beam.runners.portability.fn_api_runner import FnApiRunner

from pipelines.args import (  # noqa: F401 (re-exported: the Beam-free part of what every job shares)
    MAX_FLAG_DIGITS, ArgumentParser, UsageError, parse_floats, parse_int, report_usage_error,
)
from pipelines.flags import FlagError, check_leftovers
from transforms.sinks import is_local

#: Runners epscert refuses, with the reason.
REFUSED_RUNNERS = {
    "dask": "DaskRunner in Beam 2.77 silently writes empty Parquet files and runs only one branch "
            "of multi-sink pipelines; use the default runner, PortableRunner, Flink, Spark or Dataflow",
}
#: Runners that run workers on this machine (progress lines are visible, outputs are local).
LOCAL_RUNNERS = ("fnapirunner", "directrunner", "bundlebaseddirectrunner", "switchingdirectrunner",
                 "prismrunner", "portablerunner")


@dataclass(frozen=True)
class RunnerChoice:
    """The runner a job will use and how it should report progress."""

    options: PipelineOptions
    runner: object | None  # a runner instance, or None to let Beam build the one named by --runner
    name: str
    local: bool
    progress_mode: str  # 'eta', 'shards' or 'off' (see transforms.progress)


def check_unknown_flags(pipeline_args: Sequence[str], own_flags: Sequence[str], command: str = "certify") -> None:
    """Refuse every leftover flag that Beam does not define (see :mod:`pipelines.flags`), with a hint."""
    try:
        check_leftovers(pipeline_args, command, own_flags)
    except FlagError as err:
        raise UsageError(str(err)) from None


def choose_runner(pipeline_args: Sequence[str]) -> RunnerChoice:
    """FnApiRunner unless ``--runner`` names another; DaskRunner refused (see REFUSED_RUNNERS)."""
    options = PipelineOptions(list(pipeline_args))
    named = options.view_as(StandardOptions).runner
    if named is not None and not isinstance(named, str):
        named = type(named).__name__
    if named is None:
        direct = options.view_as(DirectOptions)
        mode = direct.direct_running_mode or "in_memory"
        workers = direct.direct_num_workers if direct.direct_num_workers is not None else 1
        single = mode == "in_memory" or workers == 1
        return RunnerChoice(options, FnApiRunner(), "FnApiRunner", True, "eta" if single else "shards")
    short = named.rsplit(".", 1)[-1].lower()
    for key, reason in REFUSED_RUNNERS.items():
        if key in short:
            raise UsageError(f"runner={named!r} is not supported: {reason}")

    local = short in LOCAL_RUNNERS or short.replace("runner", "") + "runner" in LOCAL_RUNNERS
    return RunnerChoice(options, None, named, local, "shards" if local else "off")


def check_dataflow_installed(named: str) -> None:
    """One line (UsageError) instead of a traceback when the Dataflow runner's client libraries are missing."""
    try:
        importlib.import_module("apache_beam.runners.dataflow.internal.apiclient")
    except ImportError as err:
        raise UsageError(f"runner={named!r} needs Beam's GCP client libraries, not installed here ({err}): "
                         "pip install 'epscert[gcp]'") from None


#: Seconds a job endpoint has to accept a TCP connection before the job is refused (Beam itself waits
#: minutes, silently, then raises a bare grpc.FutureTimeoutError).
ENDPOINT_CONNECT_SECONDS = 3.0
#: Where the recipes for job servers and cluster runners are (named in the refusals below).
DEPLOY_RECIPES = ("deploy/flink/README.md (FlinkRunner, or run_job_server.sh for a Flink job server) and "
                  "deploy/spark/README.md (SparkRunner, run_job_server.sh)")


def split_endpoint(endpoint: str) -> tuple[str, int]:
    """``host:port`` (``[v6]:port`` too) -> (host, port); UsageError naming ``job_endpoint`` otherwise."""
    host, sep, port = endpoint.strip().rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise UsageError(f"job_endpoint must be host:port, got job_endpoint={endpoint!r}")
    return host, int(port)


def check_job_endpoint(choice: RunnerChoice, seconds: float = ENDPOINT_CONNECT_SECONDS) -> None:
    """Refuse a ``--job_endpoint`` where nothing accepts a TCP connection within ``seconds``.

    One connection to exactly the host and port given (nothing else is probed), closed at once. Beam
    would wait for the job service for minutes without a word, then fail with a bare timeout.
    """
    endpoint = choice.options.view_as(PortableOptions).job_endpoint
    if not endpoint or endpoint == "embed":  # 'embed': Beam runs a job service in this process
        return
    host, port = split_endpoint(endpoint)
    try:
        with socket.create_connection((host, port), timeout=seconds):
            pass
    except OSError as err:
        reason = "timed out" if isinstance(err, socket.timeout) else (err.strerror or str(err))
        raise UsageError(f"no job service answers at job_endpoint={endpoint!r} ({reason} after trying for up to "
                         f"{seconds:g} s); start the job server first (see {DEPLOY_RECIPES}), or drop "
                         "--runner for the in-process runner") from None


def check_runner_ready(choice: RunnerChoice) -> None:
    """What can be known about the runner before a job is built: Dataflow's client libraries installed
    (:func:`check_dataflow_installed`), a portable runner's job service listening (:func:`check_job_endpoint`)."""
    if "dataflow" in choice.name.lower():
        check_dataflow_installed(choice.name)
    check_job_endpoint(choice)


def check_filesystem(name: str, path: str, choice: RunnerChoice) -> None:
    """Refuse (one line) a remote ``path`` whose Beam filesystem is not installed here (gs:// without the
    ``gcp`` extra), before this machine reads or writes it; on Dataflow, with Dataflow's own line."""
    if is_local(path):
        return
    if "dataflow" in choice.name.lower():
        check_dataflow_installed(choice.name)
    try:
        FileSystems.get_filesystem(path)
    except ValueError:
        extra = " (for gs:// paths: pip install 'epscert[gcp]')" if path.startswith("gs://") else ""
        raise UsageError(f"{name} is on a filesystem Beam cannot open here, got {name}={path!r}: install the "
                         f"Beam extra for its scheme{extra}") from None


def make_pipeline(choice: RunnerChoice) -> beam.Pipeline:
    """The pipeline for ``choice``; the runner is checked here (:func:`check_runner_ready`: after every other
    input check, before anything is built or submitted)."""
    check_runner_ready(choice)
    if choice.runner is not None:
        return beam.Pipeline(runner=choice.runner, options=choice.options)
    return beam.Pipeline(options=choice.options)


#: Opening of Beam's error when a Flink or Spark job server jar cannot be downloaded (no network).
JAR_FETCH_ERROR = "Unable to fetch remote job server jar"


def run_pipeline(pipeline: beam.Pipeline, choice: RunnerChoice):
    """``pipeline.run()``, with Beam's failure to download a job-server jar (FlinkRunner or SparkRunner
    without network) turned into one line (UsageError) that points to the deploy recipes."""
    try:
        return pipeline.run()
    except RuntimeError as err:
        if JAR_FETCH_ERROR not in str(err):
            raise
        raise UsageError(f"runner={choice.name!r} could not download its job server jar (no network?): give a "
                         "local copy with --flink_job_server_jar or --spark_job_server_jar, or point "
                         f"--job_endpoint at a running job server; see {DEPLOY_RECIPES} ({str(err).rsplit('. ', 1)[-1]})") from None


def check_output_reachable(name: str, path: str, choice: RunnerChoice) -> None:
    """Refuse a local output path on Dataflow, whose workers cannot see this machine's disk."""
    if is_local(path) and "dataflow" in choice.name.lower():
        raise UsageError(f"{name} must be a gs:// path with runner={choice.name!r}, got {name}={path!r}")


def check_writable_file(name: str, path: str) -> None:
    """Refuse (UsageError) an output file that cannot be created; remote URIs are not probed."""
    if not is_local(path):
        return
    if os.path.isdir(path):
        raise UsageError(f"{name} must be a file path, got {name}={path!r} (a directory)")
    check_writable_dir(name, os.path.dirname(os.path.abspath(path)), create=False, shown=path)


def check_writable_dir(name: str, path: str, create: bool = True, shown: str | None = None) -> None:
    """Create ``path`` if asked and prove it writable by creating and removing a temporary file."""
    if not is_local(path):
        return
    shown = path if shown is None else shown
    try:
        if create:
            os.makedirs(path, exist_ok=True)
        if not os.path.isdir(path):
            raise UsageError(f"{name} is not writable: directory {path!r} does not exist ({name}={shown!r})")
        with tempfile.NamedTemporaryFile(dir=path, prefix=".epscert-probe-"):
            pass
    except OSError as err:
        raise UsageError(f"{name} is not writable: {err.strerror} ({name}={shown!r})") from None
