"""The certified bracket: closed forms, dp_accounting, wrap-around tails, round-off allowance."""

from __future__ import annotations

import math

import numpy as np
import pytest
from dp_accounting.pld import privacy_loss_distribution as pld_lib
from scipy import stats

from epscert.analytic.deterministic import gaussian_delta
from epscert.fft.compose import fft_bounds, hockey_weights
from epscert.fft.grid import Grid, Rounding
from epscert.fft.mechanisms import Gaussian, RandomizedResponse, Schedule, SubsampledGaussian
from epscert.params import Direction

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
    # the width obeys the discretisation bound (1 - e^{-t})(Pr[ω > ε - t] + Pr[ω > ε]), t = kΔx
    t = GAUSSIANS.steps * grid.dx
    mu = 0.5 / _gaussian_equivalent_sigma(GAUSSIANS) ** 2
    tail = stats.norm.sf(np.asarray(EPS)[:, None] - [t, 0.0], loc=mu, scale=math.sqrt(2 * mu)).sum(axis=1)
    assert np.all(b.width <= -math.expm1(-t) * tail + 1e-12)


def test_bracket_width_shrinks_as_n_grows():
    exact = gaussian_delta(_gaussian_equivalent_sigma(GAUSSIANS), EPS)
    widths = []
    for n in (2**10, 2**12, 2**14):
        b = fft_bounds(GAUSSIANS, EPS, Grid(12.0, n), REMOVE).result
        assert np.all(b.lower <= exact) and np.all(exact <= b.upper)
        widths.append(b.width)
    assert np.all(widths[1] < widths[0]) and np.all(widths[2] < widths[1])
    # first-order in Δx: quartering Δx quarters the width (within a factor)
    assert np.all(widths[2] < widths[1] / 2.5)


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
    """Per direction: fft_lower <= dp optimistic <= dp pessimistic <= fft_upper.

    The true δ is in both brackets; dp_accounting at Δ = 1e-4 is the narrower one here, so it
    sits inside ours (grid Δx = 3e-4, k = 100..300 steps).
    """
    sched = POISSON_SCHEDULES[name]
    eps = [0.25, 0.5, 1.0, 2.0]
    res = fft_bounds(sched, eps, Grid(8.0, 2**16), BOTH)
    pess = _dp_accounting(sched.entries, True, 1e-4)
    opt = _dp_accounting(sched.entries, False, 1e-4)
    for direction, attr in ((REMOVE, "_pmf_remove"), (ADD, "_pmf_add")):
        b = res.brackets[direction]
        hi = np.array([getattr(pess, attr).get_delta_for_epsilon(e) for e in eps])
        lo = np.array([getattr(opt, attr).get_delta_for_epsilon(e) for e in eps])
        assert np.all(b.lower <= lo), (direction, b.lower, lo)
        assert np.all(hi <= b.upper), (direction, hi, b.upper)
    both = res.brackets[BOTH]
    np.testing.assert_array_equal(both.upper, np.maximum(res.brackets[REMOVE].upper, res.brackets[ADD].upper))
    np.testing.assert_array_equal(both.lower, np.maximum(res.brackets[REMOVE].lower, res.brackets[ADD].lower))


def _circular_longdouble(pmfs_counts, n):
    """Circular convolution of the half-swapped PMFs in extended precision (reference)."""
    out = np.zeros(n, dtype=np.longdouble)
    out[0] = 1
    for pmf, count in pmfs_counts:
        p = np.fft.ifftshift(pmf).astype(np.longdouble)
        for _ in range(count):
            lin = np.convolve(out, p)
            out = lin[:n].copy()
            out[: lin.size - n] += lin[n:]
    return np.fft.fftshift(out)


