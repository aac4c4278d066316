"""Issue 17 item 7: extreme and odd input gives a ValueError naming the field (or a right answer), fast."""

from __future__ import annotations

import random

import numpy as np
import pytest

import epscert
from epscert import Accountant
from pipelines import cli
from pipelines.flags import beam_flags

TINY = dict(steps=10, samples=100, method="naive")


@pytest.mark.parametrize("kwargs, field", [
    (dict(sigma=1e200), "sigma"),
    (dict(sigma="１.0"), "sigma"),                 # full-width digits
    (dict(sigma=1.0, epsilons=["１"]), "epsilon"),
    (dict(sigma=1.0, epsilons={1: 2}), "epsilons"),  # a dict is not a sequence of ε
    (dict(sigma=1.0, epsilons=[1e300]), "epsilon"),
    (dict(sigma=1.0, seed=10**5000), "seed"),      # past Python's 4300-digit repr limit
    (dict(sigma=1.0, seed=2**128), "seed"),
])
def test_api_refuses_naming_the_field(kwargs, field):
    with pytest.raises(ValueError, match=rf"\b{field}="):
        epscert.certify(**{**TINY, **kwargs})


def test_zero_dim_arrays_are_scalars():
    a = epscert.certify(sigma=np.array(1.0), epsilons=np.array(2.0), seed=np.array(3), **TINY)
    b = epscert.certify(sigma=1.0, epsilons=[2.0], seed=3, **TINY)
    assert a.column("delta").to_pylist() == b.column("delta").to_pylist()


def test_accountant_refuses_rdp_upper_at_construction():
    with pytest.raises(ValueError, match="method='rdp_upper'"):
        Accountant(noise_multiplier=1.0, steps=10, sampler="poisson", method="rdp_upper")


def test_calibrate_refuses_a_lower_bound_method():
    with pytest.raises(ValueError, match="method='pld_lower'"):
        Accountant.calibrate(target_epsilon=1, target_delta=1e-5, steps=10, sampler="poisson", method="pld_lower")


def test_calibrate_refuses_huge_target_epsilon():
    with pytest.raises(ValueError, match="target_epsilon="):
        Accountant.calibrate(target_epsilon=1e300, target_delta=1e-5, steps=10, samples=100)


def _refused(capsys, argv, field) -> None:
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and field in err and "Traceback" not in err, err


@pytest.mark.parametrize("argv, field", [
    (["certify", "--sigma", "1e200", "--steps", "4"], "sigma="),
    (["certify", "--sigma", "１", "--steps", "4"], "sigma="),
    (["certify", "--sigma", "1", "--steps", "４"], "steps="),
    (["certify", "--sigma", "1", "--steps", "4", "--epsilons", "1,２"], "epsilons="),
    (["certify", "--sigma", "1", "--steps", "4", "--seed", "9" * 5000], "seed="),
    (["certify", "--sigma", "1", "--steps", "4", "--seed", "9" * 60], "seed="),
    (["fft", "--epsilons", "1e300", "--schedule", "{SCHEDULE}"], "epsilons="),
    (["calibrate", "--target-epsilon", "1e300", "--delta", "1e-5", "--steps", "10"], "target_epsilon="),
])
def test_cli_refuses_naming_the_field(capsys, tmp_path, argv, field):
    schedule = tmp_path / "s.json"
    schedule.write_text('{"mechanisms": [{"mechanism": "gaussian", "sigma": 2, "count": 1}]}')
    _refused(capsys, [a.replace("{SCHEDULE}", str(schedule)) for a in argv], field)


# --- fuzz: random flag sets, flags of other tools, Unicode digits, extreme values ----------------------------
FLAGS = {
    "--sigma": ["1", "0.5", "1e200", "1e-300", "１", "nan", "inf", "-1", "0"],
    "--noise-multiplier": ["0.7", "1e308", "٣"],
    "--steps": ["4", "0", "1e3", "10000000000000", "４", "-2", "3.5"],
    "--epochs": ["1", "0", "²"],
    "--epsilons": ["1,2", "1e300", "nan", "1,,", "-1", "inf", "1,１"],
    "--samples": ["200", "0", "1e9", "２"],
    "--seed": ["0", "-1", "9" * 50, "１"],
    "--error-prob": ["0.01", "0", "1", "nan"],
    "--target-delta": ["1e-5"], "--delta": ["1e-5"], "--batch-size": ["256"], "--dataset-size": ["60000", "x"],
    "--target-epsilon": ["8"], "--max-grad-norm": ["1"], "--accountant": ["rdp"], "--sample-rate": ["0.01"],
    "--runner": ["FooRunner"], "--num_workers": ["2"],
}


def fuzz_argvs(seed: int, count: int) -> list[list[str]]:
    rng = random.Random(seed)  # a test-local generator: fuzz inputs, not epscert randomness
    argvs = []
    for _ in range(count):
        names = rng.sample(sorted(FLAGS), rng.randint(1, 5))
        argv = ["certify", "--no-baselines", "--no-progress", "--samples", "200"]
        if rng.random() < 0.8:
            argv += ["--sigma", "1", "--steps", "4"]
        for name in names:
            argv += [name, rng.choice(FLAGS[name])]
        argvs.append(argv)
    return argvs


def _check_fuzz(capsys, argv) -> None:
    code = cli.main(argv)
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err and "nan" not in captured.out.lower(), (argv, captured)
    if code == 2:
        assert len(captured.err.strip().splitlines()) == 1, (argv, captured.err)
        return
    assert code == 0, (argv, captured.err)
    # accepted: every flag was one of certify's own (or an alias) or a flag Beam defines, none dropped
    own = {"--sigma", "--noise-multiplier", "--steps", "--epochs", "--epsilons", "--samples", "--seed",
           "--error-prob", "--dataset-size", "--no-baselines", "--no-progress"}
    assert {a for a in argv[1:] if a.startswith("--")} <= own | beam_flags(), argv


@pytest.mark.parametrize("argv", fuzz_argvs(17, 12))
def test_cli_fuzz_fast(capsys, argv):
    _check_fuzz(capsys, argv)


@pytest.mark.slow
@pytest.mark.parametrize("argv", fuzz_argvs(1717, 300))
def test_cli_fuzz_wide(capsys, argv):
    _check_fuzz(capsys, argv)
