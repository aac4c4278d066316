"""Flags and usage errors, without Apache Beam: what every command shares, including the in-process ones.

``epscert epsilon`` (and ``plot``) import only this module of the job plumbing, so that answering one
question does not load Beam (about 65 MB and a second of start-up); :mod:`pipelines.options` re-exports
these names for the Beam jobs.
"""

from __future__ import annotations

import argparse
import sys

from epscert.config import underflows

#: Longest integer flag value read (Python refuses int() past 4300 digits; seeds stop at 39).
MAX_FLAG_DIGITS = 100


class UsageError(ValueError):
    """Bad input, found before launch: the CLI prints it on one line and exits with status 2."""


class ArgumentParser(argparse.ArgumentParser):
    """argparse with one-line errors (raised as :class:`UsageError`) and no abbreviations.

    Abbreviations stay off so that a runner flag can never be mistaken for a prefix of ours.
    """

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str):  # noqa: D401 (argparse API)
        raise UsageError(message)

    def long_flags(self) -> list[str]:
        """Every ``--flag`` this parser knows (aliases included)."""
        return [s for action in self._actions for s in action.option_strings if s.startswith("--")]


def parse_int(name: str, text: str, minimum: int = 0) -> int:
    """An integer flag value in ASCII digits, else UsageError naming the field and the value."""
    if not str(text).isascii() or len(str(text)) > MAX_FLAG_DIGITS:
        raise UsageError(f"{name} must be an integer >= {minimum} written in at most {MAX_FLAG_DIGITS} ASCII "
                         f"digits, got {name}={str(text)[:40]!r}{'...' if len(str(text)) > 40 else ''}")
    try:
        value = int(text)
    except (TypeError, ValueError):
        raise UsageError(f"{name} must be an integer >= {minimum}, got {name}={text!r}") from None
    if value < minimum:
        raise UsageError(f"{name} must be an integer >= {minimum}, got {name}={text!r}")
    return value


def parse_floats(name: str, text: str) -> tuple[float, ...]:
    """Comma-separated numbers in ASCII, e.g. '1,2,4,8' (float() would also read full-width digits)."""
    if not text.isascii():
        raise UsageError(f"{name} must be comma-separated numbers in ASCII digits, got {name}={text!r}")
    parts = [p.strip() for p in text.split(",") if p.strip()]
    try:
        values = tuple(float(p) for p in parts)
    except ValueError:
        raise UsageError(f"{name} must be comma-separated numbers, got {name}={text!r}") from None
    if not values:
        raise UsageError(f"{name} must be comma-separated numbers, got {name}={text!r}")
    for part, value in zip(parts, values):
        if value == 0.0 and underflows(part):
            raise UsageError(f"{name}={part} underflows to 0 in double precision (the smallest positive double is "
                             f"about 5e-324)")
    return values


def report_usage_error(prog: str, err: UsageError) -> int:
    """Print ``prog: error: message`` on one line and return the exit status 2."""
    message = " ".join(str(err).split())
    print(f"{prog}: error: {message}", file=sys.stderr)
    return 2
