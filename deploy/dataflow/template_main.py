"""Flex-template entry point (``FLEX_TEMPLATE_PYTHON_PY_FILE``) for the certify and sweep jobs.

The launcher runs ``python template_main.py --command=sweep --spec=gs://... --output=gs://...``
plus the job options it adds itself. ``--command`` (``certify`` or ``sweep``; default ``sweep``)
picks the job; every other flag is the job's own (Beam-style underscores accepted, e.g.
``--error_prob``) or Beam's. The job is submitted to Dataflow and not waited for.
"""

from __future__ import annotations

import sys
from typing import Sequence

from pipelines import certify, sweep
from pipelines.options import UsageError, report_usage_error

COMMANDS = {"certify": certify, "sweep": sweep}
DEFAULT_COMMAND = "sweep"


def split_command(argv: Sequence[str]) -> tuple[str, list[str]]:
    """(command, the other flags), accepting ``--command=X`` and ``--command X``."""
    command, rest, args = DEFAULT_COMMAND, [], list(argv)
    while args:
        arg = args.pop(0)
        if arg.startswith("--command="):
            command = arg.split("=", 1)[1]
        elif arg == "--command" and args:
            command = args.pop(0)
        else:
            rest.append(arg)
    if command not in COMMANDS:
        raise UsageError(f"command must be one of {', '.join(COMMANDS)}, got command={command!r}")
    return command, rest


def main(argv: Sequence[str] | None = None) -> int:
    prog = "epscert flex template"
    try:
        command, rest = split_command(sys.argv[1:] if argv is None else argv)
        if not any(a == "--runner" or a.startswith("--runner=") for a in rest):
            rest.append("--runner=DataflowRunner")  # never run the job inside the launcher
        COMMANDS[command].run(rest, wait=False, prog=f"{prog} ({command})")
    except UsageError as err:
        return report_usage_error(prog, err)
    return 0


if __name__ == "__main__":
    sys.exit(main())
