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
