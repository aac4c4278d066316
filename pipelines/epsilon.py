"""``epscert epsilon``: the certified ε of a training run, in the user's terms, in one line.

    epscert epsilon --dataset-size 60000 --batch-size 256 --epochs 10 --noise-multiplier 1.0 --delta 1e-5

The first line is the tightest certified ε for the sampler asked for (default Balls-and-Bins),
with the method that gave it, its guarantee and β (:func:`epscert.inverse.best.best_certificate`).
The next line gives, for context, the Poisson ε (its PLD upper bound, or RDP's where RDP is
smaller, and the line says which), the shuffle and Balls-and-Bins lower bounds and the
deterministic ε (exact). Where nothing finite is certified
it says why and how many samples (and about how long) a finite answer needs. Computed in
process; progress lines go to stderr.

A matrix mechanism (DP-FTRL / BandMF: ``--c-col`` with ``--iterations``, or ``--strategy-matrix``,
and ``--cycle-length``; :mod:`pipelines.strategy_flags`) is answered the same way, with its own
candidates (:data:`epscert.inverse.best.MATRIX_CANDIDATES`); the second line is then the two-sided
answer (certified lower bound, estimate, certified upper bound) and the context its deterministic
bounds (independent modes below, comonotone Gaussian above).

    epscert epsilon --c-col 1,0.5,0.25 --iterations 2000 --cycle-length 100 --noise-multiplier 3 --delta 1e-6
"""

from __future__ import annotations

import json
import math
import sys
from typing import Sequence

from epscert.inverse.best import best_certificates, outward_text
from epscert.inverse.epsilon_at_delta import analytic_epsilon_rows, check_deltas
from epscert.compare import bracket_config
from epscert.config import DEFAULT_PLD_DISCRETIZATION, CertifyConfig, Direction, Method, Sampler, steps_per_epoch
from epscert.results.cost import analytic_cost
from epscert.progress import print_to_stderr
from epscert.config.mechanism import DEFAULT_SAMPLER, MATRIX_SAMPLER, mechanism_settings
from pipelines.args import ArgumentParser, UsageError, parse_floats, parse_int, report_usage_error
from pipelines.strategy_flags import add_strategy_flags, strategy_args, strategy_of

PROG = "epscert epsilon"
#: Context printed beside the answer: (key, label, sampler, method).
#: Context of a matrix mechanism: (key, method, column) of its deterministic bounds' rows.
MATRIX_CONTEXT = (("independent_lower_bound", "independent_lower_bound", "epsilon_lower"),
                  ("comonotone_upper_bound", "comonotone_upper_bound", "epsilon_upper"))
MATRIX_LABELS = {"independent_lower_bound": "independent modes ε >= {} (lower bound)",
                 "comonotone_upper_bound": "comonotone Gaussian ε <= {} (upper bound)"}
CONTEXT = (
    ("poisson_pld_upper", "Poisson ε <= {} ({} upper bound)", Sampler.POISSON, Method.PLD_UPPER),
    ("shuffle_lower_bound", "shuffle ε >= {} (lower bound)", Sampler.SHUFFLE, Method.CUBE_LOWER_BOUND),
    ("balls_and_bins_lower_bound", "Balls-and-Bins ε >= {} (lower bound)", Sampler.BALLS_AND_BINS,
     Method.CUBE_LOWER_BOUND),
    ("deterministic_exact", "deterministic ε = {} (exact)", Sampler.DETERMINISTIC, Method.EXACT),
)


