"""The engine's JAX part: device choice, block shapes, exact grid sums of a block kernel's values.

Shared by every mechanism's JAX kernels (:mod:`epscert.dpsgd.jax_kernels`,
:mod:`epscert.dpsgd.jax_conditional`, :mod:`epscert.matrix.jax_kernels`), which a sampler object
names in its ``jax_kernels_module`` (the protocol of :mod:`epscert.montecarlo`); this module knows no
mechanism. Imported lazily (``import epscert`` never loads JAX). Every call runs inside
``jax.enable_x64(True)``, a context manager: the process-wide default dtype of a user's own JAX
code is left unchanged (tested).

Stream (SPEC §10). The base key of one direction of one stream is the threefry key made of
the two words :func:`epscert.rng.stream_key_words` hashes from (root seed, configuration key,
stream index, direction index); block g of the stream (samples [g·n, (g+1)·n)) uses
``fold_in(base, g)`` and epoch e of the block ``fold_in(block_key, e)``. The block size n is a
function of (width, stream sample count) only, never of the device or the shard layout: a shard
(samples [a, a + m) of the stream) runs the blocks it touches at full size and masks the
samples outside [a, a + m), so every layout sums the same samples, and CPU and GPU draw the
same numbers (threefry is platform independent); the numpy backend draws a different, equally
valid stream.

Precision. Losses are float64 throughout (no float32 path: no error bound for it is
proven here, so none is offered). The device reduces each block to the same exact integer
sums as :func:`epscert.montecarlo.exactsum.grid_sum_rows`: every Y = (1 - e^{ε-ℓ})_+ is
rounded UP to the grid 2**-52 (q = ceil(Y·2**52), exact in float64 because the scaling is a
power of two and q < 2**53), and q is summed in int64 as 27 + 26 bit halves, which cannot
overflow below 2**36 values. Integer addition is exact in any order, so the host merges
the blocks into the accumulator with no rounding at all: certificates are computed from
sums with the same exactness as on the numpy backend (the UCB stays valid because the
rounding only raises each Y).
"""

from __future__ import annotations

import math

import numpy as np

from epscert.montecarlo.accumulator import DirectionSums
from epscert.montecarlo.exactsum import GRID_LOG2
from epscert.rng import block_ranges

#: log2 of the largest block (floats of one epoch's T x batch array): 2**24 float64 = 128 MiB.
#: The block size shapes the stream, so it is a constant, the same on every device.
BLOCK_LOG2 = 24
#: Blocks whose sums are fetched together (results stay on the device until then).
FETCH_EVERY = 64
_LO_BITS = 26
_LOG_HALF = math.log(0.5)


def available() -> bool:
    """Whether JAX can be imported."""
    try:
        import jax  # noqa: F401
    except ImportError:
        return False
    return True


def gpu_visible() -> bool:
    """Whether JAX sees a GPU (``backend='auto'`` then takes JAX)."""
    if not available():
        return False
    import jax

    try:
        return len(jax.devices("gpu")) > 0
    except RuntimeError:  # no GPU platform in this jaxlib
        return False


def device_name() -> str:
    """'platform:kind' of the device the kernels run on (JAX's default device)."""
    import jax

    dev = jax.devices()[0]
    return f"{dev.platform}:{dev.device_kind}"


