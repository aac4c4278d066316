"""Issue 25, the rows of its tables tried again as a new user would (rows 2, 7, 9, 12–19; rows 3, 4 are in
tests/plots, 6 in tests/allocation/test_calibrate_on_bracket.py, 8 in tests/commands/test_compare_output.py,
11 in tests/deploy). Each test names its row."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
import warnings

import pyarrow.parquet as pq
import pytest

import epscert
from epscert.accountant import NotCertifiedWarning
from epscert.analytic.deterministic import deterministic_delta
from epscert.montecarlo import backends
from epscert.schema import RESULTS_SCHEMA
from pipelines import cli

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _one_line_error(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    return err


def test_row2_sweep_auto_answers_like_epsilon(tmp_path, capsys):
    # method: auto gives Balls-and-Bins the bracket (as `epscert epsilon`), Poisson its PLD: no Monte Carlo floor
    spec = tmp_path / "sweep.yaml"
    spec.write_text("sampler: [balls_and_bins, poisson]\nsigma: [0.8, 1.2]\nsteps: [20]\nmethod: [auto]\n"
                    "samples: [1000]\nepsilons: [1, 2]\nseed: 0\n")
    assert cli.main(["sweep", str(spec), "--output", str(tmp_path / "out"), "--no-progress"]) == 0
    rows = [r for r in pq.read_table(tmp_path / "out" / "results.parquet").to_pylist() if r["direction"] == "both"]
    methods = {(r["sampler"], r["method"]) for r in rows}
    assert methods == {("balls_and_bins", "bracket_upper"), ("balls_and_bins", "bracket_lower"),
                       ("poisson", "pld_upper"), ("poisson", "pld_lower")}
    for r in rows:
        if r["sampler"] == "balls_and_bins" and r["method"] == "bracket_upper":
            cert = epscert.Accountant(noise_multiplier=r["sigma"], steps=20)
            assert cert.get_delta(r["epsilon"]) == pytest.approx(r["delta_upper"], rel=1e-12)  # the same candidate
            assert cert.last_certificate.method == "bracket_upper"


def test_row7_epsilon_loads_no_beam_and_samples_nothing_where_the_bracket_answers():
    code = ("import sys; from pipelines import cli; rc = cli.main(['epsilon', '--steps', '100', '--noise-multiplier', "
            "'0.8', '--delta', '1e-6', '--no-context']); print('beam' if 'apache_beam' in sys.modules else 'no beam'); "
            "sys.exit(rc)")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "no beam"
    assert "method bracket_upper" in proc.stdout and "sampling" not in proc.stderr and "Monte Carlo" not in proc.stdout


def test_row9_calibrate_dataset_and_batch_size_mean_what_they_mean_in_epsilon(capsys):
    argv = ["calibrate", "--target-epsilon", "2", "--delta", "1e-5", "--dataset-size", "200", "--batch-size", "20",
            "--format", "json", "--no-progress"]
    assert cli.main(argv) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["steps"] == 200 // 20 and out["certified"] is True and out["method"] == "bracket_upper"
    assert "poisson_sigma" in out and "poisson_sigma_pld" not in out and "deterministic_sigma" in out  # row 12
    assert out["sigma"] == float(f"{out['sigma']:.5g}")  # row 12: σ to 5 significant digits, the certified value
    assert cli.main(["calibrate", "--target-epsilon", "2", "--delta", "1e-5", "--dataset-size", "200"]) == 2
    assert "--batch-size" in _one_line_error(capsys)


def test_row12_small_things(capsys, tmp_path):
    # --sampler Poisson (case), the short repr, nullable integer columns that read back as integers
    assert cli.main(["epsilon", "--sampler", "Poisson", "--steps", "10", "--noise-multiplier", "1", "--delta",
                     "1e-5", "--no-context"]) == 0
    assert "for poisson" in capsys.readouterr().out
    meta = json.loads(RESULTS_SCHEMA.metadata[b"pandas"])
    ints = {c["name"] for c in meta["columns"] if c["numpy_type"] == "Int64"}
    assert ints == {"samples", "dataset_size", "batch_size", "max_batch_size", "iterations"}
    table = epscert.certify(sigma=1.0, steps=5, epsilons=[1.0], method=["naive", "cube_lower_bound"], samples=100)
    pq.write_table(table, tmp_path / "r.parquet")
    pd = pytest.importorskip("pandas")
    frame = pd.read_parquet(tmp_path / "r.parquet")
    assert str(frame["samples"].dtype) == "Int64" and frame["samples"].isna().any()
    assert frame["samples"].dropna().tolist() == [100] * int(frame["samples"].notna().sum())


def test_row13_jax_backend_without_jax_is_refused_before_any_work(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(backends, "jax_installed", lambda: False)
    argv = ["certify", "--sigma", "1", "--steps", "10", "--samples", "100", "--backend", "jax", "--no-progress"]
    assert cli.main(argv) == 2
    assert "backend='jax' needs JAX" in _one_line_error(capsys)
    spec = tmp_path / "spec.yaml"
    spec.write_text("sigma: 0.25\nsteps: 10\nmethod: naive\nsamples: 100\nepsilons: [1]\nbackend: [jax]\n")
    out = tmp_path / "out"
    assert cli.main(["sweep", str(spec), "--output", str(out), "--no-progress"]) == 2
    assert "backend='jax' needs JAX" in _one_line_error(capsys)
    assert not out.exists()  # no empty parts/ left behind
    with pytest.raises(ValueError, match="backend='jax' needs JAX"):
        epscert.certify(sigma=1.0, steps=10, samples=100, method="naive", backend="jax")


def test_row14_a_backend_never_duplicates_a_row(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(backends, "jax_installed", lambda: False)  # auto is numpy here, certainly
    spec = tmp_path / "spec.yaml"
    spec.write_text("sampler: [balls_and_bins, poisson]\nsigma: [0.04, 1.0]\nsteps: 10\nsamples: 200\n"
                    "epsilons: [1]\nbackend: [auto, numpy]\n")
    from pipelines import sweep

    job = sweep.prepare([str(spec), "--output", str(tmp_path / "out"), "--dry-run"])
    # 4 configurations, each computed once (the rows are a function of the config_id): a groupby counts
    # nothing twice; the one that samples (σ = 0.04, below the bracket) runs on the backend auto means here
    keys = [(c.sampler.value, c.sigma) for c in job.configs]
    assert sorted(keys) == [("balls_and_bins", 0.04), ("balls_and_bins", 1.0), ("poisson", 0.04), ("poisson", 1.0)]
    assert len({c.config_id for c in job.configs}) == 4
    assert {c.backend for c in job.configs} == {"numpy"}


def test_row15_the_bracket_epoch_limit_is_named():
    acc = epscert.Accountant(noise_multiplier=1, steps=100, epochs=1001, samples=1000)
    with pytest.warns(NotCertifiedWarning) as record:
        assert acc.get_epsilon(1e-5) == math.inf
    message = str(record[0].message)
    assert "epochs must be <= 1000 for the Balls-and-Bins PLD bracket (BRACKET_MAX_EPOCHS), got epochs=1001" in message
    assert "samples per direction" in message and "ε > 200" in message  # what would answer, and why nothing did
    assert epscert.Accountant(noise_multiplier=1, steps=100, epochs=1000).get_epsilon(1e-5) == pytest.approx(25.44,
                                                                                                            abs=0.01)


def test_row16_an_underflowing_value_is_named_as_typed(capsys):
    assert cli.main(["epsilon", "--sigma", "1", "--steps", "10", "--delta", "1e-400"]) == 2
    assert "delta=1e-400 underflows to 0" in _one_line_error(capsys)
    with pytest.raises(ValueError, match=r"error_prob must be in \[1e-300, 1.0\), got error_prob=5e-324"):
        epscert.certify(sigma=1.0, steps=10, samples=100, method="naive", error_prob=5e-324)
    assert cli.main(["certify", "--sigma", "1", "--steps", "10", "--error-prob", "1e-999"]) == 2
    assert "error_prob='1e-999' underflows to 0" in _one_line_error(capsys)


def test_row17_a_tiny_delta_spends_no_monte_carlo_and_prints_short_numbers(capsys):
    assert cli.main(["epsilon", "--sigma", "1", "--delta", "1e-300", "--steps", "100"]) == 0
    captured = capsys.readouterr()
    first = captured.out.splitlines()[0]
    assert "deterministic_domination" in first and "<= 37.44" in first
    assert "epscert: sampling" not in captured.err  # no Monte Carlo run
    assert not re.search(r"\d{13,}", captured.out)  # no 300-digit sample count
    assert "was not run" in captured.out and "5.3e+300" in captured.out


def test_row18_get_delta_names_the_real_range():
    acc = epscert.Accountant(noise_multiplier=1.0, steps=10)
    with pytest.raises(ValueError, match=r"epsilon must be in \[0.0, 500.0\], got epsilon=-1"):
        acc.get_delta(-1)


def test_row19_the_api_applies_the_cost_guard():
    with pytest.raises(ValueError, match=r"CPU-hours .*more than max_cpu_hours=1; .*max_cpu_hours="):
        epscert.certify(sampler="deterministic", steps=10**6, samples=10**11)
    # the cap is the caller's: raising it passes the guard (the run itself is cheap here)
    table = epscert.certify(sampler="deterministic", sigma=1.0, steps=10**6, samples=1000, max_cpu_hours=0.01)
    assert table.num_rows and {r["samples"] for r in table.to_pylist()} == {1000}
    with pytest.raises(ValueError, match="max_cpu_hours"):
        epscert.certify(sampler="deterministic", sigma=1.0, steps=10, samples=10**9, max_cpu_hours=1e-4)


def test_row_accountant_exact_delta_check():
    # an independent value for row 17's answer: the deterministic (closed form) δ at the returned ε is <= 1e-300
    cert = epscert.Accountant(noise_multiplier=1, steps=100)
    with warnings.catch_warnings():
        warnings.simplefilter("error", NotCertifiedWarning)
        eps = cert.get_epsilon(1e-300)
    assert float(deterministic_delta(1.0, 1, eps)) <= 1e-300


def test_row7_the_context_plds_are_capped_and_say_so(capsys):
    # T = 10^5, σ = 0.5: a 10^5-point Poisson PLD at 1e-4 took ~100 MB beyond the answer; T = 234, E = 10: the
    # shuffle lower bound's sliced composition took ~460 MB. The context uses coarser grids and names them
    from epscert.config import CertifyConfig, Method, Sampler
    from pipelines.epsilon import context_discretization

    config = CertifyConfig("balls_and_bins", 0.5, 100_000, (1.0,))
    assert context_discretization(config) > 1e-4
    mnist = CertifyConfig("balls_and_bins", 1.0, 234, (1.0,), epochs=10)
    assert context_discretization(mnist) == 1e-4  # the README's Poisson context is unchanged
    assert context_discretization(mnist, Sampler.SHUFFLE, Method.CUBE_LOWER_BOUND) > 1e-4
    assert cli.main(["epsilon", "--dataset-size", "60000", "--batch-size", "256", "--epochs", "10",
                     "--noise-multiplier", "1.0", "--delta", "1e-5", "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["context_discretization"]["shuffle_lower_bound"] > 1e-4
    assert out["context_discretization"]["poisson_pld_upper"] == 1e-4
    # a coarser sliced composition is still a lower bound: below the deterministic (exact) ε that dominates it
    assert 7.2 < out["context"]["shuffle_lower_bound"] <= out["context"]["deterministic_exact"]
