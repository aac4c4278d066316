"""Matrix mechanism (issues 23, 34) on the JAX backend: kernel, end to end and numpy on one core, one run.

    python -m benchmarks.gpu_matrix [--seconds S] [--repeats R] [--sigma 4.8] [--bands 16] [--e2e-samples N] [--out benchmarks/results]

n = 2000 iterations, cycle length b = 100, banded Toeplitz c_col = binom(2i, i)/4^i (``--bands``).
For each estimator (naive losses, importance, conditional and tilted values) it prints, on JAX's default
device:
- ``kernel/s``: REMOVE, ε in {3, 4}, the per-block call as issue 23 measured it (the naive grid sums;
  the value kernels' logs fetched, exponentiated on the host and summed there, Y only);
- ``device/s``: REMOVE, the value kernel's jitted block alone, synchronised (no transfer, no sums);
  ``dev13/s``: the same kernels at the 13-point grid, REMOVE and ADD combined per direction-sample
  (2 / (1/r_remove + 1/r_add)): what the end-to-end call would reach with no cost outside the kernels;
  ``e2e/dev13`` the end-to-end call's share of it (the rest is the sums, transfers and host work);
- ``e2e/s``: ``epscert.certify(backend="jax")`` as the Accountant's search calls it (a 13-point ε grid
  3..6, direction both, rows built), per direction-sample: 2 · N / wall seconds of a second call
  (N = ``--e2e-samples``, whole blocks), after a first call at 10^4 samples; ``e2e/kernel`` its ratio to
  kernel/s. The kernel and end-to-end timings are interleaved, ``--repeats`` pairs (each ratio is of two
  figures taken within seconds of each other), and the columns are medians; ``spread`` the lowest and
  highest of the wall-clock ratios, ``cpu-ratio`` the median ratio of the rates per CPU second of this
  process (steadier on a shared machine: time the process waits for the core is not counted);
- ``c1_s``, ``c1``, ``c2``: the XLA compile seconds and compile count of the first call and the compile
  count of the later ones (jax.monitoring events; those calls have another sample count);
- ``numpy/s``: the numpy sampler on one core of the same machine (threads forced to 1 before numpy
  loads), and a CLT check of the kernel's and numpy's REMOVE means at ε = 4 (z-score; different streams).
No timing is asserted anywhere.
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
import statistics  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
from scipy import special  # noqa: E402

EPS = (3.0, 4.0)
E2E_GRID = tuple(3.0 + 0.25 * i for i in range(13))
_COMPILE = "/jax/core/compile/backend_compile_duration"
#: Samples of the first (compiling) certify call, as the issue's profile warmed up.
FIRST_SAMPLES = 10_000


class EndToEnd:
    """certify(backend='jax') of one method: a first call at FIRST_SAMPLES (its compiles counted), then timed
    calls at ``samples`` (:meth:`timed`; the compiles logged during those calls, and only those, in ``second``:
    the other timings of the script compile their own kernels)."""

    def __init__(self, method: str, strategy, sigma: float, samples: int) -> None:
        import jax

        import epscert

        self.events: list[tuple[str, float]] = []
        jax.monitoring.register_event_duration_secs_listener(
            lambda name, secs, **_kw: self.events.append((name, secs)))
        self.kw = dict(sampler="balls_and_bins_persistent", sigma=sigma, steps=100, strategy=strategy, method=method,
                       epsilons=list(E2E_GRID), direction="both", backend="jax", seed=3)
        self.samples = samples
        start = time.perf_counter()
        epscert.certify(samples=FIRST_SAMPLES, **self.kw)
        self.first_s = time.perf_counter() - start
        self.first = [secs for name, secs in self.events if name == _COMPILE]
        self.second: list[float] = []

    def timed(self) -> tuple[float, float]:
        """Direction-samples per wall second and per CPU second of this process, one call at ``samples``."""
        import epscert

        self.events.clear()
        start, cpu = time.perf_counter(), time.process_time()
        rows = epscert.certify(samples=self.samples, **self.kw).to_pylist()
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu
        self.second += [secs for name, secs in self.events if name == _COMPILE]  # this call's compiles only
        assert rows and all(r["samples"] == self.samples for r in rows)
        return 2 * self.samples / wall, 2 * self.samples / cpu

    def compiles(self) -> dict:
        second = self.second
        return {"e2e_samples": self.samples, "first_call_seconds": self.first_s,
                "first_compile_seconds": sum(self.first), "first_compiles": len(self.first),
                "second_compile_seconds": sum(second), "second_compiles": len(second)}


def device_rate(sampler, method: str, words, min_seconds: float, direction=None, grid=EPS) -> float:
    """Samples/s of the jitted block kernel alone (losses or log-values; REMOVE unless ``direction``) at ``grid``,
    synchronised per block."""
    import jax

    from epscert.config import Direction
    from epscert.matrix import jax_kernels as jm

    n, kernel = jm.block_kernel(sampler, Direction.REMOVE if direction is None else direction)
    with jax.enable_x64(True):
        base = jax.random.wrap_key_data(np.asarray(words, dtype=np.uint32), impl="threefry2x32")
        eps = jax.numpy.asarray(grid)
        fn = lambda b: kernel(base, b, eps)  # noqa: E731
        fn(0).block_until_ready()
        calls, start = 0, time.perf_counter()
        while time.perf_counter() - start < min_seconds:
            calls += 1
            fn(calls).block_until_ready()
        return calls * n / (time.perf_counter() - start)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=4.0, help="least seconds per timed figure")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved (kernel, end-to-end) timing pairs")
    parser.add_argument("--sigma", type=float, default=4.8)
    parser.add_argument("--bands", type=int, default=16)
    parser.add_argument("--e2e-samples", type=int, default=1 << 17, help="samples of the timed certify call")
    parser.add_argument("--budget", type=int, default=1 << 17, help="samples per timed kernel call")
    parser.add_argument("--methods", default="naive,importance,conditional,tilted")
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
    from epscert.montecarlo.accumulator import DirectionSums
    from epscert.rng import block_generator, stream_key_words
    from epscert.matrix.strategies import toeplitz_strategy

    i = np.arange(args.bands)
    strategy = toeplitz_strategy(special.comb(2 * i, i) / 4.0**i, 2000)
    pair = MatrixPair(strategy.gram(100), args.sigma)
    device = jax_backend.device_name()
    print(f"device: {device}; host: {platform.node()} {platform.processor() or platform.machine()}; jax {jax.__version__}; "
          f"n=2000 b=100 bands={args.bands} sigma={args.sigma}; REMOVE; float64")
    print("method       kernel/s   device/s   dev13/s    e2e/s      e2e/kernel  spread     cpu-ratio e2e/dev13  c1_s    c1  c2  "
          "numpy1core/s  "
          "kernel/numpy  "
          "mean(eps=4) jax / numpy        z")
    rows = []
    words = stream_key_words(0, 1, 0, 0)
    d = Direction.REMOVE
    for method in args.methods.split(","):
        order = choose_order(pair, EPS) if method == "tilted" else None
        sampler = (MatrixPairSampler(pair) if method == "naive"
                   else MatrixValueSampler(pair, method, min(EPS), order=order))
        # whole blocks: a fixed block is drawn whole (a smaller budget would time masked-out samples)
        fixed = getattr(jax_backend, "fixed_block_size", None)  # absent before issue 34 (baseline runs)
        n_block = fixed(jax_matrix.width(sampler)) if fixed else 1
        budget = max(args.budget, n_block) if method != "conditional" else max(args.budget >> 4, n_block)
        e2e_samples = max(args.e2e_samples, n_block) if method != "conditional" else max(args.e2e_samples >> 4, n_block)
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
        end = EndToEnd(method, strategy, args.sigma, e2e_samples)

        def kernel_rate() -> tuple[float, float, DirectionSums]:
            calls, start, cpu = 0, time.perf_counter(), time.process_time()
            while True:
                jsum = run(budget)
                calls += 1
                if time.perf_counter() - start >= args.seconds:
                    return (calls * budget / (time.perf_counter() - start),
                            calls * budget / (time.process_time() - cpu), jsum)

        # kernel and end-to-end timings interleaved, `--repeats` pairs: each ratio is of two figures taken
        # within seconds of each other (the shared box's load moves single rates 2-3x between minutes); the
        # CPU-second ratio (process time: all of JAX's threads, none of the other processes') is the steadier
        k_rates, e_rates, k_cpu, e_cpu = [], [], [], []
        for _ in range(args.repeats):
            rate, rate_cpu, jsum = kernel_rate()
            k_rates.append(rate)
            k_cpu.append(rate_cpu)
            e_wall, e_c = end.timed()
            e_rates.append(e_wall)
            e_cpu.append(e_c)
        ratios = [e / k for e, k in zip(e_rates, k_rates)]
        ratios_cpu = [e / k for e, k in zip(e_cpu, k_cpu)]
        jax_rate, e2e_rate, ratio, ratio_cpu = (statistics.median(x) for x in (k_rates, e_rates, ratios, ratios_cpu))
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
        dev_rate = dev13 = math.nan
        if hasattr(jax_matrix, "block_kernel"):  # absent before issue 34
            dev_rate = device_rate(sampler, method, words, args.seconds)
            s13 = sampler
            if method != "naive":
                s13 = MatrixValueSampler(pair, method, min(E2E_GRID),
                                         order=choose_order(pair, E2E_GRID) if method == "tilted" else None)
            r_rem, r_add = (device_rate(s13, method, words, args.seconds, dd, E2E_GRID)
                            for dd in (Direction.REMOVE, Direction.ADD))
            dev13 = 2.0 / (1.0 / r_rem + 1.0 / r_add)
        row = {"method": method, "jax_samples_per_s": jax_rate, "device_kernel_samples_per_s": dev_rate,
               "device_grid13_both_directions_samples_per_s": dev13, "e2e_direction_samples_per_s": e2e_rate,
               **end.compiles(), "e2e_over_kernel": ratio, "e2e_over_kernel_each": ratios,
               "kernel_samples_per_s_each": k_rates, "e2e_direction_samples_per_s_each": e_rates,
               "e2e_over_kernel_cpu": ratio_cpu, "e2e_over_kernel_cpu_each": ratios_cpu,
               "kernel_samples_per_cpu_s_each": k_cpu, "e2e_direction_samples_per_cpu_s_each": e_cpu,
               "e2e_over_device_grid13": e2e_rate / dev13, "numpy_1core_samples_per_s": numpy_rate,
               "jax_over_numpy": jax_rate / numpy_rate, "compile_seconds": compile_s,
               "mean_jax_eps4": m_j, "mean_numpy_eps4": m_np, "z": z}
        rows.append(row)
        spread = f"{min(ratios):.2f}-{max(ratios):.2f}"
        print(f"{method:<12} {jax_rate:<10.3g} {dev_rate:<10.3g} {dev13:<10.3g} {e2e_rate:<10.3g} "
              f"{ratio:<11.3g} {spread:<10} {ratio_cpu:<9.3g} {row['e2e_over_device_grid13']:<10.3g} {row['first_compile_seconds']:<7.3g} "
              f"{row['first_compiles']:<3} {row['second_compiles']:<3} {numpy_rate:<13.3g} {jax_rate / numpy_rate:<13.3g} "
              f"{m_j:.4g} / {m_np:.4g}  {z:+.2f}", flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    name = re.sub(r"[^A-Za-z0-9]+", "-", device).strip("-").lower()
    path = out / f"gpu-matrix-{name}.json"
    path.write_text(json.dumps({"device": device, "host": platform.node(), "jax": jax.__version__, "sigma": args.sigma,
                                "bands": args.bands, "n": 2000, "b": 100, "epsilons": EPS, "e2e_grid": E2E_GRID,
                                "rows": rows}, indent=1))
    print(f"saved {path}")


if __name__ == "__main__":
    main()
