"""Fourier-accountant results as rows of the results schema, and the ``epscert fft`` command.

Rows (one per direction, ε and side): sampler ``heterogeneous``, method ``fft_upper`` /
``fft_lower``, bound ``fft_koskela``, guarantee ``upper_bound`` / ``lower_bound``, steps = the
number of compositions k, epochs = 1, sigma = the smallest noise multiplier in the schedule
(σ/sensitivity; NaN if none), config_id = the first 16 hex digits of the sha256 of the
canonical JSON of (schedule, grid, direction, ε values).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
from typing import Sequence

from epscert._version import __version__
from epscert.fft.choose import choose_grid
from epscert.fft.compose import FFTBounds, fft_bounds
from epscert.fft.grid import Grid
from epscert.fft.mechanisms import Schedule
from epscert.fft.plancherel import RunningBounds, running_bounds
from epscert.names import Direction
from epscert.schema import COLUMNS

SAMPLER = "heterogeneous"
BOUND = "fft_koskela"
#: Default largest grid of the command line when the grid is chosen a priori.
CLI_MAX_SIZE = 2**22
#: Default target error of the command line's a-priori grid choice.
CLI_TARGET_ERROR = 1e-6


def config_id(schedule: Schedule, grid: Grid, direction: Direction, epsilons) -> str:
    """Stable 16-hex-digit id of the request (same inputs -> same id, any machine)."""
    payload = {"schedule": schedule.to_dict(), "grid": grid.to_dict(), "direction": Direction(direction).value,
               "epsilons": [float(e) for e in epsilons], "accountant": "fft"}
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _row(**values) -> dict:
    row = {c: None for c in COLUMNS}
    unknown = set(values) - set(COLUMNS)
    if unknown:
        raise ValueError(f"not results-schema columns: {sorted(unknown)}")
    row.update(values)
    if "quantity" in COLUMNS and row["quantity"] is None:
        row["quantity"] = "delta_at_epsilon"
    return row


def _side_rows(common: dict, direction: Direction, eps: float, lower: float, upper: float) -> list[dict]:
    return [
        _row(**common, method="fft_upper", direction=direction.value, epsilon=eps, delta=upper,
             delta_upper=upper, guarantee="upper_bound"),
        _row(**common, method="fft_lower", direction=direction.value, epsilon=eps, delta=lower,
             delta_lower=lower, guarantee="lower_bound"),
    ]


def to_rows(bounds: FFTBounds) -> list[dict]:
    """Rows in the results schema: per direction (REMOVE, ADD, and BOTH when asked) and ε."""
    cid = config_id(bounds.schedule, bounds.grid, bounds.direction, bounds.epsilons)
    common = dict(config_id=cid, sampler=SAMPLER, sigma=bounds.schedule.min_sigma, steps=bounds.schedule.steps,
                  epochs=1, bound=BOUND, wall_seconds=float(bounds.wall_seconds), epscert_version=__version__)
    rows: list[dict] = []
    wanted = bounds.direction.parts() + ((Direction.BOTH,) if bounds.direction is Direction.BOTH else ())
    for direction in wanted:
        bracket = bounds.brackets[direction]
        for i, eps in enumerate(bracket.epsilons.tolist()):
            rows += _side_rows(common, direction, eps, float(bracket.lower[i]), float(bracket.upper[i]))
    return rows


def running_rows(schedule: Schedule, grid: Grid, running: RunningBounds) -> list[dict]:
    """Rows of a running bracket: one pair per checkpoint and ε, ``steps`` = the checkpoint."""
    cid = config_id(schedule, grid, running.direction, running.epsilons)
    rows: list[dict] = []
    for t, step in enumerate(running.steps.tolist()):
        common = dict(config_id=cid, sampler=SAMPLER, sigma=schedule.min_sigma, steps=int(step), epochs=1,
                      bound=BOUND, wall_seconds=float(running.wall_seconds), epscert_version=__version__)
        for e, eps in enumerate(running.epsilons.tolist()):
            rows += _side_rows(common, running.direction, eps, float(running.lower[t, e]),
                               float(running.upper[t, e]))
    return rows


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of exiting, so bad flags give one line and exit code 2."""

    def error(self, message: str):  # type: ignore[override]
        raise ValueError(message)


def _floats(name: str, text: str) -> list[float]:
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ValueError(f"{name} must be comma-separated numbers, got {name}={text!r}") from None
    if not values:
        raise ValueError(f"{name} must hold at least one number, got {name}={text!r}")
    return values


