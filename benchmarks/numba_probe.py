"""Would numba earn its place? Its Generator draws against numpy's, on the same random stream.

    PYTHONPATH=/path/with/numba python -m benchmarks.numba_probe

numba (not a dependency of epscert) compiles numpy's own Generator algorithms (ziggurat
normals, exponentials, Marsaglia-Tsang gammas) against the same bit generator, so a jitted
fill loop returns bit-identical numbers and leaves the generator in the same state. This
script checks that identity and times, on one core: the raw fills, and the naive
Balls-and-Bins REMOVE kernel with numpy's fill versus the numba fill (everything else numpy,
so the losses must be bit-identical). Prints "numba not importable" and exits otherwise.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import numpy as np  # noqa: E402

from benchmarks.timing import best_of  # noqa: E402
from epscert.dpsgd.gauss import logsumexp_rows  # noqa: E402

ELEMENTS = 2**20


def main() -> None:
    try:
        import numba
    except ImportError:
        print("numba not importable: nothing to probe")
        return

    @numba.njit(cache=False)
    def fill_normal(rng, out):
        flat = out.reshape(-1)
        for i in range(flat.size):
            flat[i] = rng.standard_normal()
        return out

    @numba.njit(cache=False)
    def fill_exponential(rng, out):
        flat = out.reshape(-1)
        for i in range(flat.size):
            flat[i] = rng.standard_exponential()
        return out

    sigma, steps = 0.35, 1000
    n = ELEMENTS // steps

    def naive_remove(rng, fill):
        a = fill(rng, np.empty((n, steps)))
        a *= 1.0 / sigma
        a[:, 0] += 1.0 / sigma**2
        return logsumexp_rows(a)

    numpy_normal = lambda rng, out: rng.standard_normal(out=out)  # noqa: E731
    numpy_exponential = lambda rng, out: rng.standard_exponential(out=out)  # noqa: E731
    same = all(
        np.array_equal(numpy_normal(np.random.default_rng(s), np.empty(ELEMENTS)),
                       fill_normal(np.random.default_rng(s), np.empty(ELEMENTS)))
        and np.array_equal(numpy_exponential(np.random.default_rng(s), np.empty(ELEMENTS)),
                           fill_exponential(np.random.default_rng(s), np.empty(ELEMENTS)))
        and np.array_equal(naive_remove(np.random.default_rng(s), numpy_normal),
                           naive_remove(np.random.default_rng(s), fill_normal))
        for s in range(3)
    )
    print(f"# numba {numba.__version__}, numpy {np.__version__}; bit-identical draws and losses: {same}")
    rng = np.random.default_rng(0)
    out = np.empty(ELEMENTS)
    rows = [
        ("standard_normal fill", lambda: numpy_normal(rng, out), lambda: fill_normal(rng, out), ELEMENTS),
        ("standard_exponential fill", lambda: numpy_exponential(rng, out), lambda: fill_exponential(rng, out),
         ELEMENTS),
        ("naive REMOVE kernel, T=1000", lambda: naive_remove(rng, numpy_normal),
         lambda: naive_remove(rng, fill_normal), n * steps),
    ]
    print("| what | numpy ns/el | numba fill ns/el | speed-up |")
    print("|---|---|---|---|")
    for name, slow, fast, count in rows:
        a, b = best_of(slow, 7) / count * 1e9, best_of(fast, 7) / count * 1e9
        print(f"| {name} | {a:.2f} | {b:.2f} | {a / b:.2f}x |")


if __name__ == "__main__":
    main()
