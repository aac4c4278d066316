"""``epscert sweep SPEC --output DIR``: a grid of configurations into one resumable result table.

Layout of ``DIR``::

    DIR/parts/<config_id>.parquet   one per finished configuration, written atomically
    DIR/results.parquet             every configuration of SPEC, assembled from the parts

Resume: before launching, every configuration of SPEC whose part exists and is complete
(results schema, its config_id only, the expected rows and methods) is skipped; only the
others are computed. A run killed at any point leaves whole parts or none, so re-running
the same command finishes the sweep with no row lost and none duplicated. ``DIR`` may
contain ``{date}`` (UTC, YYYY-MM-DD) for dated scheduled runs.

Locally the configurations to compute run in waves of about ``--wave-seconds`` estimated
core-seconds, one pipeline per wave, so that a killed run keeps the parts of its finished
waves. On remote runners the default is one job for the whole sweep.
"""

from __future__ import annotations

import dataclasses
import datetime
import os
import sys
from dataclasses import dataclass
from typing import Sequence, TextIO

import apache_beam as beam
from apache_beam.runners.runner import PipelineResult, PipelineState

from epscert.config import CertifyConfig, check_float
from epscert.montecarlo import backends
from epscert.config.samplers import estimated_seconds
from pipelines import spec as spec_mod
from pipelines.options import (
    ArgumentParser, RunnerChoice, UsageError, check_filesystem, check_output_reachable, check_runner_ready,
    check_unknown_flags, check_writable_dir, choose_runner, make_pipeline, parse_int, report_usage_error, run_pipeline,
)
from pipelines.output import FORMATS, print_rows
from pipelines.parallelism import Parallelism, parallelism
from pipelines.plan import DEFAULT_MAX_CPU_HOURS, check_cpu_hours, print_plan
from transforms.certify import CertifyConfigs
from transforms.progress import ProgressReporter
from transforms.shards import total_samples
from transforms.sinks import (
    PARTS_DIR, AssembleResults, WritePartFn, is_local, join, read_part, read_table, results_paths,
)

PROG = "epscert sweep"
#: Most output files of one sweep (checked before any work: a million shards never finished).
MAX_OUTPUT_SHARDS = 1024
#: Default wave size on local runners, in estimated single-core seconds.
LOCAL_WAVE_SECONDS = 300.0
#: Rough cost of one analytic method (dp_accounting PLDs dominate), for wave sizing only.
ANALYTIC_SECONDS = 1.0
DATE_PLACEHOLDER = "{date}"


def build_parser(prog: str = PROG) -> ArgumentParser:
    parser = ArgumentParser(
        prog=prog, beam=True,
        description="Run a sweep spec (YAML or JSON grids) into DIR/results.parquet, resumably: "
                    "re-running computes only configurations without a complete part in DIR/parts. "
                    "Flags not listed here go to Beam (e.g. --runner).",
        epilog="Spec keys. Grids (one value or a non-empty list; the sweep is their product): "
               f"{', '.join(spec_mod.GRID_KEYS)}. Single values: {', '.join(spec_mod.SINGLE_KEYS)}. "
               "Give steps, or dataset_size and batch_size (then steps = dataset_size // batch_size, "
               "full batches per epoch). Unknown keys, empty grids and invalid combinations are "
               "refused before anything runs.",
    )
    add = parser.add_argument
    add("spec", metavar="SPEC", nargs="?", help="sweep spec file (YAML, or JSON for *.json), local or a "
        "filesystem URI; see pipelines/spec.py")
    add("--spec", dest="spec_flag", metavar="SPEC", help="the spec as a flag instead (for flex templates)")
    add("--output", required=True, metavar="DIR",
        help="output directory (local or a filesystem URI such as gs://...); '{date}' becomes the UTC date")
    add("--format", default="summary", choices=("summary",) + FORMATS,
        help="what to print on stdout: a summary line, a table or one JSON object per row "
             "(default: %(default)s)")
    add("--output-shards", "--output_shards", default="1", metavar="N",
        help="write results as N files results-0000i-of-0000N.parquet instead of one (default: %(default)s)")
    add("--wave-seconds", "--wave_seconds", default="auto", metavar="S",
        help="estimated core-seconds per pipeline run; finished waves survive a crash; 0 = one run for "
             f"the whole sweep (default: auto = {LOCAL_WAVE_SECONDS:g} locally, 0 on remote runners)")
    add("--no-progress", "--no_progress", action="store_true", help="no progress lines on stderr")
    add("--dry-run", action="store_true", help="print the configurations to compute, samples, estimated CPU "
        "time and peak memory, then exit without running or writing anything")
    add("--max-cpu-hours", "--max_cpu_hours", default=str(DEFAULT_MAX_CPU_HOURS), metavar="H",
        help="refuse to start a sweep estimated above H hours of one core (never prompts) "
             "(default: %(default)s)")
    return parser


