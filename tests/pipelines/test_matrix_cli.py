"""Issue 23 item 3: the matrix mechanism (BandMF) in `epscert certify`, `epscert epsilon` and sweeps."""

from __future__ import annotations

import json
import os
import pickle

import numpy as np
import pyarrow.parquet as pq
import pytest

import epscert
from epscert.api import certify_config
from epscert.matrix.strategies import toeplitz_strategy
from pipeline_helpers import without_wall
from pipelines import certify, cli, spec as spec_mod, sweep
from transforms import shards as shards_mod
from transforms.certify import sort_rows

#: n = 12 iterations, b = 4 (3 cycles), 3 bands: small enough for a few seconds per run.
MATRIX = ["--c-col", "1,0.5,0.25", "--iterations", "12", "--cycle-length", "4", "--sigma", "1.5",
          "--epsilons", "0.5,1", "--samples", "400", "--shards", "2", "--seed", "5", "--no-progress"]


def api_rows(configs) -> list[dict]:
    return without_wall(sort_rows(r for c in configs for r in certify_config(c).to_pylist()))


def test_strategy_flags_give_the_api_configuration(tmp_path):
    job = certify.prepare([*MATRIX, "--method", "conditional,importance"])
    config = job.config
    want = epscert.CertifyConfig(sampler="balls_and_bins_persistent", sigma=1.5, steps=4, epsilons=(0.5, 1.0),
                                 methods=("conditional", "importance"), samples=400, shards=2, seed=5,
                                 strategy=toeplitz_strategy([1.0, 0.5, 0.25], 12))
    assert config == want and config.config_id == want.config_id and config.epochs == 3
    # --steps is the same flag as --cycle-length here; --mechanism bandmf and the sampler may be explicit
    same = certify.prepare([*MATRIX, "--method", "conditional,importance", "--steps", "4", "--mechanism", "bandmf",
                            "--sampler", "balls_and_bins_persistent"]).config
    assert same == config


def test_matrix_baselines_are_its_own_deterministic_bounds():
    job = certify.prepare(MATRIX)
    methods = sorted(m.value for c in job.configs for m in c.resolved)
    assert methods == ["comonotone_upper_bound", "independent_lower_bound", "tilted"]  # auto: tilted
    assert all(c.strategy == job.config.strategy for c in job.configs)
    asked = certify.prepare([*MATRIX, "--method", "conditional,independent_lower_bound"])
    assert sorted(m.value for c in asked.configs for m in c.resolved) == [
        "comonotone_upper_bound", "conditional", "independent_lower_bound"]  # not twice


def test_the_independent_bound_is_left_out_below_the_brackets_sigma():
    """σ_eff = σ/‖C x_j‖ below 0.05 is outside the Balls-and-Bins bracket (it would fail after the sampling)."""
    job = certify.prepare(["--c-col", "3,1", "--iterations", "40", "--cycle-length", "4", "--sigma", "0.1",
                           "--samples", "100"])
    assert sorted(m.value for c in job.configs for m in c.resolved) == ["comonotone_upper_bound", "tilted"]


