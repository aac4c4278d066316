"""Sweep specs accept the Balls-and-Bins PLD bracket's methods (issue 11 item 5): one task per configuration."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from epscert.allocation import bracket_for
from pipelines import cli


def test_sweep_with_the_pld_bracket_writes_its_rows(tmp_path, capsys):
    spec = tmp_path / "spec.yaml"
    spec.write_text("sampler: balls_and_bins\nsigma: [1.0, 2.0]\nsteps: 20\nepochs: [1, 2]\n"
                    "method: [pld_upper, pld_lower]\nepsilons: [0.5, 1, 2]\nbaselines: false\n")
    assert cli.main(["sweep", str(spec), "--output", str(tmp_path / "out"), "--no_progress"]) == 0, \
        capsys.readouterr().err
    rows = pq.read_table(tmp_path / "out" / "results.parquet").to_pylist()
    got = {(r["sigma"], r["epochs"], r["method"], r["epsilon"]): r for r in rows if r["direction"] == "both"}
    assert len(got) == 2 * 2 * 2 * 3
    for (sigma, epochs, method, eps), row in got.items():
        up, lo = bracket_for(sigma, 20, epochs).delta([eps])
        if method == "bracket_upper":  # pld_upper in the spec: the bracket's old name
            assert row["guarantee"] == "upper_bound" and row["delta_upper"] == pytest.approx(up[0], rel=1e-12)
        else:
            assert row["guarantee"] == "lower_bound" and row["delta_lower"] == pytest.approx(lo[0], rel=1e-12)
        assert row["bound"].startswith("allocation_bracket")
