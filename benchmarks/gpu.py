"""Issue-18 benchmark: the JAX backend against numpy on one core and a bare kernel, one run.

    python -m benchmarks.gpu [--quick] [--seconds S] [--out benchmarks/results]

For T in {1000, 10^4}, E in {1, 10} and each estimator the JAX backend has (naive, order_stats
with the default ranks; importance at E = 1 only, SPEC §4), REMOVE direction, 16 ε:
- ``jax``: samples/s of :func:`epscert.dpsgd.jax_kernels.direction_sums` (losses,
  Y at 16 ε, exact int64 grid sums on the device, host merge) on JAX's default device, after a
  warm-up call whose time (compile) is reported on its own;
- ``numpy``: samples/s of the numpy backend (``sampler.draw`` + ``accumulator.add``) on one core
  of the same machine (thread variables forced to 1 before numpy loads);
- ``bare``: samples/s of a bare jitted kernel on the same device (normal draws, the signal, a
  logsumexp, one sum; nothing else): the practical limit;
- ``e2e``: ``epscert.certify(backend="jax")`` as the Accountant's search calls it (a 13-point ε grid
  0.25..3.25, direction both, rows built), per direction-sample of a second call at the same sample
  count as ``jax``, after a first call at 10^4 samples; ``c1_s``/``c1``/``c2``: XLA compile seconds and
  count of the first call, compile count of the second (jax.monitoring events);
- the ratios jax/numpy, jax/bare and e2e/jax, and a CLT check of the two backends' δ at the first ε
  (z-score), so that a fast wrong kernel cannot pass.
Figures are printed and saved as JSON under ``--out``, named after the device. No timing is
asserted anywhere.
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


EPS = tuple(0.25 * (i + 1) for i in range(16))
SIGMA = 0.8
E2E_GRID = tuple(0.25 * (i + 1) for i in range(13))
FIRST_SAMPLES = 10_000
_COMPILE = "/jax/core/compile/backend_compile_duration"


def e2e(steps: int, epochs: int, method: str, samples: int) -> dict:
    """Per direction-sample rate of a second certify(backend='jax') call, and the compiles of both calls."""
    import jax

    import epscert

    events: list[tuple[str, float]] = []
    jax.monitoring.register_event_duration_secs_listener(lambda name, secs, **_kw: events.append((name, secs)))
    kw = dict(sampler="balls_and_bins", sigma=SIGMA, steps=steps, epochs=epochs, method=method,
              epsilons=list(E2E_GRID), direction="both", backend="jax", seed=3)
    epscert.certify(samples=FIRST_SAMPLES, **kw)
    first = [secs for name, secs in events if name == _COMPILE]
    events.clear()
    start = time.perf_counter()
    epscert.certify(samples=samples, **kw)
    wall = time.perf_counter() - start
    second = [name for name, _ in events if name == _COMPILE]
    return {"e2e_direction_samples_per_s": 2 * samples / wall, "e2e_samples": samples,
            "first_compile_seconds": sum(first), "first_compiles": len(first), "second_compiles": len(second)}


def _timed(fn, min_seconds: float) -> tuple[float, int]:
    """(seconds, calls) of repeated fn() until min_seconds have passed (at least one call)."""
    calls, start = 0, time.perf_counter()
    while True:
        fn()
        calls += 1
        elapsed = time.perf_counter() - start
        if elapsed >= min_seconds:
            return elapsed, calls


def bare_rate(steps: int, epochs: int, n_block: int, min_seconds: float) -> float:
    """Samples/s of normal draws + signal + logsumexp + one sum, float64, fused by XLA."""
    import jax
    import jax.numpy as jnp
    from jax.scipy.special import logsumexp

    with jax.enable_x64(True):
        shift = jnp.zeros((1, steps), jnp.float64).at[0, 0].set(1 / SIGMA**2)  # a constant, fused into the add

        def kernel(key):
            total = jnp.zeros((), jnp.float64)
            for e in range(epochs):
                z = jax.random.normal(jax.random.fold_in(key, e), (n_block, steps), dtype=jnp.float64)
                total = total + jnp.sum(logsumexp(z * (1 / SIGMA) + shift, axis=1))
            return total

        fn = jax.jit(kernel)
        key = jax.random.key(0)
        fn(key).block_until_ready()
        counter = [0]

        def step():
            counter[0] += 1
            fn(jax.random.fold_in(key, counter[0])).block_until_ready()
        seconds, calls = _timed(step, min_seconds)
    return calls * n_block / seconds


def case(steps: int, epochs: int, method_name: str, jax_samples: int, numpy_seconds: float,
         min_seconds: float) -> dict:
    from epscert.montecarlo import accumulator as acc_mod
    from epscert.dpsgd import jax_kernels
    from epscert.montecarlo.backends import jax_backend
    from epscert.config.samplers import loss_sampler
    from epscert.config import CertifyConfig, Direction, Method
    from epscert.rng import block_generator, stream_key_words

    config = CertifyConfig(sampler="balls_and_bins", sigma=SIGMA, steps=steps, epochs=epochs, epsilons=EPS,
                           methods=method_name, samples=jax_samples)
    method = Method(method_name)
    sampler = loss_sampler(config, method)
    direction = Direction.REMOVE
    words = stream_key_words(0, 1, 0, 0)

    start = time.perf_counter()
    jax_kernels.direction_sums(sampler, method, direction, words, min(jax_samples, 1 << 16), EPS)
    warmup = time.perf_counter() - start
    result = {}

    def run_jax():
        result["sums"] = jax_kernels.direction_sums(sampler, method, direction, words, jax_samples, EPS)
    seconds, calls = _timed(run_jax, min_seconds)
    jax_rate = calls * jax_samples / seconds

    block = sampler.block_size()
    acc = acc_mod.create((direction,), len(EPS))
    start, b = time.perf_counter(), 0
    while time.perf_counter() - start < numpy_seconds:
        rng = block_generator(0, 1, 0, 0, b)
        acc = acc_mod.add(acc, direction, sampler.draw(rng, block, direction), EPS)
        b += 1
    numpy_rate = acc[direction].count / (time.perf_counter() - start)

    bare = bare_rate(steps, epochs, jax_backend.block_size(steps, jax_samples), min_seconds)
    end = e2e(steps, epochs, method_name, jax_samples)
    a, j = acc[direction], result["sums"]
    z = [(j.mean(i) - a.mean(i)) / math.sqrt(max(a.mean_sq(i) - a.mean(i) ** 2, 1e-300) / a.count
                                             + max(j.mean_sq(i) - j.mean(i) ** 2, 1e-300) / j.count)
         for i in (0, 3)]
    return {"T": steps, "E": epochs, "method": method_name, "jax_samples_per_s": jax_rate,
            "numpy_1core_samples_per_s": numpy_rate, "bare_kernel_samples_per_s": bare,
            "jax_over_numpy": jax_rate / numpy_rate, "jax_over_bare": jax_rate / bare,
            "compile_seconds": warmup, **end, "e2e_over_jax": end["e2e_direction_samples_per_s"] / jax_rate,
            "z_eps0.25": z[0], "z_eps1.0": z[1],
            "jax_samples": j.count, "numpy_samples": a.count}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="T = 1000 only, E = 1, few samples (a smoke run)")
    parser.add_argument("--seconds", type=float, default=3.0, help="least seconds per timed figure")
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent / "results"))
    args = parser.parse_args(argv)
    import jax

    from epscert.dpsgd import jax_kernels
    from epscert.montecarlo.backends import jax_backend

    device = jax_backend.device_name()
    grid = [(1000, 1)] if args.quick else [(1000, 1), (1000, 10), (10_000, 1), (10_000, 10)]
    rows = []
    print(f"device: {device}; host: {platform.node()} {platform.processor() or platform.machine()}; "
          f"jax {jax.__version__}; float64")
    print("T      E   method      jax/s       e2e/s       e2e/jax  c1_s    c1  c2  numpy1core/s  bare/s      jax/numpy  "
          "jax/bare  compile_s  z")
    for steps, epochs in grid:
        for method in ("naive", "importance", "order_stats") if epochs == 1 else ("naive", "order_stats"):
            width = steps if method != "order_stats" else 200  # about R + 1 with the default ranks
            budget = 1 << 14 if args.quick else max(1 << 16, (1 << 31) // (width * epochs))
            row = case(steps, epochs, method, budget, args.seconds, args.seconds)
            rows.append(row)
            print(f"{steps:<6} {epochs:<3} {method:<11} {row['jax_samples_per_s']:<11.3g} "
                  f"{row['e2e_direction_samples_per_s']:<11.3g} {row['e2e_over_jax']:<8.3g} "
                  f"{row['first_compile_seconds']:<7.3g} {row['first_compiles']:<3} {row['second_compiles']:<3} "
                  f"{row['numpy_1core_samples_per_s']:<13.3g} {row['bare_kernel_samples_per_s']:<11.3g} "
                  f"{row['jax_over_numpy']:<10.3g} {row['jax_over_bare']:<9.3g} {row['compile_seconds']:<10.3g} "
                  f"{row['z_eps0.25']:+.2f},{row['z_eps1.0']:+.2f}", flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    name = re.sub(r"[^A-Za-z0-9]+", "-", device).strip("-").lower()
    path = out / f"gpu-{name}{'-quick' if args.quick else ''}.json"
    path.write_text(json.dumps({"device": device, "host": platform.node(), "jax": jax.__version__,
                                "dtype": "float64", "sigma": SIGMA, "epsilons": EPS, "rows": rows}, indent=1))
    print(f"saved {path}")


if __name__ == "__main__":
    main()