def build_parser(prog: str = PROG) -> ArgumentParser:
    parser = ArgumentParser(prog=prog, description="Certified epsilon(delta) of one DP-SGD training run, with "
                            "the Poisson, shuffle and deterministic epsilon for context.")
    add = parser.add_argument
    add("--noise-multiplier", "--noise_multiplier", "--sigma", dest="sigma", required=True,
        help="noise multiplier sigma > 0")
    add("--delta", "--deltas", required=True, action="append",
        help="target delta in (0, 1); several as a comma list or repeated (--delta 1e-6 --delta 1e-8): one "
             "answer each, with the Monte Carlo passes they share drawn once")
    add("--dataset-size", "--dataset_size", default=None, help="dataset size n (with --batch-size)")
    add("--batch-size", "--batch_size", default=None, help="batch size b: steps per epoch = n // b")
    add("--steps", default=None, help="steps T per epoch (instead of --dataset-size and --batch-size)")
    add("--epochs", default="1", help="epochs E (default: %(default)s)")
    add("--sampler", default=None,
        help=f"batch sampler: {', '.join(s.value for s in Sampler)} (default: {DEFAULT_SAMPLER.value}; "
             f"{MATRIX_SAMPLER.value} with a strategy)")
    add("--samples", default="100000", help="Monte Carlo samples per direction (default: %(default)s)")
    add("--error-prob", "--error_prob", default="0.01", help="failure probability beta (default: %(default)s)")
    add("--seed", default="0", help="root seed (default: %(default)s)")
    add("--direction", default=Direction.BOTH.value, help="remove, add or both (default: %(default)s)")
    add("--no-context", "--no_context", action="store_true", help="skip the Poisson/shuffle/deterministic line")
    add("--no-progress", "--no_progress", action="store_true", help="no progress lines on stderr")
    add("--format", default="table", choices=("table", "json"), help="stdout format (default: %(default)s)")
    add_strategy_flags(parser)
    return parser


def steps_from_args(args, command: str = "epsilon") -> int:
    """--steps, or --dataset-size // --batch-size (one or the other): the same rule in every command.

    In ``calibrate`` --dataset-size may also go with --max-batch-size alone (the n of truncated batches),
    with --steps giving T.
    """
    truncating = getattr(args, "max_batch_size", None) is not None
    if args.batch_size is not None or (args.dataset_size is not None and not truncating):
        if args.steps is not None:
            raise UsageError(f"give either --steps or --dataset-size and --batch-size, not both, got "
                             f"steps={args.steps}, batch_size={args.batch_size}")
        if args.batch_size is None or args.dataset_size is None:
            also = " (or --dataset-size with --max-batch-size for truncated batches, and --steps)" \
                if command == "calibrate" else ""
            raise UsageError(f"--dataset-size and --batch-size go together (steps = dataset_size // batch_size)"
                             f"{also}, got dataset_size={args.dataset_size}, batch_size={args.batch_size}")
        return steps_per_epoch(parse_int("dataset_size", args.dataset_size, 1),
                               parse_int("batch_size", args.batch_size, 1))
    if args.steps is None:
        raise UsageError("give --steps, or --dataset-size and --batch-size (steps = dataset_size // batch_size)")
    return parse_int("steps", args.steps, 1)


def request(args) -> tuple[object, object, int]:
    """(strategy or None, sampler, steps): a matrix mechanism from the strategy flags, else DP-SGD."""
    strategy = strategy_of(args)
    if strategy is None:
        sampler, _ = mechanism_settings(None, sampler=args.sampler, mechanism=args.mechanism,
                                        cycle_length=None if args.cycle_length is None
                                        else parse_int("cycle_length", args.cycle_length, 1))
        return None, sampler, steps_from_args(args)
    if args.dataset_size is not None or args.batch_size is not None:
        raise UsageError(f"--dataset-size and --batch-size do not apply to a matrix mechanism (give --cycle-length), "
                         f"got dataset_size={args.dataset_size}, batch_size={args.batch_size}")
    return strategy_args(args, strategy)


def matrix_context(cert) -> dict[str, float]:
    """ε(δ) of a matrix mechanism's deterministic bounds, from the certificate's rows."""
    out = {}
    for key, method, column in MATRIX_CONTEXT:
        values = [r[column] for r in cert.rows if r["method"] == method and r.get(column) is not None]
        if values:
            out[key] = values[0]
    return out


#: The context's dp_accounting PLDs are capped (a coarser discretisation beyond; a coarser pessimistic PLD is
#: still an upper bound, a coarser sliced composition still a lower bound, only looser): they are context, and
#: at the default 1e-4 a Poisson PLD of 10^5 points (T = 10^5, σ = 0.5) took about 100 MB more than the
#: answer, and the shuffle lower bound's E-fold sliced composition at T = 234, E = 10 (10^6 points) 460 MB.
CONTEXT_MAX_PLD_POINTS = 50_000
CONTEXT_MAX_SLICED_POINTS = 100_000


