"""Exact, order-independent sums of non-negative floats of any magnitude.

The fixed-point grid of :mod:`epscert.montecarlo.exactsum` (units 2**-52) cannot hold the
conditional estimator's values, which reach 1e-30 and below, nor their squares. Here each
finite y >= 0 is split exactly as y = q * 2**(e - 53) (``np.frexp``: q an integer < 2**53,
e the binary exponent), and the q are summed per exponent. Every float64 >= 0, subnormals
included, is an integer multiple of 2**-UNIT_LOG2 (2**-1126 <= 2**-1074 / 2**52), so the
result is the exact sum of the values in units 2**-UNIT_LOG2, as a Python int.

No rounding happens anywhere: the sum is exact, hence associative and commutative, and
merges are bit-for-bit independent of the shard layout (as for the grid sums).
Vectorised: per call, the 27 high and 26 low bits of q are counted per (row, exponent) with
``np.bincount``; every partial sum is an integer below 2**53 for fewer than 2**26 values per
row, so the float64 weights add exactly.
"""

from __future__ import annotations


import numpy as np

#: Sums are integers in units of 2**-UNIT_LOG2.
UNIT_LOG2 = 1126
_LO_BITS = 26
_LO_MASK = (1 << _LO_BITS) - 1
_MAX_CALL = 2**26
_EXP_MIN, _EXP_SPAN = -1100, 2200  # frexp exponents of float64 lie in [-1073, 1024]


def float_units(value: float) -> int:
    """A finite float >= 0 as the exact integer count of units 2**-UNIT_LOG2."""
    mant, expo = np.frexp(np.float64(value))
    return int(np.ldexp(mant, 53)) << int(expo - 53 + UNIT_LOG2) if value else 0


def float_sum_rows(values: np.ndarray) -> list[int]:
    """Exact Σ_j values[i, j] in units 2**-UNIT_LOG2, per row i (values finite and >= 0)."""
    sums = RowSums(np.asarray(values).shape[0] if np.ndim(values) == 2 else 0)
    sums.add(values)
    return sums.totals()


class RowSums:
    """Exact per-row sums folded over many calls, turned into Python ints only at :meth:`totals`.

    Each :meth:`add` counts the 27 high and 26 low bits of every value's integer mantissa per (row,
    exponent) into float64 arrays. A value adds less than 2**27 to a count, so the counts stay integers
    below 2**53, where float64 adds exactly, for fewer than 2**26 values per row; past that many the
    counts are flushed into the Python-int totals first. The result is the exact sum whatever the
    calls, as for :func:`float_sum_rows` (the per-call conversion into Python ints was half its time
    on the value estimators' blocks).
    """

    def __init__(self, rows: int) -> None:
        self.rows = int(rows)
        self.hi = np.zeros(self.rows * _EXP_SPAN)
        self.lo = np.zeros(self.rows * _EXP_SPAN)
        self.pending = 0  # values per row counted in hi/lo since the last flush
        self.ints = [0] * self.rows

    def add(self, values: np.ndarray) -> None:
        y = np.asarray(values, dtype=np.float64)
        if y.ndim != 2 or y.shape[0] != self.rows:
            raise ValueError(f"float_sum_rows needs a 2-D array of {self.rows} rows, got shape={y.shape}")
        n = y.shape[1]
        if n == 0:
            return
        if n >= _MAX_CALL:
            half = n // 2
            self.add(y[:, :half])
            self.add(y[:, half:])
            return
        if not (y.min() >= 0.0 and np.isfinite(y.max())):  # also false for NaN
            raise ValueError(f"float_sum_rows needs finite values >= 0, got min={y.min()!r}, max={y.max()!r}")
        if self.pending + n >= _MAX_CALL:
            self._flush()
        nonzero = np.count_nonzero(y)
        if 4 * nonzero < y.size:  # mostly zeros (value estimators where L is below ε): they add nothing
            row_of, col = np.nonzero(y)
            mant, expo = np.frexp(y[row_of, col])
            key = row_of * _EXP_SPAN + (expo - _EXP_MIN)
        else:
            mant, expo = np.frexp(y)
            key = (expo + (np.arange(self.rows)[:, None] * _EXP_SPAN - _EXP_MIN)).ravel()
            mant = mant.ravel()
        q = np.ldexp(mant, 53).astype(np.int64)  # exact: mant has at most 53 significant bits
        size = self.rows * _EXP_SPAN
        self.hi += np.bincount(key, weights=(q >> _LO_BITS).astype(np.float64), minlength=size)
        self.lo += np.bincount(key, weights=(q & _LO_MASK).astype(np.float64), minlength=size)
        self.pending += n

    def add_at(self, rows: np.ndarray, values: np.ndarray) -> None:
        """Add each of ``values`` (1-D, finite, >= 0) to its row ``rows`` (1-D ints, the same length): the
        sums of :meth:`add` for an array holding each value in its row and zeros elsewhere."""
        y = np.asarray(values, dtype=np.float64)
        n = y.size
        if n == 0:
            return
        if not (y.min() >= 0.0 and np.isfinite(y.max())):
            raise ValueError(f"float_sum_rows needs finite values >= 0, got min={y.min()!r}, max={y.max()!r}")
        if n >= _MAX_CALL:
            self.add_at(rows[: n // 2], y[: n // 2])
            self.add_at(rows[n // 2:], y[n // 2:])
            return
        if self.pending + n >= _MAX_CALL:
            self._flush()
        mant, expo = np.frexp(y)
        key = np.asarray(rows, dtype=np.int64) * _EXP_SPAN + (expo - _EXP_MIN)
        q = np.ldexp(mant, 53).astype(np.int64)
        size = self.rows * _EXP_SPAN
        self.hi += np.bincount(key, weights=(q >> _LO_BITS).astype(np.float64), minlength=size)
        self.lo += np.bincount(key, weights=(q & _LO_MASK).astype(np.float64), minlength=size)
        self.pending += n  # at most n values reach one row

    def _flush(self) -> None:
        hi, lo = self.hi, self.lo
        for k in np.flatnonzero((hi != 0) | (lo != 0)).tolist():
            row, e = divmod(k, _EXP_SPAN)
            e += _EXP_MIN
            total = (int(hi[k]) << _LO_BITS) + int(lo[k])
            self.ints[row] += total << (e - 53 + UNIT_LOG2)
        hi.fill(0.0)
        lo.fill(0.0)
        self.pending = 0

    def totals(self) -> list[int]:
        """The exact sums so far, per row (units 2**-UNIT_LOG2)."""
        self._flush()
        return list(self.ints)
