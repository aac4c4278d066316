"""Participation, the Gram matrix of the modes, and the factor that samples from it.

Bins. With n iterations and cycle length b, bin j (0 <= j < b) takes part at t = j, j + b, ...
< n: k_j = ceil((n - j)/b) times. When b divides n every bin has k = n/b participations; when it
does not, the first n mod b bins have one more than the others (the batches of a last, partial
cycle come from those bins only). The accountant keeps this exactly: the modes and their Gram
matrix are built from the true participation sets, and the mixture over bins stays uniform
(each example's bin is uniform on {0, .., b-1} whatever n is).

Gram. G0_jk = <m_j, m_k> for the modes m_j = C x_j (:mod:`epscert.matrix.strategies`); for the noise
multiplier σ the accountant uses G = G0/σ². A banded C with p bands has G0_jk = 0 unless the
cyclic distance of j and k is < p (+ the wrap of the last cycle), so G is cyclically banded.
G0 is computed in float64 as it comes (an overflow leaves inf or NaN, an underflow zeros);
:func:`epscert.matrix.checks.check_gram` refuses both, with the range it keeps, before G0 is used.

Factor. Sampling g ~ N(0, G) as g = L z (z ~ N(0, I_b), G = L Lᵀ) never draws the n-vector y.
A cyclic band of half-width w becomes an ordinary band of half-width <= 2w + 1 after the
interleaving permutation 0, b-1, 1, b-2, 2, ... (cyclic neighbours land at most 2w + 1 apart),
and the Cholesky factor of a banded matrix has the same band: L z costs O(b w) per sample
(``kind='band'``). When the band is not narrow enough to pay, L is dense (O(b²), BLAS). Either
way L Lᵀ = G up to the rounding of the factorisation (relative ~1e-15), which changes the
sampled law by a negligible amount; it is a Monte Carlo input, not a bound.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
from scipy import linalg

#: Use the banded factor only when b is at least BAND_MIN_BINS and its diagonals are at most this
#: fraction of b: numpy's dense BLAS product beats the band loop below that (measured at b = 100 with
#: 1 and 4 bands: 1.71M rows/s dense against 0.41M banded, 20 000 x 100 draws, one core; measured with the
#: concatenation loop, before numpy's block product of issue 33, which runs 18x faster at b = 2000:
#: not re-measured, and a change of these thresholds changes the draws of a seed).
BAND_FRACTION = 0.125
BAND_MIN_BINS = 512
#: Refuse Gram matrices whose computation (dense strategies: n b² flops) would exceed this.
MAX_DENSE_GRAM_FLOPS = 4e11


def bin_counts(iterations: int, cycle_length: int) -> np.ndarray:
    """k_j = number of t < n with t ≡ j (mod b), for j = 0..b-1."""
    n, b = int(iterations), int(cycle_length)
    return np.asarray([(n - j + b - 1) // b for j in range(b)], dtype=np.int64)


@dataclass(frozen=True, eq=False)
class Factor:
    """A square root of G for sampling: ``kind`` 'dense' (L, b x b lower), 'diag' (G diagonal:
    ``band[0]`` = √diag(G)) or 'band' (lower band storage ``band[k, i] = L[i + k, i]`` in the
    interleaved order ``perm``). Applied by :func:`epscert.matrix.kernels.apply_factor`."""

    kind: str
    dense: np.ndarray | None
    band: np.ndarray | None
    perm: np.ndarray | None
    inverse: np.ndarray | None

    @functools.cached_property
    def blocks(self) -> tuple[np.ndarray, np.ndarray]:
        """'band': L as (m, K, K) diagonal and sub-diagonal blocks (:func:`epscert.matrix.kernels.band_blocks`)."""
        from epscert.matrix.kernels import band_blocks

        return band_blocks(self.band)


@dataclass(frozen=True, eq=False)
class ModeGram:
    """G0 (b x b) of a strategy's modes, with the participation counts and the cyclic half-width."""

    g0: np.ndarray
    counts: np.ndarray
    half_width: int

    @property
    def bins(self) -> int:
        return int(self.g0.shape[0])

    def scaled(self, sigma: float) -> np.ndarray:
        """G = G0/σ² (a new array)."""
        return self.g0 / (sigma * sigma)

    def factor(self, sigma: float) -> Factor:
        return _factor(self, float(sigma))


def mode_gram(strategy, cycle_length: int) -> ModeGram:
    """The (cached) ModeGram of ``strategy`` for b = ``cycle_length``."""
    return _mode_gram(strategy, int(cycle_length))


