"""The mean-one laws of epscert/matrix/laws_from_bounds.py checked in exact rational arithmetic (no slack, no ulp).

What the laws' soundness rests on (the module's docstrings, steps 5* and 5'*): the true π(t) = E(S_F - t)_+ (REMOVE)
and ψ(t) = E(t - S_F)_+ (ADD) are convex and, at every knot x_k, at most the target (REMOVE min(A_k, π_L,k), ADD
min(ψ_L,k, ψ_U,k)); so each lies below the target's greatest convex minorant (GCM) on [0, c]. A returned law is sound
when its own stop-loss (REMOVE, with the mass past c counted at c) or Ψ (ADD) is at least that GCM at every knot (both
are piecewise linear with kinks at knots only). Here every quantity is computed from the same float inputs as
Fractions: the targets, the GCM (a monotone chain with exact comparisons, written here), and the returned law's
stop-loss from its atoms and masses. That covers what the suite's long-double checks cannot: a rounding flip of the
order of one ulp, which HULL_SLACK (1e-9) would hide from a floating-point comparison.

Inputs: survival bounds around a log-normal law of mean 1 (smooth), around a staircase (long runs of collinear
target points, where the float hull's choice of vertices is a tie-break), and with the bounds touching (P_j = L_j).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy.special import ndtr

from epscert.matrix import laws_from_bounds as lfb

from tests.matrix.block_law_helpers import convex_minorant


def lognormal_survival(t: np.ndarray, s2: float) -> np.ndarray:
    """P(S > t) for S = exp(N(-s2/2, s2)), whose mean is 1."""
    with np.errstate(divide="ignore"):
        return ndtr(-(np.log(t) + s2 / 2) / math.sqrt(s2))


def bound_sets():
    """(name, grid, upper, lower, tail) sets of survival bounds on grids ending at c."""
    out = []
    grid = np.linspace(0.01, 3.0, 300)
    surv = lognormal_survival(grid, 0.3)
    out.append(("lognormal", grid, np.minimum(1.0, surv * 1.03 + 1e-4), np.maximum(0.0, surv * 0.97 - 1e-4)))
    stairs = np.repeat(np.array([0.999, 0.9, 0.6, 0.3, 0.1, 0.02, 0.004]), 40)
    grid = np.linspace(0.0125, 3.5, stairs.size)
    out.append(("staircase", grid, stairs, np.maximum(0.0, stairs - 0.01)))
    grid = np.linspace(0.005, 2.5, 500)
    surv = lognormal_survival(grid, 0.05)
    out.append(("touching", grid, surv, surv.copy()))
    return [(name, g, u, lo, float(u[-1])) for name, g, u, lo in out]


def exact_gcm(x: list[Fraction], y: list[Fraction]) -> list[Fraction]:
    """The greatest convex minorant of the points (x_k, y_k) at every x_k, exactly (the helpers' monotone chain on
    object arrays of Fractions)."""
    return list(convex_minorant(np.array(x, dtype=object), np.array(y, dtype=object)))


def knots(grid):
    x = [Fraction(0)] + [Fraction(float(s)) for s in grid]
    return x, [x[i + 1] - x[i] for i in range(len(x) - 1)]


def upper_stop_loss(upper, w):
    """A_k = ∫_{x_k}^c of Y's survival (1 on [0, s_1), P_j on [s_j, s_{j+1})), exactly."""
    seg = [Fraction(1)] + [Fraction(float(p)) for p in upper[:-1]]
    a = [Fraction(0)] * (len(w) + 1)
    for i in range(len(w) - 1, -1, -1):
        a[i] = a[i + 1] + seg[i] * w[i]
    return a


def lower_integral(lower, w):
    """∫_0^{x_k} L (L_1 on [0, s_1), L_{j+1} on [s_j, s_{j+1})), exactly."""
    out = [Fraction(0)]
    for i in range(len(w)):
        out.append(out[-1] + Fraction(float(lower[i])) * w[i])
    return out


