"""The certified bracket: closed forms, dp_accounting, wrap-around tails, round-off allowance."""

from __future__ import annotations

import math

import numpy as np
import pytest
from dp_accounting.pld import privacy_loss_distribution as pld_lib
from scipy import stats

from epscert.analytic.deterministic import gaussian_delta
from epscert.fft.compose import fft_bounds
from epscert.fft.grid import Grid, Rounding
from epscert.fft.mechanisms import Gaussian, RandomizedResponse, Schedule, SubsampledGaussian
from epscert.config import Direction

REMOVE, ADD, BOTH = Direction.REMOVE, Direction.ADD, Direction.BOTH
EPS = [0.0, 0.5, 1.0, 2.0, 4.0]


def _gaussian_equivalent_sigma(schedule: Schedule) -> float:
    """k Gaussians compose to one: 1/σ² = Σ_j count_j (s_j/σ_j)²."""
    return 1.0 / math.sqrt(sum(c * (m.sensitivity / m.sigma) ** 2 for m, c in schedule.entries))


GAUSSIANS = Schedule.of([(Gaussian(3.0), 4), (Gaussian(5.0, sensitivity=2.0), 3), (Gaussian(8.0), 10)])


def test_gaussian_composition_is_bracketed():
    exact = gaussian_delta(_gaussian_equivalent_sigma(GAUSSIANS), EPS)
    grid = Grid(12.0, 2**14)
    b = fft_bounds(GAUSSIANS, EPS, grid, BOTH).result
    assert np.all(b.lower <= exact) and np.all(exact <= b.upper)
    # connect-the-dots and merging are second order in Δx = 1.5e-3: a few 1e-5 of δ here
    assert np.all(b.width <= 2e-4 * exact)


def test_bracket_width_shrinks_as_n_grows():
    exact = gaussian_delta(_gaussian_equivalent_sigma(GAUSSIANS), EPS)
    widths = []
    for n in (2**11, 2**12, 2**13):
        b = fft_bounds(GAUSSIANS, EPS, Grid(8.0, n), REMOVE).result
        assert np.all(b.lower <= exact) and np.all(exact <= b.upper)
        widths.append(b.width[1:])
    # second order in Δx: halving Δx divides the width by about 4 (Koskela et al.'s rounding: 2)
    assert np.all(widths[1] < widths[0] / 3.5) and np.all(widths[2] < widths[1] / 3.5)


def _rr_sum(p: float, count: int):
    """(values, probabilities) of the sum of ``count`` randomized-response losses."""
    a = math.log(p / (1 - p))
    x = np.arange(count + 1)
    return a * (2 * x - count), stats.binom.pmf(x, count, p)


def test_gaussian_plus_randomized_response_is_bracketed():
    """E f_ε(G + R) = Σ_r Pr[R = r] δ_G(ε - r): exact for a heterogeneous, mixed composition."""
    sched = Schedule.of([(Gaussian(2.0), 2), (RandomizedResponse(0.7), 5), (Gaussian(4.0), 3)])
    sigma_g = 1.0 / math.sqrt(2 / 4.0 + 3 / 16.0)
    values, probs = _rr_sum(0.7, 5)
    exact = np.array([sum(p * float(gaussian_delta(sigma_g, e - r)) for r, p in zip(values, probs))
                      for e in EPS])
    b = fft_bounds(sched, EPS, Grid(16.0, 2**15), BOTH).result
    assert np.all(b.lower <= exact) and np.all(exact <= b.upper)
    assert np.all(b.width < 1e-2)


def test_infinite_mass_is_added():
    """RR with p = 1 is never private: δ = 1 whatever else is composed."""
    sched = Schedule.of([(Gaussian(2.0), 2), (RandomizedResponse(1.0), 1)])
    b = fft_bounds(sched, [0.5, 3.0], Grid(8.0, 2**10)).result
    np.testing.assert_allclose(b.lower, 1.0, atol=1e-12)
    np.testing.assert_allclose(b.upper, 1.0)


