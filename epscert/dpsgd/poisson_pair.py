"""Poisson-subsampled Gaussian pair, as a Monte Carlo cross-check against dp_accounting.

Per step (SPEC §2), q = 1/T: A = (1-q)N(0,σ²) + qN(1,σ²), B = N(0,σ²), loss
ℓ(w) = log(1 - q + q e^{(2w-1)/(2σ²)}). REMOVE samples w ~ A, ADD samples w ~ B and
uses -ℓ; the T·E-step loss is the sum. The answer is known (dp_accounting PLD), which
makes this pair a test of the shared Monte Carlo machinery.
"""

from __future__ import annotations

import math

import numpy as np

from epscert.names import Direction
from epscert.montecarlo.protocol import LossSampler


class PoissonPairSampler(LossSampler):
    def __init__(self, sigma: float, steps: int, epochs: int) -> None:
        self.sigma, self.total_steps = sigma, steps * epochs
        self.q = 1.0 / steps
        self.log_q = -math.log(steps)
        self.log_1mq = math.log1p(-self.q) if steps > 1 else -math.inf

    #: The module of this sampler's JAX kernels, named, not imported (it imports this one and JAX lazily).
    jax_kernels_module = "epscert.dpsgd.jax_kernels"

    def width(self) -> int:
        return self.total_steps

    def draw(self, rng: np.random.Generator, n: int, direction: Direction) -> np.ndarray:
        w = rng.standard_normal((n, self.total_steps))
        w *= self.sigma
        if direction is Direction.REMOVE:
            w += rng.random((n, self.total_steps)) < self.q
        # per-step loss: logaddexp(log(1-q), log q + w/σ² - 1/(2σ²))
        w *= 1.0 / self.sigma**2
        w += self.log_q - 0.5 / self.sigma**2
        loss = np.logaddexp(self.log_1mq, w).sum(axis=1)
        return loss if direction is Direction.REMOVE else -loss
