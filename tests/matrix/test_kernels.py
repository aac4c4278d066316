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
