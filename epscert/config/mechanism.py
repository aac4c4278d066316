"""Which mechanism a request describes, DP-SGD batches or a matrix mechanism, read from user input.

Every entry point (``epscert.Accountant``, ``epscert certify``, ``epscert epsilon``, sweep specs and
the JAX Privacy adapter) describes a matrix mechanism (DP-FTRL / BandMF, :mod:`epscert.matrix.strategies`)
the same way, and this module turns that description into what :class:`~epscert.config.CertifyConfig`
takes, refusing bad input before any work with one message naming the field and the value:

- the strategy C: ``c_col`` (the nonzero entries of the first column of a banded lower-triangular
  Toeplitz C, as JAX Privacy takes it: numbers, comma-separated text, or a ``.npy``/``.txt`` file)
  with ``iterations`` n, or ``strategy_matrix`` (a ``.npy`` file of a dense lower-triangular n x n
  matrix; n from the file, ``iterations`` optional and checked against it);
- the sampler: a strategy implies ``balls_and_bins_persistent`` (each example keeps one bin for
  every cycle, JAX Privacy's ``BallsInBinsSampling``); an explicit other sampler is refused;
- the cycle length b: ``cycle_length``, an alias of ``steps`` for a matrix mechanism (both may be
  given only if equal); 1 <= b <= n.

``mechanism`` ('dpsgd' or 'bandmf', alias 'matrix') is optional: a strategy implies 'bandmf', and
an explicit mechanism that contradicts the rest is refused.
"""

from __future__ import annotations

import os
import re
from typing import Any

import numpy as np

from epscert.checks import check_int, show
from epscert.names import Sampler, parse_sampler
from epscert.matrix.strategies import MAX_BANDS, Strategy, check_c_col, dense_strategy, toeplitz_strategy

#: Mechanism names: DP-SGD (a batch sampler) or the matrix mechanism (a strategy C).
MECHANISMS = ("dpsgd", "bandmf")
#: Other spellings accepted for 'bandmf'.
MECHANISM_ALIASES = {"matrix": "bandmf", "dp-ftrl": "bandmf", "dpftrl": "bandmf", "dp-sgd": "dpsgd"}
#: The only sampler of the matrix mechanism (one bin per example, reused every cycle).
MATRIX_SAMPLER = Sampler.BALLS_AND_BINS_PERSISTENT
#: The sampler of a DP-SGD request that names none.
DEFAULT_SAMPLER = Sampler.BALLS_AND_BINS
#: Largest c_col file read (MAX_BANDS = 10^5 numbers are at most about 3 MB of text, 0.8 MB of .npy).
MAX_C_COL_FILE_BYTES = 16 * 2**20
#: File names that make a c_col text a path, even when the file is missing (to say so, not "not a number").
C_COL_FILE_SUFFIXES = (".npy", ".txt", ".csv")
_SEPARATORS = re.compile(r"[,;\s]+")
_FIELD_SEPARATORS = re.compile(r"[,;]")


def check_mechanism(mechanism: object) -> str | None:
    """'dpsgd', 'bandmf' or None (not given), from a name or an alias (case-insensitive)."""
    if mechanism is None:
        return None
    name = str(mechanism).strip().lower() if isinstance(mechanism, str) else None
    name = MECHANISM_ALIASES.get(name, name)
    if name not in MECHANISMS:
        raise ValueError(f"mechanism must be one of {', '.join(MECHANISMS)}, got mechanism={show(mechanism)}")
    return name


def _numbers(text: str, where: str) -> list[float]:
    """Numbers separated by commas, semicolons or whitespace, in ASCII (float() also reads other digits).
    An empty field, a comma or semicolon with no number on one side within its line ('1,,2', '1,2,'),
    is refused rather than dropped: it reads as a missing value, not as nothing."""
    for line in text.splitlines():
        fields = _FIELD_SEPARATORS.split(line)
        if len(fields) > 1 and not all(f.strip() for f in fields):
            raise ValueError(f"c_col has an empty field (a comma or semicolon with no number on one side, as in "
                             f"'1,,2'), got {where}")
    tokens = [t for t in _SEPARATORS.split(text.strip()) if t]
    try:
        if not text.isascii():
            raise ValueError
        return [float(t) for t in tokens]
    except ValueError:
        raise ValueError(f"c_col must be numbers separated by commas, or a path to a .npy or .txt file, "
                         f"got {where}") from None


