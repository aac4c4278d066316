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


def float_sum_rows(values: np.ndarray) -> list[int]:
    """Exact Σ_j values[i, j] in units 2**-UNIT_LOG2, per row i (values finite and >= 0)."""
    y = np.asarray(values, dtype=np.float64)
    if y.ndim != 2:
        raise ValueError(f"float_sum_rows needs a 2-D array, got shape={y.shape}")
    rows, n = y.shape
    if n == 0:
        return [0] * rows
    if n >= _MAX_CALL:
        half = n // 2
        return [a + b for a, b in zip(float_sum_rows(y[:, :half]), float_sum_rows(y[:, half:]))]
    if not (y.min() >= 0.0 and np.isfinite(y.max())):  # also false for NaN
        raise ValueError(f"float_sum_rows needs finite values >= 0, got min={y.min()!r}, max={y.max()!r}")
    mant, expo = np.frexp(y)
    q = np.ldexp(mant, 53).astype(np.int64)  # exact: mant has at most 53 significant bits
    key = (np.arange(rows)[:, None] * _EXP_SPAN + (expo - _EXP_MIN)).ravel()
    hi = np.bincount(key, weights=(q >> _LO_BITS).ravel().astype(np.float64), minlength=rows * _EXP_SPAN)
    lo = np.bincount(key, weights=(q & _LO_MASK).ravel().astype(np.float64), minlength=rows * _EXP_SPAN)
    out = [0] * rows
    for k in np.flatnonzero((hi != 0) | (lo != 0)).tolist():
        row, e = divmod(k, _EXP_SPAN)
        e += _EXP_MIN
        total = (int(hi[k]) << _LO_BITS) + int(lo[k])
        out[row] += total << (e - 53 + UNIT_LOG2)
    return out