def context_discretization(config: CertifyConfig, sampler: Sampler = Sampler.POISSON,
                           method: Method = Method.PLD_UPPER) -> float:
    """The discretisation of one context baseline: the default, or coarser so that its grid stays under the
    cap (Poisson PLD: CONTEXT_MAX_PLD_POINTS; the sliced composition of a cube lower bound over E > 1 epochs:
    CONTEXT_MAX_SLICED_POINTS). Grid sizes are :mod:`epscert.results.cost`'s estimates."""
    base = CertifyConfig(sampler=sampler, sigma=config.sigma, steps=config.steps, epochs=config.epochs,
                         epsilons=(1.0,), methods=(method,), direction=config.direction)
    points = analytic_cost(base, method).points
    cap = CONTEXT_MAX_PLD_POINTS if sampler is Sampler.POISSON else CONTEXT_MAX_SLICED_POINTS
    if points <= cap:
        return DEFAULT_PLD_DISCRETIZATION
    return float(f"{DEFAULT_PLD_DISCRETIZATION * points / cap:.2g}")


#: How a context line names the bound that answered (the rows' ``bound`` column).
BOUND_LABELS = {"pld_pessimistic": "PLD", "rdp": "RDP"}


def context_epsilons(config: CertifyConfig, delta: float, bounds: dict | None = None) -> dict[str, tuple[float, float]]:
    """ε(δ) of the context baselines at the configuration's (σ, T, E), each with the discretisation it used;
    ``bounds`` (if given) receives each baseline's bound name."""
    out = {}
    for key, _, sampler, method in CONTEXT:
        if key == "balls_and_bins_lower_bound" and bracket_config(config) is not None:
            method = Method.BRACKET_LOWER  # the PLD bracket's lower side: tighter than the cube bound
        h = context_discretization(config, sampler, method)
        base = CertifyConfig(sampler=sampler, sigma=config.sigma, steps=config.steps, epochs=config.epochs,
                             epsilons=(1.0,), methods=(method,), direction=config.direction, pld_discretization=h)
        (row,) = analytic_epsilon_rows(base, method, [delta])
        out[key] = (row["epsilon_upper"] if row["epsilon_upper"] is not None else row["epsilon_lower"], h)
        if bounds is not None:
            bounds[key] = row["bound"]
    return out


def _num(value: float, up: bool | None = None) -> str:
    """Four significant digits; a bound (``up`` True for an upper, False for a lower one) rounded outward
    (:func:`~epscert.inverse.best.outward_text`), anything else (an estimate) to the nearest."""
    if up is None:
        return f"{value:.4g}" if math.isfinite(value) else str(value)
    return outward_text(value, up=up)


def _bound_side(label: str) -> bool | None:
    """Which side a context label's number bounds: 'ε <=' an upper bound, 'ε >=' a lower one; 'ε =' (exact) is
    computed on the upper side of its closed form, so it is rounded up too."""
    return False if "ε >=" in label else (True if ("ε <=" in label or "ε =" in label) else None)


def _json(value):
    return str(value) if isinstance(value, float) and not math.isfinite(value) else value


def deltas_from_args(values: Sequence[str]) -> tuple[float, ...]:
    """Every δ of ``--delta`` (repeated, or comma lists), checked, in the order given, each once."""
    deltas = [d for text in values for d in parse_floats("delta", text)]
    return tuple(dict.fromkeys(check_deltas(deltas)))


