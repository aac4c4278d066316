"""`epscert compare` output (issue 17 item 5, issue 11 item 4): JSON rows, and no coarse-grid mean ε."""

from __future__ import annotations

import json

from epscert.compare import pivot
from pipelines import cli


def _eps_row(method, eps, upper, sampler="balls_and_bins"):
    return {"quantity": "epsilon_at_delta", "sampler": sampler, "method": method, "direction": "both",
            "target_delta": 1e-5, "epsilon": eps, "epsilon_upper": upper, "epsilon_lower": None}


def test_mean_epsilon_only_where_the_fine_grid_resolves_it():
    header, table = pivot([_eps_row("naive", 1.5, float("inf"))])  # no crossing: 1.5 is a coarse point
    mean_col = header.index("δ_B MC mean")
    assert table[0][mean_col] is None and table[0][header.index("δ_B UCB")] == float("inf")
    header, table = pivot([_eps_row("naive", 10.0, 12.0)])  # a coarse point below the fine bracket
    assert table[0][mean_col] is None
    header, table = pivot([_eps_row("naive", 2.71875, 3.0)])  # a fine-grid value: shown
    assert table[0][mean_col] == 2.71875 and table[0][header.index("δ_B UCB")] == 3.0


def test_compare_json_rows(capsys):
    assert cli.main(["compare", "--sigma", "1", "--steps", "3", "--epsilons", "1,2", "--samples", "500",
                     "--no-fft", "--no-progress", "--format", "json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.strip().splitlines()]
    assert {r["sampler"] for r in rows} >= {"balls_and_bins", "poisson", "deterministic", "shuffle"}
    assert all({"sigma", "steps", "epochs", "epsilon", "delta_upper"} <= set(r) for r in rows)


def _delta_rows(mean, se, lower=1e-4, upper=1.1e-4, samples=10**6, scale=1e-3):
    base = {"quantity": "delta_at_epsilon", "sampler": "balls_and_bins", "direction": "both", "epsilon": 2.0}
    return [dict(base, method="bracket_lower", delta=lower, delta_lower=lower, delta_upper=None),
            dict(base, method="bracket_upper", delta=upper, delta_lower=None, delta_upper=upper),
            dict(base, method="importance", delta=mean, delta_upper=mean * 2, delta_lower=None, std_error=se,
                 samples=samples, scale=scale)]


def test_mean_against_the_bracket_says_inside_within_k_se_or_outside():
    # issue 25 row 8: "yes" used to mean "within 4 SE", also for a mean outside the bracket
    from epscert.compare import mean_in_bracket

    # SE floor sqrt(upper·s/m) = sqrt(1.1e-4 · 1e-3 / 1e6) ≈ 3.3e-7 <= the sample SE 1e-6 used here
    assert mean_in_bracket(_delta_rows(1.05e-4, 1e-6), "both", 2.0) == "inside"
    sample = "SE = the row's std_error"
    assert mean_in_bracket(_delta_rows(1.1e-4 + 1.5e-6, 1e-6), "both", 2.0) == f"within 1.5 SE above ({sample})"
    assert mean_in_bracket(_delta_rows(1e-4 - 3.95e-6, 1e-6), "both", 2.0) == f"within 4 SE below ({sample})"
    assert mean_in_bracket(_delta_rows(1e-4 - 7.2e-6, 1e-6), "both", 2.0) == f"OUTSIDE (7.2 SE below; {sample})"
    assert mean_in_bracket(_delta_rows(1.05e-4, 1e-6)[:2], "both", 2.0) == "-"
    header, table = pivot(_delta_rows(1e-4 - 7.2e-6, 1e-6))
    assert header[-1] == "MC mean vs PLD bracket" and table[0][-1] == f"OUTSIDE (7.2 SE below; {sample})"


def test_mean_against_the_bracket_names_the_variance_bound_se_and_the_std_error_gap():
    # issue 35: compare said "within 1.3 SE" where certify's std_error gave 2.7; it now names which SE it used.
    import math

    from epscert.compare import mean_in_bracket

    upper, scale, samples, std_error = 1.1e-4, 1e-3, 10**6, 1e-7
    bound_se = math.sqrt(upper * scale / samples)  # ≈ 3.32e-7, the variance bound, larger than std_error here
    gap = 1.3 * bound_se
    text = mean_in_bracket(_delta_rows(upper + gap, std_error), "both", 2.0)
    in_std = math.ceil(gap / std_error * 10) / 10  # 4.4 row std_errors: the number certify's column gives
    assert text == f"within 1.3 SE above (SE = √(upper·s/m); {in_std:g} in the row's std_error)"
    far = mean_in_bracket(_delta_rows(upper + 5 * bound_se, std_error), "both", 2.0)
    assert far.startswith("OUTSIDE (5 SE above; SE = √(upper·s/m); ")
