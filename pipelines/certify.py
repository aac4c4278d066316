"""``epscert certify``: one configuration, many shards, and its analytic baselines in one table.

Graph: Create(configurations) -> CertifyConfigs (shards -> RunShards -> CombinePerKey(merge)
-> finalise, with the analytic methods and baselines in a parallel branch) -> one Parquet
file, written atomically. Locally the rows are then printed as a table or as JSON lines.

    python -m pipelines.certify --sampler balls_and_bins --sigma 0.35 --steps 1000 \
        --epsilons 1,2,4,8 --method importance --samples 1000000 --output results.parquet

A matrix mechanism (DP-FTRL / BandMF, :mod:`pipelines.strategy_flags`): ``--c-col`` (with
``--iterations``) or ``--strategy-matrix``, and ``--cycle-length``; its baselines are its own
deterministic bounds (:func:`epscert.results.baselines.baseline_tasks`).

Flags this module does not know go to Beam's PipelineOptions (``--runner``,
``--direct_num_workers``, ``--job_endpoint``, Dataflow flags...).
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from typing import Sequence, TextIO

import apache_beam as beam
from apache_beam.options.pipeline_options import TestOptions
from apache_beam.runners.runner import PipelineResult, PipelineState

from epscert.results.baselines import baseline_tasks
from epscert.results.cost import (
    CERTIFY_MAX_CPU_HOURS, MAX_BASELINE_SECONDS, MAX_PLD_BYTES, Cost, check_cpu_hours, check_pld_memory, config_cost,
    format_bytes, format_seconds,
)
from epscert.config import (
    DEFAULT_ERROR_PROB, DEFAULT_PLD_DISCRETIZATION, DEFAULT_SAMPLES, CertifyConfig, Direction, Method, Sampler,
    check_float,
)
from epscert.config.mechanism import DEFAULT_SAMPLER, MATRIX_SAMPLER
from epscert.montecarlo import backends
from epscert.results.scaling import auto_shards
from pipelines.options import (
    ArgumentParser, RunnerChoice, UsageError, check_output_reachable, check_unknown_flags,
    check_writable_file, choose_runner, make_pipeline, parse_floats, parse_int, report_usage_error, run_pipeline,
)
from pipelines.certify_waves import run_waves
from pipelines.strategy_flags import add_strategy_flags, strategy_args
from pipelines.parallelism import Parallelism, parallelism
from pipelines.output import FORMATS, print_table_file
from pipelines.plan import print_plan
from transforms.certify import CertifyConfigs
from transforms.progress import ProgressReporter
from transforms.shards import total_samples
from transforms.sinks import WriteResults, read_table

PROG = "epscert certify"


def _names(kind) -> str:
    return ", ".join(m.value for m in kind)


def build_parser(prog: str = PROG) -> ArgumentParser:
    parser = ArgumentParser(
        prog=prog, beam=True,
        description="Certify delta(epsilon) of one DP-SGD configuration, or of a matrix mechanism (BandMF: "
                    "--c-col or --strategy-matrix), with sharded Monte Carlo sampling, next to its analytic baselines. Flags not listed here go to Beam "
                    "(e.g. --runner, --direct_num_workers=2 --direct_running_mode=multi_processing). "
                    "Hyphenated flags also take Beam-style underscores (--error_prob).",
    )
    add = parser.add_argument
    add("--sampler", default=None, help=f"batch sampler: {_names(Sampler)} (default: "
        f"{DEFAULT_SAMPLER.value}; {MATRIX_SAMPLER.value} with a strategy)")
    add("--sigma", "--noise-multiplier", "--noise_multiplier", required=True,
        help="noise multiplier sigma > 0 (required)")
    add("--steps", default=None, help="steps T per epoch, dataset_size // batch_size (required; with a "
        "strategy, the cycle length b, as --cycle-length)")
    add("--epochs", default="1", help="epochs E (default: %(default)s)")
    add("--epsilons", default="1", help="comma-separated epsilon grid, e.g. 1,2,4,8 (default: %(default)s)")
    add("--method", default=Method.AUTO.value, help="comma-separated methods: "
        f"{_names(Method)} (default: %(default)s)")
    add("--samples", default=str(DEFAULT_SAMPLES), help="Monte Carlo samples per direction "
        "(default: %(default)s)")
    add("--error-prob", "--error_prob", default=str(DEFAULT_ERROR_PROB),
        help="failure probability beta of the upper confidence bound "
        "(default: %(default)s)")
    add("--seed", default="0", help="root seed, a non-negative integer (default: %(default)s)")
    add("--direction", default=Direction.BOTH.value, help=f"adjacency direction: {_names(Direction)} "
        "(default: %(default)s)")
    add("--orders", default=None, help="order-statistic ranks as start,stop,step triples, e.g. 1,100,1 "
        "(default: chosen from T)")
    add("--shards", default="auto", help="shard count, or 'auto': several shards per worker of the runner "
        "(--direct_num_workers, Dataflow --max_num_workers/--num_workers, Flink --parallelism, Spark local[N]), "
        "each of 2 to 20 s of one core; the rows do not depend on the shard count (default: %(default)s)")
    add("--pld-discretization", "--pld_discretization", default=str(DEFAULT_PLD_DISCRETIZATION),
        help="loss step of the PLD baselines (Poisson bracket, sliced lower bounds; default: %(default)s)")
    add("--dataset-size", "--dataset_size", default=None, help="dataset size n, for truncated batches "
        "(with --max-batch-size; poisson and balls_and_bins only) (default: no truncation)")
    add("--max-batch-size", "--max_batch_size", default=None, help="largest batch B the trainer accepts; "
        "larger Binomial batches are truncated and the penalty is added to delta (SPEC §9) "
        "(default: no truncation)")
    add_strategy_flags(parser)
    add("--backend", default="numpy", help="where Monte Carlo kernels run: numpy (one core), jax (JAX's default "
        "device, float64), auto (jax when a GPU is visible and it has the kernel) (default: %(default)s)")
    add("--output", default=None, help="Parquet file to write (results schema); required on remote runners "
        "(default: a temporary file, removed after printing)")
    add("--format", default="table", choices=FORMATS, help="what to print on stdout: a table or one JSON "
        "object per row (default: %(default)s)")
    add("--no-baselines", "--no_baselines", action="store_true", help="skip the analytic baselines branch")
    add("--target-rel-width", "--target_rel_width", default=None, help="run Monte Carlo methods in waves of "
        "doubling samples (the first of --samples) until UCB/LCB <= 1 + W; beta_k = beta 2^-(k+1) in wave k; "
        "each wave is one Beam job (default: one run of --samples)")
    add("--max-samples", "--max_samples", default=None, help="sample budget of --target-rel-width "
        "(default: 64 x --samples)")
    add("--max-cpu-hours", "--max_cpu_hours", default=str(CERTIFY_MAX_CPU_HOURS), metavar="H",
        help="refuse a run estimated above H hours of one core, before any work (never prompts) "
             "(default: %(default)s)")
    add("--no-progress", "--no_progress", action="store_true", help="no progress lines on stderr")
    add("--dry-run", action="store_true", help="print the configurations, samples, estimated CPU time and "
        "peak memory, then exit without running anything (Beam's --dry_run=True builds the job instead)")
    return parser


def config_from_args(args, workers: int = 1) -> CertifyConfig:
    """The validated configuration, with the shard count resolved ('auto' -> epscert.results.scaling.auto_shards
    for ``workers`` workers)."""
    methods = tuple(m.strip() for m in args.method.split(",") if m.strip()) or (args.method,)
    strategy, sampler, steps = strategy_args(args)
    config = CertifyConfig(
        sampler=sampler, sigma=args.sigma, steps=steps, strategy=strategy,
        epochs=parse_int("epochs", args.epochs, 1), epsilons=parse_floats("epsilons", args.epsilons),
        methods=methods, samples=parse_int("samples", args.samples, 1), error_prob=args.error_prob,
        seed=parse_int("seed", args.seed), direction=args.direction, orders=args.orders, shards=1,
        pld_discretization=args.pld_discretization,
        dataset_size=None if args.dataset_size is None else parse_int("dataset_size", args.dataset_size, 1),
        max_batch_size=None if args.max_batch_size is None else parse_int("max_batch_size", args.max_batch_size, 1),
        backend=args.backend,
    )
    return with_shards(config, args.shards, workers)


def with_shards(config: CertifyConfig, shards: str | int, workers: int = 1) -> CertifyConfig:
    """``config`` with ``shards`` set: an integer, or 'auto' (the largest auto_shards of its methods on
    ``workers`` workers). The rows are the same for every shard count (SPEC §10)."""
    if str(shards).strip().lower() == "auto":
        count = max([auto_shards(config, m, workers) for m in config.resolved if m.is_monte_carlo], default=1)
    else:
        count = parse_int("shards", str(shards), 1)
    return config if count == config.shards else dataclasses.replace(config, shards=count)


def job_configs(config: CertifyConfig, baselines: bool) -> list[CertifyConfig]:
    """``config`` and (optionally) its baselines, one per config_id, skipping methods ``config`` runs."""
    configs = {config.config_id: config}
    if baselines:
        own = {(config.sampler, m) for m in config.resolved}
        for base, method in baseline_tasks(config):
            if (base.sampler, method) not in own:
                configs.setdefault(base.config_id, base)
    return list(configs.values())


@dataclass(frozen=True)
class CertifyJob:
    config: CertifyConfig
    configs: tuple[CertifyConfig, ...]
    output: str | None
    fmt: str
    progress: bool
    choice: RunnerChoice
    target_rel_width: float | None = None
    max_samples: int | None = None
    plan_only: bool = False
    workers: Parallelism = Parallelism(1, "not given", False)


def prepare(argv: Sequence[str] | None = None, prog: str = PROG) -> CertifyJob:
    """Parse and validate everything; raises UsageError before any pipeline is built."""
    parser = build_parser(prog)
    args, pipeline_args = parser.parse_known_args(list(sys.argv[1:] if argv is None else argv))
    check_unknown_flags(pipeline_args, parser.long_flags(), "certify")
    workers = parallelism(pipeline_args)
    try:
        config = config_from_args(args, workers.workers)
    except ValueError as err:
        raise parser.explain(err) from None
    width, budget = None, None
    if args.target_rel_width is not None:
        try:
            width = check_float("target_rel_width", args.target_rel_width, low=0.0, low_open=True)
        except ValueError as err:
            raise UsageError(str(err)) from None
        budget = 64 * config.samples if args.max_samples is None else parse_int(
            "max_samples", args.max_samples, config.samples)
    elif args.max_samples is not None:
        raise UsageError(f"--max-samples needs --target-rel-width, got max_samples={args.max_samples!r}")
    choice = choose_runner(pipeline_args)
    if choice.local:  # the workers are this machine: a backend it cannot run is refused before the job starts
        try:
            backends.check_available(config)
        except ValueError as err:
            raise UsageError(str(err)) from None
    if args.output is None and not choice.local:
        raise UsageError(f"--output is required with runner={choice.name!r}")
    if args.output is not None:
        check_output_reachable("output", args.output, choice)
        check_writable_file("output", args.output)
    configs = tuple(job_configs(config, not args.no_baselines))
    check_costs(config, configs)
    try:  # the same guard as epscert.certify(max_cpu_hours=...): the estimate and the way out, before any work
        max_hours = check_float("max_cpu_hours", args.max_cpu_hours, low=0.0, low_open=True)
        planned = config if width is None else dataclasses.replace(config, samples=2 * budget)
        if not args.dry_run:
            check_cpu_hours(config_cost(planned), max_hours, f"this run (samples={planned.samples})",
                            "lower --samples, or raise --max-cpu-hours (see the estimate with --dry-run)")
    except ValueError as err:
        raise UsageError(str(err)) from None
    return CertifyJob(config, configs, args.output, args.format, not args.no_progress, choice, width, budget,
                      args.dry_run, workers)


def check_costs(config: CertifyConfig, configs: Sequence[CertifyConfig]) -> None:
    """Refuse, before any sampling, PLD work past the caps of :mod:`epscert.results.cost`.

    The methods asked for may use up to MAX_PLD_BYTES; the baselines (context, asked for by default)
    also at most MAX_BASELINE_SECONDS of one core, with ``--no-baselines`` as the way out.
    """
    try:
        check_pld_memory(config, "--pld-discretization")
    except ValueError as err:
        raise UsageError(str(err)) from None
    baselines = [c for c in configs if c.config_id != config.config_id]
    cost = Cost()
    for base in baselines:
        cost = cost + config_cost(base)
    over = max(cost.seconds / MAX_BASELINE_SECONDS, cost.peak_bytes / MAX_PLD_BYTES)
    if over > 1:
        raise UsageError(
            f"the analytic baselines at sigma={config.sigma:g}, steps={config.steps}, epochs={config.epochs}, "
            f"pld_discretization={config.pld_discretization:g} need about {format_seconds(cost.seconds)} of one "
            f"core and {format_bytes(cost.peak_bytes)} of memory (PLD grids of about {cost.points:.2g} "
            f"grid points; limits {format_seconds(MAX_BASELINE_SECONDS)} and {format_bytes(MAX_PLD_BYTES)}); "
            f"skip them with --no-baselines, or use a coarser --pld-discretization "
            f"(>= {config.pld_discretization * over:.2g})")


def build(pipeline: beam.Pipeline, job: CertifyJob, output: str) -> None:
    """Add the certify graph to ``pipeline``, writing the results to ``output``."""
    progress = None
    if job.progress and job.choice.progress_mode != "off":
        progress = ProgressReporter(job.choice.progress_mode, total_samples(job.configs))
    (
        pipeline
        | "Configurations" >> beam.Create(list(job.configs))
        | "Certify" >> CertifyConfigs(progress)
        | "WriteResults" >> WriteResults(output)
    )


def run(argv: Sequence[str] | None = None, *, wait: bool = True, stdout: TextIO | None = None,
        prog: str = PROG) -> PipelineResult | None:
    """Run the certify job; print the rows on ``stdout`` (default sys.stdout) when it finishes here.

    With ``--dry-run``: print the plan and its estimates (:mod:`pipelines.plan`), return None.
    """
    job = prepare(argv, prog)
    if job.plan_only:
        print_plan(job.configs, stdout if stdout is not None else sys.stdout, workers=job.workers)
        return None
    tmpdir = None if job.output is not None else tempfile.mkdtemp(prefix="epscert-certify-")
    output = job.output if tmpdir is None else os.path.join(tmpdir, "results.parquet")
    try:
        if job.target_rel_width is not None:
            pipeline = run_waves(job, lambda: make_pipeline(job.choice), output)
        else:
            pipeline = make_pipeline(job.choice)
            build(pipeline, job, output)
        result = run_pipeline(pipeline, job.choice)
        if not wait:
            return result
        result.wait_until_finish()
        dry_run = bool(job.choice.options.view_as(TestOptions).dry_run)
        if dry_run:
            print(f"epscert: dry run on {job.choice.name}: the job was built, not run", file=sys.stderr)
        elif result.state == PipelineState.DONE:
            table = read_table(output)
            print_table_file(table, job.fmt, stdout if stdout is not None else sys.stdout, {job.config.config_id})
            if job.output is not None:
                print(f"epscert: wrote {table.num_rows} rows to {job.output}", file=sys.stderr)
        return result
    finally:
        if tmpdir is not None and wait:
            shutil.rmtree(tmpdir, ignore_errors=True)


def main(argv: Sequence[str] | None = None, prog: str = PROG) -> int:
    """Console entry: 0 on success, 2 on bad input (one line on stderr, no traceback)."""
    try:
        result = run(argv, prog=prog)
    except UsageError as err:
        return report_usage_error(prog, err)
    return 0 if result is None or result.state in (PipelineState.DONE, None) else 1


if __name__ == "__main__":
    sys.exit(main(prog="python -m pipelines.certify"))
