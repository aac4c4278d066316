"""The matrix-mechanism flags (DP-FTRL / BandMF) of ``epscert certify`` and ``epscert epsilon``.

    epscert certify --c-col 1,0.5,0.25 --iterations 2000 --cycle-length 100 --sigma 3 --epsilons 2,4
    epscert certify --strategy-matrix C.npy --cycle-length 100 --sigma 3 --epsilons 2,4

A strategy flag (``--c-col`` with ``--iterations``, or ``--strategy-matrix``) makes the request a
matrix mechanism, whose sampler is ``balls_and_bins_persistent`` (the default then; another
``--sampler`` is refused) and whose ``--steps`` is the cycle length (``--cycle-length`` is its
alias). The rules are :func:`epscert.config.mechanism.mechanism_settings`, shared with the API and sweep
specs. A dense strategy travels to Beam workers by path and SHA-256: every worker must read the same
file at the same path (a shared mount, or a file in the worker image), and a worker whose file differs
refuses the work (:func:`transforms.shards.check_strategy`).
"""

from __future__ import annotations

import argparse

from epscert.config.mechanism import MECHANISMS, mechanism_settings, strategy_from
from epscert.config import CertifyConfig
from epscert.matrix.strategies import MAX_DENSE_ITERATIONS, Strategy
from pipelines.args import UsageError, parse_int

WORKERS_NEED_THE_FILE = ("referenced by path and SHA-256: Beam workers must read the same file at the same path "
                         "(a shared mount or the worker image); a changed file is refused")


def add_strategy_flags(parser: argparse.ArgumentParser) -> None:
    """The strategy flags, in their own group of ``--help``."""
    group = parser.add_argument_group(
        "matrix mechanism (DP-FTRL / BandMF with Balls-and-Bins batches; JAX Privacy's convention: "
        "y = C x + sigma z, sigma relative to the clip norm)")
    add = group.add_argument
    add("--mechanism", default=None, help=f"{' or '.join(MECHANISMS)} (default: bandmf when a strategy flag "
        "is given, else dpsgd)")
    add("--c-col", "--c_col", default=None, metavar="VALUES|FILE",
        help="nonzero entries of the first column of a banded lower-triangular Toeplitz strategy C (JAX "
             "Privacy's c_col): comma-separated numbers, or a .npy or .txt file of them; needs --iterations")
    add("--strategy-matrix", "--strategy_matrix", default=None, metavar="FILE.npy",
        help=f"a dense lower-triangular n x n strategy C (n <= {MAX_DENSE_ITERATIONS}) in a .npy file, "
             f"{WORKERS_NEED_THE_FILE}")
    add("--iterations", default=None, metavar="N", help="training iterations n, the size of C (required with "
        "--c-col; read from --strategy-matrix, checked if given)")
    add("--cycle-length", "--cycle_length", default=None, metavar="B",
        help="Balls-and-Bins cycle length b of a matrix mechanism: each example keeps one bin and takes part "
             "every b iterations (JAX Privacy's BallsInBinsSampling); the same as --steps there")


def strategy_of(args: argparse.Namespace) -> Strategy | None:
    """The strategy of ``--c-col``/``--iterations`` or ``--strategy-matrix`` (None: DP-SGD)."""
    iterations = None if args.iterations is None else parse_int("iterations", args.iterations, 1)
    return strategy_from(args.c_col, args.strategy_matrix, iterations)


def strategy_args(args: argparse.Namespace, strategy: Strategy | None = None) -> tuple[object, object, int]:
    """(strategy or None, sampler, steps) from parsed flags; ValueError naming the field before any work.

    ``strategy``: the one :func:`strategy_of` already read from ``args`` (read here when None)."""
    cycle = None if args.cycle_length is None else parse_int("cycle_length", args.cycle_length, 1)
    steps = None if args.steps is None else parse_int("steps", args.steps, 1)
    strategy = strategy_of(args) if strategy is None else strategy
    sampler, steps = mechanism_settings(strategy, sampler=args.sampler, steps=steps, cycle_length=cycle,
                                        mechanism=args.mechanism)
    if steps is None:
        raise UsageError("the following arguments are required: --steps (or, for a matrix mechanism, "
                         "--c-col or --strategy-matrix with --cycle-length)")
    return strategy, sampler, steps


def describe_strategy(config: CertifyConfig) -> str:
    """' strategy=<describe> iterations=n' for a matrix mechanism (logs and plans), '' otherwise."""
    if config.strategy is None:
        return ""
    return f" strategy={config.strategy.describe()} iterations={config.strategy.iterations}"
