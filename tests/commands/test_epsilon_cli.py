"""`epscert epsilon` (issue 17, item 2): the user's question in the user's terms."""

from __future__ import annotations

import json

import dp_accounting
import pytest

from epscert.inverse.best import samples_needed
from pipelines import cli

MNIST = ["--dataset-size", "60000", "--batch-size", "256", "--noise-multiplier", "1.0", "--delta", "1e-5"]


def poisson_epsilon(sigma, steps, epochs, delta):
    acc = dp_accounting.pld.PLDAccountant(value_discretization_interval=1e-4)
    acc.compose(dp_accounting.PoissonSampledDpEvent(1 / steps, dp_accounting.GaussianDpEvent(sigma)), steps * epochs)
    return acc.get_epsilon(delta)


def test_epsilon_json_poisson_and_context(capsys):
    assert cli.main(["epsilon", *MNIST, "--epochs", "2", "--sampler", "poisson", "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    ref = poisson_epsilon(1.0, 234, 2, 1e-5)
    assert out["steps"] == 234 and out["method"] == "pld_upper" and out["certified"] is True
    assert out["epsilon"] == pytest.approx(ref, rel=2e-3)
    ctx = out["context"]
    assert ctx["poisson_pld_upper"] == pytest.approx(ref, rel=2e-3)
    # lower bounds below the certified upper bounds; deterministic (E Gaussians) above them all
    assert ctx["balls_and_bins_lower_bound"] <= ctx["deterministic_exact"]
    assert ctx["shuffle_lower_bound"] <= ctx["deterministic_exact"]


def test_epsilon_table_balls_and_bins_answers_with_the_bracket_and_samples_nothing(capsys):
    # issue 25 row 7: the bracket answers, so no Monte Carlo run and no note about what it would need
    argv = ["epsilon", *MNIST, "--epochs", "2", "--samples", "300", "--no-context"]
    assert cli.main(argv) == 0
    captured = capsys.readouterr()
    lines = captured.out.strip().splitlines()
    assert lines[0].startswith("ε(δ=1e-05) <= ") and "balls_and_bins" in lines[0]
    assert "method bracket_upper" in lines[0] and "allocation_bracket_upper" in lines[0]
    assert len(lines) == 1 and "Monte Carlo" not in captured.out and "epscert: sampling" not in captured.err
    assert "inf" not in lines[0]


def test_epsilon_says_what_monte_carlo_needs_where_nothing_else_answers(capsys):
    # E = 1001 is past the bracket's epoch limit: the note names the limit, then what Monte Carlo would need
    argv = ["epsilon", "--sigma", "1", "--steps", "100", "--epochs", "1001", "--delta", "1e-5", "--samples", "300",
            "--no-context"]
    assert cli.main(argv) == 1
    out = capsys.readouterr().out
    assert "epochs must be <= 1000 for the Balls-and-Bins PLD bracket (BRACKET_MAX_EPOCHS), got epochs=1001" in out
    assert str(samples_needed(1e-5, 0.01, 2)) in out


def test_epsilon_table_monte_carlo_progress_where_it_runs(capsys):
    # E = 1001 is beyond the bracket's range: Monte Carlo runs (and reports progress), then domination
    argv = ["epsilon", "--noise-multiplier", "30", "--steps", "5", "--epochs", "1001", "--delta", "1e-2",
            "--samples", "2000", "--no-context"]
    assert cli.main(argv) == 0
    captured = capsys.readouterr()
    assert "epscert: sampling" in captured.err and "ETA" in captured.err


@pytest.mark.slow
def test_the_issue_repro_in_full(capsys):
    assert cli.main(["epsilon", *MNIST, "--epochs", "10", "--samples", "2000"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "allocation_bracket_upper" in out[0] and "ε(δ=1e-05) <= 1.04" in out[0]
    assert "Poisson ε <= 1.101" in out[1] and "deterministic ε = 17.86" in out[1]


@pytest.mark.parametrize("argv,field", [
    (["--noise-multiplier", "1", "--delta", "1e-5"], "--steps"),
    (["--noise-multiplier", "1", "--delta", "1e-5", "--steps", "10", "--batch-size", "5", "--dataset-size", "50"],
     "not both"),
    (["--noise-multiplier", "1", "--delta", "1e-5", "--batch-size", "5"], "dataset"),
    (["--noise-multiplier", "1", "--delta", "2", "--steps", "10"], "delta"),
    (["--noise-multiplier", "0", "--delta", "1e-5", "--steps", "10"], "sigma"),
    (["--noise-multiplier", "1", "--delta", "1e-5", "--dataset-size", "5", "--batch-size", "6"], "batch_size"),
])
def test_epsilon_bad_input(capsys, argv, field):
    assert cli.main(["epsilon", *argv]) == 2
    err = capsys.readouterr().err
    assert field in err and "Traceback" not in err
