"""Matrix mechanism (issue 23) on the JAX backend: samples/s against numpy on one core, one run.

    python -m benchmarks.gpu_matrix [--seconds S] [--sigma 4.8] [--bands 16] [--out benchmarks/results]

n = 2000 iterations, cycle length b = 100, banded Toeplitz c_col = binom(2i, i)/4^i (``--bands``),
REMOVE direction, ε in {3, 4}. For each estimator (naive losses, importance, conditional and tilted values)
it prints the samples/s of the JAX kernels on JAX's default device (the per-block call that the
shards make, host exponentiation and exact sums included) and of the numpy sampler on one core of
the same machine (threads forced to 1 before numpy loads), the ratio, the compile time, and a CLT
check of the two means (z-score; different streams). No timing is asserted anywhere.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import platform  # noqa: E402
import re  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
from scipy import special  # noqa: E402

EPS = (3.0, 4.0)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=4.0, help="least seconds per timed figure")
    parser.add_argument("--sigma", type=float, default=4.8)
    parser.add_argument("--bands", type=int, default=16)
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent / "results"))
    args = parser.parse_args(argv)
    import jax

    from epscert.montecarlo import accumulator as acc_mod
    from epscert.montecarlo.backends import jax_backend
    from epscert.matrix import jax_kernels as jax_matrix
    from epscert.matrix.loss_tilt import choose_order
    from epscert.matrix.values import MatrixValueSampler
    from epscert.matrix.pair import MatrixPair, MatrixPairSampler
    from epscert.config import Direction
    from epscert.rng import block_generator, stream_key_words
    from epscert.matrix.strategies import toeplitz_strategy

    i = np.arange(args.bands)
    strategy = toeplitz_strategy(special.comb(2 * i, i) / 4.0**i, 2000)
    pair = MatrixPair(strategy.gram(100), args.sigma)
    device = jax_backend.device_name()
    print(f"device: {device}; host: {platform.node()} {platform.processor() or platform.machine()}; jax {jax.__version__}; "
          f"n=2000 b=100 bands={args.bands} sigma={args.sigma}; REMOVE; float64")
    print("method       jax/s        numpy1core/s  ratio    compile_s  mean(eps=4) jax / numpy        z")
    rows = []
    words = stream_key_words(0, 1, 0, 0)
    d = Direction.REMOVE
    for method in ("naive", "importance", "conditional", "tilted"):
        order = choose_order(pair, EPS) if method == "tilted" else None
        sampler = (MatrixPairSampler(pair) if method == "naive"
                   else MatrixValueSampler(pair, method, min(EPS), order=order))
        budget = 1 << 20 if method != "conditional" else 1 << 16
        start = time.perf_counter()
        if method == "naive":
            run = lambda n: jax_matrix.naive_sums(sampler, d, words, n, EPS)  # noqa: E731
        else:
            def run(n):
                sums = acc_mod.ValueSums(len(EPS), 1)
                for y in jax_matrix.value_blocks(sampler, d, words, n, EPS):
                    sums.add(y, y[:1])
                return sums.fold_into(acc_mod.create((d,), len(EPS), 1126, 1), d)[d]
        run(budget)  # the timed calls reuse this compile: same block size
        compile_s = time.perf_counter() - start
        calls, start = 0, time.perf_counter()
        while True:
            jsum = run(budget)
            calls += 1
            if time.perf_counter() - start >= args.seconds:
                break
        jax_rate = calls * budget / (time.perf_counter() - start)
        block = sampler.block_size()
        count, s1, s2 = 0, np.zeros(len(EPS)), np.zeros(len(EPS))
        start, b = time.perf_counter(), 0
        while time.perf_counter() - start < args.seconds:
            rng = block_generator(0, 1, 0, 0, b)
            if method == "naive":
                ell = sampler.draw(rng, block, d)
                y = -np.expm1(np.minimum(np.asarray(EPS)[:, None] - ell[None, :], 0.0))
            else:
                y = sampler.draw(rng, block, d, EPS)
            count += y.shape[1]
            s1 += y.sum(axis=1)
            s2 += (y * y).sum(axis=1)
            b += 1
        numpy_rate = count / (time.perf_counter() - start)
        m_np, m_j = s1[-1] / count, jsum.mean(len(EPS) - 1)
        v_np = max(s2[-1] / count - m_np**2, 1e-300) / count
        v_j = max(jsum.mean_sq(len(EPS) - 1) - m_j**2, 1e-300) / jsum.count
        z = (m_j - m_np) / math.sqrt(v_np + v_j)
        row = {"method": method, "jax_samples_per_s": jax_rate, "numpy_1core_samples_per_s": numpy_rate,
               "jax_over_numpy": jax_rate / numpy_rate, "compile_seconds": compile_s,
               "mean_jax_eps4": m_j, "mean_numpy_eps4": m_np, "z": z}
        rows.append(row)
        print(f"{method:<12} {jax_rate:<12.3g} {numpy_rate:<13.3g} {jax_rate / numpy_rate:<8.3g} {compile_s:<10.3g} "
              f"{m_j:.4g} / {m_np:.4g}  {z:+.2f}", flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    name = re.sub(r"[^A-Za-z0-9]+", "-", device).strip("-").lower()
    path = out / f"gpu-matrix-{name}.json"
    path.write_text(json.dumps({"device": device, "host": platform.node(), "jax": jax.__version__, "sigma": args.sigma,
                                "bands": args.bands, "n": 2000, "b": 100, "epsilons": EPS, "rows": rows}, indent=1))
    print(f"saved {path}")


if __name__ == "__main__":
    main()
