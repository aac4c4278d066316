"""Scale-out of the Beam certify job: shard counts x workers, per-shard overhead, merge cost, the model.

    python -m benchmarks.parallel [--samples 1000000] [--shard-counts auto,1,2,8,64,512] [--merge-shards 10000]
                                  [--sections baseline,startup,grid,merge,model]

The job is ``epscert certify --method importance`` (σ = 0.35, T = 1000, ε = 1,2,4,8, both directions,
no baselines: only sampling and merging are timed), run through ``pipelines.certify.run`` exactly as
the CLI runs it, on 1 worker (FnApiRunner in_memory) and 2 workers (multi_processing). Printed:

- baseline: the one-core time t_1 of the same samples in this process (``epscert.api``, one shard);
- startup: the wall time of a one-shard job of a few hundred samples on each runner (start-up);
- grid: wall time for each shard count on 1 and 2 workers, parallel efficiency T_1(S) / (2·T_2(S))
  and t_1 / (2·T_2(S)), and whether every run's rows are identical (every column but wall_seconds);
  the per-shard overhead is the least-squares slope of (T - sampling) against the rounds ⌈S/W⌉;
- merge: CPU seconds to merge 10^4 shards' exact partial sums in process (``accumulator.merge`` and the
  CombineFn's ``add_input``) and by the ``CombinePerKey(MergeAccumulatorsFn)`` Beam runs (its pipeline
  minus the same pipeline without it; launcher and worker processes);
- model: ``epscert.results.scaling.wall_time`` with the constants measured above, against every
  measured wall time (ratio), then the extrapolation tables of docs/scaling.md.

BLAS/OpenMP threads are pinned to 1 so a worker is one core. The machine's load average is printed
before and after: other jobs share it. No assertions.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import contextlib  # noqa: E402
import dataclasses  # noqa: E402
import io  # noqa: E402
import math  # noqa: E402
import pickle  # noqa: E402
import platform  # noqa: E402
import resource  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from epscert.api import certify_config  # noqa: E402
from epscert.montecarlo import accumulator as acc_mod  # noqa: E402
from epscert.results import scaling  # noqa: E402
from epscert.montecarlo.shard import plan_shards, run_shard  # noqa: E402
from epscert.config import DEFAULT_ERROR_PROB, CertifyConfig, Method  # noqa: E402
from pipelines import certify  # noqa: E402
from transforms.certify import sort_rows  # noqa: E402

RUNNERS = (
    ("in_memory", 1, []),
    ("multi_processing", 2, ["--direct_num_workers=2", "--direct_running_mode=multi_processing"]),
)
SECTIONS = ("baseline", "startup", "grid", "merge", "model")
#: Assumed, not measured: start-up of a cluster job (Dataflow: VMs booted and the SDK container
#: pulled, typically 2 to 4 minutes, independent of W while the pool starts in parallel).
CLUSTER_STARTUP_SECONDS = 180.0
#: Samples per second per core of the matrix-mechanism (BandMF, n = 2000, b = 100, 16 bands) naive
#: sampler, measured by ``python -m benchmarks.matrix`` on this machine (benchmarks/results/matrix.log,
#: REMOVE direction, end to end through epscert.certify).
MATRIX_RATE = 437_273.0
WORKER_COUNTS = (1, 2, 10, 100, 1000)


def machine() -> str:
    cpu = platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return f"{cpu}; {os.cpu_count()} cores visible; python {platform.python_version()}"


def load() -> str:
    return "load average {:.2f} / {:.2f} / {:.2f} (1 / 5 / 15 min)".format(*os.getloadavg())


def comparable(rows: list[dict]) -> list[dict]:
    return [dict(r, wall_seconds=0.0) for r in sort_rows(rows)]


def job_args(args, samples: int, shards: str) -> list[str]:
    return ["--sampler", "balls_and_bins", "--sigma", args.sigma, "--steps", args.steps, "--epsilons", "1,2,4,8",
            "--method", "importance", "--samples", str(samples), "--shards", shards, "--seed", "0",
            "--no-baselines", "--no-progress", "--format", "json"]


def run_job(argv: list[str], tmp: str, name: str) -> tuple[float, list[dict], int, float]:
    """(wall seconds, comparable rows, shard count, CPU seconds of launcher and workers) of one certify job."""
    out = os.path.join(tmp, f"{name}.parquet")
    shards = certify.prepare([*argv, "--output", out]).config.shards
    cpu, start = cpu_seconds(), time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        certify.run([*argv, "--output", out])
    wall = time.perf_counter() - start
    return wall, comparable(pq.read_table(out).to_pylist()), shards, cpu_seconds() - cpu


def one_core(config: CertifyConfig) -> tuple[float, list[dict]]:
    start = time.perf_counter()
    rows = certify_config(dataclasses.replace(config, shards=1)).to_pylist()
    return time.perf_counter() - start, comparable(rows)


def fit_overhead(points: list[tuple[int, int, float]], t1: float) -> tuple[float, float]:
    """Least squares of T - ⌈S/W⌉·t_1/S = a + b·⌈S/W⌉ over (S, W, T): (a, b) = (start-up, per-shard cost)."""
    rounds = np.array([-(-s // w) for s, w, _ in points], dtype=float)
    y = np.array([t - r * t1 / s for (s, w, t), r in zip(points, rounds)])
    design = np.stack([np.ones_like(rounds), rounds], axis=1)
    (a, b), *_ = np.linalg.lstsq(design, y, rcond=None)
    return float(a), float(b)


def synthetic_accumulators(template: acc_mod.Accumulator, count: int) -> list[acc_mod.Accumulator]:
    """``count`` distinct accumulators shaped like ``template`` (each integer sum shifted by the index)."""
    out = []
    for i in range(count):
        parts = tuple((d, acc_mod.DirectionSums(s.count, tuple(v + i for v in s.sum_y), tuple(v + i for v in s.sum_y2),
                                                s.unit_log2, tuple(v + i for v in s.extra))) for d, s in template.parts)
        out.append(acc_mod.Accumulator(parts, template.tags))
    return out


def cpu_seconds() -> float:
    """CPU seconds of this process and of its reaped children (the multi_processing workers)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def merge_in_beam(accs: list[acc_mod.Accumulator], flags: list[str], combine: bool) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of Create(10^4 sums) -> Reshuffle -> [CombinePerKey(merge)] -> Map."""
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions
    from apache_beam.runners.portability.fn_api_runner import FnApiRunner

    from transforms.shards import MergeAccumulatorsFn

    expected = sum(a.parts[0][1].count for a in accs)

    def check(item):
        _, (acc, _) = item
        if acc.parts[0][1].count != expected:
            raise RuntimeError(f"merged {acc.parts[0][1].count} samples, expected {expected}")
        return 1

    cpu, start = cpu_seconds(), time.perf_counter()
    with beam.Pipeline(runner=FnApiRunner(), options=PipelineOptions(flags)) as p:
        items = p | beam.Create([("k", (a, 1.0)) for a in accs]) | beam.Reshuffle()
        if combine:
            _ = items | beam.CombinePerKey(MergeAccumulatorsFn()) | beam.Map(check)
        else:
            _ = items | beam.Map(lambda item: 1)
    return cpu_seconds() - cpu, time.perf_counter() - start


def best(fn, repeats: int = 3) -> float:
    """Least CPU seconds (time.process_time) of ``repeats`` calls of ``fn``."""
    out = []
    for _ in range(repeats):
        start = time.process_time()
        fn()
        out.append(time.process_time() - start)
    return min(out)


def merge_section(config: CertifyConfig, count: int) -> dict:
    """CPU seconds per accumulator merged, in process and in Beam, for loss sums and conditional sums."""
    from transforms.shards import MergeAccumulatorsFn

    cond = CertifyConfig(sampler="balls_and_bins", sigma=0.5, steps=200, epsilons=(1.0, 2.0, 4.0, 8.0),
                         methods=("conditional",), samples=64, seed=0)
    templates = {
        "importance (4 ε x 2 directions, units 2^-52)": run_shard(plan_shards(dataclasses.replace(config, samples=64),
                                                                             Method.IMPORTANCE, 1)[0]),
        "conditional (4 ε x 2 directions + 192 truncated sums, units 2^-1126)": run_shard(
            plan_shards(cond, Method.CONDITIONAL, 1)[0]),
    }
    print(f"\n### Merging {count} shards' exact partial sums (CPU seconds; Beam: best of 2, launcher + workers)\n")
    print("| sums | pickled bytes per shard | in process: accumulator.merge | in process: MergeAccumulatorsFn "
          "add_input one by one | Beam in_memory: pipeline without combine, combine added | Beam 2 workers "
          "(multi_processing): without, combine added |")
    print("|---|---|---|---|---|---|")
    per = {}
    for name, template in templates.items():
        accs = synthetic_accumulators(template, count)
        t_merge = best(lambda: acc_mod.merge(accs))
        fn = MergeAccumulatorsFn()

        def fold():
            acc = fn.create_accumulator()
            for a in accs:
                acc = fn.add_input(acc, (a, 1.0))
            assert acc[0].parts[0][1].count == count * template.parts[0][1].count

        t_fn = best(fold)
        cells = []
        for _, _, flags in RUNNERS:
            with_c = min((merge_in_beam(accs, flags, True) for _ in range(2)), key=lambda cw: cw[0])
            without = min((merge_in_beam(accs, flags, False) for _ in range(2)), key=lambda cw: cw[0])
            cells.append(f"{without[0]:.2f} s CPU ({without[1]:.1f} s wall), {with_c[0] - without[0]:+.2f} s CPU "
                         f"({with_c[1] - without[1]:+.1f} s wall)")
        print(f"| {name} | {len(pickle.dumps(template)):,} | {t_merge:.3f} s | {t_fn:.3f} s | {cells[0]} | {cells[1]} |")
        per[name] = max(t_merge, t_fn) / count
    return {"merge_per_acc": per[next(iter(templates))], "merge_worst": max(per.values())}


def model_rows(t1: float, startup: dict, overhead: float, merge: float, measured: dict) -> None:
    print("\n### The model against the measurements\n")
    print("T(W, S) = t_start(W) + ⌈S/W⌉·(t_1/S + c_shard) + (⌈S/W⌉ + min(S, W))·c_merge, with "
          f"t_1 = {t1:.1f} s (one core, measured), c_shard = {overhead * 1e3:.1f} ms (measured), "
          f"c_merge = {merge * 1e6:.1f} µs (measured), t_start = "
          + ", ".join(f"{startup[w]:.2f} s ({w} worker{'s' if w > 1 else ''})" for w in sorted(startup)) + "\n")
    print("| shards | workers | measured s | model s | model / measured |")
    print("|---|---|---|---|---|")
    for (s, w), wall in sorted(measured.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        t = scaling.wall_time(t1, s, w, startup[w], overhead, merge)
        print(f"| {s} | {w} | {wall:.1f} | {t.total:.1f} | {t.total / wall:.2f} |")


def extrapolate(name: str, samples: float, rate: float, overhead: float, merge: float, startup_local: dict,
                note: str) -> None:
    print(f"\n### {name}\n\n{note}\n")
    print("| W | shards | start-up s | sampling s | shard overhead s | merge s | total | efficiency | dominant |")
    print("|---|---|---|---|---|---|---|---|---|")
    for w in WORKER_COUNTS:
        startup = startup_local.get(w, CLUSTER_STARTUP_SECONDS)
        (row,) = scaling.scaling_table(samples, rate, (w,), startup, overhead, merge)
        print(f"| {w} | {row['shards']} | {row['startup']:.0f} | {row['sampling']:.4g} | {row['shard_overhead']:.3g} "
              f"| {row['merge']:.2g} | {fmt(row['total'])} | {row['efficiency']:.0%} | {row['dominant']} |")


def fmt(seconds: float) -> str:
    for unit, size in (("d", 86400.0), ("h", 3600.0), ("min", 60.0)):
        if seconds >= size:
            return f"{seconds / size:.3g} {unit}"
    return f"{seconds:.3g} s"


def naive_rate(steps: int, samples: int = 20_000) -> float:
    """Samples (both directions) per second on one core, Balls-and-Bins naive at T = ``steps``."""
    config = CertifyConfig(sampler="balls_and_bins", sigma=0.8, steps=steps, epsilons=(1.0,), methods=("naive",),
                           samples=samples, seed=0)
    start = time.perf_counter()
    run_shard(plan_shards(config, Method.NAIVE, 1)[0])
    return samples / (time.perf_counter() - start)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", default="1000000")
    parser.add_argument("--sigma", default="0.35")
    parser.add_argument("--steps", default="1000")
    parser.add_argument("--shard-counts", default="auto,1,2,8,64,512", help="comma-separated counts or 'auto'")
    parser.add_argument("--merge-shards", type=int, default=10_000)
    parser.add_argument("--sections", default=",".join(SECTIONS), help=f"comma-separated subset of {SECTIONS}")
    parser.add_argument("--matrix-rate", type=float, default=MATRIX_RATE,
                        help="samples/s per core of the matrix-mechanism sampler for table (b) (default: "
                             "%(default)g, measured by benchmarks.matrix)")
    args = parser.parse_args(argv)
    sections = set(args.sections.split(","))
    samples = int(args.samples)
    config = certify.prepare(job_args(args, samples, "1")).config
    print(f"Machine: {machine()}; {load()} at the start")
    print(f"Job: balls_and_bins, sigma={config.sigma}, T={config.steps}, importance, {samples} samples per direction "
          "(both directions), 4 epsilons, no baselines\n")
    t1, rows0 = 0.0, []
    if sections & {"baseline", "grid"}:
        t1, rows0 = one_core(config)
        print(f"One core, in process (epscert.api, 1 shard): t_1 = {t1:.1f} s ({samples / t1:,.0f} samples/s)")
    startup: dict[int, float] = {}
    measured: dict[tuple[int, int], float] = {}
    overhead, merge = scaling.SHARD_OVERHEAD_SECONDS, scaling.MERGE_SECONDS
    with tempfile.TemporaryDirectory(prefix="epscert-bench-") as tmp:
        if "startup" in sections:
            tiny = 500
            t_tiny, _ = one_core(dataclasses.replace(config, samples=tiny))
            for name, workers, flags in RUNNERS:
                wall, _, _, _ = run_job([*job_args(args, tiny, "1"), *flags], tmp, f"tiny-{workers}")
                startup[workers] = wall - t_tiny
            print("Start-up (a one-shard job of 500 samples, minus its sampling): "
                  + ", ".join(f"{startup[w]:.2f} s on {w} worker{'s' if w > 1 else ''}" for w in sorted(startup)))
        if "grid" in sections:
            print("\n### Wall time by shard count\n")
            print("| shards (1 worker / 2 workers) | 1 worker s | 2 workers s | T_1(S) / (2·T_2(S)) | t_1 / (2·T_2(S)) "
                  "| CPU s, 1 / 2 workers |")
            print("|---|---|---|---|---|---|")
            identical = True
            fit_points = []
            for shards in args.shard_counts.split(","):
                walls, counts, cpus = {}, {}, {}
                for name, workers, flags in RUNNERS:
                    wall, rows, count, cpu = run_job([*job_args(args, samples, shards), *flags], tmp,
                                                     f"{shards}-{workers}")
                    walls[workers], counts[workers], cpus[workers] = wall, count, cpu
                    identical &= rows == rows0
                    if shards != "auto":
                        measured[count, workers] = wall
                        fit_points.append((count, workers, wall - startup.get(workers, 0.0)))
                label = shards if shards != "auto" else f"auto ({counts[1]} / {counts[2]})"
                print(f"| {label} | {walls[1]:.1f} | {walls[2]:.1f} | {walls[1] / (2 * walls[2]):.0%} "
                      f"| {t1 / (2 * walls[2]):.0%} | {cpus[1]:.1f} / {cpus[2]:.1f} |")
            print(f"\nRows identical in every run and equal to the one-core in-process run (every column but "
                  f"wall_seconds): {identical}")
            if fit_points and startup:
                _, slope = fit_overhead(fit_points, t1)
                overhead = max(slope, 0.0)  # a cost is >= 0: a negative slope is noise
                print(f"Per-shard overhead (slope of T - t_start - sampling against rounds ⌈S/W⌉): "
                      f"{slope * 1e3:.1f} ms per shard" + ("" if slope >= 0 else " (below the noise: 0 in the model)"))
    if "merge" in sections:
        merges = merge_section(config, args.merge_shards)
        merge = merges["merge_per_acc"]
        print(f"\nIn-process merge: {merge * 1e6:.1f} µs per accumulator of loss sums "
              f"({merge * args.merge_shards:.2f} s CPU for {args.merge_shards} shards), "
              f"{merges['merge_worst'] * 1e6:.1f} µs per conditional accumulator; c_merge = the former")
    if "model" in sections:
        if measured and startup:
            model_rows(t1, startup, overhead, merge, measured)
        if not startup:  # not measured in this run: the constants of epscert.results.scaling
            startup = {1: scaling.STARTUP_SECONDS["in_memory"], 2: scaling.STARTUP_SECONDS["multi_processing"]}
        beta = DEFAULT_ERROR_PROB
        n_naive = math.log(1 / beta) / 1e-8
        rate = naive_rate(1000)
        extrapolate("(a) Balls-and-Bins naive certificate at δ = 1e-8",
                    n_naive, rate, overhead, merge, startup,
                    f"N = log(1/β)/δ = {n_naive:.3g} samples per direction (β = {beta}), T = 1000, rate "
                    f"{rate:,.0f} samples/s per core (both directions, measured in this run). W = 1, 2: the local "
                    f"runners' measured start-up; W >= 10: {CLUSTER_STARTUP_SECONDS:.0f} s ASSUMED (a cluster's VMs, "
                    "not measured here). Shards: what --shards auto picks for W.")
        source = "measured by benchmarks.matrix, naive, 16 bands" if args.matrix_rate == MATRIX_RATE else "given"
        rate_note = f"rate {args.matrix_rate:g} samples/s per core ({source})"
        for n_matrix in (1e9, 1e10):
            extrapolate(f"(b) Matrix-mechanism certificate (BandMF n = 2000, b = 100, 16 bands), N = {n_matrix:.0e}",
                        n_matrix, args.matrix_rate, overhead, merge, startup,
                        f"{rate_note}; epscert.results.scaling.scaling_table(samples, rate_per_core, ...) computes "
                        "the rows. Start-up as in (a).")
    print(f"\n{load()} at the end")


if __name__ == "__main__":
    main()
