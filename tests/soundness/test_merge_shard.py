"""Merge and shard invariants of the core (what makes distributed runs reproducible).

* a shard re-executed returns an identical accumulator (==);
* merging shard accumulators in any order or tree shape gives the same accumulator;
* splitting a shard's loss values at any point and merging the pieces is the identical accumulator;
* the API's table equals plan -> run -> merge -> finalise done by hand (the Beam job's path);
* the same seed gives identical tables (all columns but wall_seconds) for EVERY shard layout: a
  shard is a range of one stream of blocks keyed by (seed, configuration, stream, direction,
  block) (SPEC §10), checked against the stream built by hand from ``np.random.SeedSequence``;
* shard edges cover the stream, in whole blocks where there are enough blocks.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import pickle
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import epscert
from epscert.montecarlo import accumulator as acc_mod
from epscert.results.rows import mc_rows
from epscert.config import CertifyConfig, Direction, Method
from epscert.config.samplers import loss_sampler
from epscert.montecarlo.shard import plan_shards, run_shard, shard_edges

ROOT = Path(__file__).resolve().parents[2]

CONFIGS = {
    "bnb-naive": dict(sampler="balls_and_bins", sigma=0.9, steps=4, epsilons=(0.0, 0.5, 2.0), methods=("naive",)),
    "bnb-importance": dict(sampler="balls_and_bins", sigma=0.9, steps=4, epsilons=(0.3, 1.0), methods=("importance",)),
    "bnb-order-stats-2ep": dict(sampler="balls_and_bins", sigma=1.1, steps=50, epochs=2, epsilons=(0.5, 1.0),
                                methods=("order_stats",), orders="1,10,1,10,49,3"),
    "bnb-ios": dict(sampler="balls_and_bins", sigma=1.1, steps=5000, epsilons=(0.5, 1.5),
                    methods=("importance_order_stats",), orders="1,20,1"),
    "poisson": dict(sampler="poisson", sigma=1.0, steps=5, epochs=2, epsilons=(0.5,), methods=("naive",)),
    "shuffle": dict(sampler="shuffle", sigma=1.0, steps=3, epochs=2, epsilons=(0.5,), methods=("naive",)),
}


def _config(name: str, **over) -> CertifyConfig:
    kw = dict(CONFIGS[name], samples=3000, error_prob=0.05, seed=11, shards=5)
    kw.update(over)
    return CertifyConfig(**kw)


def _shard_accs(config: CertifyConfig) -> list[acc_mod.Accumulator]:
    method = config.resolved[0]
    return [run_shard(task) for task in plan_shards(config, method)]


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_rerun_shard_is_identical(name):
    config = _config(name)
    tasks = plan_shards(config, config.resolved[0])
    assert sum(t.samples for t in tasks) == config.samples
    for task in (tasks[0], tasks[-1]):
        first, again = run_shard(task), run_shard(task)
        assert first == again
        assert first[Direction.REMOVE].count == task.samples


def _tree_merge(accs: list, rng: random.Random):
    """Merge by a random binary tree of random pairings."""
    items = list(accs)
    while len(items) > 1:
        i, j = sorted(rng.sample(range(len(items)), 2))
        b, a = items.pop(j), items.pop(i)
        items.append(acc_mod.merge([a, b] if rng.random() < 0.5 else [b, a]))
    return items[0]


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_merge_any_order_and_tree_shape(name):
    accs = _shard_accs(_config(name))
    reference = acc_mod.merge(accs)
    for perm in itertools.permutations(range(len(accs))):
        assert acc_mod.merge([accs[i] for i in perm]) == reference
    rng = random.Random(3)
    for _ in range(20):
        assert _tree_merge(accs, rng) == reference
    empty = acc_mod.create(reference.directions, len(reference[reference.directions[0]].sum_y))
    assert acc_mod.merge([empty, reference, empty]) == reference
    nested = acc_mod.merge([acc_mod.merge(accs[:2]), acc_mod.merge([accs[2], acc_mod.merge(accs[3:])])])
    assert nested == reference


def _shard_losses(config: CertifyConfig, direction: Direction, n: int, seed: int) -> np.ndarray:
    sampler = loss_sampler(config, config.resolved[0])
    return sampler.draw(np.random.default_rng(seed), n, direction)


@pytest.mark.parametrize("name", ["bnb-naive", "bnb-importance", "bnb-ios", "poisson"])
def test_split_losses_at_every_point(name):
    config = _config(name)
    eps = config.epsilons
    for direction in config.direction.parts():
        losses = _shard_losses(config, direction, 120, seed=5)
        start = acc_mod.create(config.direction.parts(), len(eps))
        whole = acc_mod.add(start, direction, losses, eps)
        for k in range(losses.size + 1):
            left = acc_mod.add(start, direction, losses[:k], eps)
            right = acc_mod.add(start, direction, losses[k:], eps)
            assert acc_mod.merge([left, right]) == whole
            assert acc_mod.merge([right, left]) == whole
            assert acc_mod.add(left, direction, losses[k:], eps) == whole  # folding, as run_shard does


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    losses=st.lists(st.one_of(st.floats(-50, 50), st.sampled_from([0.0, -0.0, 1e-300, 700.0, -700.0, 1e6])),
                    min_size=0, max_size=60),
    cuts=st.lists(st.integers(0, 60), max_size=6),
    eps=st.lists(st.floats(0, 30), min_size=1, max_size=4),
    order_seed=st.integers(0, 2**32 - 1),
)
def test_split_and_shuffle_merge_property(losses, cuts, eps, order_seed):
    """Any partition of any loss array, merged in any order, is the accumulator of the whole."""
    arr = np.asarray(losses, dtype=np.float64)
    eps = tuple(eps)
    d = Direction.ADD
    start = acc_mod.create((d,), len(eps))
    whole = acc_mod.add(start, d, arr, eps)
    bounds = sorted({0, arr.size, *(min(c, arr.size) for c in cuts)})
    pieces = [acc_mod.add(start, d, arr[a:b], eps) for a, b in zip(bounds, bounds[1:])]
    pieces.append(start)  # the empty accumulator is the identity (and keeps an empty array's parts)
    random.Random(order_seed).shuffle(pieces)
    assert acc_mod.merge(pieces) == whole
    assert whole[d].count == arr.size


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_api_table_is_plan_run_merge_finalise(name):
    """certify_config's Monte Carlo rows are exactly mc_rows of the merged shard accumulators."""
    config = _config(name)
    table = epscert.certify_config(config).to_pylist()
    method = config.resolved[0]
    by_hand = mc_rows(config, method, acc_mod.merge(_shard_accs(config)), 0.0)
    assert len(table) == len(by_hand)
    for got, want in zip(table, by_hand):
        for key, value in want.items():
            if key != "wall_seconds":
                assert got[key] == value, (key, got[key], value)


