"""Which command-line flags a command accepts, and what it says about the others.

A job's own flags are parsed by its ``ArgumentParser``; what is left must be a flag that Beam
really defines. Beam's flag set is not a hand list: it is the parser that Beam itself builds
from every ``PipelineOptions`` subclass (``get_all_options(add_extra_args_fn=...)`` hands it
over), so a Beam upgrade that adds a flag needs no change here. Anything else is refused with
a hint, found by meaning first (flags of Opacus, dp_accounting and common spellings, see
:data:`SYNONYMS`) and by spelling second.

Flags that mean the same thing in a command are aliases in that command's parser (e.g.
``--noise-multiplier`` for ``--sigma``); flags that look alike but mean something else there
(``certify --batch-size`` is not ``--max-batch-size``) are refused with the right pointer,
given per command in :data:`MISMATCHES`.
"""

from __future__ import annotations

import argparse
import difflib
import functools
from typing import Sequence

#: Foreign or common names -> the epscert flag with the same meaning (when the command has it).
SYNONYMS = {
    "--noise-multiplier": "--sigma", "--noise": "--sigma", "--noise-scale": "--sigma", "--std": "--sigma",
    "--num-steps": "--steps", "--iterations": "--steps", "--n-steps": "--steps", "--steps-per-epoch": "--steps",
    "--num-epochs": "--epochs", "--n-epochs": "--epochs", "--rounds": "--epochs",
    "--epsilon": "--epsilons", "--eps": "--epsilons", "--target-eps": "--target-epsilon",
    "--target-epsilon": "--target-epsilon", "--delta": "--delta", "--target-delta": "--delta",
    "--deltas": "--deltas", "--num-samples": "--samples", "--n-samples": "--samples", "--mc-samples": "--samples",
    "--beta": "--error-prob", "--confidence": "--error-prob", "--failure-prob": "--error-prob",
    "--out": "--output", "--output-file": "--output", "--random-seed": "--seed",
    "--sampling": "--sampler", "--batch-sampler": "--sampler", "--pld-discretisation": "--pld-discretization",
    "--value-discretization-interval": "--pld-discretization",
}

#: Per command: flags that exist elsewhere but mean something else here -> what to use instead.
#: Delta of a fixed epsilon is what certify computes; epsilon of a fixed delta is compare --deltas.
_EPSILON_AT_DELTA = ("certify computes delta at each epsilon of --epsilons; for epsilon at a delta use "
                     "'epscert compare --deltas D' (or Accountant.get_epsilon)")
_BATCH_SIZE = ("epscert takes the number of steps per epoch: --steps T = dataset_size // batch_size "
               "(--max-batch-size is the truncation cap of Binomial batches, a different thing)")
_SAMPLING_RATE = "epscert takes --steps T per epoch; a Poisson sampling rate q corresponds to T = 1/q"
MISMATCHES = {
    "certify": {"--delta": _EPSILON_AT_DELTA, "--target-delta": _EPSILON_AT_DELTA, "--deltas": _EPSILON_AT_DELTA,
                "--target-epsilon": "certify takes the epsilon grid --epsilons; for the sigma that meets a "
                                    "target epsilon use 'epscert calibrate --target-epsilon'",
                "--batch-size": _BATCH_SIZE, "--sampling-rate": _SAMPLING_RATE, "--q": _SAMPLING_RATE,
                "--sampling-probability": _SAMPLING_RATE},
    "calibrate": {"--sigma": "calibrate searches for sigma; it takes no --sigma (use 'epscert certify --sigma')",
                  "--noise-multiplier": "calibrate searches for the noise multiplier; it takes no "
                                        "--noise-multiplier (use 'epscert certify --noise-multiplier')",
                  "--sampling-rate": _SAMPLING_RATE, "--q": _SAMPLING_RATE,
                  "--epsilons": "calibrate takes one --target-epsilon"},
    "compare": {"--batch-size": _BATCH_SIZE, "--sampling-rate": _SAMPLING_RATE, "--q": _SAMPLING_RATE,
                "--target-epsilon": "compare prints epsilon at each of --deltas; for the sigma that meets a "
                                    "target epsilon use 'epscert calibrate --target-epsilon'",
                "--dataset-size": "compare has no truncated batches; --steps T = dataset_size // batch_size"},
    "sweep": {"--batch-size": "sweep takes batch_size and dataset_size as keys of the SPEC file, not as flags",
              "--dataset-size": "sweep takes batch_size and dataset_size as keys of the SPEC file, not as flags",
              "--sigma": "sweep takes sigma as a key of the SPEC file, not as a flag",
              "--noise-multiplier": "sweep takes sigma as a key of the SPEC file, not as a flag"},
}

