"""The tilted FFT composition (issue 24): two tilts agree, the check fails loudly, and closed forms
far in the tail (the Gaussian mechanism, whose composed PLD is exactly Gaussian)."""

from __future__ import annotations

import dataclasses
import math

import mpmath
import numpy as np
import pytest

from epscert.fft import tilt
from epscert.fft.compose import fft_bounds, placed_factors
from epscert.fft.grid import Grid, Rounding
from epscert.fft.mechanisms import Gaussian, Schedule, SubsampledGaussian
from epscert.config import Direction

REMOVE = Direction.REMOVE


def mp_gaussian_delta(sigma: float, eps: float) -> mpmath.mpf:
    """δ(ε) of one Gaussian mechanism of noise σ (sensitivity 1), 50 digits."""
    mpmath.mp.dps = 50
    s, e = mpmath.mpf(sigma), mpmath.mpf(eps)
    return mpmath.ncdf(-s * e + 1 / (2 * s)) - mpmath.exp(e) * mpmath.ncdf(-s * e - 1 / (2 * s))


def test_two_tilts_agree_and_the_check_passes():
    sched = Schedule.of([(SubsampledGaussian(0.01, 0.9), 300)])
    grid = Grid(30.0, 2**15)
    for rounding in (Rounding.UP, Rounding.DOWN):
        factors = placed_factors(sched, grid, REMOVE, rounding)
        mgf = tilt.Mgf(factors)
        for eps in (1.0, 3.0):
            lam = tilt.lam_grid(mgf.saddle(eps))
            a = tilt.compose(factors, lam, 0.0, mgf)
            b = tilt.compose(factors, tilt.lam_grid(lam / 1.5), 0.0, mgf)
            tilt.check_agree(a, b, eps, rounding is Rounding.UP)
            assert a.lower(eps) <= b.upper(eps) and b.lower(eps) <= a.upper(eps)
            assert a.upper(eps) - a.lower(eps) <= 1e-6 * a.upper(eps)


def test_check_fails_loudly_on_a_corrupted_composition():
    """A composition whose values are off by 1% (beyond its budget) is caught by the second tilt."""
    factors = placed_factors(Schedule.of([(Gaussian(2.0), 20)]), Grid(40.0, 2**14), REMOVE, Rounding.UP)
    mgf = tilt.Mgf(factors)
    a = tilt.compose(factors, 2.0, 0.0, mgf)
    b = tilt.compose(factors, 1.0, 0.0, mgf)
    bad = dataclasses.replace(a, z=a.z * 1.01, _suffix={})
    tilt.check_agree(a, b, 5.0, True)
    with pytest.raises(tilt.TiltCheckError, match="disagree"):
        tilt.check_agree(bad, b, 5.0, True)


@pytest.mark.parametrize("eps", [25.0, 45.0, 65.0])
def test_gaussian_composition_far_in_the_tail(eps):
    """k = 10 Gaussian mechanisms (σ = 1) compose to one of σ/√10: δ(ε) from 1e-10 down to 1e-100.
    The bracket holds the 50-digit value and is narrow in relative terms, where the untilted FFT's
    absolute round-off (1e-16 and more) would say nothing at all."""
    sched = Schedule.of([(Gaussian(1.0), 10)])
    b = fft_bounds(sched, [eps], Grid(100.0, 2**16), REMOVE).result
    exact = mp_gaussian_delta(1.0 / math.sqrt(10.0), eps)
    assert mpmath.mpf(float(b.lower[0])) <= exact <= mpmath.mpf(float(b.upper[0]))
    assert float(b.upper[0]) <= 1.01 * float(b.lower[0])
    assert float(exact) < 1e-10


def test_tilt_helpers():
    assert tilt.lam_grid(0.0) == 0.0 and tilt.lam_grid(1e-9) == 0.0
    assert tilt.lam_grid(3.0) <= 3.0 < tilt.lam_grid(3.0) * 2 ** (1 / 8) + 1e-12
    with pytest.raises(ValueError, match="lam"):
        tilt.compose(placed_factors(Schedule.of([(Gaussian(1.0), 1)]), Grid(8.0, 256), REMOVE, Rounding.UP),
                     -1.0, 0.0)
    # log M is an upper bound on the exact moment-generating function (Gaussian PLD: λμ + λ²μ)
    g = Gaussian(1.0).place(Grid(20.0, 2**12), Rounding.UP, REMOVE)
    v, e = tilt.log_mgf(g, np.array([0.5, 2.0]))
    mu = 0.5
    assert np.all(v + e >= np.array([0.5, 2.0]) * (np.array([0.5, 2.0]) + 1.0) * mu - 1e-12)


def test_far_suffix_sums_agree_with_term_by_term_logsumexp():
    """Far above the bulk (the suffix sums scaled to the bottom underflow) each read takes suffix sums scaled to an
    anchor: the log of Σ_{ℓ > ε} f_ε(ℓ) e^{-λℓ} v is a term-by-term logsumexp's over the window, to a few ulps."""
    from scipy import special

    factors = placed_factors(Schedule.of([(Gaussian(1.0), 100)]), Grid(400.0, 2**16), REMOVE, Rounding.UP)
    mgf = tilt.Mgf(factors)
    comp = tilt.compose(factors, tilt.lam_grid(mgf.saddle(300.0)), 0.0, mgf)
    ell = comp.losses
    j_far = int(np.flatnonzero(comp._sums(True)[0] <= 1e-250)[0])  # where the far reads begin
    assert j_far < ell.size - 5000 and comp._sums(False)[0][j_far] <= 1e-250
    for upper in (True, False):
        vals = comp._sums(upper)[2]
        for j in (j_far - 3000, j_far, j_far + 1, j_far + 2500, ell.size - 3):
            eps = float(ell[j - 1]) + 0.3 * comp.delta  # the sum runs over ℓ_m, m >= j
            f = -np.expm1(eps - ell[j:])
            with np.errstate(divide="ignore"):
                direct = float(special.logsumexp(np.log(vals[j:]) - comp.lam * ell[j:], b=f))
            assert comp._log_sum(eps, upper)[0] == pytest.approx(direct, rel=1e-13)
    # 100 Gaussians of σ = 1 are one of σ = 0.1, δ(300) about 1e-138; the factors are rounded up (a dominating pair,
    # whose own δ the composition brackets), so the exact value is below the upper read, and the read is close
    exact = mp_gaussian_delta(0.1, 300.0)
    assert int(np.searchsorted(ell, 300.0)) > j_far and exact <= mpmath.mpf(comp.upper(300.0)) <= 1.02 * exact
