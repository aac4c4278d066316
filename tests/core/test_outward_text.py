"""epscert.inverse.best.outward_text: a printed bound is still a bound. Each printed decimal, read back exactly
(fractions.Fraction), lies on the bound's side of the exact binary value and within one unit of its last digit;
the CLI's two-sided line and the certificate's summary use it."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from epscert.inverse.best import outward_text


@pytest.mark.parametrize("digits, places", [(4, None), (6, None), (2, None), (None, 3), (None, 0)])
def test_printed_bounds_stay_on_their_side(digits, places):
    rng = np.random.default_rng(4)
    values = np.concatenate([[7.609375, 7.46875, 0.19140625, 0.177734375, 0.1, 1.0, 5e-324, 1e-7, 123456.7, -7.609375],
                             np.exp(rng.uniform(-30, 12, 300)), -np.exp(rng.uniform(-5, 5, 30))])
    for value in values.tolist():
        exact = Fraction(value)
        for up in (True, False):
            text = outward_text(value, up=up, **({"digits": digits} if digits else {"places": places}))
            printed = Fraction(text)
            assert (printed >= exact) if up else (printed <= exact), (value, up, text)
            if places is not None:
                unit = Fraction(1, 10**places)
            else:
                unit = Fraction(10) ** (math.floor(math.log10(abs(value))) - digits + 1) * 10  # one unit, with room
            assert abs(printed - exact) <= unit, (value, up, text)


def test_specials_and_the_readme_example():
    assert outward_text(math.inf, up=True) == "inf" and outward_text(0.0, up=False) == "0"
    assert outward_text(7.609375, up=True) == "7.610"  # printed 7.609 before: below the certified 7.609375
    assert outward_text(7.46875, up=False) == "7.468"  # printed 7.469 before: above the certified 7.46875
    assert outward_text(7.609375, up=True, digits=6) == "7.60938"
    assert outward_text(0.0, up=True, places=3) == "0.000"


def test_cli_context_labels_round_by_their_side():
    from pipelines.epsilon import CONTEXT, MATRIX_LABELS, _bound_side

    sides = {label: _bound_side(label) for _, label, _, _ in CONTEXT} | {v: _bound_side(v) for v in MATRIX_LABELS.values()}
    for label, side in sides.items():
        assert side is (False if "ε >=" in label else True), label
