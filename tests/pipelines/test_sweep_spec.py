"""Sweep specs: parsing (YAML and JSON, safe loaders only), grids, the steps rule, refusals."""

from __future__ import annotations

import json

import pytest

from epscert.results.baselines import baseline_tasks
from epscert.config import Method, Sampler
from pipelines import spec as spec_mod
from pipelines.spec import keyed_by_result, SpecError, expand

BASE = {"sigma": 0.8, "steps": 10, "epsilons": [1, 2], "samples": 100, "shards": 1}


def test_product_of_grids_in_a_fixed_order():
    configs = expand(dict(BASE, sampler=["balls_and_bins", "poisson"], sigma=[0.5, 1.0],
                          method=["naive"], steps=[4, 8]))
    assert len(configs) == 8
    assert len({c.config_id for c in configs}) == 8
    assert {(c.sampler, c.sigma, c.steps) for c in configs} == {
        (s, sig, t) for s in (Sampler.BALLS_AND_BINS, Sampler.POISSON) for sig in (0.5, 1.0) for t in (4, 8)}
    assert all(c.epsilons == (1.0, 2.0) and c.seed == 0 for c in configs)


def test_scalars_are_one_point_grids_and_defaults_apply():
    (config,) = expand({"sigma": 1.0, "steps": 5, "epsilons": 1})
    # method auto: the candidate `epscert epsilon` answers with, the PLD bracket (σ = 1 is in its range)
    assert config.sampler is Sampler.BALLS_AND_BINS and config.resolved == (Method.BRACKET_UPPER, Method.BRACKET_LOWER)
    assert config.samples == 100_000 and config.error_prob == 0.01 and config.shards >= 1
    (config,) = expand({"sigma": 0.04, "steps": 5, "epsilons": 1})  # below the bracket's σ range (0.05): Monte Carlo
    assert config.resolved == (Method.IMPORTANCE,)


