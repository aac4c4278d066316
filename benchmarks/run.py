"""Issue-5 benchmark table: RNG+exp limit, throughput, efficiency, peak RSS, parallel, time-to-certify.

    python -m benchmarks.run [--quick] [--baseline-rev REV] [--sections limit,throughput,...]

Every figure comes from this one run on this machine, on one core (the BLAS/OpenMP thread
variables are forced to 1 before numpy loads). Timings are best-of-``--reps``, because other
jobs share the machine. ``--baseline-rev REV`` runs the throughput cases a second time, in a
subprocess, on a copy of the working tree whose kernel files (:data:`KERNEL_FILES`) are taken
from git revision REV: the "before" column of each tuned kernel, measured in the same run.
The scipy reference rows (:mod:`benchmarks.scipy_reference`) are the issue's "before" baseline.

A "sample" is one draw of each direction (``direction='both'``); "ns/coord" is wall time per
sampled Gaussian coordinate (samples x 2 directions x T x E), accumulator work included.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from benchmarks import scipy_reference, timing  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
KERNEL_FILES = ("epscert/gauss.py", "epscert/orderstats.py", "epscert/samplers/balls_and_bins.py",
                "epscert/samplers/base.py", "epscert/exactsum.py", "epscert/accumulator.py")
EPS_GRID = (1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0)
SECTIONS = ("limit", "throughput", "rss", "parallel", "certify", "sizing")


def machine_line() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import scipy
    return (f"{cpu}; {os.cpu_count()} cores visible; python {platform.python_version()}, "
            f"numpy {np.__version__}, scipy {scipy.__version__}; 1 thread")


# -- the limit -----------------------------------------------------------------------------------
def limit_figures(reps: int) -> dict[str, float]:
    """ns per element of numpy's standard_normal and in-place exp, float64 and float32."""
    rng = np.random.default_rng(0)
    n = timing.LIMIT_ELEMENTS
    out = {}
    for dtype in (np.float64, np.float32):
        buf = np.empty(n, dtype=dtype)
        rng.standard_normal(dtype=dtype, out=buf)
        vals = buf.copy()
        name = np.dtype(dtype).name
        out[f"normal_{name}"] = timing.best_of(lambda: rng.standard_normal(dtype=dtype, out=buf), reps) / n * 1e9
        out[f"exp_{name}"] = timing.best_of(lambda: np.exp(vals, out=buf), reps) / n * 1e9
    out["limit"] = out["normal_float64"] + out["exp_float64"]
    out["limit_float32"] = out["normal_float32"] + out["exp_float32"]
    return out


def print_limit(lim: dict[str, float]) -> None:
    print("\n## The limit (numpy, one core, 2^20-element arrays)\n")
    print("| dtype | standard_normal ns/el | exp (in place) ns/el | limit ns/el |")
    print("|---|---|---|---|")
    for name in ("float64", "float32"):
        key = "limit" if name == "float64" else "limit_float32"
        print(f"| {name} | {lim['normal_' + name]:.2f} | {lim['exp_' + name]:.2f} | {lim[key]:.2f} |")


# -- throughput --------------------------------------------------------------------------------
def throughput_cases(quick: bool) -> list[dict]:
    """(label, method, T, σ, E) of every throughput row."""
    steps = (1000, 10_000) if quick else (1000, 10_000, 100_000)
    sigmas = (0.35,) if quick else (0.35, 0.8)
    cases = []
    for t in steps:
        for s in sigmas:
            for label, method, epochs in (("naive", "naive", 1), ("importance", "importance", 1),
                                          ("order stats", "order_stats", 1),
                                          ("combined", "importance_order_stats", 1),
                                          ("naive E=3", "naive", 3), ("order stats E=3", "order_stats", 3)):
                cases.append(dict(label=label, method=method, steps=t, sigma=s, epochs=epochs))
    return cases


def run_throughput(cases: list[dict], seconds: float, reps: int, reference: bool) -> list[dict]:
    """Samples/s of each case through ``shard.run_shard`` (and the scipy reference if asked)."""
    rows = []
    for case in cases:
        rows.append(dict(case, **timing.shard_throughput(case, EPS_GRID, seconds, reps)))
        if reference and case["epochs"] == 1 and case["method"] in ("naive", "importance"):
            kernel = (scipy_reference.naive_losses if case["method"] == "naive"
                      else scipy_reference.importance_losses)
            ref = dict(case, label=f"{case['label']} (scipy ref.)", reference=True)
            rows.append(dict(ref, **timing.reference_throughput(case, kernel, EPS_GRID, seconds, reps)))
    return rows


