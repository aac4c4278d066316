"""The ``epscert`` console script: ``epscert COMMAND ...``.

:data:`COMMANDS` maps each command to ``module:function``, a function ``(argv) -> int`` (exit
status: 0 ok, 2 bad input), imported on use so that ``epscert --help`` stays fast. The Beam
jobs (certify, sweep) live in this package; other commands come from the core and pipelines.
"""

from __future__ import annotations

import importlib
import sys
from typing import Sequence

from epscert._version import __version__

#: command -> ("module:function", one-line description)
COMMANDS = {
    "certify": ("pipelines.certify:main", "one configuration, sharded Monte Carlo sampling, with its analytic baselines"),
    "sweep": ("pipelines.sweep:main", "a YAML/JSON grid of configurations into one resumable Parquet table"),
    "epsilon": ("pipelines.epsilon:main", "certified epsilon(delta) of one training run (dataset size, batch size, epochs, sigma)"),
    "compare": ("pipelines.compare:main", "every accountant side by side for one (sigma, T, E): delta per epsilon, epsilon per delta"),
    "calibrate": ("pipelines.calibrate:main", "smallest sigma with certified epsilon(delta) <= target, then a fresh-seed certificate"),
    "plot": ("pipelines.plot:main", "figures from a results table: delta(epsilon) curves, epsilon(delta) against sigma"),
    "fft": ("epscert.fft.report:cli_fft", "certified delta(epsilon) bracket of a heterogeneous schedule (Fourier)"),
    "hidden-state": ("epscert.analytic.hidden_state:cli_hidden_state", "last-iterate epsilon(delta) of noisy SGD (Ye & Shokri)"),
}


#: Commands whose parsers live in the core (plain argparse, no pipelines import): their flags are checked here
#: first, with the hints every other command gives (:class:`pipelines.args.ArgumentParser`).
CORE_PARSERS = {
    "fft": "epscert.fft.report:fft_parser",
    "hidden-state": "epscert.analytic.hidden_state:hidden_state_parser",
}


def check_core_flags(command: str, argv: Sequence[str]) -> None:
    """UsageError naming the first flag that ``command``'s core parser does not define, with a hint."""
    if command not in CORE_PARSERS:
        return
    from pipelines.args import ArgumentParser  # noqa: PLC0415

    module, function = CORE_PARSERS[command].split(":")
    core = getattr(importlib.import_module(module), function)()
    checker = ArgumentParser(prog=f"epscert {command}", add_help=False)
    for flag in (s for action in core._actions for s in action.option_strings):  # noqa: SLF001 (argparse's list)
        checker.add_argument(flag, nargs="?")
    checker.refuse_unknown(argv)


def resolve(command: str):
    """The function behind ``command``."""
    module, function = COMMANDS[command][0].split(":")
    return getattr(importlib.import_module(module), function)


def usage() -> str:
    lines = [f"usage: epscert {{{','.join(COMMANDS)}}} ...", "",
             "Certified (epsilon, delta) accounting for DP-SGD.", "", "commands:"]
    width = max(len(name) for name in COMMANDS)
    lines += [f"  {name.ljust(width)}  {text}" for name, (_, text) in COMMANDS.items()]
    lines += ["", "'epscert COMMAND --help' lists the flags of a command. certify and sweep are Beam jobs: flags",
              "they do not know go to Beam (--runner, --direct_num_workers, --direct_running_mode,",
              "--job_endpoint, Dataflow flags); the default runner is Beam's in-process FnApiRunner (no network)."]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return 0 if argv else 2
    if argv[0] == "--version":
        print(f"epscert {__version__}")
        return 0
    command, rest = argv[0], argv[1:]
    if command not in COMMANDS:
        print(f"epscert: error: unknown command {command!r}; choose one of {', '.join(COMMANDS)} "
              "(see epscert --help)", file=sys.stderr)
        return 2
    from pipelines.args import UsageError, report_usage_error  # noqa: PLC0415

    try:
        check_core_flags(command, rest)
    except UsageError as err:
        return report_usage_error(f"epscert {command}", err)
    return resolve(command)(rest)


if __name__ == "__main__":
    sys.exit(main())
