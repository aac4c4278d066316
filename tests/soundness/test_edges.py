"""Issue 12 / 17.1: no certified number contradicts another, down to δ = 1e-300.

Independent references: mpmath at 50 digits (the Gaussian closed form), dp_accounting's RDP
(a valid upper bound computed by a different method), the deterministic pair (which dominates
every sampler), and the true curve's monotonicity.
"""

from __future__ import annotations


import mpmath
import pytest
from hypothesis import given, settings, strategies as st

import epscert
from epscert.analytic.deterministic import deterministic_bracket
from epscert.bounds.monotone import monotone_lower, monotone_upper
from epscert.inverse.epsilon_at_delta import analytic_epsilon_rows
from epscert.config import CertifyConfig, Method
from epscert.results.rows import analytic_rows


def mp_gaussian_delta(sigma, epochs, eps):
    mpmath.mp.dps = 50
    s = mpmath.mpf(sigma) / mpmath.sqrt(epochs)
    e = mpmath.mpf(eps)
    return mpmath.ncdf(-s * e + 1 / (2 * s)) - mpmath.exp(e) * mpmath.ncdf(-s * e - 1 / (2 * s))


def both_rows(sigma, steps, epochs, eps):
    table = epscert.certify(sampler="poisson", sigma=sigma, steps=steps, epochs=epochs, epsilons=eps,
                            method=["pld_upper", "pld_lower", "rdp_upper"], direction="both")
    return {(r["method"], r["epsilon"]): r for r in table.to_pylist() if r["direction"] == "both"}


# The table of issue 12: (σ, T, E, ε grid).
ISSUE_12 = [(0.8, 1000, 1, [3.0, 4.0]), (1.0, 234, 10, [3.0, 4.0, 8.0]),
            pytest.param(0.6, 10000, 1, [8.0], marks=pytest.mark.slow)]  # T = 10^4: 6 s


@pytest.mark.parametrize("sigma,steps,epochs,eps", ISSUE_12)
def test_issue_12_table_is_consistent(sigma, steps, epochs, eps):
    rows = both_rows(sigma, steps, epochs, eps)
    uppers = [[rows[(m, e)]["delta_upper"] for e in eps] for m in ("pld_upper", "rdp_upper")]
    lowers = [rows[("pld_lower", e)]["delta_lower"] for e in eps]
    for i, e in enumerate(eps):
        assert all(u[i] > 0.0 for u in uppers), (e, uppers)  # never an upper bound of 0
        assert lowers[i] <= min(u[i] for u in uppers), (e, lowers[i], uppers)
        assert rows[("pld_upper", e)]["resolution"] > 0.0
    for u in uppers:
        assert all(a >= b for a, b in zip(u, u[1:]))  # non-increasing in ε (row 1.0, 234, 10: 3 → 4)


def test_issue_24_pld_upper_resolved_far_below_issue_12_floor():
    """Issue 12 put the PLD upper at ε = 8 on its 2e-10 floor (so RDP answered); the tilted
    composition resolves it: far above its own floor, below RDP, and within 1% of the lower bound."""
    rows = both_rows(1.0, 234, 10, [8.0])
    up, lo, rdp = rows[("pld_upper", 8.0)], rows[("pld_lower", 8.0)], rows[("rdp_upper", 8.0)]
    assert up["bound"] == "pld_pessimistic" and 0.0 < up["resolution"] < 1e-3 * up["delta_upper"]
    assert up["delta_upper"] < rdp["delta_upper"]
    assert 0.0 < lo["delta_lower"] <= up["delta_upper"] <= 1.01 * lo["delta_lower"]


def config(sampler, sigma, steps, epochs, eps, method):
    return CertifyConfig(sampler=sampler, sigma=sigma, steps=steps, epochs=epochs, epsilons=eps, methods=method)


def test_issue_17_balls_and_bins_lower_never_above_deterministic():
    eps = [32.0, 48.0, 64.0]
    rows = analytic_rows(config("balls_and_bins", 1.0, 2, 20, eps, "cube_lower_bound"), Method.CUBE_LOWER_BOUND)
    det_hi = deterministic_bracket(1.0, 20, eps)[1]
    for r in rows:
        i = eps.index(r["epsilon"])
        assert r["delta_lower"] <= det_hi[i], r
    assert float(mp_gaussian_delta(1.0, 20, 64)) < 1e-33  # the reference: 1.9e-34
    at64 = [r["delta_lower"] for r in rows if r["epsilon"] == 64.0]
    assert max(at64) < 1e-33  # it printed 6.8e-16


def test_issue_17_shuffle_lower_epsilon_at_most_deterministic():
    det = analytic_epsilon_rows(config("deterministic", 1.0, 2, 20, [1.0], "exact"), Method.EXACT, [1e-20])[0]
    shuf = analytic_epsilon_rows(config("shuffle", 1.0, 2, 20, [1.0], "cube_lower_bound"),
                                 Method.CUBE_LOWER_BOUND, [1e-20])[0]
    assert det["epsilon_upper"] == pytest.approx(50.88, abs=0.01)
    assert shuf["epsilon_lower"] <= det["epsilon_upper"]  # it was 76.2


