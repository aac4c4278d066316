"""Wall time of one Beam certify job on 1 worker (in_memory) and 2 workers (multi_processing).

    python -m benchmarks.parallel [--samples 1000000] [--sigma 0.35] [--steps 1000] [--shards auto]

The job is ``epscert certify --method importance`` (no baselines, so only sampling and merging
are timed), run through ``pipelines.certify.run`` exactly as the CLI runs it, with the same
shard layout on both runners; the in-process API (``epscert.api.certify_config``) is timed too,
for the pipeline overhead. Parallel efficiency = T(1 worker) / (2 x T(2 workers)). Prints a
Markdown table; no assertions. BLAS/OpenMP threads are pinned to 1 so a worker is one core.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import contextlib  # noqa: E402
import io  # noqa: E402
import platform  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import pyarrow.parquet as pq  # noqa: E402

from epscert.api import certify_config  # noqa: E402
from pipelines import certify  # noqa: E402
from transforms.certify import sort_rows  # noqa: E402

RUNNERS = (
    ("FnApiRunner in_memory", 1, []),
    ("FnApiRunner multi_processing", 2, ["--direct_num_workers=2", "--direct_running_mode=multi_processing"]),
)


def machine() -> str:
    cpu = platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return f"{cpu}; {os.cpu_count()} cores visible; python {platform.python_version()}"


def comparable(rows: list[dict]) -> list[dict]:
    return [dict(r, wall_seconds=0.0) for r in sort_rows(rows)]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", default="1000000")
    parser.add_argument("--sigma", default="0.35")
    parser.add_argument("--steps", default="1000")
    parser.add_argument("--shards", default="auto", help="shard count or 'auto' (epscert.montecarlo.shard.auto_shards)")
    parser.add_argument("--skip-api", action="store_true", help="do not time the in-process API")
    args = parser.parse_args(argv)
    job_args = ["--sampler", "balls_and_bins", "--sigma", args.sigma, "--steps", args.steps,
                "--epsilons", "1,2,4,8", "--method", "importance", "--samples", args.samples,
                "--shards", args.shards, "--seed", "0", "--no-baselines", "--no-progress", "--format", "json"]
    config = certify.prepare(job_args).config
    samples = config.samples
    print(f"Machine: {machine()}")
    print(f"Job: balls_and_bins, sigma={config.sigma}, T={config.steps}, importance, {samples} samples "
          f"per direction (both directions), {config.shards} shards, 4 epsilons\n")
    print("| run | workers | wall s | samples/s (per direction) |")
    print("|---|---|---|---|")
    walls: dict[int, float] = {}
    tables = []
    if not args.skip_api:
        start = time.perf_counter()
        api_rows = certify_config(config).to_pylist()
        wall = time.perf_counter() - start
        tables.append(comparable(api_rows))
        print(f"| in-process API (epscert.api, no Beam) | 1 | {wall:.1f} | {samples / wall:,.0f} |")
    with tempfile.TemporaryDirectory(prefix="epscert-bench-") as tmp:
        for name, workers, flags in RUNNERS:
            out = os.path.join(tmp, f"{workers}.parquet")
            start = time.perf_counter()
            with contextlib.redirect_stdout(io.StringIO()):
                certify.run([*job_args, "--output", out, *flags])
            wall = time.perf_counter() - start
            walls[workers] = wall
            tables.append(comparable(pq.read_table(out).to_pylist()))
            print(f"| Beam certify, {name} | {workers} | {wall:.1f} | {samples / wall:,.0f} |")
    efficiency = walls[1] / (2 * walls[2])
    print(f"\nSpeed-up 2 workers vs 1: {walls[1] / walls[2]:.2f}x; parallel efficiency T1/(2*T2) = {efficiency:.0%}")
    print(f"Rows identical across runs (every column but wall_seconds): {all(t == tables[0] for t in tables)}")


if __name__ == "__main__":
    main()
