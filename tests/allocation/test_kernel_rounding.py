"""The kernel's relative floating-point allowances against exact rational arithmetic (issue 11).

For small laws, every pair value and cell sum of one :func:`combine` step is recomputed with
``fractions.Fraction`` (exact weights count/total, exact pair masses) and grouped by the cells
of the float computation (the kernel places each computed pair value exactly in its cell).
The claims checked are those of the module docstring of epscert.allocation.cells:

* each computed pair value is within ``PAIR_REL_ERROR`` of the exact one;
* lower chain: each atom is within the step's ``value_rel_error`` of the exact mean of its
  cell (weights: the computed pair masses), and the exact cell mass M satisfies
  (1 − r)·M̂ <= M <= (1 + r)·M̂;
* upper chain: each node mass of the exact spread (exact masses, the computed pair values) is
  at most (1 + r) times the computed one (never under-counted), and the computed one exceeds it
  by at most r relative plus the documented slack on the mass at a cell's left edge,
  2γ_{k+6}(1 + 2γ_{k+1})(1 + 4u)·M̂ of the cell (k = count + chunks).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from epscert.allocation.cells import PAIR_REL_ERROR, CellLaw, cell_grid, combine, gamma_n

CELLS, TAU = 24, 1e-12


def _law(rng, n, spread):
    values = np.sort(np.exp(rng.normal(0.0, spread, n)))
    masses = rng.uniform(0.1, 1.0, n)
    return CellLaw(values, masses / masses.sum())


def _exact_pairs(x, y, op, weights, exact_weights):
    """(computed pair value, exact pair value, computed pair mass, exact pair mass) over all (i, j)."""
    wa, wb = weights
    fa, fb = exact_weights
    out = []
    for i in range(len(x)):
        for j in range(len(y)):
            a, b = x.values[i], y.values[j]
            z_hat = wa * a + wb * b if op == "mean" else a * b  # the kernel's own expression
            z = fa * Fraction(a) + fb * Fraction(b) if op == "mean" else Fraction(a) * Fraction(b)
            m_hat = x.masses[i] * y.masses[j]
            out.append((float(z_hat), z, Fraction(float(m_hat)),
                        Fraction(x.masses[i]) * Fraction(y.masses[j])))
    return out


CASES = [  # op, weights as floats, the same weights exactly, y is x
    ("mean", (0.5, 0.5), (Fraction(1, 2), Fraction(1, 2)), True),
    ("mean", (3 / 10, 7 / 10), (Fraction(3, 10), Fraction(7, 10)), False),
    ("mean", (5 / 13, 8 / 13), (Fraction(5, 13), Fraction(8, 13)), False),
    ("product", (0.5, 0.5), (Fraction(1, 2), Fraction(1, 2)), True),
    ("product", (0.5, 0.5), (Fraction(1, 2), Fraction(1, 2)), False),
]


@pytest.mark.parametrize("op,weights,exact_weights,same", CASES)
def test_kernel_allowances_cover_the_exact_rounding(op, weights, exact_weights, same):
    rng = np.random.default_rng(7)
    x = _law(rng, 48, 0.6)
    y = x if same else _law(rng, 40, 0.4)
    edges = cell_grid(x, y, op, weights, cells=CELLS, tau=TAU)[0]
    n_cells = edges.size - 1
    pairs = _exact_pairs(x, y, op, weights, exact_weights)
    z_hat = np.array([p[0] for p in pairs])
    cell = np.clip(np.searchsorted(edges, z_hat, side="right") - 1, 0, n_cells - 1)
    # pair values
    worst_pair = max(abs(Fraction(zh) - z) / z for zh, z, _, _ in pairs)
    assert worst_pair <= Fraction(PAIR_REL_ERROR)
    # exact per-cell sums
    mass_hat_w = [Fraction(0)] * n_cells  # Σ computed pair masses (the contraction's weights)
    moment_hat_w = [Fraction(0)] * n_cells
    mass = [Fraction(0)] * n_cells  # Σ exact pair masses
    node = [Fraction(0)] * (n_cells + 1)  # exact spread of the computed pair values
    for (zh, z, mh, m), k in zip(pairs, cell):
        a, b = Fraction(edges[k]), Fraction(edges[k + 1])
        mass_hat_w[k] += mh
        moment_hat_w[k] += mh * z
        mass[k] += m
        node[k] += m * (b - Fraction(zh)) / (b - a)
        node[k + 1] += m * (Fraction(zh) - a) / (b - a)
    errors = []
    lower, stats_lo = combine(x, y, op, "lower", cells=CELLS, tau=TAU, weights=weights)
    r_lo, g_lo = Fraction(stats_lo.mass_rel_error), Fraction(stats_lo.value_rel_error)
    occupied = [k for k in range(n_cells) if mass[k] > 0]
    assert len(occupied) == len(lower) and len(occupied) > CELLS // 2
    for k, v_hat, m_hat in zip(occupied, lower.values, lower.masses):
        mu = moment_hat_w[k] / mass_hat_w[k]
        errors.append(abs(Fraction(v_hat) - mu) / mu)
        assert abs(Fraction(v_hat) - mu) <= g_lo * mu, (k, float(abs(Fraction(v_hat) - mu) / mu), stats_lo)
        assert (1 - r_lo) * Fraction(m_hat) <= mass[k] <= (1 + r_lo) * Fraction(m_hat)
    upper, stats_up = combine(x, y, op, "upper", cells=CELLS, tau=TAU, weights=weights)
    r_up = Fraction(stats_up.mass_rel_error)
    assert stats_up.value_rel_error == PAIR_REL_ERROR
    atoms = dict(zip(upper.values.tolist(), upper.masses.tolist()))
    k_terms = stats_up.max_count + 1  # one block of rows at this size
    slack = 2 * Fraction(gamma_n(k_terms + 6)) * (1 + 2 * Fraction(gamma_n(k_terms + 1))) * (1 + 4 * Fraction(2.0**-53))
    for k in range(n_cells + 1):
        if node[k] > 0:
            n_hat = Fraction(atoms[float(edges[k])])
            errors.append(abs(n_hat - node[k]) / node[k])
            cell_mass = mass[k] if k < n_cells else Fraction(0)
            assert node[k] <= (1 + r_up) * n_hat, (k, stats_up)  # never under-counted
            assert n_hat <= (1 + r_up) * node[k] + 2 * slack * cell_mass, (k, stats_up)
    # the comparison is not vacuous: rounding did move some value or mass
    assert max(errors) > 0


def test_dropping_underflowing_pairs_only_lowers_the_lower_chain():
    # atoms near 2^-600: their products underflow the guard and leave the lower chain (mass drops)
    x = CellLaw(np.array([2.0**-600, 2.0**-590, 1.0]), np.array([0.25, 0.25, 0.5]))
    lower, _ = combine(x, x, "product", "lower", cells=CELLS, tau=TAU)
    upper, _ = combine(x, x, "product", "upper", cells=CELLS, tau=TAU)
    assert lower.mass < 1.0 and np.all(lower.values >= 2.0**-960)
    assert upper.mass >= 1.0 - 1e-12