def test_certify_rows_bracket_the_estimate_and_equal_the_api(tmp_path, capsys):
    out = tmp_path / "m.parquet"
    assert cli.main(["certify", *MATRIX, "--output", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "toeplitz[3 bands]" in printed and "comonotone_upper_bound" in printed  # the table shows the strategy
    rows = pq.read_table(out).to_pylist()
    assert without_wall(rows) == api_rows(certify.prepare([*MATRIX, "--output", str(out)]).configs)
    both = {(r["method"], r["epsilon"]): r for r in rows if r["direction"] == "both"}
    for eps in (0.5, 1.0):
        lower = both[("independent_lower_bound", eps)]["delta_lower"]
        upper = both[("comonotone_upper_bound", eps)]["delta_upper"]
        mc = both[("tilted", eps)]
        assert lower <= mc["delta_upper"] and mc["delta_lower"] <= upper
        assert mc["mechanism"] == "matrix" and mc["iterations"] == 12


@pytest.mark.parametrize("args, needle", [
    (["--c-col", "1,-0.5"], "c_col[1]=-0.5"),
    (["--c-col", "1,nan"], "finite"),
    (["--c-col", "missing.npy"], "c_col file not readable: path='missing.npy'"),
    (["--c-col", "1,0.5", "--iterations", "3", "--cycle-length", "4"], "cycle_length must be <= iterations=3"),
    (["--c-col", "1,0.5", "--cycle-length", "4"], "iterations is required with c_col"),
    (["--c-col", "1,0.5", "--iterations", "12"], "cycle_length is required"),
    (["--c-col", "1", "--iterations", "12", "--cycle-length", "4", "--sampler", "poisson"],
     "sampler='poisson' conflicts with a strategy"),
    (["--c-col", "1", "--iterations", "12", "--cycle-length", "4", "--steps", "3"], "give it once"),
    (["--c-col", "1", "--iterations", "x", "--cycle-length", "4"], "iterations='x'"),
    (["--c-col", "1", "--iterations", "12", "--cycle-length", "4", "--method", "order_stats"],
     "does not apply to a matrix mechanism"),
    (["--c-col", "1", "--iterations", "12", "--cycle-length", "4", "--mechanism", "dpsgd"], "mechanism='dpsgd'"),
    (["--strategy-matrix", "nowhere.npy", "--cycle-length", "2"], "not readable: path='nowhere.npy'"),
    (["--iterations", "12", "--steps", "4"], "iterations applies to a matrix mechanism"),
    (["--cycle-length", "4"], "cycle_length applies to a matrix mechanism"),
    (["--mechanism", "bandmf", "--steps", "4"], "needs a strategy"),
    (["--steps", "4", "--mechanism", "mf"], "mechanism='mf'"),
])
def test_bad_matrix_input_exits_2_with_one_line(capsys, args, needle):
    assert cli.main(["certify", "--sigma", "1", "--no-baselines", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and needle in err and "Traceback" not in err, err


def test_dense_strategy_files_are_checked_before_any_work(tmp_path, capsys):
    upper = np.triu(np.ones((4, 4)))
    np.save(tmp_path / "upper.npy", upper)
    np.save(tmp_path / "big.npy", np.zeros((10_001, 1)))  # the header says it is not square: no read of data
    for path, needle in [(tmp_path / "upper.npy", "lower-triangular"), (tmp_path / "big.npy", "square")]:
        assert cli.main(["certify", "--sigma", "1", "--strategy-matrix", str(path), "--cycle-length", "2"]) == 2
        assert needle in capsys.readouterr().err


def test_c_col_files_and_a_dense_matrix_give_the_same_pair(tmp_path):
    """A Toeplitz C given as a .npy, a .txt or as the dense matrix itself: the same Gram matrix, so
    the same δ (the dense and Toeplitz Gram code paths are independent)."""
    c = np.array([1.0, 0.5, 0.25])
    np.save(tmp_path / "c.npy", c)
    (tmp_path / "c.txt").write_text("1 0.5 0.25\n")
    np.save(tmp_path / "C.npy", toeplitz_strategy(c, 12).matrix())
    base = ["--sigma", "1.5", "--epsilons", "1", "--method", "comonotone_upper_bound,independent_lower_bound",
            "--cycle-length", "4", "--no-baselines"]
    configs = [certify.prepare([*base, "--c-col", str(tmp_path / name), "--iterations", "12"]).config
               for name in ("c.npy", "c.txt")]
    configs.append(certify.prepare([*base, "--strategy-matrix", str(tmp_path / "C.npy")]).config)
    assert configs[0] == configs[1]
    grams = [c.strategy.gram(4).g0 for c in configs]
    np.testing.assert_allclose(grams[2], grams[0], rtol=1e-12)
    values = [[r["delta"] for r in certify_config(c).to_pylist()] for c in configs]
    np.testing.assert_allclose(values[2], values[0], rtol=1e-9)


def test_help_says_workers_need_the_dense_file(capsys):
    with pytest.raises(SystemExit):
        cli.main(["certify", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for flag in ("--c-col", "--strategy-matrix", "--iterations", "--cycle-length", "--mechanism"):
        assert flag in text
    assert "workers must read the same file at the same path" in text


def test_a_worker_refuses_a_changed_dense_file(tmp_path):
    """The configuration carries the file's path and SHA-256; a worker whose file differs refuses."""
    path = tmp_path / "C.npy"
    np.save(path, np.tril(np.ones((6, 6))))
    config = certify.prepare(["--sigma", "1", "--strategy-matrix", str(path), "--cycle-length", "3",
                              "--samples", "50", "--no-baselines"]).config
    shipped = pickle.loads(pickle.dumps(config))  # what a worker receives
    assert shards_mod.check_strategy(shipped) is shipped
    np.save(path, 2 * np.tril(np.ones((6, 6))))
    with pytest.raises(ValueError, match="changed"):
        shards_mod.check_strategy(shipped)
    with pytest.raises(ValueError, match="changed"):
        list(shards_mod.RunShardFn().process(shards_mod.shard_tasks(shipped)[0]))
    os.remove(path)
    with pytest.raises(ValueError, match="not readable"):
        shards_mod.compute_analytic((shipped, shipped.resolved[0]))


def test_epsilon_command_answers_two_sided(capsys):
    args = ["epsilon", "--c-col", "1,0.5,0.25", "--iterations", "12", "--cycle-length", "4", "--noise-multiplier",
            "1.5", "--delta", "1e-2", "--samples", "1500", "--no-progress"]
    assert cli.main(args) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("ε(δ=0.01) <= ") and "bandmf toeplitz[3 bands]" in lines[0]
    assert lines[1].startswith("two-sided: ") and "independent modes" in lines[2]
    assert cli.main([*args, "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["mechanism"] == "bandmf" and out["iterations"] == 12 and out["cycle_length"] == 4
    assert out["context"]["independent_lower_bound"] <= out["epsilon_lower"] <= out["epsilon_estimate"] \
        <= out["epsilon"] <= out["context"]["comonotone_upper_bound"]
    assert cli.main(["epsilon", "--c-col", "1", "--iterations", "12", "--cycle-length", "4", "--noise-multiplier",
                     "1", "--delta", "1e-2", "--batch-size", "4"]) == 2
    assert "do not apply to a matrix mechanism" in capsys.readouterr().err


MATRIX_SPEC = """\
sigma: [1.5, 2]
c_col: [[1.0, 0.5], "1,0.5,0.25"]
iterations: 12
cycle_length: 4
method: [conditional, naive]
samples: 300
epsilons: [0.5, 1]
seed: 2
shards: 2
"""


def test_sweep_spec_expands_the_strategy_keys(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text(MATRIX_SPEC + "baselines: true\n")
    configs = spec_mod.load(str(path))
    mc = [c for c in configs if any(m.is_monte_carlo for m in c.resolved)]
    assert len(mc) == 8 and len(configs) == 8 + 2 * 2 * 2  # + each (sigma, c_col)'s two bounds
    assert {c.strategy.c_col for c in configs} == {(1.0, 0.5), (1.0, 0.5, 0.25)}
    assert all(c.sampler.value == "balls_and_bins_persistent" and c.steps == 4 for c in configs)
    np.save(tmp_path / "c.npy", np.array([1.0, 0.5]))
    path.write_text(MATRIX_SPEC.replace('[[1.0, 0.5], "1,0.5,0.25"]', repr(str(tmp_path / "c.npy"))))
    assert {c.strategy.c_col for c in spec_mod.load(str(path))} == {(1.0, 0.5)}


@pytest.mark.parametrize("change, needle", [
    (("cycle_length: 4", "cycle_length: 13"), "cycle_length must be <= iterations=12"),
    (("cycle_length: 4", "cycle_length: 4\nsteps: 4"), "give one of them"),
    (("cycle_length: 4", "cycle_length: 4\nbatch_size: 2\ndataset_size: 8"),
     "give either cycle_length or dataset_size and batch_size"),  # found by tests/soundness/test_spec_fuzz.py
    (("iterations: 12\n", ""), "iterations is required with c_col"),
    (('"1,0.5,0.25"', '"1,-0.5"'), "c_col[1]=-0.5"),
    (('"1,0.5,0.25"', '"nowhere.npy"'), "not readable"),
    (('[[1.0, 0.5], "1,0.5,0.25"]', "[1.0, x]"), "c_col lists must hold numbers"),
    (('[[1.0, 0.5], "1,0.5,0.25"]', "[[1.0, 0.5], [1.0, 0.5]]"), "the same strategy twice"),
    (("seed: 2", "seed: 2\nsampler: poisson"), "conflicts with a strategy"),
    (("method: [conditional, naive]", "method: order_stats"), "does not apply to a matrix mechanism"),
])
def test_bad_strategy_keys_are_refused_before_any_work(tmp_path, change, needle):
    path = tmp_path / "spec.yaml"
    path.write_text(MATRIX_SPEC.replace(*change))
    with pytest.raises(spec_mod.SpecError) as err:
        spec_mod.load(str(path))
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_matrix_sweep_resumes_with_no_row_lost(tmp_path, capsys):
    path = tmp_path / "spec.yaml"
    path.write_text(MATRIX_SPEC)
    out = tmp_path / "out"
    assert cli.main(["sweep", str(path), "--output", str(out), "--no-progress"]) == 0
    first = without_wall(pq.read_table(out / "results.parquet").to_pylist())
    assert first == api_rows(spec_mod.load(str(path)))
    victim = sorted((out / "parts").glob("*.parquet"))[0]
    victim.unlink()
    capsys.readouterr()
    assert cli.main(["sweep", str(path), "--output", str(out), "--no-progress"]) == 0
    assert "7 complete" in capsys.readouterr().err
    assert without_wall(pq.read_table(out / "results.parquet").to_pylist()) == first


@pytest.mark.parametrize("argv, needle", [
    (["sweep", "spec.yaml", "--output", "out", "--c-col", "1"], "keys of the SPEC file"),
    (["sweep", "spec.yaml", "--output", "out", "--iterations", "10"], "keys of the SPEC file"),
    (["compare", "--sigma", "1", "--steps", "3", "--cycle-length", "3"], "has no matrix mechanism"),
    (["calibrate", "--target-epsilon", "1", "--delta", "1e-5", "--steps", "3", "--strategy-matrix", "C.npy"],
     "has no matrix mechanism"),
])
def test_commands_without_a_matrix_mechanism_point_to_those_with_one(capsys, argv, needle):
    assert cli.main(argv) == 2
    assert needle in capsys.readouterr().err
