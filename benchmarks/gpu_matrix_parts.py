"""Where the JAX conditional matrix kernel spends its time (one block, pieces jitted on their own; the REMOVE
values at 1, 2 and 13 ε and the ADD line values at 1 and 13 ε: the per-ε cost of the Accountant's grid).

    python -m benchmarks.gpu_matrix_parts [--n 16384]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy import special


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=16384)
    args = parser.parse_args(argv)
    import jax
    import jax.numpy as jnp

    from epscert.matrix import kernels as mk
    from epscert.matrix import values as mv
    from epscert.matrix.jax_kernels import JaxSpecial
    from epscert.matrix.pair import MatrixPair
    from epscert.matrix.strategies import toeplitz_strategy

    i = np.arange(16)
    pair = MatrixPair(toeplitz_strategy(special.comb(2 * i, i) / 4.0**i, 2000).gram(100), 4.8)
    s = mv.MatrixValueSampler(pair, "conditional", 3.0)
    n, b = args.n, pair.bins
    with jax.enable_x64(True):
        factor = pair.factor_tuple(jnp)
        half = jnp.asarray(pair.half_diag)
        consts = tuple(jnp.asarray(c) for c in (s.lines.idx, s.lines.d, s.lines.mask, s.lines.self_or_near, s.lines.v))
        key = jax.random.key(0)

        def timed(name, fn, *a):
            f = jax.jit(fn)
            jax.block_until_ready(f(*a))
            t = time.perf_counter()
            for _ in range(5):
                out = jax.block_until_ready(f(*a))
            print(f"{name:<28} {(time.perf_counter() - t) / 5 * 1e3:9.2f} ms per {n} samples", flush=True)
            return out

        g = timed("normals + factor", lambda k: mk.apply_factor(jnp, jax.random.normal(k, (n, b), jnp.float64), factor), key)
        lines = mv.stratified_lines(jax.random.randint(key, (n,), 0, b), b, s.lines_per_sample, jnp)
        timed("top_k", lambda x: jax.lax.top_k(x, s.lines.top), g)
        timed("values, 1 eps", lambda g_, l_: mv.remove_line_log_values(
            jnp, JaxSpecial, g_, l_, consts, half, [pair.log_bins + 4.0], lambda x: jax.lax.top_k(x, s.lines.top)),
            g, lines)
        timed("values, 2 eps", lambda g_, l_: mv.remove_line_log_values(
            jnp, JaxSpecial, g_, l_, consts, half, [pair.log_bins + 3.0, pair.log_bins + 4.0],
            lambda x: jax.lax.top_k(x, s.lines.top)), g, lines)
        grid13 = jnp.asarray([3.0 + 0.25 * i for i in range(13)])
        timed("values, 13 eps", lambda g_, l_, e_: mv.remove_line_log_values(
            jnp, JaxSpecial, g_, l_, consts, half, [pair.log_bins + e for e in e_],
            lambda x: jax.lax.top_k(x, s.lines.top)), g, lines, grid13)
        add = lambda g_, e_: mv.add_line_log_values(jnp, JaxSpecial, g_, jnp.asarray(s.d_mean), half, s.var_u,  # noqa: E731
                                                    pair.log_bins, e_, tuple(jnp.asarray(x) for x in s.d_groups))
        timed("ADD line values, 1 eps", add, g, grid13[:1])
        timed("ADD line values, 13 eps", add, g, grid13)
        timed("log_ndtr (N,K,W)", lambda x: JaxSpecial.log_ndtr(x), jnp.ones((n, 8, 32)) * 5.0)
        timed("exp (N,K,W)", jnp.exp, jnp.ones((n, 8, 32)))
        timed("gather bool (N,K,top)", lambda ti, li: consts[3][ti[:, None, :], li[:, :, None]],
              jnp.zeros((n, 34), jnp.int32), lines)


if __name__ == "__main__":
    main()