def _strip(table) -> list[dict]:
    return [{k: v for k, v in row.items() if k != "wall_seconds"} for row in table.to_pylist()]


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_same_layout_identical_table(name):
    kw = dict(CONFIGS[name])
    kw["method"] = list(kw.pop("methods"))
    a = epscert.certify(**kw, samples=2000, error_prob=0.05, seed=4, shards=3)
    b = epscert.certify(**kw, samples=2000, error_prob=0.05, seed=4, shards=3)
    assert _strip(a) == _strip(b)
    c = epscert.certify(**kw, samples=2000, error_prob=0.05, seed=5, shards=3)
    assert _strip(a) != _strip(c)  # the seed matters


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_every_shard_count_gives_the_same_table(name):
    """shards = 1, 2, 7 and 64 (blocks split across shards): identical tables, config_id included."""
    kw = dict(CONFIGS[name])
    kw["method"] = list(kw.pop("methods"))
    tables = [_strip(epscert.certify(**kw, samples=2000, error_prob=0.05, seed=9, shards=s)) for s in (1, 2, 7, 64)]
    assert all(t == tables[0] for t in tables[1:])


#: Balls-and-Bins naive at T = 2000: blocks of 2^20 // 2000 = 524 samples, so 2000 samples are 4 blocks.
MULTI_BLOCK = dict(sampler="balls_and_bins", sigma=0.9, steps=2000, epsilons=(0.5, 1.0), methods=("naive",),
                   samples=2000, seed=6)


