"""The ``epscert`` console script: ``epscert certify ...`` and ``epscert sweep SPEC --output DIR``.

Each command is a module with ``main(argv, prog) -> int``; :data:`COMMANDS` maps names to them
(imported on use, so ``epscert --help`` stays fast).
"""

from __future__ import annotations

import importlib
import sys
from typing import Sequence

from epscert._version import __version__

#: command -> (module with main(argv, prog), one-line description)
COMMANDS = {
    "certify": ("pipelines.certify", "one configuration, sharded Monte Carlo sampling, with its analytic baselines"),
    "sweep": ("pipelines.sweep", "a YAML/JSON grid of configurations into one resumable Parquet table"),
}


def usage() -> str:
    lines = [f"usage: epscert {{{','.join(COMMANDS)}}} ...", "",
             "Certified (epsilon, delta) accounting for DP-SGD, run as Apache Beam jobs.", "", "commands:"]
    width = max(len(name) for name in COMMANDS)
    lines += [f"  {name.ljust(width)}  {text}" for name, (_, text) in COMMANDS.items()]
    lines += ["", "'epscert COMMAND --help' lists the flags of a command. Flags a command does not know go to",
              "Beam (--runner, --direct_num_workers, --direct_running_mode, --job_endpoint, Dataflow flags).",
              "The default runner is Beam's in-process FnApiRunner (no network needed)."]
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
    module = importlib.import_module(COMMANDS[command][0])
    return module.main(rest, prog=f"epscert {command}")


if __name__ == "__main__":
    sys.exit(main())
