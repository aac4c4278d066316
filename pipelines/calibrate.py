"""``epscert calibrate``: the smallest σ whose certified ε(δ) meets a target, as Beam jobs.

On the Balls-and-Bins PLD bracket (``--method auto`` or ``bracket_upper``, the default for Balls-and-Bins)
the search samples nothing: it runs in this process (without loading Beam unless runner flags or
``--output`` need it), to 0.1% of the optimal σ (:mod:`epscert.inverse.sigma_search`). With a Monte
Carlo method every δ(ε_t) evaluation of the σ search, and the final fresh-seed certificate, is one certify
Beam job on the chosen runner (shards -> exact sums -> merge -> rows), so calibration runs
wherever certify runs: in process, multi-process, Portable (Flink/Spark job servers), and on
remote runners with a shared ``--temp_location`` for the rows of each evaluation. The search logic and its guarantees are :func:`epscert.inverse.calibrate.calibrate_sigma`.

    epscert calibrate --target-epsilon 8 --delta 1e-5 --sampler balls_and_bins --steps 1000 \
        --epochs 1 --method importance --samples 100000
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import uuid
from typing import Sequence

from epscert.inverse.best import outward_text
from epscert.inverse.calibrate import calibrate_sigma, uses_bracket
from epscert.config import (
    DEFAULT_ERROR_PROB, DEFAULT_SAMPLES, MAX_EPSILON, CertifyConfig, Direction, Method, Sampler, check_float,
)
from epscert.progress import print_to_stderr
from epscert.results.tables import certify_config
from pipelines.args import ArgumentParser, UsageError, parse_floats, parse_int, report_usage_error
from pipelines.epsilon import steps_from_args
from pipelines.output import print_rows

PROG = "epscert calibrate"


def build_parser(prog: str = PROG) -> ArgumentParser:
    parser = ArgumentParser(prog=prog, beam=True, description="Smallest noise multiplier sigma whose certified "
                            "epsilon(delta) <= the target, certified by a fresh-seed run. Flags not listed "
                            "here go to Beam (e.g. --runner).")
    add = parser.add_argument
    add("--target-epsilon", "--target_epsilon", "--target-eps", required=True, help="target epsilon (>= 0)")
    add("--delta", "--target-delta", "--target_delta", required=True, help="target delta in (0, 1)")
    add("--sampler", default=Sampler.BALLS_AND_BINS.value,
        help=f"batch sampler: {', '.join(s.value for s in Sampler)} (default: %(default)s)")
    add("--steps", default=None, help="steps T per epoch (or --dataset-size and --batch-size)")
    add("--batch-size", "--batch_size", default=None, help="batch size b, with --dataset-size: steps per epoch "
        "T = n // b (as in 'epscert epsilon')")
    add("--epochs", default="1", help="epochs E (default: %(default)s)")
    add("--method", default=Method.AUTO.value, help="a Monte Carlo method, or bracket_upper; auto: the PLD "
        "bracket for Balls-and-Bins (E <= 1000, T <= 10^6), else a Monte Carlo method (default: %(default)s)")
    add("--samples", default=str(DEFAULT_SAMPLES),
        help="samples of the certificate run (default: %(default)s)")
    add("--search-samples", "--search_samples", default=None,
        help="samples per search evaluation (default: samples / 4)")
    add("--error-prob", "--error_prob", default=str(DEFAULT_ERROR_PROB),
        help="failure probability beta (default: %(default)s)")
    add("--seed", default="0", help="search seed (default: %(default)s)")
    add("--certify-seed", "--certify_seed", default=None, help="seed of the certificate run (default: seed + 1)")
    add("--direction", default=Direction.BOTH.value, help="remove, add or both (default: %(default)s)")
    add("--orders", default=None, help="order-statistic ranks as start,stop,step triples")
    add("--shards", default="auto", help="shards per evaluation, or 'auto' (default: %(default)s)")
    add("--dataset-size", "--dataset_size", default=None, help="dataset size n: with --batch-size it gives the "
        "steps T = n // b; with --max-batch-size it is the n of truncated batches")
    add("--max-batch-size", "--max_batch_size", default=None, help="truncation cap B of Binomial batches (with "
        "--dataset-size; the penalty of SPEC §9 is added to delta) (default: no truncation)")
    add("--output", default=None, help="Parquet file for the certificate rows (default: none)")
    add("--format", default="table", choices=("table", "json"), help="stdout format (default: %(default)s)")
    add("--no-progress", "--no_progress", action="store_true", help="no progress lines on stderr")
    return parser


def temp_base(choice) -> str | None:
    """Where remote runners leave each evaluation's rows: ``--temp_location`` (None: local temp dir)."""
    from apache_beam.options.pipeline_options import GoogleCloudOptions  # noqa: PLC0415 (Beam only when used)

    from transforms.sinks import is_local  # noqa: PLC0415

    if choice.local:
        return None
    location = choice.options.view_as(GoogleCloudOptions).temp_location
    if not location or is_local(location):
        raise UsageError(f"runner={choice.name!r} needs --temp_location on storage its workers and this machine "
                         f"share (e.g. gs://bucket/tmp), got temp_location={location!r}")
    return location