def _stream_by_hand(config: CertifyConfig, stream: int = 0) -> acc_mod.Accumulator:
    """SPEC §10 written out: block g of direction d is drawn whole, n_g = min(B, N - gB) samples, from
    Generator(PCG64(SeedSequence(seed, spawn_key=(config_key, stream, d, g)))), d = 0 REMOVE, 1 ADD."""
    method = config.resolved[0]
    sampler = loss_sampler(config, method)
    block, key = sampler.block_size(), config.sampling_key(method)
    acc = acc_mod.create(config.direction.parts(), len(config.epsilons))
    for d, direction in enumerate((Direction.REMOVE, Direction.ADD)):
        for g in range(-(-config.samples // block)):
            seq = np.random.SeedSequence(config.seed, spawn_key=(key, stream, d, g))
            n = min(block, config.samples - g * block)
            acc = acc_mod.add(acc, direction, sampler.draw(np.random.Generator(np.random.PCG64(seq)), n, direction),
                              config.epsilons)
    return acc


@pytest.mark.parametrize("shards", [1, 3, 4, 7])
def test_any_layout_merges_to_the_stream_built_by_hand(shards):
    """Whole blocks (1, 3, 4 shards of 4 blocks) and blocks split between shards (7): the merged
    sums equal the stream drawn block by block by hand, in any merge order."""
    config = CertifyConfig(**MULTI_BLOCK)
    assert loss_sampler(config, config.resolved[0]).block_size() == 2**20 // 2000 == 524  # 4 blocks
    accs = [run_shard(t) for t in plan_shards(config, config.resolved[0], shards)]
    by_hand = _stream_by_hand(config)
    assert acc_mod.merge(accs).parts == by_hand.parts
    assert acc_mod.merge(reversed(accs)).parts == by_hand.parts


def test_waves_are_streams_one_two_three():
    """Wave k of --target-rel-width is stream k: the first wave is the plain run's stream 0."""
    from epscert.results.waves import wave_tasks

    config = CertifyConfig(**dict(MULTI_BLOCK, samples=600), shards=2)
    method = config.resolved[0]
    offset = 0
    for k in range(3):
        wave, tasks = wave_tasks(config, method, k, offset)
        offset += len(tasks)
        assert {t.stream for t in tasks} == {k} and sum(t.samples for t in tasks) == 600 << k
        assert acc_mod.merge(run_shard(t) for t in tasks).parts == \
            _stream_by_hand(dataclasses.replace(config, samples=600 << k), stream=k).parts


@settings(max_examples=200, deadline=None)
@given(samples=st.integers(1, 10**7), shards=st.integers(1, 10**4), block=st.integers(1, 10**5))
def test_shard_edges_cover_the_stream_in_whole_blocks(samples, shards, block):
    shards = min(shards, samples)
    edges = shard_edges(samples, shards, block)
    assert edges[0] == 0 and edges[-1] == samples and len(edges) == shards + 1
    assert all(a < b for a, b in zip(edges, edges[1:]))  # no empty shard
    sizes = [b - a for a, b in zip(edges, edges[1:])]
    if shards <= -(-samples // block):  # enough blocks: every inner edge on a block boundary, balanced
        assert all(e % block == 0 for e in edges[1:-1])
        assert max(sizes) - min(sizes) <= block
    else:
        assert max(sizes) - min(sizes) <= 1


def test_shard_samples_do_not_depend_on_sample_count_or_error_prob():
    """Shard 0 of a larger run starts with the same block as shard 0 of a smaller run (SPEC §10)."""
    small = _config("bnb-naive", samples=500, shards=1)
    other = _config("bnb-naive", samples=500, shards=1, error_prob=0.2)
    method = Method.NAIVE
    assert run_shard(plan_shards(small, method)[0]) == run_shard(plan_shards(other, method)[0])


def test_shard_retried_in_another_interpreter_is_identical(tmp_path):
    """A pickled ShardTask run in a fresh interpreter (another hash seed) gives the same accumulator."""
    config = _config("bnb-ios")
    task = plan_shards(config, config.resolved[0])[2]
    (tmp_path / "task.pkl").write_bytes(pickle.dumps(task))
    script = (
        "import pickle, sys\n"
        "from epscert.montecarlo.shard import run_shard\n"
        "task = pickle.load(open(sys.argv[1], 'rb'))\n"
        "pickle.dump(run_shard(task), open(sys.argv[2], 'wb'))\n"
    )
    env = dict(os.environ, PYTHONHASHSEED="12345",
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    subprocess.run([sys.executable, "-c", script, str(tmp_path / "task.pkl"), str(tmp_path / "acc.pkl")],
                   check=True, env=env, cwd=tmp_path, timeout=120)
    remote = pickle.loads((tmp_path / "acc.pkl").read_bytes())
    assert remote == run_shard(task)
