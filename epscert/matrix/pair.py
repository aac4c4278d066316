"""The matrix-mechanism pair (DP-FTRL / BandMF) with Balls-and-Bins batches, and its naive sampler.

Mechanism. Iterations t = 0..n-1 release y = C s + σ z (z ~ N(0, I_n), coordinate-wise for each
model dimension), where s_t is the sum of the clipped (norm <= 1) per-example gradients of
iteration t's batch and C is the n x n lower-triangular strategy (:mod:`epscert.matrix.strategies`).
Balls-and-Bins with cycle length b: every example draws one bin J uniform on {0, .., b-1} (once,
for all cycles: JAX Privacy's ``BallsInBinsSampling``) and is in the batches t ≡ J (mod b).

Dominating pair (zero-out adjacency; Choquette-Choo et al., arXiv 2410.06266, for non-negative
C). Removing the sensitive example's contribution changes s by a matrix whose row t is its
clipped gradient g_t (norm <= 1) if t ≡ J (mod b), else 0. Given J = j the two outputs differ by
C applied to that matrix, the rest being common; the worst case over the gradients, when C >= 0
entrywise, is the same unit vector at every participation (every inner product of modes is then
as large as it can be), which reduces each model dimension to one: with x_j in {0, 1}^n the
indicator of {t ≡ j}, the pair is

    P = (1/b) Σ_j N(C x_j, σ² I_n)   (example present; J uniform),   Q = N(0, σ² I_n),

REMOVE is D_{e^ε}(P || Q) and ADD is D_{e^ε}(Q || P) (SPEC §2). The argument needs C >= 0; it is
why negative entries are refused.

Loss and its sufficient statistic. Whiten: w = y/σ, a_j = C x_j/σ (the modes). Then

    dP/dQ(w) = (1/b) Σ_j exp(<a_j, w> - ||a_j||²/2),   L = log dP/dQ,

which depends on w only through g = (<a_j, w>)_j in R^b. With A = [a_0 .. a_{b-1}] (n x b) and the
Gram matrix G = Aᵀ A = G0/σ² (:mod:`epscert.matrix.strategies.gram`): under Q, w ~ N(0, I) and
g ~ N(0, G); under the component P_i of P, w ~ N(a_i, I) and g ~ N(Aᵀ a_i, G) = N(G e_i, G). So with
x_k = g_k - G_kk/2, L = log((1/b) Σ_k e^{x_k}), and the n-vector is never drawn: g = L_G ξ with a
(banded) square root L_G of G and ξ ~ N(0, I_b), O(b x bands) per sample.

Reductions (tested):
- C = c I: the modes have disjoint supports, G = (c²/σ²) diag(k_j) with k_j the participations of
  bin j; when b divides n (k_j = k), L is exactly the one-epoch Balls-and-Bins loss of SPEC §2 with
  T = b steps at σ_eff = σ/(c √k) (x_k = z_k/σ_eff + δ_ki/σ_eff² - 1/(2σ_eff²)): the persistent
  sampler of epscert (``balls_and_bins_persistent``) at σ/c.
- b = 1: one mode a_0 = C 1/σ, G = ||C 1||²/σ², L = g - G/2 with g ~ N(G, G) or N(0, G): the
  Gaussian mechanism with sensitivity ||C 1|| (SPEC §7 with σ/||C 1||).

Naive sampler (SPEC §3 applied to this pair): REMOVE draws i uniform and g = G e_i + L_G ξ and
returns L(g); ADD draws g = L_G ξ and returns -L(g); δ(ε) = E[(1 - e^{ε - ℓ})_+] in both cases.
When G is diagonal (C = c·I, or bands that never reach the next participation of another bin),
L_G is diag(√G_kk) and costs one product per mode.
The arithmetic is :mod:`epscert.matrix.kernels` (shared with the JAX backend).
"""

from __future__ import annotations

import math
import threading

import numpy as np

from epscert.matrix import kernels as mk
from epscert.montecarlo.protocol import LossSampler
from epscert.names import Direction


class MatrixPair:
    """G = G0/σ² of a strategy's modes and what the samplers derive from it (constants only)."""

    def __init__(self, gram, sigma: float) -> None:
        self.sigma = float(sigma)
        self.gram = gram
        self.g = gram.scaled(self.sigma)
        self.bins = gram.bins
        self.diag = np.diag(self.g).copy()
        self.half_diag = 0.5 * self.diag
        #: x = g - diag(G)/2 is L_G ξ + offset: row i of ``remove_offsets`` for g ~ P_i (REMOVE),
        #: ``add_offset`` for g ~ Q (ADD)
        self.remove_offsets = self.g - self.half_diag
        self.add_offset = -self.half_diag
        self.log_bins = math.log(self.bins)
        self.factor = gram.factor(self.sigma)

    def factor_tuple(self, xp=np):
        """The factor in the form :func:`epscert.matrix.kernels.apply_factor` takes."""
        f = self.factor
        if f.kind == "dense":
            return ("dense", xp.asarray(f.dense))
        if f.kind == "diag":
            return ("diag", xp.asarray(f.band[0]))
        if xp is np:  # numpy multiplies the factor's blocks (kernels.band_blocks)
            return ("band", f.band, f.inverse) + f.blocks
        return ("band", xp.asarray(f.band), xp.asarray(f.inverse))

    def noise(self, z: np.ndarray) -> np.ndarray:
        """L_G ξ for the rows ξ of z."""
        return mk.apply_factor(np, z, self.factor_tuple())


class MatrixPairSampler(LossSampler):
    """Naive directional losses of the matrix-mechanism pair (module docstring)."""

    def __init__(self, pair: MatrixPair) -> None:
        self.pair = pair

    #: The module of this sampler's JAX kernels, named, not imported (it imports this one and JAX lazily).
    jax_kernels_module = "epscert.matrix.jax_kernels"

    def width(self) -> int:
        return 3 * self.pair.bins  # ξ, L_G ξ and the shifted copy

    def draw(self, rng: np.random.Generator, n: int, direction: Direction) -> np.ndarray:
        pair = self.pair
        z, g, offset, work = block_buffers(n, pair.bins)
        rng.standard_normal(out=z)
        remove = direction is Direction.REMOVE
        if remove:
            np.take(pair.remove_offsets, rng.integers(0, pair.bins, size=n), axis=0, out=offset)
        else:
            offset = pair.add_offset
        factor = pair.factor_tuple()
        g = mk.apply_factor(np, z, factor, out=g if factor[0] != "band" else None)
        return mk.naive_losses(np, g, offset, remove, work)


#: Per-thread scratch arrays of the naive sampler, by (rows, bins) (see :func:`block_buffers`).
_SCRATCH = threading.local()


def block_buffers(n: int, b: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Four n x b float64 scratch arrays for one block, reused by the next block of this shape in the
    same thread (at most the two latest shapes are kept: the full blocks and the last one).

    Cost only: fresh block-sized arrays are returned to the operating system and faulted in again
    by glibc's allocator at every block, which measured at about half the naive sampler's CPU time
    (b = 100, one core). Every array is fully overwritten before it is read, and nothing the
    sampler returns is one of them.
    """
    cache = getattr(_SCRATCH, "arrays", None)
    if cache is None:
        cache = _SCRATCH.arrays = {}
    key = (int(n), int(b))
    if key not in cache:
        while len(cache) >= 2:
            cache.pop(next(iter(cache)))
        cache[key] = tuple(np.empty(key) for _ in range(4))
    return cache[key]