def block_size(steps: int, samples: int) -> int:
    """Samples per block: the largest power of two <= 2**BLOCK_LOG2 / T, capped by the
    stream's sample count rounded up to a power of two (few compiled shapes, small tests stay small)."""
    cap = max(1, (1 << BLOCK_LOG2) // max(1, steps))
    cap = 1 << (cap.bit_length() - 1)
    want = 1 << max(0, (samples - 1).bit_length())
    return min(cap, want)


def drain_sums(fn, key_words: np.ndarray, epsilons: tuple[float, ...], n_block: int, start: int, samples: int,
               progress=None) -> DirectionSums:
    """Run a compiled block kernel ``fn(base, block, lo, hi, eps) -> (hi, lo, nan count)`` over the
    blocks of positions [start, start + samples) and add its grid halves exactly (Python integers).

    Up to FETCH_EVERY blocks are dispatched before their results are fetched, so the device works
    while the host adds; ``progress(n)`` is called per block with its kept samples. A NaN loss
    anywhere raises FloatingPointError (the sums would be meaningless)."""
    import jax

    n_eps = len(epsilons)
    totals = [0] * (2 * n_eps)
    nan_count = 0
    with jax.enable_x64(True):
        base = jax.random.wrap_key_data(np.asarray(key_words, dtype=np.uint32), impl="threefry2x32")
        eps = jax.numpy.asarray(epsilons, dtype=jax.numpy.float64)
        pending: list = []
        ranges = block_ranges(n_block, start, samples)
        for i, (b, lo, hi) in enumerate(ranges):
            pending.append((hi - lo, fn(base, b, lo, hi, eps)))
            if len(pending) == FETCH_EVERY or i == len(ranges) - 1:
                for valid, (hi, lo, nans) in pending:
                    hi, lo = np.asarray(hi).tolist(), np.asarray(lo).tolist()
                    totals = [t + (h << _LO_BITS) + lo_ for t, h, lo_ in zip(totals, hi, lo)]
                    nan_count += int(nans)
                    if progress is not None:
                        progress(valid)
                pending = []
    if nan_count:
        raise FloatingPointError("a sampled privacy loss is NaN")
    return DirectionSums(samples, tuple(totals[:n_eps]), tuple(totals[n_eps:]))


def grid_halves(y):
    """(Traced or eager under x64.) Per row: Σ (q >> 26) and Σ (q & (2**26 - 1)), q = ceil(y · 2**52), in int64.

    Rounding up to the grid raises each Y by < 2**-52, so the UCB from these sums stays
    valid (as in :mod:`epscert.montecarlo.exactsum`); q < 2**53 and at most 2**24 values per
    block keep both int64 sums below 2**51.
    """
    import jax.numpy as jnp

    q = jnp.ceil(y * float(2**GRID_LOG2)).astype(jnp.int64)
    return jnp.sum(q >> _LO_BITS, axis=1), jnp.sum(q & ((1 << _LO_BITS) - 1), axis=1)


def loss_block_sums(loss_fn, n: int):
    """jit(base key, block index, lo, hi, ε grid) -> (hi sums, lo sums, NaN count), int64, over the
    block's positions [lo, hi) of ``loss_fn(base, b)`` -> (n,) losses (the rest of the block is drawn and
    masked out): the one device reduction of every mechanism's loss kernel."""
    import jax
    import jax.numpy as jnp

    def block_sums(base, b, lo, hi, eps):
        ell = loss_fn(base, b)
        pos = jnp.arange(n)
        mask = (pos >= lo) & (pos < hi)
        # (|grid|, n) values in [0, 1]; the clip only guards a last-ulp overshoot of expm1 (the true
        # Y is <= 1, so lowering a computed value above 1 to 1 cannot lower the sum below the truth)
        y = jnp.clip(-jnp.expm1(jnp.minimum(eps[:, None] - ell[None, :], 0.0)), 0.0, 1.0)
        y = jnp.where(mask[None, :] & ~jnp.isnan(ell)[None, :], y, 0.0)
        hi_y, lo_y = grid_halves(y)
        hi_y2, lo_y2 = grid_halves(y * y)
        nans = jnp.sum(jnp.isnan(ell) & mask)
        return jnp.concatenate([hi_y, hi_y2]), jnp.concatenate([lo_y, lo_y2]), nans

    return jax.jit(block_sums)


def ndtri_exp(y):
    """Φ^{-1}(e^y) for y <= 0: Φ^{-1}(e^y) below log 1/2, -Φ^{-1}(-expm1(y)) above (no cancellation)."""
    import jax.numpy as jnp
    from jax.scipy.special import ndtri

    low = ndtri(jnp.exp(jnp.minimum(y, _LOG_HALF)))
    high = -ndtri(-jnp.expm1(jnp.maximum(y, _LOG_HALF)))
    return jnp.where(y < _LOG_HALF, low, high)
