"""Exact row sums folded over many blocks (epscert.montecarlo.exactfloat.RowSums) against Fractions.

Sparse blocks (mostly zeros) and dense blocks take different paths; the counts are flushed into Python
integers before they could reach 2**53 (checked with the flush threshold lowered to 8 values)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from epscert.montecarlo import exactfloat
from epscert.montecarlo.exactfloat import UNIT_LOG2, RowSums


def blocks(seed: int, density: float, count: int = 6):
    rng = np.random.default_rng(seed)
    for _ in range(count):
        y = np.exp(rng.normal(-300.0, 200.0, size=(3, 17)))  # 1e-300 .. 1e-50, subnormals included
        y[rng.random(y.shape) >= density] = 0.0
        y[0, 0] = 5e-324  # the smallest subnormal
        yield y


def exact(all_blocks, row: int) -> Fraction:
    return sum((Fraction(float(v)) for y in all_blocks for v in y[row]), Fraction(0))


@pytest.mark.parametrize("density", [0.1, 0.9], ids=["sparse", "dense"])
@pytest.mark.parametrize("max_call", [exactfloat._MAX_CALL, 8], ids=["one-flush", "many-flushes"])
def test_folded_sums_are_exact(density, max_call, monkeypatch):
    monkeypatch.setattr(exactfloat, "_MAX_CALL", max_call)
    got = RowSums(3)
    seen = list(blocks(1, density))
    for y in seen:
        got.add(y)
    first = got.totals()
    got.add(seen[0])  # adding after totals() goes on from the totals
    second = got.totals()
    for row in range(3):
        assert Fraction(first[row], 2**UNIT_LOG2) == exact(seen, row)
        assert Fraction(second[row], 2**UNIT_LOG2) == exact(seen + seen[:1], row)


def test_bad_blocks_are_refused():
    sums = RowSums(2)
    with pytest.raises(ValueError, match="2 rows"):
        sums.add(np.zeros((3, 4)))
    with pytest.raises(ValueError, match="finite values >= 0"):
        sums.add(np.array([[1.0, -1.0], [0.0, 0.0]]))
    with pytest.raises(ValueError, match="finite values >= 0"):
        sums.add(np.array([[1.0, np.nan], [0.0, 0.0]]))


def test_truncated_sums_from_buckets_are_the_sums_of_the_truncated_values():
    """Independent value: the exact sums of min(Y, τ) formed value by level (``ValueSums.add``), against the
    bucketed form (issue 33), on values with zeros, subnormals and ties at the levels, over several calls."""
    from epscert.bounds.truncated_lcb import LEVELS, truncation_levels
    from epscert.montecarlo.accumulator import ValueSums

    rng = np.random.default_rng(0)
    for _ in range(4):
        n_eps = int(rng.integers(1, 5))
        ranges = rng.uniform(1e-8, 1.0, n_eps)
        taus = np.stack([truncation_levels(r) for r in ranges])
        plain, bucketed = ValueSums(n_eps, n_eps * LEVELS), ValueSums(n_eps, n_eps * LEVELS).truncated_at(taus)
        for _ in range(3):
            n = int(rng.integers(4, 300))
            y = np.exp(rng.uniform(-80.0, 0.0, (n_eps, n))) * ranges[:, None]
            y[rng.random((n_eps, n)) < 0.4] = 0.0
            y[:, :3] = taus[:, [0, 5, LEVELS - 1]]
            y[:, 3] = 1e-320
            plain.add(y, np.minimum(y[:, None, :], taus[:, :, None]).reshape(n_eps * LEVELS, n))
            bucketed.add_truncated(y)
        assert bucketed.level_totals() == tuple(plain.extra.totals())
        assert bucketed.y.totals() == plain.y.totals() and bucketed.count == plain.count


@pytest.mark.parametrize("max_call", [exactfloat._MAX_CALL, 8], ids=["one-flush", "many-flushes"])
def test_add_at_sums_each_value_into_its_row_exactly(max_call, monkeypatch):
    """add_at against Fractions: many values per (row, exponent) key (values equal or a few ulps apart, so the
    per-key counts carry), subnormals, rows hit in any order, over several calls."""
    monkeypatch.setattr(exactfloat, "_MAX_CALL", max_call)
    rng = np.random.default_rng(3)
    got, seen = RowSums(5), []
    for _ in range(4):
        rows = rng.integers(0, 5, 200)
        values = np.where(rng.random(200) < 0.5, 1.0 - rng.integers(0, 4, 200) * 2.0**-53,
                          np.exp(rng.normal(-400.0, 300.0, 200)))
        values[:3] = [5e-324, 1e-310, 2.0**1000]
        got.add_at(rows, values)
        seen.append((rows, values))
    totals = got.totals()
    for row in range(5):
        want = sum((Fraction(float(v)) for rows, values in seen for r, v in zip(rows, values) if r == row), Fraction(0))
        assert Fraction(totals[row], 2**UNIT_LOG2) == want
