"""Issue 35 item 2: a strategy whose Gram matrix leaves the range the matrix methods compute in is refused
before any work, naming the field and the value, on every entry point (API, Accountant, the CLI's
certify and epsilon, sweep specs and --dry-run); inside the range every method answers.

Independent values: C = c·I with b | n has G = (c²/σ²) k I (k = n/b participations per bin), so every
mode's noise multiplier is σ/(c√k); a Gaussian mechanism bounds δ from above (comonotone modes, closed
form from scipy), and the event {some g_j > v_j/2} from below (module docstring of the last test).
"""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import special

import epscert
from epscert.config import CertifyConfig
from epscert.matrix.checks import MAX_MODE_SIGMA, MIN_GRAM_DIAGONAL, MIN_MODE_SIGMA, check_gram
from epscert.matrix.strategies import dense_strategy, toeplitz_strategy
from pipelines import cli, spec as spec_mod

ROOT = Path(__file__).resolve().parents[2]
N, B = 20, 4  # k = 5 participations per bin
K = N // B
METHODS = ["tilted", "naive", "importance", "conditional", "independent_lower_bound", "comonotone_upper_bound"]
#: (c_col, sigma, words the refusal must hold): C = c·I, so sigma_j = sigma/(c √5) is computed here
CASES = [
    ([1e300], 2.0, ["c_col", f"{2.0 / (1e300 * math.sqrt(K)):.4g}", "below the limit 1e-100",
                    "rescaling c_col and the noise multiplier together does not change it"]),
    ([1e-300], 2.0, ["c_col", f"{2.0 / (1e-300 * math.sqrt(K)):.4g}", "above the limit 1e+05"]),
    ([1e160], 1e100, ["overflows", "max c_col entry = 1e+160", "sigma=1e+100",
                      "rescale c_col and the noise multiplier together", "divide both by 1e+160"]),
]


def _config(c_col, sigma, method="tilted", **kw):
    return CertifyConfig(sampler="balls_and_bins_persistent", sigma=sigma, steps=B, epochs=K, epsilons=(1.0,),
                         methods=(method,), samples=200, strategy=toeplitz_strategy(c_col, N), **kw)


@pytest.mark.parametrize("c_col, sigma, words", CASES)
@pytest.mark.parametrize("method", METHODS)
def test_the_api_refuses_before_any_sampling(c_col, sigma, words, method):
    calls = []
    with pytest.raises(ValueError) as err:
        epscert.certify(sampler="balls_and_bins_persistent", sigma=sigma, steps=B, epochs=K, epsilons=[1.0],
                        method=method, samples=200, strategy=toeplitz_strategy(c_col, N), progress=calls.append)
    text = str(err.value)
    assert calls == [] and "\n" not in text
    for word in words:
        assert word in text, (word, text)


@pytest.mark.parametrize("c_col, sigma, words", CASES)
def test_the_accountant_refuses_alike(c_col, sigma, words):
    with pytest.raises(ValueError) as err:
        epscert.Accountant(noise_multiplier=sigma, strategy=toeplitz_strategy(c_col, N), cycle_length=B)
    assert all(word in str(err.value) for word in words), str(err.value)


def test_a_rescaled_strategy_is_the_same_mechanism_and_is_accepted():
    """The hint of the overflow refusal works: C/s with sigma/s passes, with G = (c²/σ²) k I as C = c·I has."""
    with pytest.raises(ValueError, match="divide both by 1e"):
        _config([1e160], 1e100)
    config = _config([1.0], 1e100 / 1e160)
    g = config.strategy.gram(B).scaled(config.sigma)
    np.testing.assert_allclose(g, np.eye(B) * K / (1e-60) ** 2, rtol=1e-12)