def test_issue_17_exact_row_contains_the_mpmath_value():
    truth = mp_gaussian_delta(50.0, 2, 1.0)
    row = analytic_rows(config("deterministic", 50.0, 10, 2, [1.0], "exact"), Method.EXACT)[0]
    assert mpmath.mpf(row["delta_lower"]) <= truth <= mpmath.mpf(row["delta_upper"])
    assert row["delta_lower"] <= row["delta"] <= row["delta_upper"]


@settings(max_examples=60, deadline=None, derandomize=True)
@given(sigma=st.floats(0.3, 200.0), epochs=st.integers(1, 100), eps=st.floats(0.0, 100.0))
def test_gaussian_bracket_contains_mpmath(sigma, epochs, eps):
    truth = mp_gaussian_delta(sigma, epochs, eps)
    lo, hi = deterministic_bracket(sigma, epochs, eps)
    assert mpmath.mpf(float(lo)) <= truth <= mpmath.mpf(float(hi))
    assert float(hi) > 0.0
    if truth > mpmath.mpf("1e-300"):
        assert float(hi) - float(lo) <= 1e-6 * float(truth)  # an honest, narrow bracket


def test_gaussian_bracket_down_to_1e300():
    # ε where the truth is near 1e-300 for σ = 1: both sides hold and the upper is never 0
    for eps in (200.0, 300.0, 400.0):
        truth = mp_gaussian_delta(0.9, 1, eps)
        lo, hi = deterministic_bracket(0.9, 1, eps)
        assert mpmath.mpf(float(lo)) <= truth <= mpmath.mpf(float(hi))


def test_monotone_envelopes():
    eps = [0.0, 2.0, 1.0, 3.0, 1.0]
    up = monotone_upper(eps, [5.0, 1.0, 3.0, 2.0, 4.0])
    lo = monotone_lower(eps, [5.0, 1.0, 3.0, 2.0, 4.0])
    # sorted ε: 0, 1, 1, 2, 3 with uppers 5, 3|4, 1, 2 -> running min 5, 3, 3, 1, 1
    assert up.tolist() == [5.0, 1.0, 3.0, 1.0, 3.0]
    # lowers 5, 3|4, 1, 2 -> running max from the right 5, 4, 4, 2, 2
    assert lo.tolist() == [5.0, 2.0, 4.0, 2.0, 4.0]
    with pytest.raises(ValueError, match="same length"):
        monotone_upper([1.0], [1.0, 2.0])


def test_calibrate_inherits_outward_values():
    """The analytic σ of calibrate: the deterministic σ meets the target by mpmath, and no PLD lower
    bound contradicts the Poisson σ (a raw PLD upper below its resolution used to set it)."""
    import dataclasses

    from epscert.analytic.poisson import poisson_pld_bounds
    from epscert.inverse.calibrate import calibrate_sigma
    from epscert.config import Direction
    from epscert.schema import to_table

    def run(cfg):  # stands in for the Monte Carlo run: the deterministic rows (valid uppers for BnB)
        exact = dataclasses.replace(cfg, sampler="deterministic", methods=("exact",))
        return to_table(analytic_rows(exact, Method.EXACT))

    base = CertifyConfig(sampler="balls_and_bins", sigma=1.0, steps=20, epochs=1, epsilons=[1.0],
                         methods="importance", samples=1000)
    cal = calibrate_sigma(base, target_epsilon=4.0, target_delta=1e-14, run=run)
    assert mp_gaussian_delta(cal.deterministic_sigma, 1, 4.0) <= 1e-14
    lower = poisson_pld_bounds(cal.poisson_sigma, 20, 1, [4.0], Direction.BOTH, 1e-4, False)[0][0]
    assert lower <= 1e-14
    upper = poisson_pld_bounds(cal.poisson_sigma, 20, 1, [4.0], Direction.BOTH, 1e-4, True)[0][0]
    assert 0.0 < upper <= 1e-14


@pytest.mark.slow
def test_compare_repro_of_issue_17():
    """`epscert compare --sigma 1 --steps 2 --epochs 20 --epsilons 32,48,64 --deltas 1e-16,1e-20
    --samples 2000 --no-fft`, through the API the command calls."""
    from epscert.compare import compare_rows

    cfg = CertifyConfig(sampler="balls_and_bins", sigma=1.0, steps=2, epochs=20, epsilons=[32.0, 48.0, 64.0],
                        samples=2000)
    rows = compare_rows(cfg, deltas=[1e-16, 1e-20], fft=False)
    det_hi = dict(zip([32.0, 48.0, 64.0], deterministic_bracket(1.0, 20, [32.0, 48.0, 64.0])[1]))
    for r in rows:
        # Poisson is not dominated by deterministic batches (a record joins several batches: epscert.results.rows)
        if r["quantity"] == "delta_at_epsilon" and r["delta_lower"] is not None and r["sampler"] != "poisson":
            assert r["delta_lower"] <= det_hi[r["epsilon"]], r
        if r["quantity"] == "epsilon_at_delta" and r["target_delta"] == 1e-20 and r["epsilon_lower"] is not None:
            assert r["epsilon_lower"] <= 50.89, r