@functools.lru_cache(maxsize=16)
def _mode_gram(strategy, b: int) -> ModeGram:
    from epscert.matrix.strategies.dense import dense_modes, load_dense
    from epscert.matrix.strategies.toeplitz import toeplitz_gram

    n = strategy.iterations
    if not 1 <= b <= n:
        raise ValueError(f"cycle_length must be in [1, iterations={n}], got cycle_length={b}")
    if strategy.kind == "toeplitz":
        with np.errstate(over="ignore"):  # an overflow leaves inf: check_gram refuses it (G0 >= 0, so no NaN)
            g0 = toeplitz_gram(np.asarray(strategy.c_col), n, b)
    else:
        flops = float(n) * b * b
        if flops > MAX_DENSE_GRAM_FLOPS:
            raise ValueError(f"a dense strategy with iterations={n} and cycle_length={b} needs about {flops:.1e} "
                             f"flops for its Gram matrix (limit {MAX_DENSE_GRAM_FLOPS:.0e}); use a smaller cycle "
                             "length or a banded Toeplitz strategy")
        matrix, digest = load_dense(strategy.path)
        if digest != strategy.sha256:  # the file changed after the Strategy was built (or differs on this worker)
            raise ValueError(f"the strategy matrix in {strategy.path!r} changed since the strategy was built: "
                             f"sha256={digest[:16]}..., expected sha256={strategy.sha256[:16]}...")
        with np.errstate(over="ignore", invalid="ignore"):  # overflow: inf, or NaN from inf * 0; refused by
            modes = dense_modes(matrix, b)  # epscert.matrix.checks.check_gram before anything reads G0
            g0 = modes.T @ modes
    with np.errstate(over="ignore", invalid="ignore"):
        g0 = 0.5 * (g0 + g0.T)
    g0.setflags(write=False)
    return ModeGram(g0, bin_counts(n, b), _cyclic_half_width(g0))


def _cyclic_half_width(g0: np.ndarray) -> int:
    """Largest cyclic distance min(|j - k|, b - |j - k|) of a nonzero entry."""
    b = g0.shape[0]
    j, k = np.nonzero(g0)
    if j.size == 0:
        return 0
    gap = np.abs(j - k)
    return int(np.max(np.minimum(gap, b - gap)))


def interleave(b: int) -> np.ndarray:
    """perm = [0, b-1, 1, b-2, 2, ...]: perm[i] is the bin at position i."""
    out = np.empty(b, dtype=np.int64)
    out[0::2] = np.arange((b + 1) // 2)
    out[1::2] = b - 1 - np.arange(b // 2)
    return out


@functools.lru_cache(maxsize=16)
def _factor(gram: ModeGram, sigma: float) -> Factor:
    g = gram.scaled(sigma)
    b = gram.bins
    if gram.half_width == 0:  # the modes do not overlap: G is diagonal
        return Factor("diag", None, np.sqrt(np.diag(g))[None, :], None, None)
    diagonals = 2 * gram.half_width + 2  # half-width <= 2w + 1 after interleaving
    if b >= BAND_MIN_BINS and diagonals <= BAND_FRACTION * b:
        perm = interleave(b)
        a = g[np.ix_(perm, perm)]
        lower = np.zeros((diagonals, b))
        for k in range(diagonals):
            lower[k, : b - k] = np.diagonal(a, -k)
        try:
            band = linalg.cholesky_banded(lower, lower=True)
        except linalg.LinAlgError:
            band = None
        if band is not None:
            inverse = np.empty(b, dtype=np.int64)
            inverse[perm] = np.arange(b)
            return Factor("band", None, band, perm, inverse)
    try:
        dense = np.linalg.cholesky(g)
    except np.linalg.LinAlgError:  # singular G (e.g. c_col[0] = 0): a symmetric square root
        w, v = np.linalg.eigh(g)
        dense = v * np.sqrt(np.clip(w, 0.0, None))
    return Factor("dense", dense, None, None, None)


def unit_gram_diagonal(strategy, cycle_length: int) -> tuple[float, np.ndarray]:
    """(s, diag G0(C/s)) with s the largest entry of C: the modes' squared norms of the strategy scaled
    to a largest entry of 1, so that they neither overflow nor (unless C spans ~300 decades) underflow
    where those of C do. G0(C) = s² G0(C/s): :func:`epscert.matrix.checks.check_gram` reads from it
    whether a G0 out of float64's range is a matter of scale (C/s with σ/s is the same mechanism) or
    of the mechanism itself. Not cached: it runs only on that refusal's path."""
    from epscert.matrix.strategies.dense import dense_modes, load_dense
    from epscert.matrix.strategies.toeplitz import toeplitz_gram

    n, b = strategy.iterations, int(cycle_length)
    if strategy.kind == "toeplitz":
        col = np.asarray(strategy.c_col, dtype=np.float64)
        scale = float(col.max())
        return scale, np.diagonal(toeplitz_gram(col / scale, n, b)).copy()
    matrix = load_dense(strategy.path)[0]
    scale = float(matrix.max())
    modes = dense_modes(matrix / scale, b)  # scaled first: the sums of k entries of C may overflow
    return scale, np.einsum("ij,ij->j", modes, modes)