def _dp_accounting(entries, pessimistic: bool, discretization: float):
    pld = None
    for mech, count in entries:
        if isinstance(mech, SubsampledGaussian):
            one = pld_lib.from_gaussian_mechanism(
                standard_deviation=mech.sigma, sensitivity=1.0, sampling_prob=mech.q,
                pessimistic_estimate=pessimistic, value_discretization_interval=discretization,
                use_connect_dots=pessimistic)
        else:
            raise TypeError(mech)
        one = one.self_compose(count)
        pld = one if pld is None else pld.compose(one)
    return pld


POISSON_SCHEDULES = {
    "homogeneous": Schedule.of([(SubsampledGaussian(0.02, 1.0), 300)]),
    "heterogeneous": Schedule.of([(SubsampledGaussian(0.05, 1.2), 40), (SubsampledGaussian(0.05, 1.0), 40),
                                  (SubsampledGaussian(0.1, 0.8), 20)]),
}


@pytest.mark.parametrize("name", sorted(POISSON_SCHEDULES))
def test_poisson_schedules_bracket_dp_accounting(name):
    """Per direction, the two brackets hold the true δ, so they intersect:
    fft_lower <= dp pessimistic and dp optimistic <= fft_upper; and ours is the narrower one
    (dp_accounting's optimistic PLD rounds every loss down, first order in its Δ = 1e-4)."""
    sched = POISSON_SCHEDULES[name]
    eps = [0.25, 0.5, 1.0, 2.0]
    res = fft_bounds(sched, eps, Grid(8.0, 2**16), BOTH)
    pess = _dp_accounting(sched.entries, True, 1e-4)
    opt = _dp_accounting(sched.entries, False, 1e-4)
    for direction, attr in ((REMOVE, "_pmf_remove"), (ADD, "_pmf_add")):
        b = res.brackets[direction]
        hi = np.array([getattr(pess, attr).get_delta_for_epsilon(e) for e in eps])
        lo = np.array([getattr(opt, attr).get_delta_for_epsilon(e) for e in eps])
        assert np.all(b.lower <= hi), (direction, b.lower, hi)
        assert np.all(lo <= b.upper), (direction, lo, b.upper)
        assert np.all(b.width <= hi - lo), (direction, b.width, hi - lo)
    both = res.brackets[BOTH]
    np.testing.assert_array_equal(both.upper, np.maximum(res.brackets[REMOVE].upper, res.brackets[ADD].upper))
    np.testing.assert_array_equal(both.lower, np.maximum(res.brackets[REMOVE].lower, res.brackets[ADD].lower))


def _linear_longdouble(factors):
    """(losses, masses, p∞) of the composition of placed factors by direct convolution in extended
    precision (no FFT, no window: the reference the tilted FFT's allowances must cover)."""
    out = np.ones(1, dtype=np.longdouble)
    start, offset, finite = 0, 0.0, np.longdouble(1)
    delta = factors[0].masses.delta
    for f in factors:
        m = f.masses.masses.astype(np.longdouble)
        for _ in range(f.count):
            out = np.convolve(out, m)
        start += f.count * f.masses.start
        offset += f.count * f.masses.offset
        finite *= (1 - np.longdouble(f.masses.inf_mass)) ** f.count
    losses = offset + delta * (start + np.arange(out.size))
    return losses, out, float(1 - finite)


