"""Issue 17 item 3: no silent flag, no silent default (pipelines.flags and the command parsers)."""

from __future__ import annotations

import pytest

from epscert.config import DEFAULT_SAMPLES, CertifyConfig
from pipelines import calibrate, certify, cli, compare
from pipelines.flags import beam_flags

BASE = ["--sigma", "1", "--steps", "10", "--no-baselines", "--no-progress"]


def _error(capsys, argv) -> str:
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


def test_beam_flag_set_comes_from_beam_itself():
    flags = beam_flags()
    # flags of several PipelineOptions subclasses (standard, direct, portable, Google Cloud, setup)
    assert {"--runner", "--direct_num_workers", "--job_endpoint", "--temp_location", "--setup_file"} <= flags
    assert "--noise-multiplier" not in flags and "--batch-size" not in flags


def test_noise_multiplier_is_sigma_in_certify():
    job = certify.prepare(["--noise-multiplier", "0.5", "--steps", "100"])
    assert job.config.sigma == 0.5
    job = certify.prepare(["--noise_multiplier", "0.7", "--steps", "100"])
    assert job.config.sigma == 0.7


@pytest.mark.parametrize("flag", ["--target-delta", "--delta", "--target_delta"])
def test_delta_in_certify_points_to_epsilon_at_delta(capsys, flag):
    err = _error(capsys, ["certify", *BASE, flag, "1e-5"])
    assert "compare --deltas" in err and "--help" not in err


def test_batch_size_in_certify_is_not_max_batch_size(capsys):
    err = _error(capsys, ["certify", *BASE, "--batch-size", "256"])
    assert "--steps" in err and "did you mean --max" not in err and "dataset_size // batch_size" in err


@pytest.mark.parametrize("flag, meant", [("--num-samples", "--samples"), ("--beta", "--error-prob"),
                                         ("--num-epochs", "--epochs"), ("--epsilon", "--epsilons"),
                                         ("--sampels", "--samples")])
def test_hints_by_meaning_and_spelling(capsys, flag, meant):
    assert f"did you mean {meant}?" in _error(capsys, ["certify", *BASE, flag, "3"])


@pytest.mark.parametrize("argv", [["--runner_typo", "x"], ["--dryrun"], ["stray"], ["--direct_num_workers", "two"]])
def test_anything_beam_does_not_define_is_refused(capsys, argv):
    _error(capsys, ["certify", *BASE, *argv])


def test_sigma_and_steps_are_required_in_certify(capsys):
    assert "--sigma" in _error(capsys, ["certify", "--steps", "10"])
    assert "--steps" in _error(capsys, ["certify", "--sigma", "1"])


def test_compare_and_calibrate_aliases():
    args, _ = compare.build_parser().parse_known_args(["--noise-multiplier", "2", "--steps", "3",
                                                       "--target-delta", "1e-5"])
    assert args.sigma == "2" and args.deltas == "1e-5"
    args, _ = calibrate.build_parser().parse_known_args(["--target-epsilon", "2", "--target-delta", "1e-5",
                                                         "--steps", "3"])
    assert args.delta == "1e-5"


def test_compare_refuses_unknown_flags_with_a_hint(capsys):
    err = _error(capsys, ["compare", "--sigma", "1", "--steps", "3", "--batch-size", "4"])
    assert "--steps" in err
    assert "did you mean --samples" in _error(capsys, ["compare", "--sigma", "1", "--steps", "3", "--num-samples", "4"])


def test_calibrate_refuses_sigma_with_a_pointer(capsys):
    err = _error(capsys, ["calibrate", "--target-epsilon", "1", "--delta", "1e-3", "--steps", "3",
                          "--noise-multiplier", "1"])
    assert "searches for the noise multiplier" in err


def test_one_source_of_sample_defaults():
    import inspect  # noqa: PLC0415

    from epscert import Accountant, api  # noqa: PLC0415

    assert DEFAULT_SAMPLES == 100_000  # the documented default
    cli_defaults = {p.build_parser().get_default("samples") for p in (certify, calibrate, compare)}
    assert cli_defaults == {str(DEFAULT_SAMPLES)}
    api_defaults = {inspect.signature(f).parameters["samples"].default
                    for f in (api.certify, Accountant.__init__, Accountant.calibrate)}
    assert api_defaults == {DEFAULT_SAMPLES} == {CertifyConfig.__dataclass_fields__["samples"].default}
