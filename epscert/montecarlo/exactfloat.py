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

import bisect
import math

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
        # counted per distinct key, not over all rows x _EXP_SPAN slots: with many rows (the truncated sums'
        # buckets) two bincounts of that length per block were most of the cost (issue 33). The partial sums
        # are the same integers below 2**53, so the result is the same exact sum.
        keys, where = np.unique(key, return_inverse=True)
        self.hi[keys] += np.bincount(where, weights=(q >> _LO_BITS).astype(np.float64), minlength=keys.size)
        self.lo[keys] += np.bincount(where, weights=(q & _LO_MASK).astype(np.float64), minlength=keys.size)
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


#: Bins per row of an IEEE histogram (:func:`fold_ieee_histogram`): one per biased exponent field E in
#: [0, 2047), E = 2047 (inf, NaN) included so that a device can report non-finite values.
IEEE_BINS = 2048


def ieee_bin_units(e: int) -> int:
    """log2 of the unit, in units 2**-UNIT_LOG2, of the integer significand q of a float64 with biased exponent
    field E: the value is q · 2**(max(E, 1) - 1075) with q = M + 2**52·[E > 0] (M the 52 stored bits), i.e.
    q << (max(E, 1) + 51) units 2**-UNIT_LOG2 (the shift is >= 52: every float64 is a whole number of units)."""
    return max(int(e), 1) - 1075 + UNIT_LOG2


def fold_ieee_histogram(y_hist: np.ndarray, y2_hist: np.ndarray, ranges, levels: int) -> tuple[list, list, list]:
    """Exact (Σ Y, Σ Y², Σ min(Y, τ_k)) per row from per-(row, exponent) significand counts (units 2**-UNIT_LOG2).

    ``y_hist`` (rows, IEEE_BINS, 2, 3) int64: for the values Y of a row whose biased exponent field is E and
    whose 52 stored bits M are <= (flag 0) or > (flag 1) the row's threshold M_τ, the sums of q >> 26, of
    q & (2**26 - 1) and the count (q the integer significand of :func:`ieee_bin_units`); ``y2_hist``
    (rows, IEEE_BINS, 3): the same for the squares, flags merged. ``ranges`` B per row (float64 > 0): the
    levels τ_k = B·4^{-k}, k < ``levels`` (:func:`epscert.bounds.truncation_levels`), must be normal floats
    that share B's stored bits M_τ (:func:`levels_share_mantissa`), the flag's threshold.

    Why the truncated sums are exact: for every level, the values of a bin below τ_k's exponent are <= τ_k
    and add themselves, those of a bin above are > τ_k and add τ_k each; in τ_k's own bin, the order of two
    non-negative floats with the same exponent is the order of their stored bits, so flag 0 holds exactly
    the values <= τ_k. Every term is an integer in units 2**-UNIT_LOG2, so Σ min(Y, τ_k) is exactly the sum
    the numpy path forms from the same values (:class:`RowSums` of ``np.minimum(Y, τ_k)``). Values with
    E = 2047 (inf or NaN) raise FloatingPointError.
    """
    y_hist, y2_hist = np.asarray(y_hist), np.asarray(y2_hist)
    rows = y_hist.shape[0]
    if y_hist[:, IEEE_BINS - 1].any() or y2_hist[:, IEEE_BINS - 1].any():
        raise FloatingPointError("a sampled value is not finite")
    sum_y, sum_y2, extra = [], [], []
    for r in range(rows):
        tau_bits = int(np.float64(ranges[r]).view(np.int64))
        m_tau, e_tau0 = tau_bits & ((1 << 52) - 1), tau_bits >> 52
        per_e = {}  # E -> [units of flag 0, units of flag 1, count of flag 0, count of flag 1]
        for e, flag in zip(*np.nonzero(y_hist[r, :, :, 2])):
            hi, lo, cnt = (int(v) for v in y_hist[r, e, flag])
            per_e.setdefault(int(e), [0, 0, 0, 0])
            per_e[int(e)][flag] += ((hi << _LO_BITS) + lo) << ieee_bin_units(e)
            per_e[int(e)][2 + flag] += cnt
        total2 = 0
        for e in np.flatnonzero(y2_hist[r, :, 2]).tolist():
            hi, lo = int(y2_hist[r, e, 0]), int(y2_hist[r, e, 1])
            total2 += ((hi << _LO_BITS) + lo) << ieee_bin_units(e)
        exps = sorted(per_e)
        below, above = [0], [0]  # below[i]: units of bins exps[:i]; above[i]: count of bins exps[i:]
        for e in exps:
            below.append(below[-1] + per_e[e][0] + per_e[e][1])
        for e in reversed(exps):
            above.append(above[-1] + per_e[e][2] + per_e[e][3])
        above.reverse()
        sum_y.append(below[-1])
        sum_y2.append(total2)
        for k in range(levels):
            e_tau = e_tau0 - 2 * k
            tau_units = ((1 << 52) + m_tau) << ieee_bin_units(e_tau)
            i = bisect.bisect_left(exps, e_tau)
            if i < len(exps) and exps[i] == e_tau:
                u0, _, _, c1 = per_e[e_tau]
                extra.append(below[i] + u0 + tau_units * (c1 + above[i + 1]))
            else:
                extra.append(below[i] + tau_units * above[i])
    return sum_y, sum_y2, extra


def levels_share_mantissa(ranges, levels: int) -> bool:
    """Whether every τ_k = B·4^{-k} (k < ``levels``) of every B in ``ranges`` is a normal float64 with B's
    stored bits (true unless B·4^{-levels+1} falls below 2**-1022, or B is not a positive normal float)."""
    for b in np.asarray(ranges, dtype=np.float64).ravel().tolist():
        e = int(np.float64(b).view(np.int64)) >> 52
        if not (math.isfinite(b) and b > 0.0 and e - 2 * (levels - 1) >= 1 and e < 2047):
            return False
    return True
