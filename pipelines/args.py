"""Flags and usage errors, without Apache Beam: what every command shares, including the in-process ones.

``epscert epsilon`` (and ``plot``) import only this module of the job plumbing, so that answering one
question does not load Beam (about 65 MB and a second of start-up); :mod:`pipelines.options` re-exports
these names for the Beam jobs.
"""

from __future__ import annotations

import argparse
import re
import sys

from epscert.config import underflows
from pipelines.flags import canonical, hint

#: Longest integer flag value read (Python refuses int() past 4300 digits; seeds stop at 39).
MAX_FLAG_DIGITS = 100


class UsageError(ValueError):
    """Bad input, found before launch: the CLI prints it on one line and exits with status 2."""


def command_of(prog: str) -> str:
    """'epscert epsilon' or 'python -m pipelines.epsilon' -> 'epsilon' (the name the flag hints use)."""
    return prog.split()[-1].rsplit(".", 1)[-1]


def unknown_flags(argv, known) -> list[str]:
    """The ``--flags`` of ``argv`` (``--flag=value`` too) that are none of ``known``, compared as
    :func:`pipelines.flags.canonical` spells them, in the order given."""
    names = {canonical(f) for f in known}
    return [a for a in argv if isinstance(a, str) and a.startswith("--") and a != "--" and canonical(a) not in names]


class ArgumentParser(argparse.ArgumentParser):
    """argparse with one-line errors (raised as :class:`UsageError`) and no abbreviations.

    Abbreviations stay off so that a runner flag can never be mistaken for a prefix of ours. A flag
    that neither this parser nor (with ``beam=True``, the Beam jobs) Beam defines is named first, with
    a "did you mean" (:func:`pipelines.flags.hint`), even where argparse would first complain of a
    required flag missing (``--nosie-multiplier`` leaves ``--noise-multiplier`` unset). The flags the user
    typed are kept (:meth:`explain` names them in errors about their values).
    """

    def __init__(self, *args, beam: bool = False, **kwargs) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)
        self.beam = beam
        self.typed: dict[str, tuple[str, str]] = {}

    def error(self, message: str):  # noqa: D401 (argparse API)
        raise UsageError(message)

    def long_flags(self) -> list[str]:
        """Every ``--flag`` this parser knows (aliases included)."""
        return [s for action in self._actions for s in action.option_strings if s.startswith("--")]

    def refuse_unknown(self, argv) -> None:
        """UsageError naming the first flag of ``argv`` no one defines (Beam's flags pass with ``beam``)."""
        unknown = unknown_flags(argv, self.long_flags())
        if unknown and self.beam:
            from pipelines.flags import beam_flags  # noqa: PLC0415 (Beam, for the jobs that load it anyway)

            unknown = unknown_flags(unknown, beam_flags())
        if unknown:
            raise UsageError(hint(unknown[0], command_of(self.prog), self.long_flags()))

    def parse_known_args(self, args=None, namespace=None):
        argv = list(sys.argv[1:] if args is None else args)
        try:
            parsed = super().parse_known_args(argv, namespace)
        except UsageError:
            self.refuse_unknown(argv)  # a misspelt flag first: it is often why a required one is missing
            raise
        self.typed = self._typed(argv)
        return parsed

    def parse_args(self, args=None, namespace=None):
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            self.refuse_unknown(extras)
            raise UsageError(f"unexpected argument {extras[0]!r}; '{self.prog} --help' lists the flags")
        return parsed

    def _typed(self, argv) -> dict[str, tuple[str, str]]:
        """dest -> (the option string typed, its value as typed), for the flags given in ``argv``."""
        typed: dict[str, tuple[str, str]] = {}
        for i, token in enumerate(argv):
            if not isinstance(token, str) or not token.startswith("-"):
                continue
            name, eq, value = token.partition("=")
            action = self._option_string_actions.get(name)
            if action is None or action.nargs == 0:
                continue
            if not eq:
                value = argv[i + 1] if i + 1 < len(argv) else ""
            typed[action.dest] = (name, value)
        return typed

    def explain(self, err: Exception) -> "UsageError":
        """``err`` as a UsageError that names the flag the user typed for the field it is about, with the value
        typed: "sigma must be in [...], got sigma='0' (given as --noise-multiplier 0)"."""
        message = str(err)
        found = [(m.start(), dest) for dest in self.typed
                 for m in [re.search(rf"(?<![\w-]){re.escape(dest)}(?![\w-])", message)] if m]
        if found:
            flag, value = self.typed[min(found)[1]]
            message = f"{message} (given as {flag} {value})"
        return UsageError(message)


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
