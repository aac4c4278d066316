"""The shared matrix-mechanism kernels at the edges of the float range (numpy and, if installed, JAX).

Independent value: ``numpy.logaddexp.reduce`` (a pairwise log-sum-exp that never overflows) minus
log b, row by row.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from epscert.matrix import kernels as mk


def rows() -> np.ndarray:
    rng = np.random.default_rng(3)
    x = rng.normal(0.0, 2.0, (6, 50))
    x[1] += 800.0  # every term overflows e^x: the shifted path
    x[2] -= 800.0  # every term underflows: the shifted path
    x[3, 7] = 705.0  # one term near the top: finite, but the sum is above SAFE_HIGH
    x[4, :] = -700.0  # the largest term is subnormal-adjacent: below SAFE_LOW
    x[4, 0] = -690.0
    return x


def reference(x: np.ndarray) -> np.ndarray:
    return np.array([np.logaddexp.reduce(r) for r in x]) - math.log(x.shape[1])


def test_log_mean_exp_matches_the_reference_on_every_row_numpy():
    x = rows()
    got = mk.log_mean_exp(np, x.copy())
    np.testing.assert_allclose(got, reference(x), rtol=1e-13, atol=1e-12)
    assert np.all(np.isfinite(got))


def test_log_mean_exp_matches_the_reference_on_every_row_jax():
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    x = rows()
    with jax.enable_x64(True):
        got = np.asarray(mk.log_mean_exp(jnp, jnp.asarray(x)))
    np.testing.assert_allclose(got, reference(x), rtol=1e-13, atol=1e-12)


def test_naive_losses_are_the_loss_of_the_shifted_terms_in_both_directions():
    rng = np.random.default_rng(4)
    g = rng.normal(size=(5, 8))
    offset = rng.normal(size=(5, 8))
    expected = reference(g + offset)
    np.testing.assert_allclose(mk.naive_losses(np, g.copy(), offset, True), expected, rtol=1e-14)
    np.testing.assert_allclose(mk.naive_losses(np, g.copy(), offset, False), -expected, rtol=1e-14)


def test_diagonal_factor_is_the_elementwise_product():
    z = np.random.default_rng(5).normal(size=(4, 6))
    d = np.linspace(0.5, 2.0, 6)
    np.testing.assert_array_equal(mk.apply_factor(np, z, ("diag", d)), z * d)


@pytest.mark.parametrize("c_col,b", [([1.0], 10), ([1.0, 0.6, 0.3], 12)])  # a diagonal G, a dense factor
def test_naive_draws_with_reused_buffers_are_the_plain_computation(c_col, b):
    """The sampler's scratch arrays change nothing: the same generator state gives the losses of the
    plain formula (fresh arrays, the row-max log-mean-exp), block after block, in both directions,
    and an earlier block's losses are not overwritten by the next one."""
    from epscert.matrix.pair import MatrixPair, MatrixPairSampler
    from epscert.config import Direction
    from epscert.matrix.strategies import toeplitz_strategy

    pair = MatrixPair(toeplitz_strategy(np.asarray(c_col), 60).gram(b), 2.5)
    sampler = MatrixPairSampler(pair)
    factor = np.linalg.cholesky(pair.g)
    for direction in (Direction.REMOVE, Direction.ADD):
        for n in (7, 7, 3):
            seed = 100 + n
            got = sampler.draw(np.random.default_rng(seed), n, direction)
            ref_rng = np.random.default_rng(seed)
            g = ref_rng.standard_normal((n, b)) @ factor.T
            if direction is Direction.REMOVE:
                g = g + pair.g[ref_rng.integers(0, b, size=n)]
            expected = reference(g - pair.half_diag)
            np.testing.assert_allclose(got, expected if direction is Direction.REMOVE else -expected, rtol=1e-12)
            again = got.copy()
            sampler.draw(np.random.default_rng(seed + 1), n, direction)
            np.testing.assert_array_equal(got, again)


@pytest.mark.parametrize("b, diagonals", [(37, 5), (64, 8), (10, 10), (9, 12)])
def test_band_blocks_product_is_the_dense_band_product(b, diagonals):
    """Independent value: L built entry by entry from the band storage, times z by matmul (issue 33's
    block product; b not a multiple of the block size, and one block or fewer, included)."""
    rng = np.random.default_rng(b)
    band = rng.uniform(0.1, 1.0, (diagonals, b))
    dense = np.zeros((b, b))
    for k in range(diagonals):
        for i in range(b - k):
            dense[i + k, i] = band[k, i]
    perm = rng.permutation(b)
    z = rng.standard_normal((7, b))
    got = mk.apply_factor(np, z, ("band", band, perm))
    np.testing.assert_allclose(got, (z @ dense.T)[:, perm], rtol=1e-13, atol=1e-13)


def test_table_draws_by_bisection_are_the_inverse_cdf_indices():
    """Independent value: the generic inverse CDF (a pass over all m partial sums), on weights with zeros and
    at the ends of [0, 1)."""
    from epscert.matrix.loss_tilt import count_at_most, inverse_cdf

    rng = np.random.default_rng(5)
    weights = rng.uniform(0.0, 1.0, (400, 33))
    weights[weights < 0.3] = 0.0
    weights[:, 0] += 1e-3  # some weight in every row
    u = rng.random(400)
    u[:5], u[5:10] = 0.0, 1.0 - 2.0**-53
    want = inverse_cdf(np, weights, u)
    np.testing.assert_array_equal(count_at_most(np.cumsum(weights, axis=1), u), want)
    np.testing.assert_array_equal(count_at_most(np.cumsum(weights[0]), u), inverse_cdf(np, np.broadcast_to(
        weights[0], weights.shape), u))


def test_add_line_values_are_the_same_with_the_grid_in_one_chunk_or_one_epsilon_at_a_time(monkeypatch):
    """The chunked Newton loop (issue 33) against one loop per ε (chunk of one): the same floats."""
    from epscert.matrix import values as mv
    from epscert.matrix.pair import MatrixPair
    from epscert.matrix.strategies import toeplitz_strategy

    pair = MatrixPair(toeplitz_strategy([1.0, 0.5, 0.25], 60).gram(60), 1.0)
    sampler = mv.MatrixValueSampler(pair, "conditional", 0.1)
    g = pair.noise(np.random.default_rng(2).standard_normal((300, 60)))
    eps = [0.1, 0.3, 0.7, 1.5, 3.0, 6.0]

    def run():
        with np.errstate(divide="ignore", invalid="ignore"):
            return mv.add_line_log_values(np, mv.NumpySpecial, g, sampler.d_mean, pair.half_diag, sampler.var_u,
                                          pair.log_bins, eps, sampler.d_groups)

    whole = run()
    monkeypatch.setattr(mv, "ADD_LINE_ELEMENTS", 1)
    np.testing.assert_array_equal(whole, run())
    assert np.isfinite(whole).any() and whole.shape == (len(eps), 300)
