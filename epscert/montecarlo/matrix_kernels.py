"""Kernels of the matrix-mechanism pair, written once for both array namespaces (numpy, jax.numpy).

Every function takes ``xp`` (the module ``numpy`` or ``jax.numpy``) and pre-drawn random inputs,
so the numpy sampler (:mod:`epscert.montecarlo.samplers.matrix_pair`) and the JAX backend
(:mod:`epscert.montecarlo.backends.jax_matrix`) run the same arithmetic on their own streams.
Notation of :mod:`epscert.montecarlo.samplers.matrix_pair`: g in R^b holds the inner products of
the whitened output with the b whitened modes, G its covariance, x_k = g_k - G_kk/2, and the
privacy loss is L = log((1/b) Σ_k e^{x_k}).
"""

from __future__ import annotations


def apply_factor(xp, z, factor):
    """g = L z for every row of z (N x b). ``factor`` is ('dense', L) or ('band', band, inverse):
    band[k, i] = L[i + k, i] in the interleaved order, ``inverse`` maps it back
    (:class:`epscert.strategies.gram.Factor`). The band product is written with concatenations
    (no in-place slices), which both namespaces support."""
    if factor[0] == "dense":
        return z @ factor[1].T
    band, inverse = factor[1], factor[2]
    b = z.shape[1]
    y = z * band[0]
    for k in range(1, band.shape[0]):
        y = y + xp.concatenate([xp.zeros_like(z[:, :k]), band[k, : b - k] * z[:, : b - k]], axis=1)
    return y[:, inverse]


def log_mean_exp(xp, x):
    """log((1/b) Σ_k e^{x_k}) per row, shifted by the row maximum (no overflow, no underflow to -inf
    unless every term does)."""
    top = xp.max(x, axis=1)
    return top + xp.log(xp.mean(xp.exp(x - top[:, None]), axis=1))


def naive_losses(xp, g_noise, shift, half_diag, remove: bool):
    """Directional losses of the naive sampler from g_noise = L z.

    REMOVE: g = G e_i + L z ~ P_i with i uniform (``shift`` = the rows G[i]), loss L(g).
    ADD: g = L z ~ Q (``shift`` = None), loss -L(g).
    """
    g = g_noise if shift is None else g_noise + shift
    loss = log_mean_exp(xp, g - half_diag)
    return loss if remove else -loss
