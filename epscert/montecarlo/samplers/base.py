"""The interface every Monte Carlo loss sampler implements."""

from __future__ import annotations

import abc

import numpy as np

from epscert.params import Direction

#: Elements of the widest array one block may hold (8 MiB of float64).
BLOCK_ELEMENTS = 2**20


class LossSampler(abc.ABC):
    """Draws directional losses ℓ with δ(ε) = s · E[(1 - e^{ε-ℓ})_+] (see package docstring)."""

    #: 'mc_upper_confidence' for tight pairs, 'conjecture' for the shuffle pair.
    guarantee: str = "mc_upper_confidence"

    @abc.abstractmethod
    def width(self) -> int:
        """Floats per sample in the widest array of :meth:`draw` (sets the block size)."""

    def block_size(self) -> int:
        """Samples per block: a deterministic function of the configuration only."""
        return max(1, BLOCK_ELEMENTS // max(1, self.width()))

    def log_scale(self, direction: Direction) -> float:
        """log s, s = Pr[importance event]; 0 when sampling the unconditioned pair."""
        return 0.0

    @abc.abstractmethod
    def draw(self, rng: np.random.Generator, n: int, direction: Direction) -> np.ndarray:
        """n i.i.d. directional losses (float64, shape (n,)), no NaN."""
