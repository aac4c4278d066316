"""benchmarks/matrix.py runs end to end in its --quick mode (a smoke run; figures are not asserted)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("jax_privacy.experimental.monte_carlo", reason="needs the [jax] extra")

from benchmarks import matrix  # noqa: E402
from benchmarks.matrix_rivals import load_opake  # noqa: E402

try:
    load_opake()
except ImportError as err:  # pragma: no cover - the [test] extra installs it
    pytest.skip(f"needs opake-accounting (the [test] extra): {err}", allow_module_level=True)


def test_quick_mode_runs_and_saves_its_figures(tmp_path, capsys):
    report = matrix.main(["--quick", "--out", str(tmp_path)])
    saved = json.loads((tmp_path / "matrix-quick.json").read_text())
    assert saved["sigma"] == report["sigma"] > 0
    assert [r["bands"] for r in saved["rates"]] == list(matrix.QUICK["bands"])
    for r in saved["rates"]:
        for name in matrix.METHODS + ("jax_privacy", "opake", "opake_draws"):
            assert r[name]["rate"] > 0 and r[name]["samples"] > 0
    assert {(c["method"], c["target"]) for c in saved["certification"]} == {
        (m, t) for m in matrix.METHODS for t in matrix.QUICK["targets"]}
    for c in saved["certification"]:
        assert c["steps"] and c["search_cpu_s"] > 0
        for step in c["steps"]:  # every step's certificate contains its estimate (by construction)
            assert step["ucb"] >= step["delta"] >= 0  # a Monte Carlo mean may be 0 at small δ
            assert step["lcb"] is None or step["lcb"] <= step["delta"]
    out = capsys.readouterr().out
    assert "Part 1" in out and "Part 2" in out and "saved" in out
