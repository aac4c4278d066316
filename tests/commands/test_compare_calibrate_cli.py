"""`epscert compare` and `epscert calibrate` (issue 6) from the command line."""

from __future__ import annotations

import json
import math
from fractions import Fraction

import pyarrow.parquet as pq
import pytest

from epscert.inverse.calibrate import calibrate_sigma
from epscert.config import CertifyConfig
from epscert.compare import pivot
from pipelines import cli
from pipelines.compare import column_sides


def test_compare_prints_every_accountant_with_its_bounds_outward(capsys, tmp_path):
    """The table names every accountant, and every upper-bound cell of it is at least its row's value (the run's
    own rows, from its --output file), every lower-bound cell at most it (exact rationals), for δ(ε) and ε(δ) lines
    alike; the Monte Carlo mean is to the nearest."""
    argv = ["compare", "--sigma", "0.8", "--steps", "50", "--epsilons", "1,2", "--deltas", "1e-3", "--samples", "5000",
            "--no-progress", "--output", str(tmp_path / "rows.parquet")]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    header, table = pivot(pq.read_table(tmp_path / "rows.parquet").to_pylist(), "both")
    for label in ("δ_D exact", "δ_P PLD upper", "δ_P PLD lower", "δ_P RDP", "δ_P FFT upper", "δ_S lower",
                  "δ_B lower", "δ_B MC mean", "δ_B UCB"):
        assert label in out
    assert "ε=1" in out and "ε=2" in out and "δ=0.001" in out
    printed = [line.split() for line in out.splitlines()[2:]]
    sides = column_sides()
    assert sides[1:-1] == [True, True, False, True, True, False, False, False, False, True, None, True]
    checked = 0
    for line, cells in zip(table, printed):
        for value, cell, up in zip(line[1:-1], cells[1:], sides[1:-1]):
            if not isinstance(value, float) or not math.isfinite(value) or up is None:
                continue
            assert (Fraction(cell) >= Fraction(value)) if up else (Fraction(cell) <= Fraction(value))
            checked += 1
    assert checked >= 20


@pytest.mark.parametrize("argv,field", [(["--sigma", "0", "--steps", "10"], "sigma"),
                                        (["--sigma", "1", "--steps", "10", "--deltas", "2"], "delta"),
                                        (["--sigma", "1", "--steps", "10", "--method", "pld_upper"], "method")])
def test_compare_bad_input(capsys, argv, field):
    assert cli.main(["compare", *argv]) == 2
    err = capsys.readouterr().err
    assert field in err and "Traceback" not in err


def test_calibrate_beam_job_equals_the_in_process_search(capsys):
    # T = 1: cheap; the Beam evaluations must reproduce the in-process tables, so the same σ comes out
    argv = ["calibrate", "--target-epsilon", "1.5", "--delta", "1e-2", "--steps", "1", "--samples", "20000",
            "--method", "importance", "--shards", "2", "--format", "json"]
    assert cli.main(argv) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    config = CertifyConfig("balls_and_bins", 1.0, 1, (1.5,), methods=("importance",), samples=20000, shards=2)
    local = calibrate_sigma(config, 1.5, 1e-2)
    assert summary["sigma"] == local.sigma
    assert summary["delta_upper_at_target"] == local.delta_upper
    assert summary["certified"] is True and summary["certify_seed"] == "1"
    assert summary["poisson_sigma"] == pytest.approx(local.poisson_sigma)  # the API's name (was poisson_sigma_pld)


def test_calibrate_summary_prints_its_bounds_outward(capsys, monkeypatch):
    """The table form's UCB is rounded up and the failing σ down (on the exact binary values): the summary never shows
    a δ below the certified one or a failing σ above the proven one. (The comparison σ's are already rounded up to 5
    digits by the search, so their cells cannot differ from them.) The evaluations run in process here: that a Beam
    job gives the same tables is the test above's."""
    from epscert.results.tables import certify_config
    from pipelines import calibrate as calibrate_command

    monkeypatch.setattr(calibrate_command, "beam_runner", lambda choice: certify_config)
    argv = ["calibrate", "--target-epsilon", "1.5", "--delta", "1e-2", "--steps", "1", "--samples", "20000",
            "--method", "importance", "--shards", "2"]
    assert cli.main(argv) == 0
    shown = dict(line.split(None, 1) for line in capsys.readouterr().out.splitlines()[:16] if line.strip())
    config = CertifyConfig("balls_and_bins", 1.0, 1, (1.5,), methods=("importance",), samples=20000, shards=2)
    local = calibrate_sigma(config, 1.5, 1e-2)
    assert float(shown["sigma"]) == local.sigma  # the exact double (its repr)
    assert Fraction(shown["delta_upper_at_target"]) >= Fraction(local.delta_upper)
    if local.failing_sigma is not None:
        assert Fraction(shown["failing_sigma"]) <= Fraction(local.failing_sigma)


@pytest.mark.parametrize("argv,field", [(["--target-epsilon", "-1", "--delta", "1e-3", "--steps", "10"], "epsilon"),
                                        (["--target-epsilon", "1", "--delta", "1e-3", "--steps", "10",
                                          "--method", "exact"], "method"),
                                        (["--target-epsilon", "1", "--delta", "1e-3", "--steps", "10",
                                          "--runner", "DaskRunner"], "runner")])
def test_calibrate_bad_input(capsys, argv, field):
    assert cli.main(["calibrate", *argv]) == 2
    err = capsys.readouterr().err
    assert field in err and "Traceback" not in err


def test_calibrate_on_a_remote_runner_needs_a_shared_temp_location(capsys):
    argv = ["calibrate", "--target-epsilon", "1", "--delta", "1e-2", "--steps", "10",
            "--runner", "DataflowRunner", "--project", "p", "--region", "r"]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert "temp_location" in err and "Traceback" not in err


@pytest.mark.slow
def test_calibrate_on_two_worker_processes_equals_in_process(capsys):
    argv = ["calibrate", "--target-epsilon", "1.5", "--delta", "1e-2", "--steps", "1", "--samples", "20000",
            "--method", "importance", "--shards", "2", "--format", "json",
            "--direct_num_workers=2", "--direct_running_mode=multi_processing"]
    assert cli.main(argv) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    config = CertifyConfig("balls_and_bins", 1.0, 1, (1.5,), methods=("importance",), samples=20000, shards=2)
    assert summary["sigma"] == calibrate_sigma(config, 1.5, 1e-2).sigma
