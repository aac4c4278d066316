"""The protocol between the engine and a mechanism: what a sampler object offers (see the package docstring)."""

from __future__ import annotations

import abc

import numpy as np

from epscert.names import Direction

#: Elements of the widest array one block may hold (8 MiB of float64).
BLOCK_ELEMENTS = 2**20


class LossSampler(abc.ABC):
    """Draws directional losses ℓ with δ(ε) = s · E[(1 - e^{ε-ℓ})_+] (see the package docstring)."""

    #: 'mc_upper_confidence' for tight pairs, 'conjecture' for the shuffle pair.
    guarantee: str = "mc_upper_confidence"
    #: A loss sampler: the engine folds (1 - e^{ε-ℓ})_+ of each loss into exact grid sums.
    draws_values: bool = False

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

    #: Dotted name of the module of this sampler's JAX kernels (the engine's JAX protocol), or None: no
    #: JAX kernel. A name, not an import: the kernels read the sampler, so the arrow points their way only.
    jax_kernels_module: str | None = None


class ValueSampler(abc.ABC):
    """Draws, per ε of a grid, values Y in [0, value_range] with E[Y] = δ_direction(ε) (package docstring)."""

    guarantee: str = "mc_upper_confidence"
    #: A value sampler: the engine folds its values themselves (and their truncations) into exact sums.
    draws_values: bool = True

    @abc.abstractmethod
    def width(self) -> int:
        """Floats per sample in the widest array of :meth:`draw` (sets the block size)."""

    def block_size(self) -> int:
        """Samples per block: a deterministic function of the configuration only."""
        return max(1, BLOCK_ELEMENTS // max(1, self.width()))

    @abc.abstractmethod
    def value_range(self, direction: Direction, epsilons) -> np.ndarray:
        """(|ε|,) proven upper ends of the values' range, per ε (the truncation levels scale with them)."""

    @abc.abstractmethod
    def draw(self, rng: np.random.Generator, n: int, direction: Direction, epsilons) -> np.ndarray:
        """(|ε|, n) i.i.d. values per ε, float64, each in [0, value_range]."""

    #: Dotted name of the module of this sampler's JAX kernels (the engine's JAX protocol), or None: no
    #: JAX kernel. A name, not an import: the kernels read the sampler, so the arrow points their way only.
    jax_kernels_module: str | None = None
