"""``epscert compare``: every accountant side by side for one (σ, T, E).

δ per ε (deterministic exact, Poisson PLD upper/lower, RDP and Fourier bracket, shuffle and
Balls-and-Bins lower bounds, Balls-and-Bins Monte Carlo mean and UCB) and, with ``--deltas``,
ε per δ. Computed in process (:func:`epscert.compare.compare_rows`).
"""

from __future__ import annotations

import math
import sys
from typing import Sequence

from epscert.compare import compare_rows, pivot
from epscert.config import DEFAULT_ERROR_PROB, DEFAULT_SAMPLES, CertifyConfig, Direction, Method
from epscert.compare import COMPARE_COLUMNS
from epscert.inverse.epsilon_at_delta import check_deltas
from epscert.progress import print_to_stderr
from pipelines.flags import FlagError, check_leftovers
from pipelines.options import (
    ArgumentParser, UsageError, check_writable_file, parse_floats, parse_int, report_usage_error,
)
from pipelines.output import bound_text, print_json
from transforms.sinks import write_rows

PROG = "epscert compare"


def build_parser(prog: str = PROG) -> ArgumentParser:
    parser = ArgumentParser(prog=prog, description="Side-by-side delta(epsilon) and epsilon(delta) of every "
                            "accountant for one configuration.")
    add = parser.add_argument
    add("--sigma", "--noise-multiplier", "--noise_multiplier", required=True, help="noise multiplier sigma > 0")
    add("--steps", required=True, help="steps T per epoch")
    add("--epochs", default="1", help="epochs E (default: %(default)s)")
    add("--epsilons", default="1,2,4,8", help="epsilon grid (default: %(default)s)")
    add("--deltas", "--delta", "--target-delta", "--target_delta", default=None, help="comma-separated deltas for the epsilon(delta) rows (default: none)")
    add("--method", default=Method.AUTO.value, help="Balls-and-Bins Monte Carlo method (default: %(default)s)")
    add("--samples", default=str(DEFAULT_SAMPLES),
        help="Monte Carlo samples per direction (default: %(default)s)")
    add("--error-prob", "--error_prob", default=str(DEFAULT_ERROR_PROB),
        help="failure probability beta (default: %(default)s)")
    add("--seed", default="0", help="root seed (default: %(default)s)")
    add("--direction", default=Direction.BOTH.value, help="remove, add or both (default: %(default)s)")
    add("--no-fft", "--no_fft", action="store_true", help="skip the Fourier-accountant bracket")
    add("--output", default=None, help="also write every row to this Parquet file")
    add("--no-progress", "--no_progress", action="store_true", help="no progress lines on stderr")
    add("--format", default="table", choices=("table", "json"),
        help="stdout: the side-by-side table, or every row as one JSON object per line (default: %(default)s)")
    return parser


def _cell(value, up: bool | None = None) -> str:
    """Four significant digits: a bound rounded away from the side it bounds (``up`` True for an upper bound, False for
    a lower one: :func:`~epscert.inverse.best.outward_text`), an estimate (None) to the nearest."""
    if value is None:
        return "-"
    if isinstance(value, str):
        return value
    if not math.isfinite(value):
        return str(value)
    if up is not None:
        return bound_text(value, up, 4, 1e-3)
    return f"{value:.4g}" if value == 0 or 1e-3 <= abs(value) < 1e4 else f"{value:.3e}"


def column_sides() -> list[bool | None]:
    """The side of each column of :func:`~epscert.compare.pivot`'s table: the quantity's label (None), then per
    :data:`~epscert.compare.COMPARE_COLUMNS` up for an upper bound (the exact deterministic column reads its
    bracket's upper side), down for a lower bound, None for the Monte Carlo mean; the last column is text. An ε(δ)
    row reads the same sides (ε's upper bound where δ's is)."""
    sides = {"delta_upper": True, "delta_lower": False}
    return [None] + [sides.get(column) for _, _, _, column in COMPARE_COLUMNS] + [None]


def main(argv: Sequence[str] | None = None, prog: str = PROG) -> int:
    parser = build_parser(prog)
    try:
        args, leftover = parser.parse_known_args(list(sys.argv[1:] if argv is None else argv))
        try:
            check_leftovers(leftover, "compare", parser.long_flags(), beam=False)
        except FlagError as err:
            raise UsageError(str(err)) from None
        config = CertifyConfig(
            sampler="balls_and_bins", sigma=args.sigma, steps=parse_int("steps", args.steps, 1),
            epochs=parse_int("epochs", args.epochs, 1), epsilons=parse_floats("epsilons", args.epsilons),
            methods=(args.method,), samples=parse_int("samples", args.samples, 1), error_prob=args.error_prob,
            seed=parse_int("seed", args.seed), direction=args.direction,
        )
        if not all(m.is_monte_carlo for m in config.resolved):
            raise UsageError(f"method must be a Monte Carlo method, got method={args.method!r}")
        deltas = check_deltas(parse_floats("deltas", args.deltas)) if args.deltas else ()
        if args.output is not None:
            check_writable_file("output", args.output)
        rows = compare_rows(config, deltas, fft=not args.no_fft,
                            progress=None if args.no_progress else print_to_stderr)
    except (UsageError, ValueError) as err:
        return report_usage_error(prog, err if isinstance(err, UsageError) else parser.explain(err))
    if args.format == "json":
        print_json(rows, sys.stdout)
        if args.output is not None:
            write_rows(rows, args.output)
        return 0
    header, table = pivot(rows, config.direction.value)
    sides = column_sides()
    cells = [header] + [[_cell(v, up) for v, up in zip(line, sides)] for line in table]
    widths = [max(len(line[i]) for line in cells) for i in range(len(header))]
    print(f"σ={config.sigma:g}, T={config.steps}, E={config.epochs}, direction={config.direction.value}, "
          f"Monte Carlo: {config.resolved[0].value}, {config.samples} samples, β={config.error_prob:g}")
    for line in cells:
        print("  ".join(c.rjust(w) for c, w in zip(line, widths)))
    if args.output is not None:
        write_rows(rows, args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main(prog="python -m pipelines.compare"))