@pytest.mark.parametrize("rounding", [Rounding.UP, Rounding.DOWN])
def test_roundoff_allowance_covers_the_fft(rounding):
    """|δ̃_fft - δ̃_exact-arithmetic| <= fp, and fp is tiny (the model is not vacuous)."""
    sched = Schedule.of([(Gaussian(1.5), 3), (RandomizedResponse(0.6), 2), (SubsampledGaussian(0.3, 1.0), 4)])
    grid = Grid(6.0, 512)
    eps = [0.0, 0.5, 1.0, 3.0]
    b = fft_bounds(sched, eps, grid, REMOVE).brackets[REMOVE]
    placed = [(m.place(grid, rounding, REMOVE), c) for m, c in sched.distinct]
    ref_b = _circular_longdouble([(p.pmf, c) for p, c in placed], grid.size)
    inf = 1 - np.prod([(1 - p.inf_mass) ** c for p, c in placed])
    estimate, fp = (b.estimate_up, b.fp_up) if rounding is Rounding.UP else (b.estimate_down, b.fp_down)
    for i, e in enumerate(eps):
        ref = inf + float(np.sum(hockey_weights(grid, e).astype(np.longdouble) * ref_b))
        assert abs(estimate[i] - ref) <= fp[i], (e, estimate[i] - ref, fp[i])
    assert np.all(fp < 1e-11)


def test_chernoff_tail_bounds_the_wrapped_mass():
    """With a small L much mass wraps; the tail term still bounds it and the bracket stays valid."""
    sched = Schedule.of([(Gaussian(1.0), 3)])
    grid = Grid(2.5, 256)
    b = fft_bounds(sched, [0.5, 1.0, 2.0], grid, REMOVE).brackets[REMOVE]
    up = Gaussian(1.0).place(grid, Rounding.UP, REMOVE).pmf
    lin = np.convolve(np.convolve(up, up), up)  # sum index i+j+k <-> loss -3L + (i+j+k)dx
    values = -3 * grid.half_width + grid.dx * np.arange(lin.size)
    assert lin[values >= grid.half_width - 1e-12].sum() <= b.tail_up
    down = Gaussian(1.0).place(grid, Rounding.DOWN, REMOVE).pmf
    lin = np.convolve(np.convolve(down, down), down)
    assert lin[values < -grid.half_width].sum() <= b.tail_down
    exact = gaussian_delta(1 / math.sqrt(3), [0.5, 1.0, 2.0])
    assert np.all(b.lower <= exact) and np.all(exact <= b.upper)
    assert b.tail_up > 1e-3  # the case is not vacuous


def test_epsilon_validation():
    grid = Grid(4.0, 64)
    with pytest.raises(ValueError, match="epsilons"):
        fft_bounds(GAUSSIANS, [4.0], grid)
    with pytest.raises(ValueError, match="epsilons"):
        fft_bounds(GAUSSIANS, [-0.5], grid)
    with pytest.raises(ValueError, match="epsilons"):
        fft_bounds(GAUSSIANS, [], grid)


def test_fft_coefficient_error_is_within_the_model():
    """Each rfft coefficient of a placed PMF is within τ = FFT_ROUNDOFF_UNITS·u·log2(n)·Σp of an
    extended-precision DFT (checked at 64 frequencies)."""
    from epscert.fft.grid import UNIT_ROUNDOFF
    from epscert.fft.spectrum import FFT_ROUNDOFF_UNITS

    grid = Grid(10.0, 2**14)
    pmf = np.fft.ifftshift(SubsampledGaussian(0.05, 0.9).place(grid, Rounding.UP, REMOVE).pmf)
    y = np.fft.rfft(pmf)
    tau = FFT_ROUNDOFF_UNITS * UNIT_ROUNDOFF * math.log2(grid.size) * pmf.sum()
    m = np.arange(grid.size, dtype=np.int64)
    p = pmf.astype(np.longdouble)
    two_pi = 2 * np.arccos(np.longdouble(-1))
    worst = 0.0
    for k in np.linspace(0, grid.size // 2, 64).astype(int):
        angle = two_pi * ((k * m) % grid.size).astype(np.longdouble) / grid.size  # exact reduction
        ref_re, ref_im = np.sum(p * np.cos(angle)), -np.sum(p * np.sin(angle))
        worst = max(worst, float(abs(complex(y[k]) - complex(float(ref_re), float(ref_im)))))
    assert worst <= tau, (worst, tau)
