"""The Beam wrappers around the core: shard DoFn, merge CombineFn, finalise, CertifyConfigs.

Every pipeline here runs on Beam's in-process FnApiRunner (no network, no Prism download).
"""

from __future__ import annotations

import io
import itertools
import pickle

import apache_beam as beam
import numpy as np
import pytest
from apache_beam.runners.portability.fn_api_runner import FnApiRunner
from apache_beam.testing.test_pipeline import TestPipeline as BeamTestPipeline
from apache_beam.testing.util import assert_that, equal_to

from epscert.montecarlo import accumulator as acc_mod
from epscert.api import certify_config
from epscert.results.baselines import baseline_tasks
from epscert.config import CertifyConfig, Method
from epscert.montecarlo.shard import plan_shards, run_shard
from epscert.schema import to_table
from transforms.certify import CertifyConfigs, complete_config, expected_row_count, pack_rows, sort_rows, sort_table
from transforms.progress import ProgressReporter
from transforms.shards import (
    MergeAccumulatorsFn, RunShardFn, finalise_monte_carlo, method_key, shard_tasks, total_samples,
)

CONFIG = CertifyConfig(sampler="balls_and_bins", sigma=0.7, steps=12, epsilons=(0.5, 1.0, 2.0),
                       methods=("importance", "naive", "cube_lower_bound"), samples=3001, shards=3, seed=5)


def pipeline() -> BeamTestPipeline:
    return BeamTestPipeline(runner=FnApiRunner())


def without_wall(rows):
    return [dict(r, wall_seconds=0.0) for r in rows]


def test_run_shard_fn_emits_the_core_accumulator_per_shard():
    tasks = shard_tasks(CONFIG)
    assert len(tasks) == 2 * CONFIG.shards  # two Monte Carlo methods
    expected = [(t.key, run_shard(t)) for t in tasks]
    with pipeline() as p:
        out = (p | beam.Create(tasks) | "Run" >> beam.ParDo(RunShardFn())
               | beam.Map(lambda kv: (kv[0], kv[1][0])))
        assert_that(out, equal_to(expected))


def test_merge_combine_fn_equals_core_merge_per_key():
    tasks = shard_tasks(CONFIG)
    expected = [(method_key(CONFIG, m), acc_mod.merge(run_shard(t) for t in plan_shards(CONFIG, m)))
                for m in (Method.IMPORTANCE, Method.NAIVE)]
    with pipeline() as p:
        out = (p | beam.Create(tasks) | beam.ParDo(RunShardFn())
               | beam.CombinePerKey(MergeAccumulatorsFn()) | beam.Map(lambda kv: (kv[0], kv[1][0])))
        assert_that(out, equal_to(expected))


def test_merge_combine_fn_is_order_and_tree_independent():
    fn = MergeAccumulatorsFn()
    parts = [(run_shard(t), 1.0) for t in plan_shards(CONFIG, Method.NAIVE)]
    reference = acc_mod.merge(a for a, _ in parts)
    for order in itertools.permutations(parts):
        left = fn.add_input(fn.add_input(fn.create_accumulator(), order[0]), order[1])
        right = fn.add_input(fn.create_accumulator(), order[2])
        merged, seconds = fn.extract_output(fn.merge_accumulators([right, left]))
        assert merged == reference and seconds == 3.0


def test_finalise_refuses_a_lost_or_duplicated_shard():
    tasks = plan_shards(CONFIG, Method.NAIVE)
    table = {method_key(CONFIG, Method.NAIVE): (CONFIG, Method.NAIVE)}
    full = acc_mod.merge(run_shard(t) for t in tasks)
    config_id, rows = finalise_monte_carlo((tasks[0].key, (full, 1.0)), table)
    assert config_id == CONFIG.config_id and len(rows) == 9
    short = acc_mod.merge(run_shard(t) for t in tasks[:2])
    with pytest.raises(RuntimeError, match="a shard was lost or counted twice"):
        finalise_monte_carlo((tasks[0].key, (short, 1.0)), table)
    double = acc_mod.merge([full, run_shard(tasks[0])])
    with pytest.raises(RuntimeError, match="expected samples=3001"):
        finalise_monte_carlo((tasks[0].key, (double, 1.0)), table)


def test_certify_configs_equals_the_in_process_api():
    configs = [CONFIG] + [c for c, _ in baseline_tasks(CONFIG)]
    expected = [(c.config_id, without_wall(sort_rows(certify_config(c).to_pylist()))) for c in configs]
    with pipeline() as p:
        out = (p | beam.Create(configs) | CertifyConfigs()
               | beam.MapTuple(lambda cid, rows: (cid, without_wall(rows))))
        assert_that(out, equal_to(expected))


