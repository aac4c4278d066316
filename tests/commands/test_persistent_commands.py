"""``balls_and_bins_persistent`` in the commands: ``epscert epsilon``, sweeps, and ``compare`` (fresh only).

The persistent sampler at (σ, T, E) is certified as fresh Balls-and-Bins at (σ/√E, T, 1) through the
deterministic PLD bracket; every entry point must give that value under the persistent name.
"""

from __future__ import annotations

import json
import math

import pyarrow.parquet as pq
import pytest

import epscert
from epscert.compare import compare_rows
from epscert.config import CertifyConfig
from pipelines import cli

SIGMA, T, E, DELTA = 2.0, 20, 4, 1e-5


def test_epsilon_cli_persistent_is_fresh_balls_and_bins_at_sigma_over_sqrt_e(capsys):
    argv = ["epsilon", "--noise-multiplier", str(SIGMA), "--steps", str(T), "--epochs", str(E), "--delta",
            str(DELTA), "--sampler", "balls_and_bins_persistent", "--samples", "1000", "--no-context",
            "--no-progress", "--format", "json"]
    assert cli.main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["sampler"], out["steps"], out["epochs"], out["certified"]) == ("balls_and_bins_persistent", T, E, True)
    # the bracket's upper side, labelled as such (not the Poisson PLD's "pld_pessimistic")
    assert (out["method"], out["bound"], out["error_prob"]) == ("bracket_upper", "allocation_bracket_upper", None)
    reduced = epscert.Accountant(noise_multiplier=SIGMA / math.sqrt(E), steps=T, epochs=1).get_epsilon(DELTA)
    assert out["epsilon"] == reduced
    # one assignment for all epochs costs more than a fresh one per epoch
    assert epscert.Accountant(noise_multiplier=SIGMA, steps=T, epochs=E).get_epsilon(DELTA) < reduced


def test_sweep_runs_the_persistent_sampler_as_its_reduction(tmp_path, capsys):
    spec = tmp_path / "spec.yaml"
    spec.write_text(f"sampler: [balls_and_bins_persistent]\nsigma: {SIGMA}\nsteps: {T}\nepochs: {E}\n"
                    "method: pld_upper\nepsilons: [0.5, 1]\nshards: 1\n")
    out = tmp_path / "out"
    assert cli.main(["sweep", str(spec), "--output", str(out), "--no-progress"]) == 0
    capsys.readouterr()
    rows = [r for r in pq.read_table(out / "results.parquet").to_pylist() if r["sampler"] == "balls_and_bins_persistent"]
    assert rows and {(r["method"], r["epochs"]) for r in rows} == {("bracket_upper", E)}
    fresh = epscert.certify(sampler="balls_and_bins", sigma=SIGMA / math.sqrt(E), steps=T, epochs=1,
                            epsilons=[0.5, 1.0], method="pld_upper").to_pylist()
    want = {(r["epsilon"], r["direction"]): r["delta_upper"] for r in fresh}
    got = {(r["epsilon"], r["direction"]): r["delta_upper"] for r in rows}
    assert got == want and all(0 < v < 1 for v in got.values())


def test_compare_is_fresh_balls_and_bins_only():
    config = CertifyConfig(sampler="balls_and_bins_persistent", sigma=SIGMA, steps=T, epochs=E, epsilons=(1.0,))
    with pytest.raises(ValueError, match="sampler.*balls_and_bins_persistent"):
        compare_rows(config, fft=False)
    assert cli.main(["compare", "--sigma", "1", "--steps", "4", "--sampler", "balls_and_bins_persistent"]) == 2
