"""``epscert epsilon`` at several δ in one call: the answers of separate calls with the same seed, with the
Monte Carlo passes they share drawn once (issue 35, item 6)."""

from __future__ import annotations

import json

import pytest

from epscert.config import CertifyConfig
from epscert.inverse import epsilon_at_delta
from epscert.inverse.best import best_certificate, best_certificates
from pipelines import cli

#: A run the PLD bracket does not cover (σ/√E = 0.25 < 0.3), so Monte Carlo (importance) answers: cheap
#: (T = 20, 20,000 samples per direction).
MC_RUN = ["--sampler", "balls_and_bins_persistent", "--noise-multiplier", "0.5", "--steps", "20", "--epochs", "4",
          "--samples", "20000", "--seed", "3", "--no-progress", "--no-context"]
DELTAS = (1e-2, 1e-3)


def _config() -> CertifyConfig:
    return CertifyConfig(sampler="balls_and_bins_persistent", sigma=0.5, steps=20, epochs=4, epsilons=(1.0,),
                         samples=20_000, seed=3)


def test_several_deltas_give_the_answers_of_separate_calls_and_share_the_coarse_pass(monkeypatch):
    # the Monte Carlo path (the bracket reaches σ_eff = 0.25 since its floor went to 0.05): take the bracket away
    from epscert.inverse import best as best_mod  # noqa: PLC0415

    monkeypatch.setattr(best_mod, "bracket_limit", lambda *args: "no bracket in this test")
    calls = []
    real = epsilon_at_delta.certify_config
    monkeypatch.setattr(epsilon_at_delta, "certify_config", lambda c, p=None: calls.append(c.config_id) or real(c, p))
    alone = [best_certificate(_config(), delta=d) for d in DELTAS]
    separate = len(calls)
    calls.clear()
    together = best_certificates(_config(), DELTAS)
    assert [c.method for c in alone] == [c.method for c in together] == ["importance", "importance"]
    for a, t in zip(alone, together):
        assert (t.value, t.lower, t.estimate, t.target) == (a.value, a.lower, a.estimate, a.target)
    assert together[0].value < together[1].value  # a smaller δ needs a larger ε: two different answers
    # two coarse searches and two certifying passes alone; together the coarse search (the same pass) runs once
    assert separate == 4 and len(calls) == 3 and len(set(calls)) == 3


@pytest.mark.parametrize("form", [["--delta", "1e-2", "--delta", "1e-3"], ["--delta", "1e-2,1e-3"],
                                  ["--deltas", "1e-2", "--delta", "1e-3,1e-2"]])
def test_cli_takes_several_deltas(form, capsys):
    alone = []
    for d in ("1e-2", "1e-3"):
        assert cli.main(["epsilon", *MC_RUN, "--delta", d, "--format", "json"]) == 0
        alone.append(json.loads(capsys.readouterr().out))
    assert cli.main(["epsilon", *MC_RUN, *form, "--format", "json"]) == 0
    together = [json.loads(line) for line in capsys.readouterr().out.strip().splitlines()]
    assert together == alone  # one JSON line per δ, in the order given, each δ once


def test_cli_table_prints_one_answer_per_delta(capsys):
    assert cli.main(["epsilon", *MC_RUN, "--delta", "1e-2", "--delta", "1e-3"]) == 0
    out = capsys.readouterr().out
    assert "ε(δ=0.01) <=" in out and "ε(δ=0.001) <=" in out


def test_a_bad_delta_among_several_is_named(capsys):
    assert cli.main(["epsilon", *MC_RUN, "--delta", "1e-2", "--delta", "2"]) == 2
    err = capsys.readouterr().err
    assert "delta" in err and "2" in err and len(err.strip().splitlines()) == 1


def test_accountant_reuses_the_passes_of_an_earlier_delta(monkeypatch):
    from epscert import Accountant
    from epscert.inverse import best as best_mod  # noqa: PLC0415

    monkeypatch.setattr(best_mod, "bracket_limit", lambda *args: "no bracket in this test")  # the Monte Carlo path

    def make():
        return Accountant(noise_multiplier=0.5, steps=20, epochs=4, sampler="balls_and_bins_persistent",
                          samples=20_000, seed=3)

    fresh = [make().get_epsilon(d) for d in DELTAS]
    calls = []
    real = epsilon_at_delta.certify_config
    monkeypatch.setattr(epsilon_at_delta, "certify_config", lambda c, p=None: calls.append(c.config_id) or real(c, p))
    acc = make()
    assert [acc.get_epsilon(d) for d in DELTAS] == fresh
    assert len(calls) == 3  # the second δ draws only its own certifying pass
