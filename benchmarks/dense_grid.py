"""A dense ε grid (issue 35 item 5): CPU time and peak memory of ``certify`` against the grid's size.

``certify(sigma=1, steps=50, samples=1000, epsilons=<k values>)`` for k = 1, 100, 1000, 14001 (the
default method, and the analytic baselines per method). Each run is in a fresh process, so ru_maxrss
is that run's peak resident memory; CPU is ``time.process_time`` of the call alone. Run:

    PYTHONPATH=$PWD python -m benchmarks.dense_grid [--methods auto,pld_upper,...] [--sizes 1,100,...]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

CHILD = r"""
import json, resource, sys, time
import numpy as np
import epscert
k, method, sampler = int(sys.argv[1]), sys.argv[2], sys.argv[3]
eps = np.linspace(0.0, 14.0, k).tolist() if k > 1 else [1.0]
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0 = time.process_time()
w0 = time.perf_counter()
table = epscert.certify(sampler=sampler, sigma=1.0, steps=50, samples=1000, epsilons=eps, method=method)
cpu = time.process_time() - t0
wall = time.perf_counter() - w0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"k": k, "method": method, "sampler": sampler, "cpu_s": cpu, "wall_s": wall,
                  "rows": table.num_rows, "peak_mib": peak / 1024, "import_mib": before / 1024}))
"""


def run_one(k: int, method: str, sampler: str) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, str(k), method, sampler], check=True,
                         capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,100,1000,14001")
    parser.add_argument("--methods", default="balls_and_bins:auto")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"{'sampler':<16}{'method':<18}{'k':>7}{'rows':>8}{'cpu s':>9}{'wall s':>9}{'peak MiB':>10}"
          f"{'x one ε':>9}")
    for spec in args.methods.split(","):
        sampler, method = spec.split(":")
        base = None
        for k in sizes:
            r = run_one(k, method, sampler)
            base = r["cpu_s"] if base is None else base
            print(f"{sampler:<16}{method:<18}{k:>7}{r['rows']:>8}{r['cpu_s']:>9.2f}{r['wall_s']:>9.2f}"
                  f"{r['peak_mib']:>10.0f}{r['cpu_s'] / base:>9.1f}", flush=True)


if __name__ == "__main__":
    main()