@dataclass(frozen=True)
class SweepJob:
    configs: tuple[CertifyConfig, ...]
    output: str
    fmt: str
    output_shards: int
    wave_seconds: float
    progress: bool
    choice: RunnerChoice
    plan_only: bool = False
    max_cpu_hours: float = DEFAULT_MAX_CPU_HOURS
    workers: Parallelism = Parallelism(1, "not given", False)


def expand_output(path: str, today: datetime.date | None = None) -> str:
    """``path`` with ``{date}`` replaced by the UTC date (YYYY-MM-DD)."""
    today = today or datetime.datetime.now(datetime.timezone.utc).date()
    return path.replace(DATE_PLACEHOLDER, today.isoformat())


def prepare(argv: Sequence[str] | None = None, prog: str = PROG) -> SweepJob:
    """Parse flags and the spec, validate every configuration, check DIR; UsageError on bad input."""
    parser = build_parser(prog)
    args, pipeline_args = parser.parse_known_args(list(sys.argv[1:] if argv is None else argv))
    check_unknown_flags(pipeline_args, parser.long_flags(), "sweep")
    if (args.spec is None) == (args.spec_flag is None):
        raise UsageError("give the sweep spec once, as SPEC or as --spec, got "
                         f"SPEC={args.spec!r}, --spec={args.spec_flag!r}")
    spec_path = args.spec if args.spec is not None else args.spec_flag
    shards = parse_int("output_shards", args.output_shards, 1)
    choice = choose_runner(pipeline_args)
    if args.wave_seconds == "auto":
        wave = LOCAL_WAVE_SECONDS if choice.local else 0.0
    else:
        try:
            wave = float(args.wave_seconds)
        except ValueError:
            raise UsageError(f"wave_seconds must be a number >= 0 or 'auto', got wave_seconds={args.wave_seconds!r}") from None
        if not wave >= 0:
            raise UsageError(f"wave_seconds must be a number >= 0 or 'auto', got wave_seconds={args.wave_seconds!r}")
    try:
        max_hours = check_float("max_cpu_hours", args.max_cpu_hours, low=0.0, low_open=True)
    except ValueError as err:
        raise UsageError(str(err)) from None
    workers = parallelism(pipeline_args)
    configs = spec_mod.load(spec_path, workers.workers)
    if choice.local:  # the workers are this machine: a backend it cannot run is refused now, auto decided now
        try:
            configs = local_backends(configs)
        except ValueError as err:
            raise UsageError(f"sweep spec: {err}") from None
    output = expand_output(args.output)
    check_output_reachable("output", output, choice)
    check_filesystem("output", output, choice)  # the sweep reads its parts here to resume (gs:// needs [gcp])
    if not args.dry_run:  # the runner as certify checks it (Dataflow's libraries, a job endpoint that answers)
        check_runner_ready(choice)
    if not args.dry_run:  # a dry run writes nothing, not even DIR
        check_writable_dir("output", output)
        check_writable_dir("output", join(output, PARTS_DIR), shown=output)
    if shards > MAX_OUTPUT_SHARDS:
        raise UsageError(f"output_shards must be <= {MAX_OUTPUT_SHARDS} (one Parquet file each), got "
                         f"output_shards={shards}; use fewer output shards")
    for path in results_paths(output, shards):
        if is_local(path) and os.path.isdir(path):
            raise UsageError(f"output holds a directory where the results file goes: {path!r} "
                             f"(output={output!r}); remove it or choose another --output")
    return SweepJob(tuple(configs), output, args.format, shards, wave, not args.no_progress, choice,
                    args.dry_run, max_hours, workers)


def local_backends(configs: Sequence[CertifyConfig]) -> list[CertifyConfig]:
    """For a local runner: refuse ``backend: jax`` without JAX (before any directory or pipeline exists),
    and decide ``auto`` here, so that ``backend: [auto, numpy]`` on a machine without a GPU is one
    configuration (one config_id, one set of rows), not two identical ones."""
    out: dict[str, CertifyConfig] = {}
    for config in configs:
        backends.check_available(config)
        here = backends.resolved_here(config)
        if here != config.backend:
            config = dataclasses.replace(config, backend=here)
        out.setdefault(config.config_id, config)
    return list(out.values())