@pytest.mark.parametrize("rounding", [Rounding.UP, Rounding.DOWN])
def test_roundoff_allowance_covers_the_fft(rounding):
    """lower <= δ(exact arithmetic, direct convolution) <= upper for compositions of the same placed
    PMFs at several tilts (a tilt far above the saddle point too); the allowance is tiny where the
    tilt suits ε, and at ε = 10 (δ ≈ 2e-8) the tilt λ = 1 is 1000x tighter than the untilted FFT."""
    from epscert.fft import tilt
    from epscert.fft.compose import placed_factors

    sched = Schedule.of([(Gaussian(1.5), 3), (RandomizedResponse(0.6), 2), (SubsampledGaussian(0.3, 1.0), 4)])
    grid = Grid(20.0, 1024)  # wide: the wrap-around terms are negligible, the allowance is round-off
    factors = placed_factors(sched, grid, REMOVE, rounding)
    losses, masses, inf = _linear_longdouble(factors)
    window = (-grid.half_width, grid.half_width)
    comps = {lam: tilt.compose(factors, lam, -grid.half_width, size=grid.size, window=window) for lam in (0.0, 1.0, 4.0)}
    for e in [0.0, 1.0, 3.0, 6.0, 10.0]:
        weights = np.where(losses > e, -np.expm1(np.minimum(e - losses.astype(float), 0.0)), 0.0)
        ref = inf + float(np.sum(weights.astype(np.longdouble) * masses))
        for lam, comp in comps.items():
            assert comp.lower(e) <= ref <= comp.upper(e), (lam, e, comp.lower(e), ref, comp.upper(e))
        if e <= 6.0:
            for lam in (0.0, 1.0):
                assert comps[lam].upper(e) - comps[lam].lower(e) <= 1e-8 * ref
    width = {lam: comps[lam].upper(10.0) - comps[lam].lower(10.0) for lam in (0.0, 1.0)}
    assert width[1.0] < 1e-3 * width[0.0]


def test_chernoff_tail_bounds_the_wrapped_mass():
    """With a small L much mass wraps; the tail and wrap-around terms keep the bracket valid."""
    sched = Schedule.of([(Gaussian(1.0), 3)])
    grid = Grid(2.5, 256)
    b = fft_bounds(sched, [0.5, 1.0, 2.0], grid, REMOVE).brackets[REMOVE]
    exact = gaussian_delta(1 / math.sqrt(3), [0.5, 1.0, 2.0])
    assert np.all(b.lower <= exact) and np.all(exact <= b.upper)
    assert np.all(b.absolute_up > 1e-3)  # the case is not vacuous: the tail term is large


def test_epsilon_validation():
    grid = Grid(4.0, 64)
    with pytest.raises(ValueError, match="epsilons"):
        fft_bounds(GAUSSIANS, [4.0], grid)
    with pytest.raises(ValueError, match="epsilons"):
        fft_bounds(GAUSSIANS, [-0.5], grid)
    with pytest.raises(ValueError, match="epsilons"):
        fft_bounds(GAUSSIANS, [], grid)


def test_fft_coefficient_error_is_within_the_model():
    """Each rfft coefficient of a tilted placed PMF is within τ = FFT_ROUNDOFF_UNITS·u·log2(n)·Σx of
    an extended-precision DFT (checked at 64 frequencies)."""
    from epscert.fft import tilt
    from epscert.fft.pairs import UNIT_ROUNDOFF

    grid = Grid(10.0, 2**14)
    g = SubsampledGaussian(0.05, 0.9).place(grid, Rounding.UP, REMOVE)
    n = grid.size
    ell = g.losses()
    x = g.masses * np.exp(2.0 * ell - np.log(np.sum(g.masses * np.exp(2.0 * ell))))
    buf = np.bincount((g.start + np.arange(g.masses.size)) % n, weights=x, minlength=n)
    y = np.fft.rfft(buf)
    tau = tilt.FFT_ROUNDOFF_UNITS * UNIT_ROUNDOFF * math.log2(n) * buf.sum()
    m = np.arange(n, dtype=np.int64)
    p = buf.astype(np.longdouble)
    two_pi = 2 * np.arccos(np.longdouble(-1))
    worst = 0.0
    for k in np.linspace(0, n // 2, 64).astype(int):
        angle = two_pi * ((k * m) % n).astype(np.longdouble) / n  # exact reduction
        ref_re, ref_im = np.sum(p * np.cos(angle)), -np.sum(p * np.sin(angle))
        worst = max(worst, float(abs(complex(y[k]) - complex(float(ref_re), float(ref_im)))))
    assert worst <= tau, (worst, tau)
