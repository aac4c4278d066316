"""The shuffle pair (P_S, Q_S) of "How Private are DP-SGD Implementations?" (SPEC §1–§2).

P_S = (1/T)Σ_t N(2e_t, σ²I), Q_S = (1/T)Σ_t N(e_t, σ²I),
L_S(x) = logsumexp((2x - 2)/σ²) - logsumexp((2x - 1)/(2σ²)).
REMOVE samples x = 2e_1 + σz, ADD samples x = e_1 + σz and uses -L_S.
This pair gives lower bounds on the shuffle sampler only; tightness is a conjecture,
so every Monte Carlo result from it carries the guarantee label 'conjecture'.
Dynamic shuffling over E epochs is the E-fold product (losses add up); the persistent
variant is the one-epoch pair with σ/√E (the caller passes that σ and epochs=1).
"""

from __future__ import annotations

import numpy as np

from epscert.dpsgd.gauss import logsumexp_rows
from epscert.names import Direction
from epscert.montecarlo.protocol import LossSampler


class ShufflePairSampler(LossSampler):
    guarantee = "conjecture"

    def __init__(self, sigma: float, steps: int, epochs: int) -> None:
        self.sigma, self.steps, self.epochs = sigma, steps, epochs

    #: The module of this sampler's JAX kernels, named, not imported (it imports this one and JAX lazily).
    jax_kernels_module = "epscert.dpsgd.jax_kernels"

    def width(self) -> int:
        return 2 * self.steps

    def draw(self, rng: np.random.Generator, n: int, direction: Direction) -> np.ndarray:
        shift = 2.0 if direction is Direction.REMOVE else 1.0
        var = self.sigma**2
        total = np.zeros(n)
        for _ in range(self.epochs):
            x = rng.standard_normal((n, self.steps))
            x *= self.sigma
            x[:, 0] += shift
            num = (2.0 * x - 2.0) / var
            den = (2.0 * x - 1.0) / (2.0 * var)
            loss = logsumexp_rows(num) - logsumexp_rows(den)
            total += loss if direction is Direction.REMOVE else -loss
        return total
