"""The one place where epscert builds random number generators (SPEC §10).

A run of N samples of one method is one *stream*, cut into fixed-size blocks of samples
(the block size is a function of the configuration and N only, never of the shard layout).
Block g of direction d is drawn from ``np.random.SeedSequence(root_seed,
spawn_key=(config_key, stream_index, d, g))``; the stream index is 0 for a run (k for wave k
of ``--target-rel-width``). A shard is a contiguous range of the stream's samples: it draws
the blocks that range touches and keeps its part. So every sample depends only on (root
seed, configuration key, stream, direction, its position in the stream), whatever the shard
layout: any layout gives the same samples, hence (the sums being exact integers) the same
merged sums and rows; a retried shard reproduces them bit for bit and no global state is
touched. With one shard the spawn keys are those of the earlier per-shard streams' shard 0.
"""

from __future__ import annotations

import numpy as np

_MAX_SEED = 2**128


def _shown(seed: object) -> str:
    """A short repr: a huge int has no repr past 4300 digits (Python raises), so give its size."""
    if isinstance(seed, (int, np.integer)) and not isinstance(seed, bool) and abs(int(seed)).bit_length() > 256:
        return f"<an integer of {abs(int(seed)).bit_length()} bits>"
    text = repr(seed)
    return text if len(text) <= 80 else text[:77] + "..."


def check_seed(seed: object) -> int:
    """Validate a user seed (a non-negative integer) and return it as ``int``."""
    if isinstance(seed, np.ndarray) and seed.ndim == 0:
        seed = seed.item()
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise ValueError(f"seed must be a non-negative integer, got seed={_shown(seed)}")
    if not 0 <= int(seed) < _MAX_SEED:
        raise ValueError(f"seed must be in [0, 2**128), got seed={_shown(seed)}")
    return int(seed)


def block_generator(
    root_seed: int, config_key: int, stream_index: int, direction_index: int, block_index: int
) -> np.random.Generator:
    """Generator for block ``block_index`` (counted from the start of the stream) of one direction."""
    seq = np.random.SeedSequence(
        root_seed, spawn_key=(config_key, stream_index, direction_index, block_index)
    )
    return np.random.Generator(np.random.PCG64(seq))


def stream_generator(root_seed: int, *spawn_key: int) -> np.random.Generator:
    """Generator of one named stream outside the shards (batch indices: key, epoch, step)."""
    seq = np.random.SeedSequence(root_seed, spawn_key=tuple(int(k) for k in spawn_key))
    return np.random.Generator(np.random.PCG64(seq))


def stream_key_words(root_seed: int, config_key: int, stream_index: int, direction_index: int) -> np.ndarray:
    """Two uint32 words seeding the JAX key of one direction of one stream (SPEC §10).

    ``SeedSequence(root_seed, spawn_key=(config_key, stream_index, direction_index))`` (the
    prefix of :func:`block_generator`'s keys), hashed down to 64 bits; the JAX backend wraps
    them as a threefry key and selects block g of the stream and the epochs with ``fold_in``.
    The JAX stream is a function of (root seed, configuration key, stream) only, the same on
    CPU and GPU and for every shard layout, and differs from the numpy stream (both are valid
    i.i.d. draws).
    """
    seq = np.random.SeedSequence(root_seed, spawn_key=(config_key, stream_index, direction_index))
    return seq.generate_state(2, np.uint32)


def block_ranges(block: int, start: int, samples: int) -> list[tuple[int, int, int]]:
    """The stream's samples [start, start + samples) as (g, lo, hi): positions [lo, hi) of block g,
    for every block of ``block`` samples they touch (block g holds samples [g·block, (g+1)·block))."""
    if block < 1 or start < 0 or samples < 0:
        raise ValueError(f"block_ranges needs block >= 1, start >= 0, samples >= 0, got block={block}, "
                         f"start={start}, samples={samples}")
    stop = start + samples
    return [(g, max(start - g * block, 0), min(stop - g * block, block))
            for g in range(start // block, -(-stop // block))]
