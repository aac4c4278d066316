"""Exact value sums on the JAX device (epscert.montecarlo.backends.jax_backend: log_value_bits, ieee_histograms,
drain_value_sums) against the numpy path's RowSums of the same values, bit for bit.

Skipped without JAX. No statistical test here: every comparison is exact equality of integers."""

from __future__ import annotations

import math

import numpy as np
import pytest

jax = pytest.importorskip("jax", reason="JAX is not installed: pip install -e '.[jax]' to test the JAX backend")

from epscert.bounds.truncated_lcb import LEVELS, truncation_levels  # noqa: E402
from epscert.montecarlo.backends import jax_backend as jb  # noqa: E402
from epscert.montecarlo.exactfloat import RowSums, fold_ieee_histogram, levels_share_mantissa  # noqa: E402


def host_sums(y: np.ndarray, y2: np.ndarray, ranges) -> tuple[list, list, list]:
    """The numpy path's sums (shard.run_value_shard): RowSums of Y, of Y² and of min(Y, τ_k), ε-major."""
    rows = y.shape[0]
    taus = np.stack([truncation_levels(float(b)) for b in ranges])[:, :, None]
    s1, s2, ex = RowSums(rows), RowSums(rows), RowSums(rows * LEVELS)
    s1.add(y)
    s2.add(y2)
    ex.add(np.minimum(y[:, None, :], taus).reshape(rows * LEVELS, y.shape[1]))
    return s1.totals(), s2.totals(), ex.totals()


def device_sums(y: np.ndarray, y2: np.ndarray, ranges, valid=None) -> tuple[list, list, list]:
    with jax.enable_x64(True):
        jnp = jax.numpy
        n = y.shape[1]
        valid = np.ones(n, bool) if valid is None else valid
        m_tau = np.asarray(ranges, dtype=np.float64).view(np.int64) & ((1 << 52) - 1)
        hist, hist2 = jax.jit(jb.ieee_histograms)(jnp.asarray(y.view(np.int64)), jnp.asarray(y2.view(np.int64)),
                                                  jnp.asarray(m_tau), jnp.asarray(valid))
        return fold_ieee_histogram(np.asarray(hist), np.asarray(hist2), ranges, LEVELS)


def random_values(seed: int, rows: int = 3, n: int = 4000) -> np.ndarray:
    """Magnitudes spread over the float64 range whose square is finite, zeros, subnormals, the extremes."""
    rng = np.random.default_rng(seed)
    y = np.exp2(rng.uniform(-1074.0, 511.0, size=(rows, n))) * rng.uniform(1.0, 2.0, size=(rows, n))
    y[rng.random(y.shape) < 0.2] = 0.0
    sub = rng.random(y.shape) < 0.1
    y[sub] = np.ldexp(rng.integers(1, 2**52, size=int(sub.sum())).astype(np.float64), -1074)  # subnormals
    y[0, :4] = [5e-324, 2.0**-1022, np.nextafter(2.0**-1022, 0.0), 2.0**511]
    return y


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_device_histograms_give_the_numpy_row_sums_bit_for_bit(seed):
    y = random_values(seed)
    rng = np.random.default_rng(100 + seed)
    # ranges: random mantissas; one row's range lies inside the values' bulk, so every level's bin is mixed
    ranges = [float(np.max(y[0]) * 1.37), float(2.0**-300 * rng.uniform(1, 2)), float(rng.uniform(1e-5, 1.0))]
    for i, b in enumerate(ranges[1:], start=1):  # values equal to a level and to its neighbours in the same bin
        taus = truncation_levels(b)
        y[i, 10:10 + LEVELS] = taus
        y[i, 60:60 + LEVELS] = np.nextafter(taus, np.inf)
        y[i, 110:110 + LEVELS] = np.nextafter(taus, 0.0)
    assert levels_share_mantissa(ranges, LEVELS)
    y2 = y * y
    assert device_sums(y, y2, ranges) == host_sums(y, y2, ranges)


def test_masked_positions_add_nothing():
    y = random_values(7, rows=2, n=300)
    valid = np.random.default_rng(7).random(300) < 0.5
    ranges = [1.0, 3.7e-20]
    kept = np.ascontiguousarray(y[:, valid])
    assert device_sums(y, y * y, ranges, valid) == host_sums(kept, kept * kept, ranges)


def test_non_finite_values_raise():
    y = np.array([[1.0, np.inf]])
    with pytest.raises(FloatingPointError):
        device_sums(y, y * y, [2.0])
    y = np.array([[1.0, np.nan]])
    with pytest.raises(FloatingPointError):
        device_sums(y, y * y, [2.0])


def test_levels_that_leave_the_normal_range_are_reported():
    assert levels_share_mantissa([1.0, 1e-250], LEVELS)
    assert not levels_share_mantissa([1e-290], LEVELS)  # τ_47 = 1e-290 · 2**-94 is subnormal
    assert not levels_share_mantissa([0.0], LEVELS) and not levels_share_mantissa([math.inf], LEVELS)


def test_log_value_bits_follow_the_exponential_without_subnormal_floats_on_the_device():
    """exp(L) over [-760, 700] against numpy's IEEE exp: within 1e-12 relative (the device's exp and the
    shifted arguments), plus one subnormal step 2**-1074 below 2**-1022 (the rounding to a subnormal)."""
    logs = np.concatenate([np.linspace(-760.0, 700.0, 20001), [-np.inf, -708.0, -700.0, math.log(2.0**-1022)]])
    with jax.enable_x64(True):
        bits = np.asarray(jax.jit(jb.log_value_bits)(jax.numpy.asarray(logs)))
        nan_bits = int(np.asarray(jax.jit(jb.log_value_bits)(jax.numpy.asarray([np.nan])))[0])
    got, want = bits.view(np.float64), np.exp(logs)
    assert np.isnan(np.float64(np.int64(nan_bits).view(np.float64)))
    normal = want >= 2.0**-1022
    np.testing.assert_allclose(got[normal], want[normal], rtol=1e-12, atol=0)
    assert np.all(np.abs(got[~normal] - want[~normal]) <= 1e-12 * want[~normal] + 5e-324)
    assert got[logs == -np.inf][0] == 0.0 and np.all(got >= 0.0)