@pytest.mark.parametrize("case", bound_sets(), ids=lambda c: c[0])
def test_remove_law_stop_loss_is_above_the_exact_minorant(case):
    _, grid, upper, lower, tail = case
    law = lfb.mean_one_remove_law(grid, upper, lower, tail)
    assert law is not None  # the check passes on these inputs (the fallback has its own tests)
    atoms, masses = law
    x, w = knots(grid)
    a = upper_stop_loss(upper, w)
    pi_l = [max(Fraction(1) - b, Fraction(0)) for b in lower_integral(lower, w)]
    gcm = exact_gcm(x, [min(ai, pi) for ai, pi in zip(a, pi_l)])
    c, t = x[-1], Fraction(tail)
    at = [(Fraction(float(v)), Fraction(float(m))) for v, m in zip(atoms, masses)]
    assert all(m >= 0 for _, m in at) and all(v <= c for v, _ in at)
    for xk, floor in zip(x, gcm):
        stop_loss = sum((m * (v - xk) for v, m in at if v > xk), Fraction(0)) + t * (c - xk)
        assert stop_loss >= floor  # at x = 0 this is E[Y*] >= min(A_0, 1) (the mass past c counted at c)


@pytest.mark.parametrize("case", bound_sets(), ids=lambda c: c[0])
def test_add_law_psi_is_above_the_exact_minorant(case):
    _, grid, upper, lower, tail = case
    tail_int = 1e-4
    law = lfb.mean_one_add_law(grid, upper, lower, tail_int)
    assert law is not None
    atoms, masses = law
    x, w = knots(grid)
    a = upper_stop_loss(upper, w)
    psi_l = [xk - b for xk, b in zip(x, lower_integral(lower, w))]  # ∫_0^x (1 - L)
    psi_u = [xk - 1 + ak + Fraction(tail_int) for xk, ak in zip(x, a)]
    gcm = exact_gcm(x, [min(p, q) for p, q in zip(psi_l, psi_u)])
    at = [(Fraction(float(v)), Fraction(float(m))) for v, m in zip(atoms, masses)]
    assert all(m >= 0 for _, m in at) and sum((m for _, m in at), Fraction(0)) >= 1
    assert all(v <= x[-1] for v, _ in at)  # all mass in [0, c]
    for xk, floor in zip(x, gcm):
        psi = sum((m * (xk - v) for v, m in at if v < xk), Fraction(0))
        assert psi >= floor


def test_the_exact_add_check_sees_a_shortfall_of_one_part_in_a_million():
    """The ADD comparison fails for the law with its atoms raised by one part in a million (Ψ then falls below the
    minorant at some knot)."""
    _, grid, upper, lower, _ = bound_sets()[0]
    tail_int = 1e-4
    atoms, masses = lfb.mean_one_add_law(grid, upper, lower, tail_int)
    x, w = knots(grid)
    a = upper_stop_loss(upper, w)
    psi_l = [xk - b for xk, b in zip(x, lower_integral(lower, w))]
    psi_u = [xk - 1 + ak + Fraction(tail_int) for xk, ak in zip(x, a)]
    gcm = exact_gcm(x, [min(p, q) for p, q in zip(psi_l, psi_u)])
    at = [(Fraction(float(v)) * (1 + Fraction(1, 10**6)), Fraction(float(m))) for v, m in zip(atoms, masses)]
    short = [sum((m * (xk - v) for v, m in at if v < xk), Fraction(0)) < floor for xk, floor in zip(x, gcm)]
    assert any(short)


def test_the_exact_check_sees_a_shortfall_of_one_part_in_a_million():
    """The same exact comparison fails for the law with its atoms lowered by one part in a million (its mean then falls
    below 1 = GCM(0)): these tests see a shortfall far below what a float comparison at HULL_SLACK could."""
    _, grid, upper, lower, tail = bound_sets()[0]
    atoms, masses = lfb.mean_one_remove_law(grid, upper, lower, tail)
    x, w = knots(grid)
    a = upper_stop_loss(upper, w)
    pi_l = [max(Fraction(1) - b, Fraction(0)) for b in lower_integral(lower, w)]
    gcm = exact_gcm(x, [min(ai, pi) for ai, pi in zip(a, pi_l)])
    c, t = x[-1], Fraction(tail)
    at = [(Fraction(float(v)) * (1 - Fraction(1, 10**6)), Fraction(float(m))) for v, m in zip(atoms, masses)]
    short = [sum((m * (v - xk) for v, m in at if v > xk), Fraction(0)) + t * (c - xk) < floor
             for xk, floor in zip(x, gcm)]
    assert any(short)