def beam_runner(choice):
    """A ``run(config) -> pyarrow.Table`` that computes one configuration as a Beam job.

    Local runners write the rows to a local temporary directory; remote runners (Dataflow, or a
    Flink/Spark cluster through their runners) to a fresh folder under ``--temp_location``.
    """
    import apache_beam as beam  # noqa: PLC0415 (Beam only when a job runs)
    from apache_beam.io.filesystems import FileSystems  # noqa: PLC0415

    from pipelines.options import make_pipeline, run_pipeline  # noqa: PLC0415
    from transforms.certify import CertifyConfigs  # noqa: PLC0415
    from transforms.sinks import WriteResults, join, read_table  # noqa: PLC0415

    base = temp_base(choice)

    def run(config: CertifyConfig):
        folder = tempfile.mkdtemp(prefix="epscert-calibrate-") if base is None else \
            join(base, f"epscert-calibrate-{uuid.uuid4().hex}")
        path = join(folder, "rows.parquet")
        try:
            pipeline = make_pipeline(choice)
            (pipeline | "Configuration" >> beam.Create([config]) | "Certify" >> CertifyConfigs(None)
             | "Write" >> WriteResults(path))
            run_pipeline(pipeline, choice).wait_until_finish()
            return read_table(path)
        finally:
            if base is None:
                shutil.rmtree(folder, ignore_errors=True)
            elif FileSystems.exists(path):
                FileSystems.delete([path])

    return run


