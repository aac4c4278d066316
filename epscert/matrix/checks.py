"""The matrix mechanism's part of a configuration's checks: strategy, cycle length, cycles, methods.

:class:`~epscert.config.CertifyConfig` calls :func:`check_matrix_config` from its ``__post_init__`` when
a strategy is given (the configuration sits above the rooms it configures, so it reads their checks;
this room never imports the configuration). Every refusal names the field and the value, before any work.
"""

from __future__ import annotations

import math

from epscert.checks import show
from epscert.matrix.strategies import Strategy
from epscert.names import (
    BRACKET_MIN_SIGMA, JAX_MATRIX_KERNELS, MATRIX_METHODS, MAX_CYCLE_LENGTH, MAX_EPSILONS, MAX_TOTAL_COORDINATES,
    Method, Sampler,
)


def check_matrix_config(config) -> None:
    """A matrix mechanism (strategy C, Balls-and-Bins of cycle length b = steps over n iterations):
    the sampler, cycle length, epochs, methods and backend, refused before any work."""
    set_ = lambda k, v: object.__setattr__(config, k, v)  # noqa: E731 (frozen dataclass)
    if not isinstance(config.strategy, Strategy):
        raise ValueError(f"strategy must be an epscert.strategies.Strategy (toeplitz_strategy or dense_strategy), "
                         f"got strategy={show(config.strategy)}")
    if config.sampler is not Sampler.BALLS_AND_BINS_PERSISTENT:
        raise ValueError(f"a strategy (matrix mechanism) needs sampler='balls_and_bins_persistent' (one bin per "
                         f"example for every cycle), got sampler={config.sampler.value!r}")
    n, b = config.strategy.iterations, config.steps
    if b > n:
        raise ValueError(f"steps (the cycle length b) must be <= iterations={n}, got steps={b}")
    if b > MAX_CYCLE_LENGTH:
        raise ValueError(f"steps (the cycle length b) must be <= {MAX_CYCLE_LENGTH} for a matrix mechanism, got "
                         f"steps={b}")
    cycles = -(-n // b)
    if config.epochs not in (1, cycles):
        raise ValueError(f"epochs of a matrix mechanism is the number of cycles ceil(iterations/steps) = {cycles}, "
                         f"got epochs={config.epochs}")
    set_("epochs", cycles)
    if config.dataset_size is not None or config.max_batch_size is not None:
        raise ValueError("truncated batches (dataset_size, max_batch_size) are not supported for a matrix "
                         "mechanism")
    if config.orders is not None:
        raise ValueError(f"orders do not apply to a matrix mechanism (correlated modes have no order-statistic "
                         f"bound), got orders={show(config.orders)}")
    for m in config.methods:
        if m not in MATRIX_METHODS:
            allowed = ", ".join(sorted(x.value for x in MATRIX_METHODS))
            raise ValueError(f"method={m.value!r} does not apply to a matrix mechanism; allowed: {allowed}")
        if m is Method.EXACT and b != 1:
            raise ValueError(f"method='exact' needs one bin (steps=1: the Gaussian mechanism), got steps={b}")
        if m in (Method.BRACKET_UPPER, Method.BRACKET_LOWER) and not (config.strategy.is_identity() and n % b == 0):
            raise ValueError(f"method={m.value!r} (the Balls-and-Bins bracket) needs C = c*I and steps dividing "
                             f"iterations, got {config.strategy.describe()} with iterations={n}, steps={b}; use "
                             "independent_lower_bound / comonotone_upper_bound or a Monte Carlo method")
    set_("resolved", tuple(dict.fromkeys(Method.TILTED if m is Method.AUTO else m for m in config.methods)))
    if config.shards > config.samples and any(m.is_monte_carlo for m in config.resolved):
        raise ValueError(f"shards must be <= samples, got shards={config.shards}, samples={config.samples}")
    brackets = (Method.INDEPENDENT_LOWER_BOUND, Method.BRACKET_UPPER, Method.BRACKET_LOWER)
    if b > 1 and any(m in brackets for m in config.resolved):
        v_min = float(config.strategy.gram(b).g0.diagonal().min()) / config.sigma**2
        if not v_min > 0.0:
            raise ValueError("a mode of this strategy has zero norm (is c_col[0] = 0?): the Balls-and-Bins "
                             "bracket of independent_lower_bound / bracket_* does not apply")
        if 1.0 / math.sqrt(v_min) < BRACKET_MIN_SIGMA:
            raise ValueError(f"independent_lower_bound / bracket_* use the Balls-and-Bins bracket at sigma_eff = "
                             f"1/sqrt(min_j G_jj) = {1.0 / math.sqrt(v_min):.4g}, below its limit "
                             f"{BRACKET_MIN_SIGMA} (sigma={config.sigma}); use a Monte Carlo method")
    if config.backend == "jax":
        for m in config.resolved:
            if m.is_monte_carlo and m.value not in JAX_MATRIX_KERNELS:
                raise ValueError(f"backend='jax' has no matrix-mechanism kernel for method={m.value!r}")
        config.check_jax_value_grid()
    if len(config.epsilons) > MAX_EPSILONS:
        raise ValueError(f"epsilons has {len(config.epsilons)} values, limit {MAX_EPSILONS}")
    total = config.samples * b * len(config.direction.parts())
    if any(m.is_monte_carlo for m in config.resolved) and total > MAX_TOTAL_COORDINATES:
        raise ValueError(f"samples={config.samples} x {b} modes is {total:.2e} sampled coordinates (limit "
                         f"{MAX_TOTAL_COORDINATES:.0e}); lower samples")
