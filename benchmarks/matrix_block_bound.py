"""Issue-33: the block-comonotone upper bound at one participation, next to the comonotone bound it refines.

    python -m benchmarks.matrix_block_bound

For the one-participation configurations of issue 33 (c_i = binom(2i, i)/4^i truncated to the bands, n = b),
prints the blocks J and the certified upper bounds on ε(δ) at δ = 1e-6, 1e-8, 1e-10 of:
- the comonotone bound without blocks (the Gaussian mechanism of the largest mode: no amplification);
- the block bound with one lognormal per block (:mod:`epscert.matrix.block_bound`, step 4: Balls-and-Bins with
  T = J at σ_eff = 1/√v', the upper side of its PLD bracket), with v'/v, the price of the split at the block edges;
- the block bound with the per-site mixture (steps 3'-4', what the product uses: the smallest of the mixture
  brackets of :mod:`epscert.allocation.mixture` over the splits tried, the singular-vector split "svd" of step 1'
  and the column splits of ``MIXTURE_POWERS``), with the split that gave it and the mean log-variance of its
  mixture against v;
with the CPU seconds of each (the split and the brackets; one core, time.process_time). The sampled
intervals of the same configurations are in ``benchmarks/results/matrix_production.log``.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import math  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from benchmarks.matrix_rivals import binomial_c_col  # noqa: E402
from epscert.allocation.bracket import bracket_for  # noqa: E402
from epscert.analytic.deterministic import gaussian_bracket  # noqa: E402
from epscert.config.samplers import cached_pair  # noqa: E402
from epscert.allocation.mixture import mixture_bracket_for  # noqa: E402
from epscert.matrix.block_bound import block_law, block_mixtures  # noqa: E402
from epscert.matrix.strategies import toeplitz_strategy  # noqa: E402

CONFIGS = ((2000, 16, 1.2), (2000, 16, 0.6), (10_000, 64, 2.0))
DELTAS = (1e-6, 1e-8, 1e-10)


def gaussian_epsilon(sigma: float, delta: float) -> float:
    """The smallest ε on a fine grid where the certified Gaussian upper δ is <= δ (a grid upper bound)."""
    grid = np.linspace(0.0, 60.0, 60_001)
    upper = gaussian_bracket(sigma, grid)[1]
    return float(grid[np.flatnonzero(upper <= delta)[0]])


def main() -> None:
    print(f"# matrix_block_bound: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; one core "
          "(thread variables 1), CPU s of time.process_time\n")
    print("| n = b | bands | σ | J (block size) | δ | comonotone, no blocks: ε <= | one lognormal per block: v'/v, "
          "ε <= | CPU s | per-site mixture: split, mean v*/v, ε <= | CPU s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for n, bands, sigma in CONFIGS:
        pair = cached_pair(toeplitz_strategy(np.array(binomial_c_col(bands)), n), n, sigma)
        v = float(np.max(pair.diag))
        start = time.process_time()
        blocks, sigma_eff = block_law(pair.gram, sigma)
        bracket = bracket_for(sigma_eff, blocks, 1)
        single = [bracket.epsilon_side(delta, "both", "upper") for delta in DELTAS]
        cpu_single = time.process_time() - start
        start = time.process_time()
        _, mixtures = block_mixtures(pair.gram, sigma)
        per_split = [[mixture_bracket_for(s, w, blocks).epsilon_side(delta, "both", "upper") for delta in DELTAS]
                     for _, s, w in mixtures]
        cpu_mix = time.process_time() - start
        for i, delta in enumerate(DELTAS):
            best = min(range(len(mixtures)), key=lambda k: per_split[k][i])
            split, s, w = mixtures[best]
            mean_v = float(np.dot(w, 1.0 / np.square(s)))
            print(f"| {n:,} | {bands} | {sigma} | {blocks} ({n // blocks}) | {delta:.0e} | "
                  f"{gaussian_epsilon(1 / math.sqrt(v), delta):.3f} | {1 / (sigma_eff**2 * v):.3f}, {single[i]:.3f} | "
                  f"{cpu_single if i == 0 else 0.0:.1f} | {split}, "
                  f"{mean_v / v:.3f}, {per_split[best][i]:.3f} | {cpu_mix if i == 0 else 0.0:.1f} |")


if __name__ == "__main__":
    main()
