"""Every subcommand names a flag it does not know, with "did you mean", before complaining of a missing
required flag; an invalid value names the flag the user typed; sweep specs hint at misspelt keys (issue 35,
item 6)."""

from __future__ import annotations

import pytest

from epscert.inverse.best import Certificate
from pipelines import cli

#: (command and its arguments with one misspelt flag, the flag meant)
MISSPELT = [
    (["epsilon", "--nosie-multiplier", "1", "--delta", "1e-5", "--steps", "10"], "--noise-multiplier"),
    (["certify", "--nosie-multiplier", "1", "--steps", "10"], "--noise-multiplier"),
    (["compare", "--sigam", "1", "--steps", "10"], "--sigma"),
    (["calibrate", "--target-epsilonn", "1", "--delta", "1e-5", "--steps", "10"], "--target-epsilon"),
    (["sweep", "spec.yaml", "--outptu", "out"], "--output"),
    (["plot", "results.parquet", "--out", "x.png", "--kindd", "sigma"], "--kind"),
    (["fft", "--schedul", "s.json"], "--schedule"),
    (["hidden-state", "--sigmaa", "1"], "--sigma"),
]


@pytest.mark.parametrize("argv, meant", MISSPELT, ids=[a[0] for a, _ in MISSPELT])
def test_every_command_names_a_misspelt_flag(argv, meant, capsys):
    wrong = next(a for a in argv if a.startswith("--") and a[2] == meant[2] and a != meant)
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"epscert {argv[0]}: error: unknown flag {wrong}; did you mean {meant}?"


def test_unknown_flag_without_a_near_name_points_to_help(capsys):
    assert cli.main(["epsilon", "--noise-multiplier", "1", "--delta", "1e-5", "--steps", "10", "--zzz", "1"]) == 2
    assert capsys.readouterr().err.strip() == \
        "epscert epsilon: error: unknown flag --zzz; 'epscert epsilon --help' lists its flags"


def test_runner_flags_still_pass_the_beam_jobs(tmp_path, capsys):
    # a real Beam flag is not "unknown" for certify (the dry run stops before any work)
    argv = ["certify", "--sigma", "1", "--steps", "10", "--dry-run", "--direct_num_workers=2", "--no-progress"]
    assert cli.main(argv) == 0, capsys.readouterr().err


@pytest.mark.parametrize("command", ["epsilon", "certify", "compare"])
@pytest.mark.parametrize("flag", ["--noise-multiplier", "--noise_multiplier", "--sigma"])
def test_an_invalid_value_names_the_flag_typed(command, flag, capsys):
    argv = [command, flag, "0", "--steps", "10"] + (["--delta", "1e-5"] if command == "epsilon" else [])
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert f"(given as {flag} 0)" in err and "sigma" in err and len(err.splitlines()) == 1, err


def test_equals_form_is_named_too(capsys):
    assert cli.main(["epsilon", "--noise-multiplier=-1", "--delta", "1e-5", "--steps", "10"]) == 2
    assert "(given as --noise-multiplier -1)" in capsys.readouterr().err


@pytest.mark.parametrize("key, meant", [("sigam", "sigma"), ("noise_multiplier", "sigma"), ("epsilon", "epsilons"),
                                        ("datasetsize", "dataset_size"), ("zzz", None)])
def test_sweep_spec_key_hint(tmp_path, capsys, key, meant):
    spec = tmp_path / "spec.yaml"
    spec.write_text(f"sampler: [poisson]\n{key}: [1.0]\nsigma: [1]\nsteps: [100]\nmethod: [auto]\nepsilons: [1]\n")
    assert cli.main(["sweep", str(spec), "--output", str(tmp_path / "out"), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert f"unknown key '{key}'" in err
    if meant is None:
        assert "did you mean" not in err
    else:
        assert f"unknown key '{key}' (did you mean {meant}?); allowed keys:" in err


def test_notes_of_a_missing_certificate_are_separate_sentences():
    notes = ("the PLD bracket does not apply: sigma must be >= 0.3 for the Balls-and-Bins PLD bracket "
             "(BRACKET_MIN_SIGMA), got sigma=0.25", "Monte Carlo (importance) was not run.")
    cert = Certificate("epsilon", 1e-5, "balls_and_bins", float("inf"), None, None, None, None, notes, ())
    text = cert.summary()
    assert "got sigma=0.25. Monte Carlo" in text and ".." not in text
