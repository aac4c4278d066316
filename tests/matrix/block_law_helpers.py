"""Helpers of the block-law tests (tests/matrix/test_block_law_*.py): the one-participation pair, this package's
own dense Toeplitz C and naive estimates of δ_remove and δ_add, and the drawn factor rebuilt from the module's steps."""

from __future__ import annotations


import numpy as np
from scipy import linalg

from benchmarks.matrix_rivals import binomial_c_col
from epscert.config.samplers import cached_pair
from epscert.matrix import block_law
from epscert.matrix.block_bound import band_and_blocks
from epscert.matrix.strategies import toeplitz_strategy



def one_participation(n: int, bands: int, sigma: float):
    return cached_pair(toeplitz_strategy(np.array(binomial_c_col(bands)), n), n, sigma)


def toeplitz_matrix(n: int, bands: int) -> np.ndarray:
    """This file's own dense lower-triangular Toeplitz C with first column binomial_c_col(bands)."""
    col = np.zeros(n)
    col[:bands] = binomial_c_col(bands)
    return linalg.toeplitz(col, np.zeros(n))


def naive_add(pair, bands: int, eps: np.ndarray, draws: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """This file's own estimate of δ_add(ε) = E_Q[(1 - e^ε S)_+] with its standard error, drawn as in
    :func:`naive_remove`."""
    return naive_remove(pair, bands, eps, draws, seed, add=True)


def naive_remove(pair, bands: int, eps: np.ndarray, draws: int, seed: int, add: bool = False
                 ) -> tuple[np.ndarray, np.ndarray]:
    """This file's own estimate of δ_remove(ε) = E_Q[(S - e^ε)_+] (with ``add`` δ_add(ε) = E_Q[(1 - e^ε S)_+])
    with its standard error. One participation: mode j is C e_j, so g = Cᵀ w / σ with w ~ N(0, I) has covariance
    G = CᵀC/σ² (no factorisation of G, which may be ill-conditioned); the strategy is rebuilt here from its first
    column, not taken from the pair."""
    n = pair.bins
    c = toeplitz_matrix(n, bands) / pair.sigma
    half = 0.5 * np.sum(c * c, axis=0)
    rng = np.random.default_rng(seed)
    sums = np.zeros(eps.size)
    squares = np.zeros(eps.size)
    for _ in range(draws // 20_000):
        x = rng.standard_normal((20_000, n)) @ c - half
        s = np.exp(x).mean(axis=1)
        if add:
            vals = np.maximum(1.0 - np.exp(eps)[None, :] * s[:, None], 0.0)
        else:
            vals = np.maximum(s[:, None] - np.exp(eps)[None, :], 0.0)
        sums += vals.sum(axis=0)
        squares += (vals * vals).sum(axis=0)
    mean = sums / draws
    return mean, np.sqrt(np.maximum(squares / draws - mean * mean, 0.0) / draws)


def drawn_factor(pair):
    band, natural = band_and_blocks(pair.gram, pair.sigma)
    blocks = block_law.law_block_count(band.shape[1], natural)
    return block_law.dominating_factor(block_law.dominating_covariance(*block_law.split_blocks(band, blocks)))


def convex_minorant(x, y):
    """The greatest convex minorant of the points (x_k, y_k) at every x_k, in the arrays' own arithmetic (long double,
    or exact with object arrays of Fractions; a monotone chain written here, independent of the module's): every convex
    function below the points at the knots lies below it."""
    hull = [0]
    for k in range(1, x.size):
        while len(hull) >= 2:
            i, j = hull[-2], hull[-1]
            if (y[j] - y[i]) * (x[k] - x[i]) >= (y[k] - y[i]) * (x[j] - x[i]):
                hull.pop()
            else:
                break
        hull.append(k)
    return _chords(x, y, np.array(hull))


def _chords(x, y, idx):
    """The piecewise-linear function through (x_i, y_i), i in ``idx``, at every knot (in the arrays' dtype)."""
    out = np.empty(x.size, dtype=x.dtype)
    for a, b in zip(idx[:-1], idx[1:]):
        t = (x[a:b + 1] - x[a]) / (x[b] - x[a])
        out[a:b + 1] = y[a] + t * (y[b] - y[a])
    return out
