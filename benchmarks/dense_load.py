"""Issue 35 item 3: checking a dense strategy file, blockwise (now) against whole-matrix checks (before).

    python -m benchmarks.dense_load [--n 10000] [--dir /tmp] [--repeats 2]

Writes an all-zero n x n float64 ``.npy`` under ``--dir`` (8 n² bytes: 800 MB at n = 10^4; removed at
the end) and refuses it, each attempt in a fresh process so that its peak memory is its own:

- ``blockwise``: :func:`epscert.matrix.strategies.dense_strategy` (blocks of rows read, converted and
  checked; an all-zero block is neither checked further nor stored);
- ``whole``: the checks as they were before, on the whole matrix (a float64 copy, then ``isfinite``,
  ``< 0``, ``triu`` and ``> 0`` over all of it), reproduced here for the comparison;
- ``import``: the interpreter with epscert imported and nothing else (the floor of the peak).

Prints wall and CPU seconds (``time.process_time``) and the peak resident memory (``ru_maxrss``).
Wall time on a shared machine varies with its load; CPU seconds and memory do much less.
No figure is asserted anywhere.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

CHILD = r"""
import resource, sys, time
import numpy as np
from epscert.matrix.strategies import dense_strategy

def whole(path):
    head = np.load(path, mmap_mode="r", allow_pickle=False)
    matrix = np.array(head, dtype=np.float64)
    if not np.all(np.isfinite(matrix)) or np.any(matrix < 0) or np.any(np.triu(matrix, 1) != 0):
        raise ValueError("bad entries")
    if not np.any(matrix > 0):
        raise ValueError("all zeros")

kind, path = sys.argv[1], sys.argv[2]
wall, cpu = time.perf_counter(), time.process_time()
outcome = "accepted" if kind != "import" else "-"
try:
    if kind == "blockwise":
        dense_strategy(path)
    elif kind == "whole":
        whole(path)
except ValueError as err:
    outcome = "refused: " + str(err)[:60]
print(f"{time.perf_counter() - wall:.2f} {time.process_time() - cpu:.2f} "
      f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} {outcome}")
"""


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--dir", default=tempfile.gettempdir())
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args(argv)
    handle, path = tempfile.mkstemp(suffix=".npy", dir=args.dir)
    os.close(handle)
    try:
        zeros = np.lib.format.open_memmap(path, mode="w+", dtype=np.float64, shape=(args.n, args.n))
        zeros.flush()
        del zeros
        print(f"all-zero {args.n} x {args.n} float64 file ({os.path.getsize(path) / 1e6:.0f} MB): {path}")
        print("| check | wall s | CPU s | peak RSS MiB | outcome |\n|---|---|---|---|---|")
        for _ in range(args.repeats):
            for kind in ("import", "whole", "blockwise"):
                out = subprocess.run([sys.executable, "-c", CHILD, kind, path], capture_output=True, text=True,
                                     check=True).stdout.split(maxsplit=3)
                print(f"| {kind} | {out[0]} | {out[1]} | {out[2]} | {out[3].strip()} |")
    finally:
        os.unlink(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
