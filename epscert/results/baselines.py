"""The analytic baselines a certification is compared against (one row set per sampler).

For a configuration (σ, T, E, ε grid, direction) the comparison users ask for is:
deterministic batching (exact), Poisson (the PLD bracket's upper and lower sides), and the
shuffle and Balls-and-Bins lower bounds. Each comes back as its own (config, method)
task so that a pipeline can compute them in a parallel branch.

A matrix mechanism (a configuration with a strategy) has no DP-SGD baseline: its pair depends
on C. Its baselines are its own deterministic bounds (:mod:`epscert.matrix.bracket`), the
independent-modes lower bound (within the bracket's range of σ_eff) and the comonotone Gaussian upper
bound (:data:`MATRIX_BASELINES`).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from epscert.config import BRACKET_MAX_STEPS, BRACKET_MIN_SIGMA, CertifyConfig, Method, Sampler

BASELINES: tuple[tuple[Sampler, Method], ...] = (
    (Sampler.DETERMINISTIC, Method.EXACT),
    (Sampler.POISSON, Method.PLD_UPPER),
    (Sampler.POISSON, Method.PLD_LOWER),
    (Sampler.SHUFFLE, Method.CUBE_LOWER_BOUND),
    (Sampler.BALLS_AND_BINS, Method.CUBE_LOWER_BOUND),
)


#: The baselines of a matrix mechanism: its deterministic lower and upper bounds.
MATRIX_BASELINES = (Method.INDEPENDENT_LOWER_BOUND, Method.COMONOTONE_UPPER_BOUND)


def independent_bound_applies(config: CertifyConfig) -> bool:
    """Whether the independent-modes lower bound of a matrix mechanism is within the Balls-and-Bins
    bracket's range: it is the bracket's lower side at σ_eff = 1/√v_min over b steps
    (:mod:`epscert.matrix.bracket`, v = diag(G0)/σ²), which needs σ_eff >= BRACKET_MIN_SIGMA (so
    v_min > 0) and b <= BRACKET_MAX_STEPS."""
    v_min = float(np.min(np.diag(config.strategy.gram(config.steps).g0))) / config.sigma**2
    return v_min > 0 and 1.0 / math.sqrt(v_min) >= BRACKET_MIN_SIGMA and config.steps <= BRACKET_MAX_STEPS


def baseline_tasks(config: CertifyConfig) -> list[tuple[CertifyConfig, Method]]:
    """(configuration, analytic method) pairs for the baselines of ``config``'s (σ, T, E, ε)."""
    if config.strategy is not None:
        return [(dataclasses.replace(config, methods=(m,)), m) for m in MATRIX_BASELINES
                if m is not Method.INDEPENDENT_LOWER_BOUND or independent_bound_applies(config)]
    tasks = []
    for sampler, method in BASELINES:
        truncation = {}
        if sampler not in (Sampler.POISSON, Sampler.BALLS_AND_BINS):  # fixed-size batches: never truncated
            truncation = {"dataset_size": None, "batch_size": None, "max_batch_size": None}
        base = dataclasses.replace(config, sampler=sampler, methods=(method,), orders=None, **truncation)
        tasks.append((base, method))
    return tasks
