"""The one place where epscert builds random number generators (SPEC §10).

Every draw of a shard comes from ``np.random.SeedSequence(root_seed,
spawn_key=(config_key, shard_index, ...))``. The extra spawn-key words select a
sub-stream inside the shard (the direction and the fixed-size block of samples),
so a shard's numbers depend only on (root seed, configuration key, shard index):
a retried shard reproduces them bit for bit and no global state is touched.
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


def shard_generator(
    root_seed: int, config_key: int, shard_index: int, direction_index: int, block_index: int
) -> np.random.Generator:
    """Generator for one block of samples of one direction of one shard."""
    seq = np.random.SeedSequence(
        root_seed, spawn_key=(config_key, shard_index, direction_index, block_index)
    )
    return np.random.Generator(np.random.PCG64(seq))


def stream_generator(root_seed: int, *spawn_key: int) -> np.random.Generator:
    """Generator of one named stream outside the shards (batch indices: key, epoch, step)."""
    seq = np.random.SeedSequence(root_seed, spawn_key=tuple(int(k) for k in spawn_key))
    return np.random.Generator(np.random.PCG64(seq))


def shard_key_words(root_seed: int, config_key: int, shard_index: int, direction_index: int) -> np.ndarray:
    """Two uint32 words seeding the JAX key of one direction of one shard (SPEC §10).

    The same ``SeedSequence(root_seed, spawn_key=(config_key, shard_index, direction_index))``
    as :func:`shard_generator`, hashed down to 64 bits; the JAX backend wraps them as a
    threefry key and selects blocks and epochs with ``fold_in``. The JAX stream is a
    function of (root seed, configuration key, shard index) only, the same on CPU and GPU,
    and differs from the numpy stream of the same shard (both are valid i.i.d. draws).
    """
    seq = np.random.SeedSequence(root_seed, spawn_key=(config_key, shard_index, direction_index))
    return seq.generate_state(2, np.uint32)