def test_drained_sums_are_the_row_sums_of_the_same_values_in_any_layout():
    """drain_value_sums over a synthetic kernel (log-values from the key, down to -900): equal to RowSums of
    the values log_value_bits forms, for the whole stream and for it cut in three shards (blocks split)."""
    n_block, samples = 64, 150
    eps = (0.5, 1.5)
    ranges = [float(np.exp(40.0) * 1.1), 0.75]

    def logs_fn(base, b, e):
        key = jax.random.fold_in(base, b)
        logs = jax.random.normal(key, (e.shape[0], n_block), dtype=jax.numpy.float64) * 300.0 - 400.0 - e[:, None]
        return jax.numpy.minimum(logs, 300.0)  # squares stay finite

    words = np.array([3, 4], dtype=np.uint32)
    whole = jb.drain_value_sums(logs_fn, words, eps, ranges, LEVELS, n_block, 0, samples)
    parts = [jb.drain_value_sums(logs_fn, words, eps, ranges, LEVELS, n_block, a, m)
             for a, m in ((0, 40), (40, 70), (110, 40))]
    assert sum(parts[1:], parts[0]) == whole
    with jax.enable_x64(True):
        base = jax.random.wrap_key_data(words, impl="threefry2x32")
        e = jax.numpy.asarray(eps)
        values = jax.jit(lambda b: jb.log_value_bits(logs_fn(base, b, e)))  # fused as in the step
        y = np.concatenate([np.asarray(values(b)).view(np.float64) for b in range(3)], axis=1)[:, :samples]
    s1, s2, ex = host_sums(y, y * y, ranges)
    assert whole.count == samples and list(whole.sum_y) == s1 and list(whole.extra) == ex
    # Y² is formed from 2L on the device (not as fl(Y·Y)): the same sums up to each square's float rounding
    assert all(abs(a - b) * 10**12 <= b + (samples << 52) * 10**12 for a, b in zip(whole.sum_y2, s2))


def test_one_exponential_per_value_gives_the_bits_of_three_masked_ones():
    """log_value_bits forms one exp per entry at its range's argument; the three masked exponentials it replaced
    (written out here) give the same bit patterns over the whole range, the boundaries, ±inf and NaN."""
    jnp = jax.numpy
    rng = np.random.default_rng(7)
    logs = np.concatenate([np.linspace(-800.0, 700.0, 30001), rng.uniform(-760.0, -690.0, 20000),
                           [-np.inf, np.inf, np.nan, jb.LOG_SCALED, jb.LOG_SUBNORMAL, np.nextafter(jb.LOG_SCALED, 0.0),
                            np.nextafter(jb.LOG_SCALED, -1e3), np.nextafter(jb.LOG_SUBNORMAL, -1e3), 0.0, -0.0]])

    def three(x):
        big, small = x >= jb.LOG_SCALED, x < jb.LOG_SUBNORMAL
        mid = ~big & ~small & ~jnp.isnan(x)
        as_bits = lambda y: jax.lax.bitcast_convert_type(y, jnp.int64)  # noqa: E731
        b_big = as_bits(jnp.exp(jnp.where(big, x, 0.0)))
        b_mid = as_bits(jnp.exp(jnp.where(mid, x + 64 * math.log(2.0), 0.0))) - (64 << 52)
        k = jnp.round(jnp.exp(jnp.where(small, x + 1074 * math.log(2.0), -jnp.inf))).astype(jnp.int64)
        return jnp.where(jnp.isnan(x), jnp.int64(0x7FF8000000000000), jnp.where(big, b_big, jnp.where(mid, b_mid, k)))

    with jax.enable_x64(True):
        got = np.asarray(jax.jit(jb.log_value_bits)(jnp.asarray(logs)))
        want = np.asarray(jax.jit(three)(jnp.asarray(logs)))
    np.testing.assert_array_equal(got, want)


def test_jax_log_ndtr_is_scipy_accurate_in_the_far_tail():
    """jax_backend.log_ndtr against scipy's (the numpy path's) on [-60, 40], both sides of its two cuts (the
    tail series at -18, the sign of x for erfc) and near 0: within 1e-12 absolute in log Φ (1e-12 relative
    in Φ, far inside FLOAT_REL = 1e-9). JAX's own log_ndtr was 4.0e-9 off at x = -20.
    (A comparison of floats, not of integers, unlike the rest of this file.)"""
    from scipy import special

    from epscert.montecarlo.backends.jax_backend import log_ndtr

    tiny = np.logspace(-300, 0, 601)
    x = np.concatenate([np.linspace(-60.0, 40.0, 200_001), [-18.0, -18.0 - 1e-12, -18.0 + 1e-12, -20.0, -1e4, 0.0],
                        tiny, -tiny, [1e4, np.inf, -np.inf]])
    with jax.enable_x64(True):
        got = np.asarray(log_ndtr(jax.numpy.asarray(x)))
    want = special.log_ndtr(x)
    finite = np.isfinite(want)
    np.testing.assert_array_equal(got[~finite], want[~finite])
    err = np.abs(got[finite] - want[finite])
    assert np.all(err <= 1e-12 + 4e-16 * np.abs(want[finite])), float(np.max(err))