@pytest.mark.parametrize("factor, ok", [(0.999, True), (1.001, False)])
def test_the_mode_sigma_limits_are_where_the_docstring_puts_them(factor, ok):
    """sigma_j = sigma/sqrt(k) for C = I: accepted just inside [MIN_MODE_SIGMA, MAX_MODE_SIGMA], refused outside."""
    high = MAX_MODE_SIGMA * math.sqrt(K) * factor
    low = MIN_MODE_SIGMA * math.sqrt(K) / factor
    for sigma, side in ((high, "above"), (low, "below")):
        if ok:
            check_gram(toeplitz_strategy([1.0], N), B, sigma)
        else:
            with pytest.raises(ValueError, match=f"is {side} the limit"):
                check_gram(toeplitz_strategy([1.0], N), B, sigma)


def test_an_underflowing_gram_is_below_the_diagonal_floor_and_says_so():
    """||C x_j||² below MIN_GRAM_DIAGONAL: every such strategy has sigma_j above the range at sigma >= 1e-100
    (sigma/sqrt(1e-290) > 1e45), so the refusal names the mode's sigma, not a rescale that cannot help."""
    c = math.sqrt(MIN_GRAM_DIAGONAL / K) / 10
    with pytest.raises(ValueError, match="above the limit 1e\\+05"):
        check_gram(toeplitz_strategy([c], N), B, 1e-100)


def test_a_zero_mode_is_refused_naming_it():
    """C Toeplitz with c_col = [0, 0, 1], n = 5, b = 4: bin 3 = {3}, whose column holds c[0], c[1] at rows 3, 4."""
    with pytest.raises(ValueError, match=r"mode 3 .* has zero norm.*is c_col\[0\] = 0\?"):
        CertifyConfig(sampler="balls_and_bins_persistent", sigma=1.0, steps=4, epochs=2, epsilons=(1.0,),
                      methods=("naive",), strategy=toeplitz_strategy([0.0, 0.0, 1.0], 5))


@pytest.mark.parametrize("entry, sigma, words", [
    (1e200, 2.0, ["strategy_matrix", f"{2.0 / (1e200 * math.sqrt(K)):.4g}", "below the limit"]),
    (1e-300, 1.0, ["strategy_matrix", f"{1.0 / (1e-300 * math.sqrt(K)):.4g}", "above the limit"]),
    (1e160, 1e100, ["overflows", "max strategy_matrix entry = 1e+160", "divide both by 1e+160"]),
])
def test_dense_entries_out_of_range_are_refused(tmp_path, entry, sigma, words):
    path = tmp_path / "c.npy"
    np.save(path, np.eye(N) * entry)
    with pytest.raises(ValueError) as err:
        epscert.certify(sampler="balls_and_bins_persistent", sigma=sigma, steps=B, epochs=K,
                        epsilons=[1.0], method="naive", samples=200, strategy=dense_strategy(path))
    assert all(word in str(err.value) for word in words), str(err.value)


@pytest.mark.parametrize("command", ["epsilon", "certify"])
@pytest.mark.parametrize("c_col, sigma, words", CASES)
def test_the_cli_prints_one_line(capsys, command, c_col, sigma, words):
    noise = ["--noise-multiplier" if command == "epsilon" else "--sigma", repr(sigma)]
    extra = ["--delta", "1e-3"] if command == "epsilon" else ["--epsilons", "1"]
    argv = [command, *noise, *extra, "--c-col", repr(c_col[0]), "--iterations", str(N), "--cycle-length", str(B),
            "--samples", "200", "--no-progress"]
    assert cli.main(argv) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert captured.out == "" and "\n" not in err and "Traceback" not in err
    assert all(word in err for word in words), err