def looks_like_a_path(text: str) -> bool:
    """Whether a c_col text that is not a list of numbers names a file: it exists, has a file suffix,
    or contains a path separator (a missing file is then reported as such, not as a bad number)."""
    return (os.path.exists(text) or text.lower().endswith(C_COL_FILE_SUFFIXES) or os.sep in text
            or (os.altsep is not None and os.altsep in text))


def read_c_col_file(path: str) -> np.ndarray:
    """The numbers in a c_col file: a ``.npy`` 1-D array, or text (numbers separated by commas or
    whitespace; lines starting with '#' are comments). Size, shape and dtype are checked before the
    contents are read; the values are then checked by :func:`epscert.matrix.strategies.check_c_col`."""
    try:
        info = os.stat(path)
    except OSError as err:
        raise ValueError(f"c_col file not readable: path={path!r} ({err.strerror})") from None
    if not os.path.isfile(path):
        raise ValueError(f"c_col must name a file, got a directory or special file: path={path!r}")
    if info.st_size > MAX_C_COL_FILE_BYTES:
        raise ValueError(f"c_col file is too large: {info.st_size} bytes, limit {MAX_C_COL_FILE_BYTES} bytes "
                         f"(at most {MAX_BANDS} bands), path={path!r}")
    if path.lower().endswith(".npy"):
        try:
            head = np.load(path, mmap_mode="r", allow_pickle=False)
        except (OSError, ValueError) as err:
            raise ValueError(f"c_col file is not a readable .npy array: path={path!r} ({err})") from None
        if head.ndim != 1:
            raise ValueError(f"c_col file must hold a 1-D array, got shape={head.shape} in path={path!r}")
        if head.dtype.kind not in "fiu":
            raise ValueError(f"c_col file must hold real numbers, got dtype={head.dtype} in path={path!r}")
        if head.size > MAX_BANDS:
            raise ValueError(f"c_col has {head.size} entries, more than the limit {MAX_BANDS} (path={path!r})")
        return check_c_col(np.array(head, dtype=np.float64))
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_C_COL_FILE_BYTES + 1)
        text = raw.decode("ascii")
    except OSError as err:
        raise ValueError(f"c_col file not readable: path={path!r} ({err.strerror})") from None
    except UnicodeDecodeError:
        raise ValueError(f"c_col file must be ASCII text or a .npy array, path={path!r}") from None
    body = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    return check_c_col(_numbers(body, f"a file with other text: path={path!r}"))


def read_c_col(c_col: Any) -> np.ndarray:
    """c_col as a validated 1-D array: numbers, comma-separated text, or a path to a .npy/.txt file
    (text that reads as numbers is numbers, so a file must have a name that does not)."""
    if isinstance(c_col, os.PathLike):
        return read_c_col_file(os.fspath(c_col))
    if isinstance(c_col, str):
        text = c_col.strip()
        if not text:
            raise ValueError(f"c_col must be numbers separated by commas, or a path to a .npy or .txt file, "
                             f"got c_col={show(c_col)}")
        try:
            values = _numbers(text, f"c_col={show(c_col)}")
        except ValueError:
            if looks_like_a_path(text):
                return read_c_col_file(text)
            raise
        return check_c_col(values)
    try:
        return check_c_col(c_col)
    except OverflowError:  # a Python int beyond the float range
        raise ValueError(f"c_col entries must be finite numbers, got c_col={show(c_col)}") from None


