"""The ``epscert`` console script: ``epscert certify ...`` and ``epscert sweep SPEC --output DIR``."""

from __future__ import annotations

import sys
from typing import Sequence

from epscert._version import __version__

USAGE = """usage: epscert {certify,sweep} ...

Certified (epsilon, delta) accounting for DP-SGD, run as Apache Beam jobs.

commands:
  certify   one configuration, sharded Monte Carlo sampling, with its analytic baselines
  sweep     a YAML/JSON grid of configurations into one resumable Parquet table

'epscert COMMAND --help' lists the flags of a command. Flags a command does not know go to
Beam (--runner, --direct_num_workers, --direct_running_mode, --job_endpoint, Dataflow flags).
The default runner is Beam's in-process FnApiRunner (no network needed)."""


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if argv else 2
    if argv[0] == "--version":
        print(f"epscert {__version__}")
        return 0
    command, rest = argv[0], argv[1:]
    if command == "certify":
        from pipelines import certify
        return certify.main(rest, prog="epscert certify")
    if command == "sweep":
        from pipelines import sweep
        return sweep.main(rest, prog="epscert sweep")
    print(f"epscert: error: unknown command {command!r}; choose certify or sweep (see epscert --help)",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
