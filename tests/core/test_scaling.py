"""``--shards auto`` sizing and the wall-time model (epscert.results.scaling), against hand values."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from epscert.results import scaling
from epscert.results.scaling import (
    MIN_SHARD_SECONDS, SHARDS_PER_WORKER, TARGET_SHARD_SECONDS, auto_count, auto_shards, scaling_table, wall_time,
)
from epscert.montecarlo.shard import stream_block
from epscert.config import CertifyConfig


@pytest.mark.parametrize("seconds,workers,want", [
    (24.0, 1, 4),  # several shards for one worker: min(4, 12)
    (24.0, 2, 8),  # four per worker
    (24.0, 10, 10),  # min(40, 12) = 12 -> down to a multiple of 10 (up, 20, would be 1.2 s shards)
    (24.0, 1000, 12),  # more workers than 2 s shards: 12 shards of 2 s
    (1.0, 2, 1),  # below MIN_SHARD_SECONDS: one shard
    (1e4, 1, 500),  # ⌈1e4 / 20⌉: a retry loses at most 20 s
    (1e4, 1000, 4000),  # four per worker, 2.5 s each
    (1e4, 3, 501),  # 500 -> up to a multiple of 3
])
def test_auto_count_hand_values(seconds, workers, want):
    assert (MIN_SHARD_SECONDS, TARGET_SHARD_SECONDS, SHARDS_PER_WORKER) == (2.0, 20.0, 4)  # the values above
    assert auto_count(seconds, workers) == want


@settings(max_examples=300, deadline=None)
@given(seconds=st.floats(0, 1e7), workers=st.integers(1, 5000))
def test_auto_count_properties(seconds, workers):
    count = auto_count(seconds, workers)
    assert count >= 1
    if count >= workers:
        assert count % workers == 0  # equal rounds
    if count > 1:
        assert seconds / count >= MIN_SHARD_SECONDS * (1 - 1e-12)  # per-shard cost stays a small fraction
    assert seconds / count <= max(TARGET_SHARD_SECONDS, MIN_SHARD_SECONDS * 2, seconds if count == 1 else 0) + 1e-9
    several = min(SHARDS_PER_WORKER * workers, math.floor(seconds / MIN_SHARD_SECONDS))
    assert count >= several - (workers - 1)  # several per worker, less at most the rounding


def test_auto_shards_is_capped_by_the_blocks_of_the_stream():
    """No block is drawn twice: auto never cuts more shards than the stream has blocks."""
    config = CertifyConfig(sampler="balls_and_bins", sigma=0.35, steps=1000, epsilons=(1.0,), methods=("importance",),
                           samples=10_000)
    blocks = -(-config.samples // stream_block(config, config.resolved[0]))
    assert blocks == 10  # blocks of 2^20 // 1000 = 1048 samples
    assert auto_shards(config, config.resolved[0], 1000) <= blocks


def test_wall_time_hand_values():
    t = wall_time(24.0, 8, 2, startup=2.0, shard_overhead=0.03, merge=1e-4)
    assert t.startup == 2.0
    assert t.sampling == pytest.approx(4 * 3.0)  # ⌈8/2⌉ = 4 rounds of 3 s
    assert t.shard_overhead == pytest.approx(4 * 0.03)
    assert t.merge == pytest.approx((4 + 2) * 1e-4)
    assert t.total == pytest.approx(2.0 + 12.0 + 0.12 + 6e-4)
    assert wall_time(24.0, 3, 2, 0.0, 0.0, 0.0).sampling == pytest.approx(2 * 8.0)  # 2 rounds, one half idle
    assert t.dominant() == "sampling"
    with pytest.raises(ValueError, match="shards"):
        wall_time(1.0, 0, 1)


def test_scaling_table_placeholder_rate_by_hand():
    """N = 1e9 at 1e5 samples/s per core: t_1 = 1e4 s; W = 10 -> 500 shards in 50 rounds of 20 s."""
    (row,) = scaling_table(1e9, 1e5, (10,), startup=180.0, shard_overhead=0.03, merge=1e-4)
    assert row["shards"] == 500
    assert row["sampling"] == pytest.approx(1000.0)
    assert row["shard_overhead"] == pytest.approx(50 * 0.03)
    assert row["total"] == pytest.approx(180.0 + 1000.0 + 1.5 + 60 * 1e-4)
    assert row["efficiency"] == pytest.approx(1e4 / (10 * row["total"]))
    assert row["dominant"] == "sampling"
    (big,) = scaling_table(1e9, 1e5, (1000,), startup=180.0)
    assert big["dominant"] == "start-up"


def test_defaults_are_the_measured_constants():
    """The constants the dry run uses are positive and the placeholder is not among them."""
    assert scaling.SHARD_OVERHEAD_SECONDS > 0 and scaling.MERGE_SECONDS > 0
    assert set(scaling.STARTUP_SECONDS) == {"in_memory", "multi_processing"}
