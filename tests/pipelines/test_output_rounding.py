"""The results table prints its bound columns outward: a printed upper bound is never below the certified one, a
printed lower bound never above it (pipelines.output.BOUND_COLUMNS)."""

from __future__ import annotations

import io
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest

from pipelines.output import BOUND_COLUMNS, _cell, print_table


def _row(**values) -> dict:
    base = dict(sampler="balls_and_bins", sigma=1.0, steps=10, epochs=1, method="naive", direction="both",
                epsilon=1.0, delta_lower=None, delta=None, delta_upper=None, std_error=None, samples=100,
                guarantee="mc_upper_confidence")
    base.update(values)
    return base


def _printed(value: float, up: bool) -> Fraction:
    return Fraction(_cell(value, up))  # Fraction parses the decimal text exactly


@pytest.mark.parametrize("seed", [0, 1])
def test_bound_cells_round_outward_on_the_exact_value(seed):
    """Against the exact rational value of each double: up >= value >= down, and both within one unit of the
    sixth significant digit (a cell is not loosened by more than its rounding)."""
    rng = np.random.default_rng(seed)
    values = np.concatenate([10.0 ** rng.uniform(-15, 7, 400), [1.2345675e-06, 9.999999e-07, 0.25, 3.0]])
    for v in values.tolist():
        exact = Fraction(v)
        up, down = _printed(v, True), _printed(v, False)
        assert down <= exact <= up
        unit = Fraction(10) ** (Decimal(v).adjusted() - 5)  # one unit of the sixth significant digit
        assert up - down <= unit


def test_nearest_would_have_understated():
    """A value whose nearest six digits lie below it: the upper cell is above it, the estimate cell is not."""
    v = 1.2345641e-06
    assert Fraction(f"{v:.6g}") < Fraction(v)  # the old cell (to the nearest) was below the certified bound
    assert _printed(v, True) >= Fraction(v)
    assert _cell(v) == f"{v:.4e}"  # a number that bounds nothing is still to the nearest (4 digits below 1e-4)


def test_table_prints_each_bound_column_outward():
    rows = [_row(delta_upper=1.2345641e-06, delta_lower=1.2345689e-06, delta=1.2345665e-06, epsilon=0.123456789)]
    out = io.StringIO()
    print_table(rows, out)
    header, _, line = out.getvalue().splitlines()
    names, cells = header.split(), line.split()
    got = dict(zip(names, cells))
    assert Fraction(got["delta_upper"]) >= Fraction(rows[0]["delta_upper"])
    assert Fraction(got["delta_lower"]) <= Fraction(rows[0]["delta_lower"])
    assert got["delta"] == _cell(rows[0]["delta"])
    assert set(BOUND_COLUMNS) >= {"delta_upper", "delta_lower"}


def test_small_bounds_are_written_like_the_other_cells():
    """Below 1e-4 (and from 1e6 on) a bound cell is in scientific notation with a two-digit exponent, as the table's
    other cells are; the digits are still the outward ones."""
    assert _cell(3.0798e-05, True) == "3.07980e-05" and _cell(3.0798e-05, False) == "3.07979e-05"
    assert _cell(2.5e7, True) == "2.50000e+07"
    assert _cell(0.0123, True) == "0.0123001"  # fixed notation in between (the double is just above 0.0123)