def main(argv: Sequence[str] | None = None, prog: str = PROG) -> int:
    parser = build_parser(prog)
    try:
        args, pipeline_args = parser.parse_known_args(list(sys.argv[1:] if argv is None else argv))
        choice = None
        if pipeline_args:  # runner flags: checked (and Beam loaded) only when there are some
            from pipelines.options import check_unknown_flags, choose_runner  # noqa: PLC0415

            check_unknown_flags(pipeline_args, parser.long_flags(), "calibrate")
            choice = choose_runner(pipeline_args)
            temp_base(choice)  # remote runners: a shared --temp_location, checked before any work
        eps_t = check_float("target_epsilon", parse_floats("target_epsilon", args.target_epsilon)[0], low=0.0,
                            low_open=False, high=MAX_EPSILON, high_open=False)
        delta_t = parse_floats("delta", args.delta)[0]
        truncated = args.max_batch_size is not None
        config = CertifyConfig(
            sampler=args.sampler, sigma=1.0, steps=steps_from_args(args, "calibrate"),
            epochs=parse_int("epochs", args.epochs, 1), epsilons=(eps_t,), methods=(args.method,),
            samples=parse_int("samples", args.samples, 1), error_prob=args.error_prob,
            seed=parse_int("seed", args.seed), direction=args.direction, orders=args.orders,
            dataset_size=parse_int("dataset_size", args.dataset_size, 1) if truncated else None,
            max_batch_size=parse_int("max_batch_size", args.max_batch_size, 1) if truncated else None,
        )
        bracket = uses_bracket(config)
        if not (bracket or any(m.is_monte_carlo for m in config.resolved)):
            raise UsageError(f"calibrate needs a Monte Carlo method or bracket_upper (Balls-and-Bins), "
                             f"got method={args.method!r}")
        search = None if args.search_samples is None else parse_int("search_samples", args.search_samples, 1)
        certify_seed = None if args.certify_seed is None else parse_int("certify_seed", args.certify_seed)
        run = certify_config  # the bracket: no sampling to distribute, computed here
        if not bracket or args.output is not None:  # Monte Carlo evaluations are Beam jobs; outputs may be URIs
            from pipelines.certify import with_shards  # noqa: PLC0415 (Beam only when used)
            from pipelines.options import check_writable_file, choose_runner  # noqa: PLC0415
            from pipelines.parallelism import parallelism  # noqa: PLC0415

            choice = choice or choose_runner([])
            config = with_shards(config, args.shards, parallelism(pipeline_args).workers) if not bracket else config
            if args.output is not None:
                check_writable_file("output", args.output)
            run = run if bracket else beam_runner(choice)
        result = calibrate_sigma(config, eps_t, delta_t, search_samples=search, certify_seed=certify_seed,
                                 run=run, progress=None if args.no_progress else print_to_stderr)
    except (UsageError, ValueError) as err:
        return report_usage_error(prog, err if isinstance(err, UsageError) else parser.explain(err))
    rows = result.certificate.to_pylist()
    summary = {
        "target_epsilon": eps_t, "target_delta": delta_t, "sampler": config.sampler.value, "steps": config.steps,
        "epochs": config.epochs, "sigma": result.sigma, "certified": result.certified,
        "method": result.method or config.resolved[0].value, "sigma_accuracy": result.sigma_accuracy,
        "failing_sigma": result.failing_sigma, "delta_upper_at_target": result.delta_upper,
        "certify_seed": rows[0]["seed"], "poisson_sigma": result.poisson_sigma,
        "deterministic_sigma": result.deterministic_sigma, "search_evaluations": len(result.search_sigmas),
        "search_seconds": round(result.search_seconds, 2), "certify_seconds": round(result.certify_seconds, 2),
    }
    if args.format == "json":
        print(json.dumps(summary))
    else:
        # every printed σ is one that suffices (rounded up) or one that fails (rounded down); the UCB and the accuracy
        # (a bound on the gap to the optimum) are rounded up: a σ copied from this summary into training still meets
        # the target
        shown = {"sigma_accuracy": lambda v: "-" if v is None else f"{outward_text(100 * v, up=True, digits=3)}% (optimum proven in "
                 f"({outward_text(result.failing_sigma, up=False, digits=6)}, "
                 f"{outward_text(result.sigma, up=True, digits=6)}])",
                 "delta_upper_at_target": lambda v: outward_text(v, up=True),
                 "failing_sigma": lambda v: "-" if v is None else outward_text(v, up=False, digits=6),
                 "poisson_sigma": lambda v: outward_text(v, up=True, digits=5),
                 "deterministic_sigma": lambda v: outward_text(v, up=True, digits=5),
                 "certify_seed": lambda v: "-" if v is None else str(v)}
        for key, value in summary.items():
            print(f"{key:28s} {shown.get(key, str)(value)}")
        print()
        print_rows(rows, "table", sys.stdout, {rows[0]["config_id"]})
    if args.output is not None:
        from transforms.sinks import write_rows  # noqa: PLC0415 (Beam's filesystems: local or a URI)

        write_rows(rows, args.output)
    if not result.certified:
        print(f"{prog}: the fresh-seed run did not certify sigma={result.sigma!r} (UCB "
              f"{outward_text(result.delta_upper, up=True, digits=6)} > delta {delta_t!r}); raise --samples or the target",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(prog="python -m pipelines.calibrate"))
