"""Issue-33: the loss-tilted estimator at order 5 (row-wise top table) against order 4, one run, one core.

    python -m benchmarks.matrix_order5

At the benchmark size (n = 2000, b = 100, 16 bands, c_i = binom(2i, i)/4^i, σ = 4.61), what a user calls:
``Accountant(noise_multiplier=σ, strategy=toeplitz_strategy(c, n), cycle_length=b).epsilon_interval(δ)``
with the default arguments, at δ = 1e-10 and 1e-12: once as shipped (θ_max = 5 at b <= 154) and once with
the order capped at 4 (``loss_tilt.MAX_ORDER = 4``, the previous cap), in the same process, each on fresh
caches. Printed: the certified interval, its width, the order the run chose and CPU seconds.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import platform  # noqa: E402
import time  # noqa: E402

from benchmarks.matrix_rivals import binomial_c_col  # noqa: E402
from epscert import Accountant  # noqa: E402
from epscert.config import samplers  # noqa: E402
from epscert.matrix import loss_tilt  # noqa: E402
from epscert.matrix.strategies import toeplitz_strategy  # noqa: E402

N, B, SIGMA, BANDS = 2000, 100, 4.61, 16
DELTAS = (1e-10, 1e-12)


def one(delta: float) -> tuple[float, float, int, float]:
    samplers.cached_pair.cache_clear()
    loss_tilt.loss_tilt.cache_clear()
    strategy = toeplitz_strategy(binomial_c_col(BANDS), N)
    acc = Accountant(noise_multiplier=SIGMA, strategy=strategy, cycle_length=B)
    t0 = time.process_time()
    interval = acc.epsilon_interval(delta)
    seconds = time.process_time() - t0
    pair = samplers.cached_pair(strategy, B, SIGMA)
    return interval.lower, interval.upper, loss_tilt.max_order(pair), seconds


def main() -> None:
    print(f"# matrix_order5: {platform.node()}, one thread; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print(f"# n = {N}, b = {B}, {BANDS} bands, σ = {SIGMA}; Accountant defaults")
    print("| cap | δ | certified ε | width | θ_max | CPU s |")
    print("|---|---|---|---|---|---|")
    for cap in (5, 4):
        loss_tilt.MAX_ORDER = cap
        for delta in DELTAS:
            lo, hi, top, seconds = one(delta)
            print(f"| {cap} | {delta:.0e} | [{lo:.3f}, {hi:.3f}] | {100 * (hi / lo - 1):.1f}% | {top} | {seconds:.1f} |",
                  flush=True)


if __name__ == "__main__":
    main()
