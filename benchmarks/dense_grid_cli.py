"""The issue's own command on a dense ε grid (issue 35 item 5): CPU and peak memory of
``epscert certify --sigma 1 --steps 50 --samples 1000 --epsilons <k values in [0, 14]>`` (with its baselines,
the table printed to /dev/null), one fresh process per run, for one or more source trees in the same run.

    PYTHONPATH=$PWD python -m benchmarks.dense_grid_cli [--sizes 1,1000,14001] [--trees base=/path,new=.]

CPU is the child's user + sys time and peak memory its ru_maxrss (``os.wait4``: that child's own usage). Runs alternate between trees size by size, so that a change of the machine's load falls on both.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

import numpy as np


def run_one(tree: str, k: int) -> dict:
    eps = ",".join(repr(e) for e in (np.linspace(0.0, 14.0, k).tolist() if k > 1 else [1.0]))
    env = dict(os.environ, PYTHONPATH=os.path.abspath(tree))
    with open(os.devnull, "w") as sink:
        child = subprocess.Popen([sys.executable, "-m", "pipelines.cli", "certify", "--sigma", "1", "--steps", "50",
                                  "--samples", "1000", "--epsilons", eps, "--no-progress"], cwd=os.path.abspath(tree),
                                 env=env, stdout=sink, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(child.pid, 0)  # this child's own resource usage
        child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode:
        raise SystemExit(f"certify failed in {tree} at k={k} (exit {child.returncode})")
    return {"cpu_s": usage.ru_utime + usage.ru_stime, "peak_mib": usage.ru_maxrss / 1024}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,1000,14001")
    parser.add_argument("--trees", default="new=.")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    trees = dict(t.split("=", 1) for t in args.trees.split(","))
    base: dict[str, float] = {}
    print(f"{'tree':<8}{'k':>7}{'cpu s':>9}{'peak MiB':>10}{'x one ε':>9}", flush=True)
    for k in sizes:
        for name, path in trees.items():
            r = run_one(path, k)
            base.setdefault(name, r["cpu_s"])
            print(f"{name:<8}{k:>7}{r['cpu_s']:>9.2f}{r['peak_mib']:>10.0f}{r['cpu_s'] / base[name]:>9.1f}", flush=True)


if __name__ == "__main__":
    main()