def parse_or_exit_code(parser: argparse.ArgumentParser, argv) -> argparse.Namespace | int:
    """Parsed flags, or the exit code of ``--help`` (argparse exits after printing help)."""
    try:
        return parser.parse_args(argv)
    except SystemExit as stop:
        return int(stop.code or 0)


def fft_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="epscert fft", description="Certified δ(ε) bracket of a heterogeneous "
                     "composition (Fourier accountant, Koskela et al.).")
    parser.add_argument("--schedule", required=True, help="JSON file: {\"mechanisms\": [{\"mechanism\": "
                        "\"subsampled_gaussian\", \"q\": 0.01, \"sigma\": 1.0, \"count\": 1000}, ...]}")
    parser.add_argument("--epsilons", default="1,2,4,8", help="comma-separated ε values (default 1,2,4,8)")
    parser.add_argument("--direction", default="both", choices=[d.value for d in Direction])
    parser.add_argument("--half-width", type=float, default=None, help="grid half-width L (with --size)")
    parser.add_argument("--size", type=int, default=None, help="grid size n, even (with --half-width)")
    parser.add_argument("--target-error", type=float, default=CLI_TARGET_ERROR,
                        help="a-priori grid choice when --half-width/--size are not given")
    parser.add_argument("--max-size", type=int, default=CLI_MAX_SIZE, help="cap of the a-priori grid size")
    parser.add_argument("--running-every", type=int, default=0,
                        help="also print the running bracket every this many steps (Plancherel)")
    return parser


def cli_fft(argv: Sequence[str] | None = None) -> int:
    """``epscert fft``: print the bracket table; 0 on success, 2 on bad input (one line, no traceback)."""
    try:
        args = parse_or_exit_code(fft_parser(), argv)
        if isinstance(args, int):
            return args
        schedule = Schedule.from_json(args.schedule)
        eps = _floats("--epsilons", args.epsilons)
        direction = Direction(args.direction)
        if args.running_every < 0:
            raise ValueError(f"--running-every must be >= 1 (or 0 for none), got --running-every={args.running_every}")
        if (args.half_width is None) != (args.size is None):
            raise ValueError("--half-width and --size go together, got only one of them")
        note = ""
        if args.size is None:
            choice = choose_grid(schedule, eps, args.target_error, direction, args.max_size)
            grid = choice.grid
            note = (f"# a-priori grid for target error {choice.target_error:g}"
                    + (f" (capped at n={grid.size}: predicted discretisation error "
                       f"{choice.predicted_discretisation:.2e})" if choice.capped else ""))
        else:
            grid = Grid(args.half_width, args.size)
        bounds = fft_bounds(schedule, eps, grid, direction)
        running = None
        if args.running_every:
            marks = list(range(args.running_every, schedule.steps + 1, args.running_every))
            running = running_bounds(schedule, eps, grid, direction, marks or [schedule.steps])
    except ValueError as err:
        print(f"epscert fft: error: {err}", file=sys.stderr)
        return 2
    print(f"# Fourier accountant: k={schedule.steps} steps, {len(schedule.distinct)} distinct mechanisms, "
          f"L={grid.half_width:g}, n={grid.size}, dx={grid.dx:.3g}, {bounds.wall_seconds:.2f} s")
    if note:
        print(note)
    print("| direction | ε | lower | upper | width |")
    print("|---|---|---|---|---|")
    for row_dir, bracket in bounds.brackets.items():
        if row_dir not in bounds.direction.parts() and row_dir is not bounds.direction:
            continue
        for i, e in enumerate(bracket.epsilons.tolist()):
            print(f"| {row_dir.value} | {e:g} | {bracket.lower[i]:.6e} | {bracket.upper[i]:.6e} | "
                  f"{bracket.upper[i] - bracket.lower[i]:.2e} |")
    if running is not None:
        print(f"\n# running bracket ({running.direction.value}), Plancherel, {running.wall_seconds:.2f} s")
        print("| step | ε | lower | upper |")
        print("|---|---|---|---|")
        for t, step in enumerate(running.steps.tolist()):
            for e, eps_val in enumerate(running.epsilons.tolist()):
                print(f"| {step} | {eps_val:g} | {running.lower[t, e]:.6e} | {running.upper[t, e]:.6e} |")
    return 0 if all(math.isfinite(v) for v in bounds.result.upper.tolist()) else 1
