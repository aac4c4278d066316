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
function of (width, stream sample count) only (:func:`block_size`, DP-SGD's kernels) or of the width
only (:func:`fixed_block_size`, the matrix mechanism's: one compile for every sample count), never of
the device or the shard layout: a shard
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
rounding only raises each Y). Value estimators (:func:`drain_value_sums`) keep per-(ε, exponent)
int64 significand counts on the device and fold them into the exact sums in units 2**-1126 of
:mod:`epscert.montecarlo.exactfloat` on the host: no rounding at all beyond the values' own.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from epscert.montecarlo.accumulator import DirectionSums
from epscert.montecarlo.exactfloat import IEEE_BINS, UNIT_LOG2, fold_ieee_histogram
from epscert.montecarlo.exactsum import GRID_LOG2
from epscert.rng import block_ranges

#: log2 of the largest block (floats of one epoch's T x batch array): 2**24 float64 = 128 MiB.
#: The block size shapes the stream, so it is a constant, the same on every device.
BLOCK_LOG2 = 24
#: log2 of the most samples in a block of :func:`fixed_block_size` (the matrix mechanism's kernels).
FIXED_BLOCK_LOG2 = 14
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


def fixed_block_size(width: int) -> int:
    """Samples per block of a kernel that costs ``width`` floats a sample: the largest power of two
    <= 2**BLOCK_LOG2 / width, at most 2**FIXED_BLOCK_LOG2. A function of the configuration only, never of the
    sample count, so one compiled kernel serves every sample count (the last block is drawn whole and masked)."""
    cap = max(1, (1 << BLOCK_LOG2) // max(1, width))
    return min(1 << (cap.bit_length() - 1), 1 << FIXED_BLOCK_LOG2)


def fetched(ranges, dispatch):
    """Yield (block, lo, hi, result) for every (block, lo, hi) of ``ranges``, in order, with result =
    ``dispatch(block, lo, hi)``: up to FETCH_EVERY blocks are dispatched before the first of them is
    yielded, so the device works on the next blocks while the host reads one (results stay on the device
    until then). The one dispatch loop of every JAX kernel module."""
    pending: list = []
    for i, (b, lo, hi) in enumerate(ranges):
        pending.append((b, lo, hi, dispatch(b, lo, hi)))
        if len(pending) == FETCH_EVERY or i == len(ranges) - 1:
            yield from pending
            pending = []


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
        for _, lo, hi, (hi_sums, lo_sums, nans) in fetched(block_ranges(n_block, start, samples),
                                                            lambda b, lo, hi: fn(base, b, lo, hi, eps)):
            hi_sums, lo_sums = np.asarray(hi_sums).tolist(), np.asarray(lo_sums).tolist()
            totals = [t + (h << _LO_BITS) + lo_ for t, h, lo_ in zip(totals, hi_sums, lo_sums)]
            nan_count += int(nans)
            if progress is not None:
                progress(hi - lo)
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


#: Below this argument :func:`log_ndtr` uses its own asymptotic series instead of the complementary error function.
LOG_NDTR_TAIL = -18.0
#: Terms of that series (the first left out is below 1e-17 relative for x <= LOG_NDTR_TAIL).
LOG_NDTR_TERMS = 12


def log_ndtr(x):
    """log Φ(x), as accurate as scipy's (the numpy path's), at one erfc and one log per entry.

    Above LOG_NDTR_TAIL: with e = erfc(|x|/√2) (XLA's erfc, relatively accurate on [0, 13]: measured on
    the CPU backend, see below), Φ(x) = e/2 for x <= 0 and 1 - e/2 for x > 0, and log Φ = log of that
    number. For x <= 0 the log's error is the relative error of erfc. For x > 0 the rounding of 1 - e/2 is
    at most half an ulp of a number in [1/2, 1], so log Φ has an absolute error below 1.2e-16 there (Φ a
    relative one): the accuracy jax.scipy's log(ndtr) has on (0, 8]; above x ≈ 8.3, where
    -6.2e-16 < log Φ < 0, this returns 0, the same absolute error. So a law drawn through Φ(m) (a normal
    truncated below m) moves by a total variation of at most about 1.2e-16 per coordinate, as before.
    Measured against scipy on [-60, 40] (tests/core/test_jax_value_sums.py): within 1e-12 absolute in
    log Φ, far inside the matrix rows' FLOAT_REL = 1e-9 relative allowance. (jax.scipy's log_ndtr
    evaluates erf, erfc, both tails and a series for every entry, 2.5x the cost on the CPU, and was off by
    up to 4.0e-9 in log Φ for x in [-25, -20] in JAX 0.10.)

    For x <= LOG_NDTR_TAIL the Mills-ratio expansion

        Φ(x) = φ(x)/|x| · (1 + Σ_{k=1}^{K} (-1)^k (2k - 1)!! / x^{2k} + R_K),

    whose remainder R_K has the sign of the first term left out and is smaller in absolute value (the
    classical bound for this alternating asymptotic series, x < 0): at x <= -18 and K = 12 that term is
    (25)!!/18^26 < 1e-17, far inside float64 rounding. log φ(x)/|x| = -x²/2 - log|x| - log(2π)/2 is
    formed directly, so no underflow occurs down to x = -1e150 (x² stays finite)."""
    import jax.numpy as jnp
    from jax import lax

    tail = jnp.minimum(x, LOG_NDTR_TAIL)
    inv = 1.0 / (tail * tail)
    term, series = jnp.ones_like(tail), jnp.zeros_like(tail)
    for k in range(1, LOG_NDTR_TERMS + 1):
        term = term * -(2 * k - 1) * inv
        series = series + term
    far = -0.5 * tail * tail - jnp.log(-tail) - 0.5 * math.log(2.0 * math.pi) + jnp.log1p(series)
    mid = jnp.maximum(x, LOG_NDTR_TAIL)
    half_erfc = 0.5 * lax.erfc(jnp.abs(mid) * _SQRT_HALF)
    return jnp.where(x <= LOG_NDTR_TAIL, far, jnp.log(jnp.where(mid > 0, 1.0 - half_erfc, half_erfc)))


_SQRT_HALF = math.sqrt(0.5)


#: Below this log-value, exp is formed at a shifted argument (e^{L + 64 ln 2}, a normal float) and scaled back
#: in the exponent field; below LOG_SUBNORMAL it is formed as a count of 2**-1074 (see :func:`log_value_bits`).
LOG_SCALED = -700.0
LOG_SUBNORMAL = -708.0
_SHIFT_MID = 64
_MASK52 = (1 << 52) - 1
_NAN_BITS = 0x7FF8000000000000
#: Values per row folded on the device before the counts go to the host: every (row, bin) sum of
#: 27-bit halves then stays below 2**35 · 2**27 < 2**63 (int64 exact).
FOLD_VALUES = 1 << 35


def log_value_bits(logs):
    """(Traced, x64.) int64 IEEE-754 bit patterns of Y = e^L for log-values L (-inf gives 0, NaN a NaN pattern).

    No subnormal float is formed on the device (XLA on CPU flushes them to zero): for L >= LOG_SCALED the
    pattern is that of ``exp(L)``; for LOG_SUBNORMAL <= L < LOG_SCALED that of ``exp(L + 64 ln 2)`` with 64
    taken from its exponent field (an exact scaling by 2**-64; the result is >= e^-708 > 2**-1022, normal);
    below LOG_SUBNORMAL it is the integer k = round(e^{L + 1074 ln 2}) < 2**53, whose pattern is the float
    k · 2**-1074 (subnormal for k < 2**52), rounded as IEEE rounds a subnormal result. Relative to e^L the
    shifted forms add the rounding of L + c (|L| < 750: below 2**-43) and of c itself: far inside the
    matrix rows' FLOAT_REL = 1e-9, which already covers the exponential's own few-ulp error; the absolute
    error of the subnormal rounding (<= 2**-1075) is the host path's own.
    """
    import jax
    import jax.numpy as jnp

    big = logs >= LOG_SCALED
    small = logs < LOG_SUBNORMAL
    # one exponential per entry, at the argument of its range (L, L + 64 ln 2 or L + 1074 ln 2: the same float
    # sums as three masked exponentials would form, so the same bits; L + 0.0 is L exactly)
    shift = jnp.where(big, 0.0, jnp.where(small, 1074 * math.log(2.0), _SHIFT_MID * math.log(2.0)))
    t = jnp.exp(logs + shift)
    b = jax.lax.bitcast_convert_type(t, jnp.int64)
    k = jnp.round(jnp.where(small, t, 0.0)).astype(jnp.int64)  # < 2**53 where small; 0 elsewhere (unused)
    out = jnp.where(big, b, jnp.where(small, k, b - (_SHIFT_MID << 52)))
    return jnp.where(jnp.isnan(logs), jnp.int64(_NAN_BITS), out)


def ieee_histograms(bits, bits2, m_tau, valid):
    """(Traced, x64.) The per-(row, exponent) significand counts of :func:`epscert.montecarlo.exactfloat.fold_ieee_histogram`.

    ``bits`` (R, n) int64 patterns of non-negative values Y, ``bits2`` those of Y², ``m_tau`` (R,) the stored
    bits of each row's range B, ``valid`` (n,) the positions kept (the others add nothing). Returns (R, IEEE_BINS, 2, 3) and
    (R, IEEE_BINS, 3) int64: Σ (q >> 26), Σ (q & (2**26 - 1)) and the count per bin, q the integer
    significand (< 2**53). A segment sum of integers: exact in any order.
    """
    import jax
    import jax.numpy as jnp

    rows = bits.shape[0]
    bits = jnp.where(valid[None, :], bits, 0)
    bits2 = jnp.where(valid[None, :], bits2, 0)
    row_base = jnp.arange(rows, dtype=jnp.int64)[:, None] * IEEE_BINS
    ones = jnp.broadcast_to(valid[None, :], bits.shape).astype(jnp.int64)

    def parts(b):
        e, m = b >> 52, b & _MASK52
        q = m + jnp.where(e > 0, jnp.int64(1 << 52), jnp.int64(0))
        return e, m, jnp.stack([q >> _LO_BITS, q & ((1 << _LO_BITS) - 1), ones], axis=-1).reshape(-1, 3)

    e, m, data = parts(bits)
    flag = (m > m_tau[:, None]).astype(jnp.int64)
    hist = jax.ops.segment_sum(data, ((row_base + e) * 2 + flag).ravel(), num_segments=rows * IEEE_BINS * 2)
    e2, _, data2 = parts(bits2)
    hist2 = jax.ops.segment_sum(data2, (row_base + e2).ravel(), num_segments=rows * IEEE_BINS)
    return hist.reshape(rows, IEEE_BINS, 2, 3), hist2.reshape(rows, IEEE_BINS, 3)


@functools.lru_cache(maxsize=32)
def value_sums_step(logs_fn, n: int):
    """jit(Y histogram, Y² histogram, base key, block index, lo, hi, ε grid, M_τ) -> the histograms plus those
    of the block's positions [lo, hi) of ``logs_fn(base, b, eps)`` -> (|ε|, n) log-values. One compile per
    (kernel, block size, grid length): the ε grid is an argument, not a constant."""
    import jax
    import jax.numpy as jnp

    def step(hist, hist2, base, b, lo, hi, eps, m_tau):
        logs = logs_fn(base, b, eps)
        pos = jnp.arange(n)
        valid = (pos >= lo) & (pos < hi)
        add, add2 = ieee_histograms(log_value_bits(logs), log_value_bits(2.0 * logs), m_tau, valid)
        return hist + add, hist2 + add2

    return jax.jit(step)


def drain_value_sums(logs_fn, key_words: np.ndarray, epsilons: tuple[float, ...], ranges, levels: int, n_block: int,
                     start: int, samples: int, progress=None) -> DirectionSums:
    """Exact (count, Σ Y, Σ Y², Σ min(Y, τ_k)) in units 2**-UNIT_LOG2 of the values e^L of ``logs_fn`` at positions
    [start, start + samples) of the stream: the histograms stay on the device across blocks and reach the host
    once per FOLD_VALUES samples (in practice once), where :func:`fold_ieee_histogram` turns them into Python
    integers. The same integers as the numpy path's :class:`~epscert.montecarlo.accumulator.ValueSums` of the
    same values (tested); the values are those of :func:`log_value_bits`. ``ranges`` B per ε: the levels
    τ_k = B·4^{-k} must share B's stored bits (:func:`epscert.montecarlo.exactfloat.levels_share_mantissa`)."""
    import jax
    import jax.numpy as jnp

    n_eps = len(epsilons)
    step = value_sums_step(logs_fn, n_block)
    sum_y, sum_y2, extra = [0] * n_eps, [0] * n_eps, [0] * (n_eps * levels)
    with jax.enable_x64(True):
        base = jax.random.wrap_key_data(np.asarray(key_words, dtype=np.uint32), impl="threefry2x32")
        eps = jnp.asarray(epsilons, dtype=jnp.float64)
        m_tau = jnp.asarray(np.asarray(ranges, dtype=np.float64).view(np.int64) & _MASK52)
        zero = (jnp.zeros((n_eps, IEEE_BINS, 2, 3), jnp.int64), jnp.zeros((n_eps, IEEE_BINS, 3), jnp.int64))
        hist, hist2 = zero
        pending = 0
        blocks = block_ranges(n_block, start, samples)
        for i, (b, lo, hi) in enumerate(blocks):
            hist, hist2 = step(hist, hist2, base, b, lo, hi, eps, m_tau)
            pending += hi - lo
            if progress is not None:
                progress(hi - lo)
            if pending + n_block > FOLD_VALUES or i == len(blocks) - 1:
                y, y2, ex = fold_ieee_histogram(np.asarray(hist), np.asarray(hist2), ranges, levels)
                sum_y = [a + c for a, c in zip(sum_y, y)]
                sum_y2 = [a + c for a, c in zip(sum_y2, y2)]
                extra = [a + c for a, c in zip(extra, ex)]
                hist, hist2, pending = zero[0], zero[1], 0
    return DirectionSums(samples, tuple(sum_y), tuple(sum_y2), UNIT_LOG2, tuple(extra))