def baseline_throughput(rev: str, cases: list[dict], seconds: float, reps: int) -> list[dict]:
    """The same cases on the working tree with the kernel files of git revision ``rev``."""
    with tempfile.TemporaryDirectory(prefix="epscert-baseline-") as tmp:
        shutil.copytree(ROOT / "epscert", Path(tmp) / "epscert",
                        ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copytree(ROOT / "benchmarks", Path(tmp) / "benchmarks",
                        ignore=shutil.ignore_patterns("__pycache__"))
        for rel in KERNEL_FILES:
            text = subprocess.run(["git", "show", f"{rev}:{rel}"], cwd=ROOT, check=True,
                                  capture_output=True, text=True).stdout
            (Path(tmp) / rel).write_text(text)
        spec = Path(tmp) / "cases.json"
        spec.write_text(json.dumps(dict(cases=cases, seconds=seconds, reps=reps)))
        proc = subprocess.run([sys.executable, "-m", "benchmarks.run", "--child-throughput", str(spec)],
                              cwd=tmp, check=True, capture_output=True, text=True,
                              env=dict(os.environ, PYTHONPATH=tmp))
        return json.loads(proc.stdout.strip().splitlines()[-1])


def best_rows(old: list[dict], new: list[dict]) -> list[dict]:
    """Per case (same label, T, σ, E), the row with the higher rate: best-of across rounds."""
    if not old:
        return new
    key = lambda r: (r["label"], r["steps"], r["sigma"], r["epochs"])  # noqa: E731
    prev = {key(r): r for r in old}
    return [max(r, prev.get(key(r), r), key=lambda x: x["samples_per_s"]) for r in new]


def print_throughput(rows: list[dict], before: list[dict] | None, limit: float) -> None:
    print("\n## Throughput (one core, both directions, ε grid of 8, R = default orders ≈ 150)\n")
    head = "| estimator | T | σ | E | samples/s | ns/coord | µs/sample·dir | efficiency |"
    sep = "|---|---|---|---|---|---|---|---|"
    if before is not None:
        head += " before samples/s | speed-up |"
        sep += "---|---|"
    print(head)
    print(sep)
    old = {(r["label"], r["steps"], r["sigma"], r["epochs"]): r for r in (before or [])}
    for r in rows:
        eff = (f"{limit / r['ns_per_coord']:.0%}" if r["method"] in ("naive", "importance") and r["epochs"] == 1
               else "-")
        line = (f"| {r['label']} | {r['steps']:g} | {r['sigma']:g} | {r['epochs']} | {r['samples_per_s']:.4g} | "
                f"{r['ns_per_coord']:.3g} | {r['us_per_sample_dir']:.3g} | {eff} |")
        if before is not None:
            b = old.get((r["label"], r["steps"], r["sigma"], r["epochs"]))
            line += (f" {b['samples_per_s']:.4g} | {r['samples_per_s'] / b['samples_per_s']:.2f}x |" if b
                     else " - | - |")
        print(line)
    print("\nefficiency = (normal + exp limit, ns) / (achieved ns per coordinate), naive and importance only."
          " order-statistic rows: cost per sample is what matters (independent of T).")


# -- peak RSS ----------------------------------------------------------------------------------
RSS_CASES_QUICK = (("order_stats", "1,4,1", 100_000), ("order_stats", "1,4,1", 10_000_000))
RSS_CASES_FULL = RSS_CASES_QUICK + (("naive", None, 10_000), ("naive", None, 1_000_000))


def print_rss(quick: bool) -> None:
    print("\n## Peak RSS (T = 1000, σ = 0.35, REMOVE only, one shard, ε grid of 8; one child process each)\n")
    print("| method | ranks | m | seconds | peak RSS MiB (os.wait4 ru_maxrss) | peak RSS MiB while sampling |")
    print("|---|---|---|---|---|---|")
    for method, orders, m in (("none", None, 0),) + (RSS_CASES_QUICK if quick else RSS_CASES_FULL):
        rss, hwm, secs = timing.child_rss(["--child-rss", method, orders or "-", str(m)])
        label = "imports only" if method == "none" else method
        print(f"| {label} | {orders or ('-' if method == 'none' else 'all T')} | {m:.0e} | {secs:.1f} | "
              f"{rss:.0f} | {hwm:.0f} |")
    print("\n'while sampling' = VmHWM after resetting it once the imports are done (/proc/self/clear_refs);"
          " ru_maxrss includes the import peak (scipy, dp_accounting).")


# -- parallel ----------------------------------------------------------------------------------
def print_parallel(quick: bool) -> None:
    print("\n## Parallel efficiency of the Beam certify job (2 workers vs 1)\n")
    if not (ROOT / "benchmarks" / "parallel.py").exists() or quick:
        print("| parallel efficiency | see benchmarks/parallel.py (`python -m benchmarks.parallel`) |")
        return
    proc = subprocess.run([sys.executable, "-m", "benchmarks.parallel", "--skip-api"], cwd=ROOT,
                          capture_output=True, text=True, timeout=900)
    print(proc.stdout.strip() or f"benchmarks.parallel failed: {proc.stderr.strip()[-500:]}")


# -- time to certify ---------------------------------------------------------------------------
def print_certify(quick: bool) -> None:
    cap = 20.0 if quick else 120.0
    print(f"\n## Time to certify: σ = 0.35, T = 1000, one ε per grid, until UCB ≤ 1.1·mean "
          f"(both directions, β = 0.01; shards of doubling size, cap {cap:g} s per case)\n")
    print("| ε | method | δ mean | UCB | samples | seconds | outcome |")
    print("|---|---|---|---|---|---|---|")
    for eps in (4.0, 8.0):
        for method in ("naive", "importance", "importance_order_stats"):
            r = timing.time_to_certify(0.35, 1000, eps, method, cap)
            print(f"| {eps:g} | {method} | {r['delta']:.4e} | {r['ucb']:.4e} | {r['samples']:.3g} | "
                  f"{r['seconds']:.1f} | {r['outcome']} |")


# -- shard sizing ------------------------------------------------------------------------------
def print_sizing(rows: list[dict]) -> None:
    print("\n## Shard sizing constants (measured in this run)\n")
    coords = [r["ns_per_coord"] for r in rows if r["method"] in ("naive", "importance")
              and not r.get("reference")]
    ranks = [r["us_per_sample_dir"] * 1e3 / (r["ranks"] + 3) / r["epochs"] for r in rows
             if r["method"] in ("order_stats", "importance_order_stats")]
    if coords:
        print(f"- seconds per coordinate (naive/importance): median {np.median(coords) * 1e-9:.2e}, "
              f"max {max(coords) * 1e-9:.2e}")
    if ranks:
        print(f"- seconds per (rank + 3) of an order-statistic sample and epoch: median "
              f"{np.median(ranks) * 1e-9:.2e}, max {max(ranks) * 1e-9:.2e}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer cases, shorter timings (1-2 min)")
    parser.add_argument("--sections", default=",".join(SECTIONS), help=f"subset of {','.join(SECTIONS)}")
    parser.add_argument("--baseline-rev", default=None, help="git revision whose kernel files give 'before'")
    parser.add_argument("--reps", type=int, default=None, help="repetitions per timing (best-of)")
    parser.add_argument("--seconds", type=float, default=None, help="target seconds per timing")
    parser.add_argument("--rounds", type=int, default=2,
                        help="rounds of the throughput cases (after, before, after, ...); best rate kept")
    parser.add_argument("--child-throughput", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--child-rss", nargs=3, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child_throughput:
        spec = json.loads(Path(args.child_throughput).read_text())
        print(json.dumps(run_throughput(spec["cases"], spec["seconds"], spec["reps"], reference=False)))
        return
    if args.child_rss:
        timing.rss_child(*args.child_rss)
        return
    sections = set(args.sections.split(","))
    reps = args.reps or 3
    seconds = args.seconds or (0.25 if args.quick else 0.5)
    start = time.perf_counter()
    print(f"# epscert issue-5 benchmark ({'quick' if args.quick else 'full'}), "
          f"{time.strftime('%Y-%m-%d %H:%M')}")
    print(f"# machine: {machine_line()}")
    print(f"# timings: best of {reps} x {args.rounds} rounds, ~{seconds:g} s each; kernels of the working tree"
          + (f"; 'before' = kernel files of {args.baseline_rev}" if args.baseline_rev else ""))
    lim = limit_figures(reps)
    rows: list[dict] = []
    if "throughput" in sections or "sizing" in sections:
        cases = throughput_cases(args.quick)
        rows, before = [], None
        for _ in range(args.rounds):  # alternate after/before so that load bursts hit both alike
            again = limit_figures(reps)  # the limit too is best-of across the rounds
            lim = {k: min(v, again[k]) for k, v in lim.items()}
            lim["limit"] = lim["normal_float64"] + lim["exp_float64"]
            lim["limit_float32"] = lim["normal_float32"] + lim["exp_float32"]
            rows = best_rows(rows, run_throughput(cases, seconds, reps, reference=True))
            if args.baseline_rev:
                before = best_rows(before or [], baseline_throughput(args.baseline_rev, cases, seconds, reps))
        print_limit(lim)
        print_throughput(rows, before, lim["limit"])
    if "limit" in sections and not rows:
        print_limit(lim)
    if "rss" in sections:
        print_rss(args.quick)
    if "parallel" in sections:
        print_parallel(args.quick)
    if "certify" in sections:
        print_certify(args.quick)
    if "sizing" in sections:
        print_sizing(rows)
    print(f"\n# total {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