def test_steps_from_dataset_and_batch_size():
    configs = expand(dict({k: v for k, v in BASE.items() if k != "steps"},
                          dataset_size=60000, batch_size=[64, 256, 70000 // 2]))
    assert sorted(c.steps for c in configs) == [60000 // 35000, 60000 // 256, 60000 // 64]


def test_equal_steps_from_different_pairs_keep_what_was_specified():
    # issue 35: rows keep the dataset_size and batch_size the user gave, so two pairs with the same steps are two
    # configurations (two parts), with the same samples (sampling_key) and so the same numbers
    configs = expand(dict({k: v for k, v in BASE.items() if k != "steps"}, dataset_size=[100, 101], batch_size=10))
    assert sorted((c.steps, c.dataset_size, c.batch_size) for c in configs) == [(10, 100, 10), (10, 101, 10)]
    assert len({c.sampling_key(m) for c in configs for m in c.resolved}) == len(configs[0].resolved)


def test_truncated_batches():
    configs = expand(dict({k: v for k, v in BASE.items() if k != "steps"}, method="naive",
                          dataset_size=1000, batch_size=100, max_batch_size=[130, 160]))
    assert sorted((c.steps, c.dataset_size, c.max_batch_size) for c in configs) == [(10, 1000, 130), (10, 1000, 160)]
    (config,) = expand(dict(BASE, method="naive", dataset_size=1000, max_batch_size=150))
    assert (config.steps, config.dataset_size, config.max_batch_size) == (10, 1000, 150)


def test_baselines_become_configurations():
    configs = expand(dict(BASE, method="naive", baselines=True))
    main = configs[0]
    # the analytic baselines are keyed by what changes their rows (samples, seed... do not)
    assert {c.config_id for c in configs} == {main.config_id} | {keyed_by_result(b).config_id
                                                                 for b, _ in baseline_tasks(main)}


def test_orders_grid_with_order_statistics():
    configs = expand(dict(BASE, method="order_stats", orders=["1,5,1", "1,9,2", None]))
    assert sorted(c.orders for c in configs) == sorted(["1,5,1", "1,8,2", "1,10,1"])  # canonical triples


@pytest.mark.parametrize("spec, needle", [
    (dict(BASE, sigmas=[1.0]), "unknown key 'sigmas'"),
    (dict(BASE, sigma=[]), "grid 'sigma' is empty"),
    (dict(BASE, epsilons=[]), "grid 'epsilons' is empty"),
    ({k: v for k, v in BASE.items() if k != "epsilons"}, "missing required key 'epsilons'"),
    ({k: v for k, v in BASE.items() if k != "steps"}, "missing required key 'steps'"),
    (dict({k: v for k, v in BASE.items() if k != "steps"}, dataset_size=100), "missing required key 'steps'"),
    (dict({k: v for k, v in BASE.items() if k != "steps"}, batch_size=10), "needed by batch_size=10"),
    (dict(BASE, dataset_size=100, batch_size=10), "either steps or dataset_size"),
    (dict(BASE, dataset_size=100), "needs batch_size"),
    (dict(BASE, max_batch_size=30), "needed by max_batch_size=30"),
    (dict(BASE, sampler="shuffle", dataset_size=100, max_batch_size=30, method="naive"), "truncated batches"),
    (dict({k: v for k, v in BASE.items() if k != "steps"}, dataset_size=10, batch_size=20), "batch_size=20"),
    (dict({k: v for k, v in BASE.items() if k != "steps"}, dataset_size=10.5, batch_size=2), "dataset_size=10.5"),
    (dict(BASE, sigma=[1.0, 1.0]), "lists 1.0 twice"),
    (dict(BASE, sigma={"a": 1}), "sigma"),
    (dict(BASE, sigma=[0.5, -1.0]), "sigma"),
    (dict(BASE, sigma=True), "sigma=True"),
    (dict(BASE, seed=[1, 2]), "seed must be one"),
    (dict(BASE, shards="many"), "shards='many'"),
    (dict(BASE, baselines="yes"), "baselines='yes'"),
    (dict(BASE, orders=[1, 5, 1], method="order_stats"), "orders values must be strings"),
    (dict(BASE, method=["importance", "naive"], epochs=[1, 2]), "epochs=2"),
    (dict(BASE, sampler="poisson", method="importance"), "method='importance'"),
    (dict(BASE, method="naive", orders="1,5,1"), "orders"),
])
def test_bad_specs_are_refused_naming_key_and_value(spec, needle):
    with pytest.raises(SpecError, match=None) as info:
        expand(spec)
    assert needle in str(info.value), str(info.value)


def test_invalid_combination_message_names_the_combination():
    with pytest.raises(SpecError) as info:
        expand(dict(BASE, method=["importance", "naive"], epochs=[1, 2, 3]))
    text = str(info.value)
    assert "combination" in text and "method='importance'" in text and "epochs=2" in text
    assert "and 1 more invalid combinations" in text


def test_product_size_cap(monkeypatch):
    monkeypatch.setattr(spec_mod, "MAX_CONFIGS", 3)
    with pytest.raises(SpecError, match="4 configurations"):
        expand(dict(BASE, sigma=[0.5, 1.0], steps=[4, 8]))


def test_load_yaml_and_json(tmp_path):
    yaml_path = tmp_path / "s.yaml"
    yaml_path.write_text("sigma: [0.5, 1.0]\nsteps: 6\nepsilons: [1]\nsamples: 10\nshards: 1\n")
    json_path = tmp_path / "s.json"
    json_path.write_text(json.dumps({"sigma": [0.5, 1.0], "steps": 6, "epsilons": [1], "samples": 10, "shards": 1}))
    ids = lambda cs: sorted(c.config_id for c in cs)  # noqa: E731
    assert ids(spec_mod.load(str(yaml_path))) == ids(spec_mod.load(str(json_path)))


@pytest.mark.parametrize("name, text, needle", [
    ("bad.yaml", "sigma: [1, 2\n", "not valid YAML"),
    ("bad.json", "{\"sigma\": }", "not valid JSON"),
    ("list.yaml", "- 1\n- 2\n", "must be a mapping"),
    ("empty.yaml", "", "must be a mapping"),
    ("evil.yaml", "sigma: !!python/object/apply:os.system ['echo hi']\n", "not valid YAML"),
])
def test_malformed_files_are_refused(tmp_path, name, text, needle):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(SpecError, match=needle):
        spec_mod.load(str(path))


def test_missing_file_is_refused(tmp_path):
    with pytest.raises(SpecError, match="cannot read sweep spec"):
        spec_mod.load(str(tmp_path / "nope.yaml"))


def test_method_auto_picks_the_certified_analytic_methods():
    # issue 17: Poisson gets PLD (both sides; its upper side falls back to RDP below its resolution), deterministic its exact curve; issue 25 item 3:
    # Balls-and-Bins the PLD bracket that `epscert epsilon` answers with, never Monte Carlo in its range
    configs = {c.sampler: c for c in expand(dict(BASE, sampler=["poisson", "deterministic", "balls_and_bins"],
                                                 method="auto"))}
    assert configs[Sampler.POISSON].resolved == (Method.PLD_UPPER, Method.PLD_LOWER)
    assert configs[Sampler.DETERMINISTIC].resolved == (Method.EXACT,)
    assert configs[Sampler.BALLS_AND_BINS].resolved == (Method.BRACKET_UPPER, Method.BRACKET_LOWER)
