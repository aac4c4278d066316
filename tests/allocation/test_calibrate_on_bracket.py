"""Calibration on the PLD bracket (issue 11 item 4) against independent values.

At T = 1 Balls-and-Bins is one Gaussian per epoch, so the calibrated σ must be the deterministic
(closed form) σ up to the search tolerance; at larger T the returned σ must meet the target on the
bracket's upper side, and a σ a little below it must fail on the bracket's LOWER side (so no smaller
σ could be certified: the search is near-optimal, not merely valid).
"""

from __future__ import annotations

import pytest

from epscert import Accountant
from epscert.allocation import bracket_for
from epscert.analytic.deterministic import deterministic_delta
from epscert.inverse.calibrate import SIGMA_REL_TOL
from scipy.optimize import brentq


def test_t1_matches_the_gaussian_closed_form():
    eps_t, delta_t = 1.0, 1e-5
    closed = brentq(lambda s: float(deterministic_delta(s, 2, eps_t)) - delta_t, 0.3, 50.0, xtol=1e-12)
    cal = Accountant.calibrate(target_epsilon=eps_t, target_delta=delta_t, steps=1, epochs=2)
    assert cal.certified and cal.delta_upper <= delta_t
    assert closed <= cal.sigma <= closed * (1 + 3 * SIGMA_REL_TOL)
    assert cal.certificate.to_pylist()[0]["bound"] == "allocation_bracket_upper"


@pytest.mark.parametrize("steps,epochs,eps_t,delta_t", [(50, 1, 2.0, 1e-6),
                                                      pytest.param(100, 3, 1.5, 1e-5, marks=pytest.mark.slow)])
def test_sigma_is_certified_and_near_optimal(steps, epochs, eps_t, delta_t):
    cal = Accountant.calibrate(target_epsilon=eps_t, target_delta=delta_t, steps=steps, epochs=epochs)
    up, _ = bracket_for(cal.sigma, steps, epochs).delta([eps_t])
    assert cal.certified and up[0] <= delta_t
    below = cal.sigma / (1 + 3 * SIGMA_REL_TOL)
    _, lo = bracket_for(below, steps, epochs).delta([eps_t])
    assert lo[0] > delta_t  # the true δ at a slightly smaller σ misses the target
    assert cal.sigma < cal.poisson_sigma * 1.2  # and it is of the order of the Poisson σ (context only)
