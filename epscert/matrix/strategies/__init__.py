"""Matrix-mechanism strategies C (DP-FTRL / BandMF) and the Gram matrix of their modes.

A matrix mechanism releases y = C x + σ z, z ~ N(0, I_n), where x in R^n holds the (clipped,
norm <= 1) contributions of one example at the n iterations and C is lower-triangular; σ is the
noise multiplier relative to the clip norm (JAX Privacy's convention: the noise is not scaled by
any norm of C). With Balls-and-Bins batches of cycle length b (JAX Privacy's
``BallsInBinsSampling``) an example keeps one bin j, drawn uniformly from {0, .., b-1}, and takes
part in the iterations t ≡ j (mod b), t < n: its participation pattern is x_j (1 there, 0
elsewhere) and its *mode* is m_j = C x_j.

Everything the accountant needs is the b x b Gram matrix G0_jk = <m_j, m_k> (module
:mod:`epscert.matrix.strategies.gram`), computed without forming C for a banded Toeplitz strategy
(:mod:`epscert.matrix.strategies.toeplitz`) and from the matrix for a dense one
(:mod:`epscert.matrix.strategies.dense`).

A :class:`Strategy` is a frozen, validated value: ``toeplitz`` by the nonzero entries of C's
first column (``c_col``, as JAX Privacy takes it), or ``dense`` by a ``.npy`` file of an n x n
lower-triangular matrix. Both need non-negative, finite entries (the dominating pair of
:mod:`epscert.matrix.pair` relies on C >= 0 entrywise).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from epscert.checks import check_int, show
from epscert.matrix.strategies.dense import MAX_DENSE_ITERATIONS, load_dense
from epscert.matrix.strategies.gram import ModeGram, bin_counts, mode_gram

__all__ = ["Strategy", "ModeGram", "bin_counts", "mode_gram", "toeplitz_strategy", "dense_strategy",
           "MAX_ITERATIONS", "MAX_DENSE_ITERATIONS", "MAX_BANDS"]

#: Largest number of iterations n of a Toeplitz strategy (10^7: far beyond any training run).
MAX_ITERATIONS = 10**7
#: Most nonzero entries of c_col (the bands of C).
MAX_BANDS = 100_000
KINDS = ("toeplitz", "dense")


@dataclass(frozen=True)
class Strategy:
    """A validated strategy matrix C of size ``iterations`` x ``iterations``.

    ``kind='toeplitz'``: banded lower-triangular Toeplitz, C_{t,u} = c_col[t - u] for
    0 <= t - u < len(c_col), else 0. ``kind='dense'``: the matrix in the ``.npy`` file ``path``,
    checked on construction (lower-triangular, finite, non-negative, n <= MAX_DENSE_ITERATIONS)
    and identified by the SHA-256 of its bytes, so a changed file is a different strategy.
    """

    kind: str
    iterations: int
    c_col: tuple[float, ...] = ()
    path: str | None = None
    sha256: str = field(default="")

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"strategy kind must be one of {', '.join(KINDS)}, got kind={show(self.kind)}")
        n = check_int("iterations", self.iterations, 1)
        object.__setattr__(self, "iterations", n)
        if self.kind == "toeplitz":
            if n > MAX_ITERATIONS:
                raise ValueError(f"iterations must be <= {MAX_ITERATIONS}, got iterations={n}")
            col = check_c_col(self.c_col)[:n]  # bands past n never act
            col = col[: int(np.flatnonzero(col)[-1]) + 1] if np.any(col) else col  # trailing zeros: the same C
            object.__setattr__(self, "c_col", tuple(float(v) for v in col))
            digest = hashlib.sha256(np.asarray(self.c_col, dtype=np.float64).tobytes()).hexdigest()
            object.__setattr__(self, "sha256", digest)
            return
        if self.path is None:
            raise ValueError("a dense strategy needs path=<a .npy file>, got path=None")
        matrix, digest = load_dense(self.path)
        if matrix.shape[0] != n:
            raise ValueError(f"iterations must match the matrix in {self.path!r}: got iterations={n}, "
                             f"matrix size={matrix.shape[0]}")
        if self.sha256 and self.sha256 != digest:
            raise ValueError(f"the matrix in {self.path!r} changed: sha256={digest[:16]}..., expected "
                             f"sha256={self.sha256[:16]}...")
        object.__setattr__(self, "sha256", digest)

    @property
    def bands(self) -> int:
        """Nonzero diagonals of C (Toeplitz: len(c_col) after trailing zeros; dense: n)."""
        if self.kind == "dense":
            return self.iterations
        nz = np.flatnonzero(np.asarray(self.c_col))
        return int(nz[-1]) + 1 if nz.size else 0

    def matrix(self) -> np.ndarray:
        """C as a dense array (tests and small n only; the accountant never forms it for Toeplitz)."""
        n = self.iterations
        if self.kind == "dense":
            return load_dense(self.path)[0]
        out = np.zeros((n, n))
        for k, value in enumerate(self.c_col):
            out += np.diag(np.full(n - k, value), -k)
        return out

    def describe(self) -> str:
        """Short text for rows and logs: 'toeplitz[16 bands]:<sha8>' or 'dense:<sha8>'."""
        if self.kind == "toeplitz":
            return f"toeplitz[{self.bands} bands]:{self.sha256[:8]}"
        return f"dense:{os.path.basename(str(self.path))}:{self.sha256[:8]}"

    def to_dict(self) -> dict:
        """The identity of the strategy (its content hash, not its path)."""
        return {"kind": self.kind, "iterations": self.iterations, "sha256": self.sha256}

    def gram(self, cycle_length: int) -> ModeGram:
        """The Gram matrix of the b = ``cycle_length`` modes (cached per strategy and b)."""
        return mode_gram(self, cycle_length)

    def is_identity(self) -> bool:
        """C = c·I for c > 0 (the DP-SGD case: b disjoint modes; scaling C scales every mode)."""
        return self.kind == "toeplitz" and self.bands == 1


def check_c_col(c_col: object) -> np.ndarray:
    """c_col as a 1-D float array: finite, non-negative, not all zero, at most MAX_BANDS entries (text:
    numbers separated by commas or semicolons, none of the fields empty)."""
    if isinstance(c_col, str):
        fields = c_col.replace(";", ",").split(",")
        if len(fields) > 1 and not all(v.strip() for v in fields):  # '1,,2' is a missing value, not [1, 2]
            raise ValueError(f"c_col has an empty field (a comma or semicolon with no number on one side, as in "
                             f"'1,,2'), got c_col={show(c_col)}")
        try:
            c_col = [float(v) for v in fields if v.strip()]
        except ValueError:
            raise ValueError(f"c_col must be numbers separated by commas, got c_col={show(c_col)}") from None
    try:
        col = np.asarray(c_col, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"c_col must be a 1-D list of numbers, got c_col={show(c_col)}") from None
    if col.ndim != 1 or col.size == 0:
        raise ValueError(f"c_col must be a non-empty 1-D list of numbers, got c_col={show(c_col)}")
    if col.size > MAX_BANDS:
        raise ValueError(f"c_col has {col.size} entries, more than the limit {MAX_BANDS}")
    if not np.all(np.isfinite(col)):
        bad = int(np.flatnonzero(~np.isfinite(col))[0])
        raise ValueError(f"c_col entries must be finite, got c_col[{bad}]={col[bad]}")
    if np.any(col < 0):
        bad = int(np.flatnonzero(col < 0)[0])
        raise ValueError(f"c_col entries must be >= 0 (the dominating pair needs C >= 0), got c_col[{bad}]={col[bad]}")
    if not np.any(col > 0):
        raise ValueError("c_col must have a positive entry, got all zeros")
    return col


def toeplitz_strategy(c_col: Sequence[float] | np.ndarray | str, iterations: int) -> Strategy:
    """The banded Toeplitz strategy with first-column nonzeros ``c_col`` and n = ``iterations``."""
    return Strategy(kind="toeplitz", iterations=iterations, c_col=tuple(check_c_col(c_col).tolist()))


def dense_strategy(path: str | os.PathLike, iterations: int | None = None) -> Strategy:
    """The dense strategy in the ``.npy`` file ``path`` (n read from the file when not given)."""
    matrix, _ = load_dense(str(path))
    n = matrix.shape[0] if iterations is None else iterations
    return Strategy(kind="dense", iterations=n, path=str(path))
