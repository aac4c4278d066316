"""Monte Carlo loss samplers, one module per pair (SPEC §2, §4–§6).

A loss sampler draws, for a direction, i.i.d. values of the *directional privacy
loss* ℓ (an upper bound on it for order statistics) such that

    δ_direction(ε) = s · E[(1 - e^{ε - ℓ})_+]

where s = exp(log_scale(direction)) is the importance-sampling scale (1 without
importance sampling). REMOVE: ℓ = L(x), x ~ P. ADD: ℓ = -L(x), x ~ Q.
"""

from __future__ import annotations

import functools
import math

from epscert.params import CertifyConfig, Method, Sampler
from epscert.montecarlo.samplers.base import LossSampler
from epscert.montecarlo.samplers.balls_and_bins import BallsAndBinsSampler
from epscert.montecarlo.samplers.matrix_pair import MatrixPair, MatrixPairSampler
from epscert.montecarlo.samplers.poisson_pair import PoissonPairSampler
from epscert.montecarlo.samplers.shuffle_pair import ShufflePairSampler

__all__ = ["LossSampler", "loss_sampler", "matrix_pair", "MatrixPair"]


def matrix_pair(config: CertifyConfig) -> MatrixPair:
    """The matrix-mechanism pair of a validated config with a strategy (G cached per σ)."""
    return _pair(config.strategy, config.steps, config.sigma)


@functools.lru_cache(maxsize=8)
def _pair(strategy, cycle_length: int, sigma: float) -> MatrixPair:
    return MatrixPair(strategy.gram(cycle_length), sigma)


def loss_sampler(config: CertifyConfig, method: Method) -> LossSampler:
    """The sampler that estimates ``config`` with the (resolved) Monte Carlo ``method``."""
    if not method.is_monte_carlo:
        raise ValueError(f"method={method.value!r} is not a Monte Carlo method")
    if config.strategy is not None:
        if method is not Method.NAIVE:
            raise ValueError(f"method={method.value!r} of a matrix mechanism draws values, not losses "
                             "(epscert.montecarlo.matrix_values)")
        return MatrixPairSampler(matrix_pair(config))
    if config.sampler.is_persistent:  # E epochs at σ = one epoch of the base sampler at σ/√E
        return loss_sampler(config.reduced(), method)
    eps0 = min(config.epsilons)
    if config.sampler is Sampler.BALLS_AND_BINS:
        return BallsAndBinsSampler(config.sigma, config.steps, config.epochs, method, config.ranks, eps0)
    if config.sampler is Sampler.DETERMINISTIC:  # one Gaussian: Balls-and-Bins with T = 1, σ/√E
        sigma = config.sigma / math.sqrt(config.epochs)
        return BallsAndBinsSampler(sigma, 1, 1, method, None, eps0)
    if config.sampler is Sampler.POISSON:
        return PoissonPairSampler(config.sigma, config.steps, config.epochs)
    if config.sampler is Sampler.SHUFFLE:
        return ShufflePairSampler(config.sigma, config.steps, config.epochs)
    raise ValueError(f"no Monte Carlo sampler for sampler={config.sampler.value!r}")