#: The matrix-mechanism flags of certify and epsilon (pipelines.strategy_flags), pointed to elsewhere.
MATRIX_FLAGS = ("--c-col", "--strategy-matrix", "--cycle-length", "--mechanism")
_NO_MATRIX = ("{command} has no matrix mechanism (BandMF); 'epscert certify' and 'epscert epsilon' take --c-col "
              "or --strategy-matrix with --cycle-length")
for _command in ("compare", "calibrate"):
    MISMATCHES[_command].update({flag: _NO_MATRIX.format(command=_command) for flag in MATRIX_FLAGS})
MISMATCHES["sweep"].update({flag: "sweep takes a matrix mechanism as keys of the SPEC file (c_col, strategy_matrix, "
                                  "iterations, cycle_length, mechanism), not as flags"
                            for flag in MATRIX_FLAGS + ("--iterations",)})


class FlagError(ValueError):
    """A flag no one defines; the message names it and points to the flag meant."""


def canonical(flag: str) -> str:
    """``--Target_Delta=1e-5`` -> ``--target-delta`` (the name only, hyphens, lower case)."""
    return flag.split("=", 1)[0].replace("_", "-").lower()


@functools.lru_cache(maxsize=1)
def beam_parser() -> argparse.ArgumentParser:
    """The parser Beam builds from all its PipelineOptions subclasses (its real flag set).

    Beam is imported here, on first use, so that the hints above serve the commands that never load it."""
    from apache_beam.options.pipeline_options import PipelineOptions  # noqa: PLC0415

    captured: list[argparse.ArgumentParser] = []
    PipelineOptions([]).get_all_options(add_extra_args_fn=captured.append)
    parser = captured[0]
    parser.allow_abbrev = False  # '--run' must not pass as '--runner'

    def error(message: str):
        raise FlagError(f"bad Beam flag: {message}")

    parser.error = error  # one-line errors instead of argparse's exit
    return parser


def beam_flags() -> frozenset[str]:
    """Every ``--flag`` that Beam defines."""
    return frozenset(s for a in beam_parser()._actions for s in a.option_strings if s.startswith("--"))


def hint(flag: str, command: str, own_flags: Sequence[str]) -> str:
    """Why ``flag`` is refused in ``command`` and what to use: meaning first, then spelling."""
    name = canonical(flag)
    mismatch = MISMATCHES.get(command, {}).get(name)
    if mismatch is not None:
        return f"{flag.split('=', 1)[0]} is not a flag of epscert {command}: {mismatch}"
    own: dict[str, str] = {}
    for f in own_flags:
        own.setdefault(canonical(f), f)  # the first (hyphenated) spelling of each flag
    meant = SYNONYMS.get(name)
    if meant is not None and meant in own:
        return f"unknown flag {flag.split('=', 1)[0]}; did you mean {own[meant]}?"
    close = difflib.get_close_matches(name, list(own), n=1, cutoff=0.75)
    pointer = f"; did you mean {own[close[0]]}?" if close else \
        f"; 'epscert {command} --help' lists its flags"
    return f"unknown flag {flag.split('=', 1)[0]}{pointer}"


def check_leftovers(leftover: Sequence[str], command: str, own_flags: Sequence[str],
                    beam: bool = True) -> None:
    """Refuse every leftover argument that is not a Beam flag (``beam=False``: refuse them all).

    Raises :class:`FlagError` naming the first refused argument, with a hint.
    """
    leftover = list(leftover)
    if beam and leftover:
        _, unknown = beam_parser().parse_known_args(leftover)
    else:
        unknown = leftover
    for arg in unknown:
        if arg.startswith("-") and arg not in ("-", "--"):
            raise FlagError(hint(arg, command, own_flags))
    if unknown:
        raise FlagError(f"unexpected argument {unknown[0]!r}; 'epscert {command} --help' lists the flags")

