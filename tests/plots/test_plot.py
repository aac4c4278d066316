"""Figures render (Agg) into non-trivial PNGs, and bad input exits 2 without a traceback."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import epscert
from pipelines import plot

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _png_ok(path) -> None:
    data = path.read_bytes()
    assert data.startswith(PNG_MAGIC)
    assert len(data) > 20_000  # axes, curves, band and legend: not an empty canvas


def test_delta_curves_render(tmp_path):
    table = epscert.certify(sigma=0.5, steps=50, epsilons=[0.5, 1, 2, 3], method=["importance", "cube_lower_bound"],
                            samples=3000, seed=0)
    src = tmp_path / "r.parquet"
    pq.write_table(table, src)
    out = tmp_path / "fig.png"
    assert plot.main([str(src), "--out", str(out)]) == 0
    _png_ok(out)


def test_epsilon_against_sigma_renders_from_a_sweep(tmp_path):
    eps = [0.25 * i for i in range(1, 40)]
    tables = [epscert.certify(sampler=s, sigma=sg, steps=50, epsilons=eps, method=m, samples=5000, seed=1)
              for sg in (0.6, 0.9, 1.2) for s, m in (("balls_and_bins", "importance"), ("poisson", "pld_upper"))]
    src = tmp_path / "sweep.parquet"
    pq.write_table(pa.concat_tables(tables), src)
    out = tmp_path / "sigma.png"
    assert plot.main([str(src), "--out", str(out), "--kind", "sigma", "--delta", "1e-3"]) == 0
    _png_ok(out)
    # the certified ε(δ) read off the grid decreases with σ for the Poisson upper bound
    rows = [r for r in pa.concat_tables(tables).to_pylist() if r["method"] == "pld_upper" and r["direction"] == "both"]
    by_sigma = {sg: plot.epsilon_at([r for r in rows if r["sigma"] == sg], 1e-3) for sg in (0.6, 0.9, 1.2)}
    assert by_sigma[0.6] > by_sigma[0.9] > by_sigma[1.2]


@pytest.mark.parametrize("args,field", [(["missing.parquet", "--out", "x.png"], "results"),
                                        (["{src}", "--out", "{tmp}/x.png", "--kind", "sigma", "--delta", "2"], "delta")])
def test_bad_input_exits_2(tmp_path, capsys, args, field):
    src = tmp_path / "r.parquet"
    pq.write_table(epscert.certify(sigma=1.0, steps=5, epsilons=[1.0], method="naive", samples=100), src)
    argv = [a.format(src=src, tmp=tmp_path) for a in args]
    assert plot.main(argv) == 2
    err = capsys.readouterr().err
    assert field in err and "Traceback" not in err