def strategy_from(c_col: Any = None, strategy_matrix: Any = None, iterations: Any = None) -> Strategy | None:
    """The :class:`~epscert.matrix.strategies.Strategy` a request describes, or None (a DP-SGD request).

    ``c_col`` needs ``iterations`` (n); ``strategy_matrix`` reads n from the file (``iterations``, if
    given, must match it). Both at once, or ``iterations`` alone, are refused.
    """
    if c_col is not None and strategy_matrix is not None:
        raise ValueError(f"give either c_col or strategy_matrix, not both, got c_col={show(c_col)}, "
                         f"strategy_matrix={show(strategy_matrix)}")
    if c_col is None and strategy_matrix is None:
        if iterations is not None:
            raise ValueError(f"iterations applies to a matrix mechanism: give c_col or strategy_matrix with it, "
                             f"got iterations={show(iterations)}")
        return None
    if iterations is not None:
        iterations = check_int("iterations", iterations, 1)
    if c_col is not None:
        col = read_c_col(c_col)
        if iterations is None:
            raise ValueError("iterations is required with c_col (the number n of training iterations, the size "
                             "of C), got iterations=None")
        return toeplitz_strategy(col, iterations)
    if not isinstance(strategy_matrix, (str, os.PathLike)):
        raise ValueError(f"strategy_matrix must be a path to a .npy file, got strategy_matrix={show(strategy_matrix)}")
    return dense_strategy(os.fspath(strategy_matrix), iterations)


def mechanism_settings(strategy: Strategy | None, *, sampler: Any = None, steps: Any = None,
                       cycle_length: Any = None, mechanism: Any = None) -> tuple[Any, Any]:
    """(sampler, steps) for :class:`~epscert.config.CertifyConfig`, checked against the mechanism.

    With a strategy: the sampler is ``balls_and_bins_persistent`` (another explicit sampler is
    refused) and steps is the cycle length b (``cycle_length`` or ``steps``; required, 1 <= b <= n).
    Without one: ``cycle_length`` and ``mechanism='bandmf'`` are refused; the sampler defaults to
    ``balls_and_bins`` and ``steps`` passes through (None if not given: the caller says what it needs).
    """
    mech = check_mechanism(mechanism)
    if strategy is not None and not isinstance(strategy, Strategy):
        raise ValueError(f"strategy must be an epscert.matrix.strategies.Strategy (toeplitz_strategy or dense_strategy), "
                         f"got strategy={show(strategy)}")
    if strategy is None:
        if mech == "bandmf":
            raise ValueError("mechanism='bandmf' needs a strategy: c_col (with iterations) or strategy_matrix")
        if cycle_length is not None:
            raise ValueError(f"cycle_length applies to a matrix mechanism (give c_col or strategy_matrix); DP-SGD "
                             f"takes steps, got cycle_length={show(cycle_length)}")
        return (DEFAULT_SAMPLER.value if sampler is None else sampler), steps
    if mech == "dpsgd":
        raise ValueError(f"mechanism='dpsgd' conflicts with the strategy {strategy.describe()}: a strategy C is "
                         "the matrix mechanism (mechanism='bandmf')")
    if sampler is not None and parse_sampler(sampler) is not MATRIX_SAMPLER:
        raise ValueError(f"sampler={show(getattr(sampler, 'value', sampler))} conflicts with a strategy: the matrix "
                         f"mechanism uses sampler='{MATRIX_SAMPLER.value}' (each example keeps one bin for every "
                         "cycle); leave the sampler out")
    if steps is not None and cycle_length is not None:
        if check_int("steps", steps, 1) != check_int("cycle_length", cycle_length, 1):
            raise ValueError(f"steps is the cycle length of a matrix mechanism: give it once, got steps={show(steps)}, "
                             f"cycle_length={show(cycle_length)}")
    b = cycle_length if cycle_length is not None else steps
    if b is None:
        raise ValueError("cycle_length is required with a strategy (the Balls-and-Bins cycle length b: each "
                         "example takes part every b iterations), got cycle_length=None")
    b = check_int("cycle_length", b, 1)
    if b > strategy.iterations:
        raise ValueError(f"cycle_length must be <= iterations={strategy.iterations}, got cycle_length={b}")
    return MATRIX_SAMPLER.value, b
