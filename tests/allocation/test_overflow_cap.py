"""The top cap of the product grid and pairs of tiny mass (issue 11: no IndexError at small σ).

Kernel level: laws of powers of two (every pair value and pair mass exact unless it under- or
overflows) combined by one product step; the exact E f(X·Y) in rational arithmetic must lie
between the chains' evaluations for (v − K)_+ (upper: plus the excess moment, slope 1) and
(1 − v/K)_+ (slope 0: no excess), and the first moment below its bound.

Bracket level: the configurations that crashed (σ = 0.3 over 64–100 epochs, σ = 0.5 over 1000
epochs) give finite, ordered, monotone bounds, and the upper bound lies above the independent
composed lower bound of :mod:`epscert.analytic.composed` (sliced one-epoch pair, dp_accounting).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from epscert.allocation import AllocationBracket
from epscert.allocation.cells import TOP_LIMIT, CellLaw, combine, rel_product
from epscert.analytic.composed import composed_lower_bounds
from epscert.config import Direction

CELLS, TAU = 24, 1e-12

# values 2^-10, 1/2, 1, 2^520, 2^700 with masses 2^-400, ~1/2, ~1/2, 2^-505, 2^-720: pairs over the
# cap with normal mass (2^520·2^520), over the cap and beyond the float range with tiny mass
# (2^520·2^700), and of tiny mass below the cap (2^-10·2^700)
EXPONENTS = [-10, -1, 0, 520, 700]
MASS_EXPONENTS = [-400, None, None, -505, -720]


def _law() -> tuple[CellLaw, list[Fraction], list[Fraction]]:
    small = [Fraction(2) ** e for e in MASS_EXPONENTS if e is not None]
    rest = (1 - sum(small)) / 2
    masses = [Fraction(2) ** e if e is not None else rest for e in MASS_EXPONENTS]
    values = [Fraction(2) ** e for e in EXPONENTS]
    law = CellLaw(np.array([float(v) for v in values]), np.array([float(m) for m in masses]))
    # the float masses are the exact ones except the two halves (rounded): use the floats exactly
    return law, values, [Fraction(float(m)) for m in masses]


def _exact(values, masses, f) -> Fraction:
    return sum(mi * mj * f(vi * vj) for vi, mi in zip(values, masses) for vj, mj in zip(values, masses))


def _on(law: CellLaw, f) -> Fraction:
    return sum(Fraction(float(m)) * f(Fraction(float(v))) for v, m in zip(law.values, law.masses))


def test_pairs_over_the_cap_and_of_tiny_mass_stay_on_the_safe_side():
    law, values, masses = _law()
    with np.errstate(over="ignore"):
        assert values[3] * values[3] > Fraction(TOP_LIMIT) and law.values[3] * law.values[4] == np.inf
    upper, st_up = combine(law, law, "product", "upper", cells=CELLS, tau=TAU)
    lower, st_lo = combine(law, law, "product", "lower", cells=CELLS, tau=TAU)
    assert np.all(np.isfinite(upper.values)) and np.all(np.isfinite(lower.values))
    assert upper.values[-1] <= 2 * TOP_LIMIT and st_up.excess_moment > 0.0
    r_up = Fraction(rel_product(st_up.mass_rel_error, st_up.value_rel_error))
    r_lo, g_lo = Fraction(st_lo.mass_rel_error), Fraction(st_lo.value_rel_error)
    excess = Fraction(st_up.excess_moment)
    # the first moment: exact <= (1 + r) m1(upper) + D
    exact_m1 = _exact(values, masses, lambda v: v)
    assert exact_m1 <= (1 + r_up) * _on(upper, lambda v: v) + excess
    for k_exp in (-5, 0, 100, 690, 1030, 1100):
        k = Fraction(2) ** k_exp

        def remove(v, k=k):
            return max(v - k, Fraction(0))

        def add(v, k=k):
            return max(1 - v / k, Fraction(0))

        for f, slope in ((remove, 1), (add, 0)):
            true = _exact(values, masses, f)
            assert true <= (1 + r_up) * _on(upper, f) + slope * excess, (k_exp, f.__name__)
        # lower chain: e^ε moved outward by the value allowance (K·(1 + Γ) for remove, where K is e^ε;
        # K/(1 + Γ) for add, where 1/K is), masses by 1 − r − Γ
        low = (1 - r_lo - g_lo)
        assert low * _on(lower, lambda v: max(v - k * (1 + g_lo), Fraction(0))) <= _exact(values, masses, remove)
        assert low * _on(lower, lambda v: max(1 - v * (1 + g_lo) / k, Fraction(0))) <= _exact(values, masses, add)


CRASHED = [(0.3, 10, 64), pytest.param(0.3, 100, 100, marks=pytest.mark.slow),
           pytest.param(0.5, 10, 1000, marks=pytest.mark.slow)]


@pytest.mark.parametrize("sigma,steps,epochs", CRASHED)
def test_configurations_that_overflowed_give_sound_bounds(sigma, steps, epochs):
    eps = np.array([0.0, 1.0, 10.0, 30.0, 60.0, 100.0, 200.0, 400.0])
    b = AllocationBracket(sigma, steps, epochs)
    for d in (Direction.REMOVE, Direction.ADD):
        up, lo = b.delta(eps, d)
        assert np.all(np.isfinite(up)) and np.all(np.isfinite(lo))
        assert np.all((0.0 <= lo) & (lo <= up) & (up <= 1.0))
        assert np.all(np.diff(up) <= 0) and np.all(np.diff(lo) <= 0)
        ref, _ = composed_lower_bounds(sigma, steps, epochs, eps, "balls_and_bins", d, 1e-2)
        assert np.all(up >= ref), (d, up, ref)
    eps_up, eps_lo = b.epsilon(1e-5)
    assert eps_lo <= eps_up
