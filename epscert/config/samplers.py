"""The plug between configurations and the Monte Carlo engine: which mechanism's sampler runs a request.

The engine (:mod:`epscert.montecarlo`) knows no mechanism: it is handed a sampler object (the protocol
in its package docstring) by :meth:`epscert.config.CertifyConfig.mc_sampler`, which is
:func:`sampler_for`. This module is the one place that maps (configuration, method) to a room's sampler:

- DP-SGD's pairs (:mod:`epscert.dpsgd`): loss samplers for Balls-and-Bins, Poisson, shuffle and
  deterministic batches (SPEC §2, §4–§6), and the conditional value sampler of Balls-and-Bins;
- the matrix mechanism (:mod:`epscert.matrix`): the naive loss sampler of its pair and the value
  samplers of its importance, conditional and tilted estimators.

A loss sampler draws, for a direction, i.i.d. values of the *directional privacy loss* ℓ (an upper
bound on it for order statistics) such that

    δ_direction(ε) = s · E[(1 - e^{ε - ℓ})_+]

where s = exp(log_scale(direction)) is the importance-sampling scale (1 without importance
sampling). REMOVE: ℓ = L(x), x ~ P. ADD: ℓ = -L(x), x ~ Q. A value sampler draws, per ε, values
Y >= 0 with E[Y] = δ_direction(ε) within its stated range.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from epscert.dpsgd.balls_and_bins import BallsAndBinsSampler
from epscert.dpsgd.conditional import conditional_sampler
from epscert.dpsgd.poisson_pair import PoissonPairSampler
from epscert.dpsgd.shuffle_pair import ShufflePairSampler
from epscert.matrix.cluster_tilt import choose_order
from epscert.matrix.pair import MatrixPair, MatrixPairSampler
from epscert.matrix.shift_mixture import ShiftMixture, applies as shift_applies
from epscert.matrix.values import MatrixValueSampler
from epscert.montecarlo.protocol import LossSampler
from epscert.names import Method, Sampler

__all__ = ["LossSampler", "MatrixPair", "estimated_seconds", "loss_sampler", "matrix_pair", "sampler_for",
           "uses_values", "value_sampler"]


def matrix_pair(config) -> MatrixPair:
    """The matrix-mechanism pair of a validated config with a strategy (G cached per σ)."""
    return cached_pair(config.strategy, config.steps, config.sigma)


@functools.lru_cache(maxsize=8)
def cached_pair(strategy, cycle_length: int, sigma: float) -> MatrixPair:
    """The pair of (strategy, b, σ), built once per process (its Gram matrix is the costly part)."""
    return MatrixPair(strategy.gram(cycle_length), sigma)


def loss_sampler(config, method: Method) -> LossSampler:
    """The sampler that estimates ``config`` with the (resolved) Monte Carlo ``method``."""
    if not method.is_monte_carlo:
        raise ValueError(f"method={method.value!r} is not a Monte Carlo method")
    if config.strategy is not None:
        if method is not Method.NAIVE:
            raise ValueError(f"method={method.value!r} of a matrix mechanism draws values, not losses "
                             "(epscert.matrix.values)")
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


def uses_values(config, method: Method) -> bool:
    """Whether ``method`` draws values per ε (conditional estimators, the matrix mechanism's importance
    and tilted estimators) rather than losses."""
    return method.is_conditional or (config.strategy is not None and method in (Method.IMPORTANCE, Method.TILTED))


def value_sampler(config, method: Method):
    """The value sampler of a validated config: :class:`~epscert.dpsgd.conditional.ConditionalSampler`
    for Balls-and-Bins, :class:`~epscert.matrix.values.MatrixValueSampler` for a strategy."""
    if config.strategy is not None:
        pair = matrix_pair(config)
        # JAX draws the tuples from tables: no cluster order there (auto falls back to numpy for one)
        order = choose_order(pair, config.epsilons, clusters=config.backend != "jax") if method is Method.TILTED else None
        # REMOVE from the shift mixture where the tilt reaches no order above 2 and the block law bounds REMOVE
        shift = None
        if method is Method.TILTED and shift_applies(pair, config.backend):
            shift = ShiftMixture(pair, float(np.median(np.asarray(config.epsilons, dtype=np.float64))))
        return MatrixValueSampler(pair, method.value, min(config.epsilons), order=order, shift=shift)
    return conditional_sampler(config, method)


def sampler_for(config, method: Method):
    """The sampler object the engine runs for (config, method): a value sampler or a loss sampler."""
    return value_sampler(config, method) if uses_values(config, method) else loss_sampler(config, method)


#: Cost of one sampled coordinate (normal draw + exp + bookkeeping), in seconds: measured by
#: benchmarks/run.py at 1.1e-8 on a quiet core and 2.4e-8 with both cores busy.
SECONDS_PER_COORDINATE = 1.5e-8
#: One order-statistic rank costs about this many coordinates (one gamma/exponential + ndtri).
ORDER_STATS_RANK_FACTOR = 3


def estimated_seconds(config, method: Method, samples: int | None = None) -> float:
    """Rough single-core time to draw ``samples`` samples of ``method`` (both directions)."""
    sampler = sampler_for(config, method)
    n = config.samples if samples is None else samples
    cycles = 1 if config.strategy is not None else config.epochs  # a matrix sampler's width covers every cycle
    per_sample = sampler.width() * cycles * len(config.direction.parts())
    if method.uses_order_stats:
        per_sample *= ORDER_STATS_RANK_FACTOR
    return n * per_sample * SECONDS_PER_COORDINATE