def test_the_issue_command_ends_with_one_line_and_no_traceback():
    argv = ["epsilon", "--noise-multiplier", "2", "--delta", "1e-3", "--c-col", "1e300", "--iterations", "20",
            "--cycle-length", "4"]
    done = subprocess.run([sys.executable, "-W", "error::RuntimeWarning", "-m", "pipelines.cli", *argv],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    err = done.stderr.strip()
    assert done.returncode == 2 and "\n" not in err and "Traceback" not in err, done.stderr
    assert "c_col" in err and "sigma=2.0" in err


SPEC = """\
sigma: [{sigma}]
c_col: [{c_col}]
iterations: 20
cycle_length: 4
method: [conditional]
samples: 200
epsilons: [1]
"""


@pytest.mark.parametrize("c_col, sigma, words", CASES)
def test_sweep_specs_and_dry_run_refuse(tmp_path, capsys, c_col, sigma, words):
    path = tmp_path / "spec.yaml"
    path.write_text(SPEC.format(sigma=float(sigma), c_col=float(c_col[0])))
    with pytest.raises(spec_mod.SpecError) as err:
        spec_mod.load(str(path))
    assert "\n" not in str(err.value) and all(word in str(err.value) for word in words), str(err.value)
    assert cli.main(["sweep", str(path), "--output", str(tmp_path / "out"), "--dry-run"]) == 2
    printed = capsys.readouterr().err.strip()
    assert "\n" not in printed and "Traceback" not in printed and words[0] in printed
    assert not (tmp_path / "out").exists()


def _gaussian_delta_upper(sigma_eff: float, eps: float) -> float:
    """δ of the Gaussian mechanism at σ_eff (sensitivity 1): the comonotone modes' ceiling on the pair's δ.
    ε = 0: erf(1/(2√2 σ)) (no cancellation); ε > 0: the two-term closed form, which is tiny here."""
    if eps == 0.0:
        return float(special.erf(1.0 / (2.0 * math.sqrt(2.0) * sigma_eff)))
    return float(special.ndtr(-sigma_eff * eps + 0.5 / sigma_eff))  # drops the subtracted term: larger


@pytest.mark.parametrize("end", ["low", "high"])
def test_every_method_answers_soundly_at_both_ends_of_the_range(end):
    """At sigma_j just inside [1e-100, 1e5] every method gives finite rows in [0, 1] with lower <= upper, and:

    - high end (sigma_j = 0.99e5): no lower bound above the Gaussian ceiling (all modes comonotone at
      v_max: Slepian, epscert.matrix.bracket); this is the side where rounding showed first;
    - low end (sigma_j = 1.01e-100, v ~ 1e200): no upper bound below the floor
      1 - (1 + b)(1 + e^ε) Φ̄(√v_min/2), from the event A = {some g_j > v_j/2}: REMOVE >= P(A) - e^ε Q(A) >=
      Φ(√v/2) - e^ε b Φ̄(√v/2), ADD >= Q(A^c) - e^ε P(A^c) >= 1 - b Φ̄(√v/2) - e^ε Φ̄(√v/2).
    The Monte Carlo sides hold with probability >= 1 - β each (β = 0.01, fixed seed 0): a false failure
    has probability below 0.01 per row side, and the seed is fixed, so the outcome is reproducible.
    """
    s = toeplitz_strategy([1.0, 0.5], N)
    v0 = np.diag(s.gram(B).g0)
    sigma = (0.99 * MAX_MODE_SIGMA * math.sqrt(v0.min())) if end == "high" else (1.01e-100 * math.sqrt(v0.max()))
    eps = [0.0, 1.0, 5.0]
    methods = [m for m in METHODS if not (m == "independent_lower_bound")]  # its bracket needs 0.3 <= sigma_eff
    rows = epscert.certify(sampler="balls_and_bins_persistent", sigma=sigma, steps=B, epochs=K, epsilons=eps,
                           method=methods, samples=500, strategy=s, seed=0).to_pylist()
    assert {r["method"] for r in rows} == set(methods)
    v_max, v_min = float(v0.max()) / sigma**2, float(v0.min()) / sigma**2
    for r in rows:
        lo, hi = r["delta_lower"], r["delta_upper"]
        for x in (lo, hi, r["delta"]):
            assert x is None or (math.isfinite(x) and 0.0 <= x <= 1.0), r
        if lo is not None and hi is not None:
            assert lo <= hi, r
        if end == "high" and lo is not None:
            assert lo <= _gaussian_delta_upper(1.0 / math.sqrt(v_max), r["epsilon"]), r
        if end == "low" and hi is not None:
            floor = 1.0 - (1 + B) * (1 + math.exp(r["epsilon"])) * special.ndtr(-math.sqrt(v_min) / 2)
            assert hi >= floor * (1 - 1e-9), r