def test_complete_config_refuses_missing_methods():
    rows = certify_config(CONFIG).to_pylist()
    partial = [r for r in rows if r["method"] != "naive"]
    with pytest.raises(RuntimeError, match="expected 27 rows"):
        complete_config((CONFIG.config_id, [partial]), {CONFIG.config_id: CONFIG})
    cid, out = complete_config((CONFIG.config_id, [rows[:5], rows[5:]]), {CONFIG.config_id: CONFIG})
    assert cid == CONFIG.config_id and out == sort_rows(rows)
    packed = [pack_rows((CONFIG.config_id, rows[7:]))[1], pack_rows((CONFIG.config_id, rows[:7]))[1]]
    assert complete_config((CONFIG.config_id, packed), {CONFIG.config_id: CONFIG})[1] == sort_rows(rows)


def test_sort_table_orders_rows_as_sort_rows():
    # issue 35 item 5: Arrow sorts the rows; the order is sort_rows' (None last, strings by code point)
    rows = certify_config(CONFIG).to_pylist()
    rows += [dict(r, quantity="epsilon_at_delta", target_delta=None if i % 2 else 1e-5 * (i % 5))
             for i, r in enumerate(rows)]
    rows += [dict(r, method="naïve_ü", config_id=r["config_id"] + "Ω") for r in rows[:6]]
    shuffled = [rows[i] for i in np.random.default_rng(7).permutation(len(rows))]
    assert sort_table(to_table(shuffled)).to_pylist() == sort_rows(to_table(shuffled).to_pylist())


@pytest.mark.parametrize("config", [
    CONFIG,
    CertifyConfig(sampler="poisson", sigma=1.0, steps=8, epsilons=(1.0, 3.0), direction="add",
                  methods=("naive", "pld_upper", "pld_lower", "rdp_upper"), samples=50),
    CertifyConfig(sampler="deterministic", sigma=1.0, steps=4, epochs=2, epsilons=(1.0,),
                  methods=("exact", "naive"), samples=50, direction="remove"),
    CertifyConfig(sampler="shuffle", sigma=1.0, steps=4, epsilons=(1.0, 2.0), methods=("auto",), samples=50),
    CertifyConfig(sampler="balls_and_bins", sigma=1.0, steps=6, epsilons=(1.0,), methods=("order_stats",),
                  orders="1,4,1", samples=50),
], ids=lambda c: f"{c.sampler.value}-{'-'.join(m.value for m in c.resolved)}-{c.direction.value}")
def test_expected_row_count_matches_the_core(config):
    assert expected_row_count(config) == certify_config(config).num_rows


def test_sort_rows_orders_by_config_method_direction_epsilon():
    rows = certify_config(CONFIG).to_pylist()[::-1]
    keys = [(r["config_id"], r["method"], r["direction"], r["epsilon"]) for r in sort_rows(rows)]
    assert keys == sorted(keys) and len(set(keys)) == len(keys)


def test_total_samples_counts_directions_and_monte_carlo_methods():
    assert total_samples([CONFIG]) == 2 * 2 * 3001


def test_progress_eta_lines_and_shard_lines():
    stream = io.StringIO()
    eta = ProgressReporter("eta", 100, stream=stream, interval=0.0)
    for _ in range(4):
        eta.samples(25)
    lines = stream.getvalue().splitlines()
    assert len(lines) == 4 and "100.0%" in lines[-1] and "ETA" in lines[-1]
    stream = io.StringIO()
    shards = ProgressReporter("shards", 100, stream=stream)
    task = plan_shards(CONFIG, Method.NAIVE)[1]
    shards.samples(10)
    shards.shard_done(task, 0.5)
    assert stream.getvalue().strip() == (f"epscert: shard 2/3 of {task.key} done (1000 samples per direction, 0.5 s)")
    clone = pickle.loads(pickle.dumps(eta))  # travels with the DoFn; the stream stays behind
    assert clone.mode == "eta" and clone._stream is None  # noqa: SLF001
    with pytest.raises(ValueError, match="mode="):
        ProgressReporter("loud", 1)


def test_run_shard_fn_reports_samples_counter():
    p = pipeline()
    _ = p | beam.Create(plan_shards(CONFIG, Method.NAIVE)) | beam.ParDo(RunShardFn())
    result = p.run()
    result.wait_until_finish()
    counters = {c.key.metric.name: c.committed for c in result.metrics().query()["counters"]}
    assert counters["samples_done"] == 2 * 3001 and counters["shards_done"] == 3
