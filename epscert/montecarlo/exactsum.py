"""Exact, order-independent sums of values in [0, 1] on a fixed-point grid.

Each value y in [0, 1] is rounded UP to the grid 2**-52 (q = ceil(y * 2**52),
an exact operation in float64) and the integers q are summed exactly. The
rounding raises a value by at most 2**-52, so the mean of the rounded values is
>= the true mean and any upper confidence bound computed from them stays valid
(SPEC §3); the bias is below 2.3e-16 per unit of scale.

Integer sums are associative and commutative, so the accumulators of
:mod:`epscert.montecarlo.accumulator` merge bit-for-bit identically in any order or tree
shape, however a shard's samples are split (the issue's merge invariance).
Vectorised: q < 2**53 is split into 27 + 26 bit halves whose int64 sums cannot
overflow for fewer than 2**36 values per call.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

GRID_LOG2 = 52  # sums are integers in units of 2**-GRID_LOG2
_LO_BITS = 26
_LO_MASK = (1 << _LO_BITS) - 1
_MAX_CALL = 2**36
_SCALE = float(2**GRID_LOG2)  # y * 2**52 == ldexp(y, 52) exactly for y in [0, 1]


def grid_sum(values: np.ndarray) -> int:
    """Exact sum of ceil(y * 2**52) over values y in [0, 1] (raises on anything else)."""
    y = np.asarray(values, dtype=np.float64).ravel()
    if y.size == 0:
        return 0
    if y.size >= _MAX_CALL:
        half = y.size // 2
        return grid_sum(y[:half]) + grid_sum(y[half:])
    if not (y.min() >= 0.0 and y.max() <= 1.0):  # also false for NaN
        raise ValueError(f"grid_sum needs values in [0, 1], got min={y.min()!r}, max={y.max()!r}")
    q = np.ceil(np.ldexp(y, GRID_LOG2)).astype(np.int64)
    hi = int(np.sum(q >> _LO_BITS, dtype=np.int64))
    lo = int(np.sum(q & _LO_MASK, dtype=np.int64))
    return (hi << _LO_BITS) + lo


def grid_sum_rows(values: np.ndarray) -> list[int]:
    """``[grid_sum(row) for row in values]`` for a 2-D array, in one vectorised pass.

    The same exact integers: ceil(y * 2**52) is ``ldexp`` by a power of two (exact for
    y in [0, 1]), and the 27 + 26 bit halves are summed per row in int64 without overflow.
    """
    y = np.asarray(values, dtype=np.float64)
    if y.ndim != 2:
        raise ValueError(f"grid_sum_rows needs a 2-D array, got shape={y.shape}")
    if y.shape[1] == 0:
        return [0] * y.shape[0]
    if y.shape[1] >= _MAX_CALL:
        half = y.shape[1] // 2
        return [a + b for a, b in zip(grid_sum_rows(y[:, :half]), grid_sum_rows(y[:, half:]))]
    if not (y.min() >= 0.0 and y.max() <= 1.0):  # also false for NaN
        raise ValueError(f"grid_sum needs values in [0, 1], got min={y.min()!r}, max={y.max()!r}")
    q = np.ceil(y * _SCALE).astype(np.int64)
    hi = np.sum(q >> _LO_BITS, axis=1, dtype=np.int64).tolist()
    lo = np.sum(q & _LO_MASK, axis=1, dtype=np.int64).tolist()
    return [(h << _LO_BITS) + l for h, l in zip(hi, lo)]


def grid_mean(units: int, count: int) -> float:
    """Correctly rounded ``units * 2**-52 / count``."""
    if count <= 0:
        raise ValueError(f"count must be > 0, got count={count}")
    return float(Fraction(units, count << GRID_LOG2))