def main(argv: Sequence[str] | None = None, prog: str = PROG) -> int:
    parser = build_parser(prog)
    try:
        args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
        deltas = deltas_from_args(args.delta)
        strategy, sampler, steps = request(args)
        config = CertifyConfig(
            sampler=sampler, sigma=args.sigma, steps=steps, strategy=strategy,
            epochs=parse_int("epochs", args.epochs, 1), epsilons=(1.0,),
            samples=parse_int("samples", args.samples, 1), error_prob=args.error_prob,
            seed=parse_int("seed", args.seed), direction=args.direction,
        )
        certs = best_certificates(config, deltas, progress=None if args.no_progress else print_to_stderr)
        if strategy is not None:
            return max(print_matrix(config, cert, {} if args.no_context else matrix_context(cert), args.format)
                       for cert in certs)
        answers = []
        for delta, cert in zip(deltas, certs):
            bounds: dict[str, str] = {}
            context = {} if args.no_context else context_epsilons(config, delta, bounds)
            answers.append((delta, cert, context, bounds))
    except (UsageError, ValueError) as err:
        return report_usage_error(prog, err if isinstance(err, UsageError) else parser.explain(err))
    return max(print_answer(args, config, *answer) for answer in answers)


def print_answer(args, config: CertifyConfig, delta: float, cert, context: dict, bounds: dict) -> int:
    """The answer at one δ (a table block or one JSON line); 0 when certified, else 1."""
    if args.format == "json":
        out = {"sampler": config.sampler.value, "noise_multiplier": config.sigma, "steps": config.steps,
               "epochs": config.epochs, "dataset_size": None if args.dataset_size is None else int(args.dataset_size),
               "batch_size": None if args.batch_size is None else int(args.batch_size), "delta": delta,
               "epsilon": _json(cert.value), "certified": cert.finite, "method": cert.method, "bound": cert.bound,
               "guarantee": cert.guarantee, "error_prob": cert.error_prob, "notes": list(cert.notes),
               "samples_needed": cert.samples_needed, "seconds_needed": cert.seconds_needed,
               "context": {k: _json(v) for k, (v, _) in context.items()},
               "context_bounds": bounds,
               "context_discretization": {k: h for k, (_, h) in context.items()}}
        print(json.dumps(out, allow_nan=False))
    else:
        print(cert.summary())
        if context:
            parts = []
            for key, label, _, _ in CONTEXT:
                value, h = context[key]
                text = label.format(_num(value, _bound_side(label)), BOUND_LABELS.get(bounds.get(key, ""), "PLD"))
                if h != DEFAULT_PLD_DISCRETIZATION:  # a coarser grid than the default: said, with its value
                    text = text[:-1] + f", discretization {h:g})"
                parts.append(text)
            print("context: " + "; ".join(parts))
        if cert.finite:
            for note in cert.notes:
                print(f"note: {note}")
    return 0 if cert.finite else 1


def print_matrix(config: CertifyConfig, cert, context: dict[str, float], fmt: str) -> int:
    """The answer for a matrix mechanism: the certificate, its two-sided interval, its context."""
    lower, estimate, upper = cert.interval
    if fmt == "json":
        out = {"mechanism": "bandmf", "strategy": config.strategy.describe(), "iterations": config.strategy.iterations,
               "cycle_length": config.steps, "noise_multiplier": config.sigma, "delta": cert.target,
               "epsilon": _json(upper), "epsilon_lower": lower, "epsilon_estimate": estimate,
               "certified": cert.finite, "method": cert.method, "lower_method": cert.lower_method,
               "bound": cert.bound, "guarantee": cert.guarantee, "error_prob": cert.error_prob,
               "notes": list(cert.notes), "context": {k: _json(v) for k, v in context.items()}}
        print(json.dumps(out, allow_nan=False))
    else:
        print(cert.summary())
        shown = "-" if estimate is None else _num(estimate)
        print(f"two-sided: {_num(lower, up=False)} <= ε <= {_num(upper, up=True)}, estimate {shown} (lower bound from "
              f"{cert.lower_method or 'none: 0'}; each side at β, both at 2β)")
        if context:
            print("context: " + "; ".join(MATRIX_LABELS[k].format(_num(v, _bound_side(MATRIX_LABELS[k])))
                                          for k, v in context.items()))
        for note in cert.notes:
            print(f"note: {note}")
    return 0 if cert.finite else 1


if __name__ == "__main__":
    sys.exit(main(prog="python -m pipelines.epsilon"))