def pending(job: SweepJob) -> list[CertifyConfig]:
    """Configurations without a complete part in ``DIR/parts``, in config_id order."""
    todo = [c for c in job.configs if read_part(job.output, c) is None]
    return sorted(todo, key=lambda c: c.config_id)


def config_seconds(config: CertifyConfig) -> float:
    return sum(estimated_seconds(config, m) if m.is_monte_carlo else ANALYTIC_SECONDS for m in config.resolved)


def waves(configs: Sequence[CertifyConfig], wave_seconds: float) -> list[list[CertifyConfig]]:
    """Consecutive groups of about ``wave_seconds`` estimated seconds (0: one group); never empty."""
    if wave_seconds <= 0 or not configs:
        return [list(configs)]
    out: list[list[CertifyConfig]] = [[]]
    budget = 0.0
    for config in configs:
        if out[-1] and budget >= wave_seconds:
            out.append([])
            budget = 0.0
        out[-1].append(config)
        budget += config_seconds(config)
    return out


def build(pipeline: beam.Pipeline, job: SweepJob, batch: Sequence[CertifyConfig], assemble: bool) -> None:
    """Compute ``batch`` into parts; with ``assemble``, then write the results file(s) of the sweep."""
    progress = None
    if job.progress and job.choice.progress_mode != "off" and batch:
        progress = ProgressReporter(job.choice.progress_mode, total_samples(batch))
    written = (
        pipeline
        | "Configurations" >> beam.Create(list(batch))
        | "Certify" >> CertifyConfigs(progress)
        | "WriteParts" >> beam.ParDo(WritePartFn(job.output))
    )
    if assemble:
        written | "AssembleResults" >> AssembleResults(job.output, job.configs, job.output_shards)


def run(argv: Sequence[str] | None = None, *, wait: bool = True, stdout: TextIO | None = None,
        prog: str = PROG) -> PipelineResult | None:
    """Run the sweep; returns the PipelineResult of the last (assembling) pipeline run.

    ``--dry-run``: print the plan (:mod:`pipelines.plan`) and return None. Past ``--max-cpu-hours`` of
    estimated single-core time the sweep is refused (UsageError) before any pipeline starts.

    With ``wait=False`` (flex templates) the sweep runs as one job and is not waited for.
    """
    job = prepare(argv, prog)
    todo = pending(job)
    if job.plan_only:
        print_plan(todo, stdout if stdout is not None else sys.stdout, reused=len(job.configs) - len(todo),
                   workers=job.workers)
        return None
    try:
        check_cpu_hours(todo, job.max_cpu_hours)
    except ValueError as err:
        raise UsageError(str(err)) from None
    batches = waves(todo, job.wave_seconds if wait else 0.0)
    print(f"epscert: sweep of {len(job.configs)} configurations: {len(job.configs) - len(todo)} complete "
          f"in {join(job.output, PARTS_DIR)}, {len(todo)} to compute in {len(batches)} pipeline run(s)",
          file=sys.stderr)
    result = None
    for index, batch in enumerate(batches):
        last = index == len(batches) - 1
        if len(batches) > 1:
            print(f"epscert: wave {index + 1}/{len(batches)}: {len(batch)} configurations", file=sys.stderr)
        pipeline = make_pipeline(job.choice)
        build(pipeline, job, batch, assemble=last)
        result = run_pipeline(pipeline, job.choice)
        if last and not wait:
            return result
        result.wait_until_finish()
        if result.state != PipelineState.DONE:
            return result
    assert result is not None
    paths = results_paths(job.output, job.output_shards)
    stream = stdout if stdout is not None else sys.stdout
    if job.fmt == "summary":
        rows = sum(read_table(p).num_rows for p in paths)
        print(f"{len(job.configs)} configurations ({len(job.configs) - len(todo)} reused, {len(todo)} computed), "
              f"{rows} rows in {paths[0] if len(paths) == 1 else join(job.output, 'results-*.parquet')}",
              file=stream)
    else:
        rows = [row for p in paths for row in read_table(p).to_pylist()]
        print_rows(rows, job.fmt, stream, {c.config_id for c in job.configs})
    return result


def main(argv: Sequence[str] | None = None, prog: str = PROG) -> int:
    """Console entry: 0 on success, 2 on bad input (one line on stderr, no traceback)."""
    try:
        result = run(argv, prog=prog)
    except UsageError as err:
        return report_usage_error(prog, err)
    return 0 if result is None or result.state == PipelineState.DONE else 1


if __name__ == "__main__":
    sys.exit(main(prog="python -m pipelines.sweep"))
