"""Kernels of the matrix-mechanism pair, written once for both array namespaces (numpy, jax.numpy).

Every function takes ``xp`` (the module ``numpy`` or ``jax.numpy``) and pre-drawn random inputs,
so the numpy sampler (:mod:`epscert.matrix.pair`) and the JAX backend
(:mod:`epscert.matrix.jax_kernels`) run the same arithmetic on their own streams.
Notation of :mod:`epscert.matrix.pair`: g in R^b holds the inner products of
the whitened output with the b whitened modes, G its covariance, x_k = g_k - G_kk/2, and the
privacy loss is L = log((1/b) Σ_k e^{x_k}).
"""

from __future__ import annotations

import math

import numpy as np

#: Relative error allowance of a computed value of the matrix estimators against the exact one
#: (:mod:`epscert.matrix.values`, :mod:`epscert.matrix.loss_tilt`); the rows raise the UCB by it.
FLOAT_REL = 1e-9


def apply_factor(xp, z, factor, out=None):
    """g = L z for every row of z (N x b). ``factor`` is ('dense', L), ('diag', d) with L = diag(d)
    (G diagonal: the modes do not overlap), or ('band', band, inverse[, diag, sub]): band[k, i] = L[i + k, i]
    in the interleaved order, ``inverse`` maps it back (:class:`epscert.matrix.strategies.gram.Factor`). The
    band product is written with concatenations (no in-place slices), which both namespaces support;
    numpy multiplies the blocks of :func:`band_blocks` instead (``diag``, ``sub``, or built here).
    ``out`` (numpy only, dense and diag): an N x b array to write g into (it may be z for diag)."""
    if factor[0] == "dense":
        return z @ factor[1].T if out is None else np.matmul(z, factor[1].T, out=out)
    if factor[0] == "diag":
        return z * factor[1] if out is None else np.multiply(z, factor[1], out=out)
    band, inverse = factor[1], factor[2]
    b = z.shape[1]
    if xp.__name__ == "numpy":  # ('band', band, inverse, diag, sub): the blocks of band_blocks, built once
        blocks = factor[3:5] if len(factor) >= 5 else band_blocks(np.asarray(band))
        return _band_product_numpy(z, blocks[0], blocks[1], inverse)
    y = z * band[0]
    for k in range(1, band.shape[0]):
        y = y + xp.concatenate([xp.zeros_like(z[:, :k]), band[k, : b - k] * z[:, : b - k]], axis=1)
    return y[:, inverse]


def band_blocks(band: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The band factor (``band[k, i] = L[i + k, i]``, K diagonals, b columns) as a block lower-bidiagonal
    matrix of m = ceil(b/K) blocks of size K (the rows past b are zero): (diag, sub), each (m, K, K) and
    transposed, diag[i, c, r] = L[iK + r, iK + c], sub[i, c, r] = L[iK + r, (i-1)K + c] (sub[0] = 0).
    Bandwidth K - 1 < K: every entry of L lies in one of those blocks."""
    size, b = band.shape
    m = -(-b // size)
    diag, sub = np.zeros((m, size, size)), np.zeros((m, size, size))
    for k in range(size):
        cols = np.arange(b - k)
        block, col = np.divmod(cols, size)
        row_block, row = np.divmod(cols + k, size)
        same = row_block == block
        diag[block[same], col[same], row[same]] = band[k, cols[same]]
        sub[row_block[~same], col[~same], row[~same]] = band[k, cols[~same]]
    return diag, sub


def _band_product_numpy(z, diag, sub, inverse):
    """L z per row of z (N x b) by the blocks of :func:`band_blocks`: y_i = z_i L_iiᵀ + z_{i-1} L_{i,i-1}ᵀ,
    batched matrix products (BLAS). 2K multiply-adds per entry against K for the concatenation loop
    of :func:`apply_factor`, which it replaces on numpy because it ran 18x slower per sample at
    b = 2000, K = 32 (2.5 s against 0.14 s per 10^4 samples, one core; issue 33). The sums run in
    another order, so g differs from the loop's by rounding (1e-15 relative): the same L, the same
    law up to the rounding of L z that every evaluation of it has (:mod:`epscert.matrix.strategies.gram`)."""
    n, b = z.shape
    m, size, _ = diag.shape
    if m * size != b:
        padded = np.zeros((n, m * size))
        padded[:, :b] = z
        z = padded
    zt = z.reshape(n, m, size).transpose(1, 0, 2)  # (m, N, K): block i of every row
    y = np.matmul(zt, diag)
    if m > 1:
        y[1:] += np.matmul(zt[:-1], sub[1:])
    y = y.transpose(1, 0, 2).reshape(n, m * size)
    return y[:, :b] if inverse is None else y[:, inverse]


#: Row sums of e^{x_k} outside [SAFE_LOW, SAFE_HIGH] are recomputed with the row maximum taken out:
#: inside, no term overflowed and the largest term is normal, so the plain sum is accurate.
SAFE_LOW, SAFE_HIGH = 1e-290, 1e290


def log_mean_exp(xp, x, work=None):
    """log((1/b) Σ_k e^{x_k}) per row.

    The plain sum of e^{x_k} where it lies in [``SAFE_LOW``, ``SAFE_HIGH``] (every term finite,
    the largest normal: a sum of positive terms, accurate to a few ulp relative); elsewhere the
    same with the row maximum taken out first (no overflow, no underflow to -inf unless every term
    does). numpy recomputes only those rows; jax.numpy evaluates both and selects. ``work``
    (numpy only): an array of x's shape for the terms e^{x_k}.
    """
    b = x.shape[1]
    if xp.__name__ == "numpy":
        with np.errstate(over="ignore", under="ignore", divide="ignore"):  # those rows are redone
            total = np.sum(np.exp(x, out=work), axis=1)
            out = np.log(total) - math.log(b)
        safe = (total >= SAFE_LOW) & (total <= SAFE_HIGH)
        if not bool(safe.all()):
            out[~safe] = _shifted_log_mean_exp(np, x[~safe])
        return out
    total = xp.sum(xp.exp(x), axis=1)
    safe = (total >= SAFE_LOW) & (total <= SAFE_HIGH)
    return xp.where(safe, xp.log(xp.where(safe, total, 1.0)) - math.log(b), _shifted_log_mean_exp(xp, x))


def _shifted_log_mean_exp(xp, x):
    top = xp.max(x, axis=1)
    return top + xp.log(xp.mean(xp.exp(x - top[:, None]), axis=1))


def naive_losses(xp, g_noise, offset, remove: bool, work=None):
    """Directional losses of the naive sampler from g_noise = L z: x = g_noise + ``offset``.

    REMOVE: g = G e_i + L z ~ P_i with i uniform, so x_k = g_k - G_kk/2 takes ``offset`` = the rows
    (G - diag(G)/2)[i]; loss L = log((1/b) Σ_k e^{x_k}). ADD: g = L z ~ Q, ``offset`` = -diag(G)/2
    (broadcast), loss -L. numpy: ``g_noise`` is overwritten with x, and ``work`` (an array of its
    shape, optional) takes the terms e^{x_k}: no block-sized array is allocated.
    """
    if xp.__name__ == "numpy":
        x = g_noise
        x += offset
    else:
        x = g_noise + offset
    loss = log_mean_exp(xp, x, work)
    return loss if remove else -loss
