"""The README's figures and its sweep, regenerated from the commands the README shows.

    python -m benchmarks.readme_figures [--out benchmarks/figures] [--samples 200000]

1. ``epscert certify --sampler balls_and_bins --sigma 0.35 --steps 1000 --epsilons 0.5,1,...,8 --method
   importance,bracket_upper,bracket_lower,cube_lower_bound --samples 200000`` (with its analytic baselines),
   then ``epscert plot`` of it: ``delta_curves.png`` (the Monte Carlo mean against the certified bracket).
2. The README's ``sweep.yaml`` (``method: auto``) into a temporary directory, then ``epscert plot`` of its
   results: ``sweep_delta.png`` (δ(ε), six configurations) and ``sweep_sigma.png`` (``--kind sigma
   --delta 1e-5``). Prints the sweep's rows (method, guarantee, δ) so the README's table can be checked.
"""

from __future__ import annotations

import argparse
import io
import os
import pathlib
import tempfile

import pyarrow.parquet as pq

from pipelines import certify, plot, sweep

ROOT = pathlib.Path(__file__).resolve().parents[1]
EPSILONS = "0.5,1,2,3,4,5,6,7,8"
SWEEP_SPEC = """\
sampler: [balls_and_bins, poisson]
sigma: [0.5, 0.8, 1.2]
steps: [1000]
method: [auto]
samples: [100000]
epsilons: [1, 2, 4, 8]
seed: 0
"""


def readme_spec() -> str:
    """The sweep.yaml block of the README (so the figure is made from exactly what the README shows)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index("# sweep.yaml\n") + len("# sweep.yaml\n")
    return text[start:text.index("```", start)]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "figures"))
    parser.add_argument("--samples", default="200000")
    args = parser.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="epscert-figures-") as tmp:
        results = os.path.join(tmp, "r.parquet")
        certify.run(["--sampler", "balls_and_bins", "--sigma", "0.35", "--steps", "1000", "--epsilons", EPSILONS,
                     "--method", "importance,bracket_upper,bracket_lower,cube_lower_bound", "--samples",
                     args.samples, "--output", results, "--no-progress"], stdout=io.StringIO())
        print(plot.plot_delta_curves(pq.read_table(results), os.path.join(args.out, "delta_curves.png")))
        spec = os.path.join(tmp, "sweep.yaml")
        pathlib.Path(spec).write_text(readme_spec(), encoding="utf-8")
        out = os.path.join(tmp, "sweep")
        sweep.run([spec, "--output", out, "--no-progress"], stdout=io.StringIO())
        table = pq.read_table(os.path.join(out, "results.parquet"))
        print(plot.plot_delta_curves(table, os.path.join(args.out, "sweep_delta.png")))
        print(plot.plot_epsilon_vs_sigma(table, os.path.join(args.out, "sweep_sigma.png"), 1e-5))
        rows = sorted((r for r in table.to_pylist() if r["direction"] == "both"),
                      key=lambda r: (r["sampler"], r["sigma"], r["method"], r["epsilon"]))
        print("| sampler | σ | method | guarantee | " + " | ".join(f"δ(ε={e:g})" for e in (1, 2, 4, 8)) + " |")
        by = {}
        for r in rows:
            by.setdefault((r["sampler"], r["sigma"], r["method"], r["guarantee"]), []).append(r)
        for (sampler, sigma, method, guarantee), group in by.items():
            values = [r["delta_upper"] if r["delta_upper"] is not None else r["delta_lower"] for r in group]
            print(f"| {sampler} | {sigma:g} | {method} | {guarantee} | " + " | ".join(f"{v:.3g}" for v in values) + " |")


if __name__ == "__main__":
    main()
