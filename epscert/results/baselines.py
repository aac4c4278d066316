"""The analytic baselines a certification is compared against (one row set per sampler).

For a configuration (σ, T, E, ε grid, direction) the comparison users ask for is:
deterministic batching (exact), Poisson (the PLD bracket's upper and lower sides), and the
shuffle and Balls-and-Bins lower bounds. Each comes back as its own (config, method)
task so that a pipeline can compute them in a parallel branch.
"""

from __future__ import annotations

import dataclasses

from epscert.params import CertifyConfig, Method, Sampler

BASELINES: tuple[tuple[Sampler, Method], ...] = (
    (Sampler.DETERMINISTIC, Method.EXACT),
    (Sampler.POISSON, Method.PLD_UPPER),
    (Sampler.POISSON, Method.PLD_LOWER),
    (Sampler.SHUFFLE, Method.CUBE_LOWER_BOUND),
    (Sampler.BALLS_AND_BINS, Method.CUBE_LOWER_BOUND),
)


def baseline_tasks(config: CertifyConfig) -> list[tuple[CertifyConfig, Method]]:
    """(configuration, analytic method) pairs for the baselines of ``config``'s (σ, T, E, ε)."""
    tasks = []
    for sampler, method in BASELINES:
        truncation = {}
        if sampler not in (Sampler.POISSON, Sampler.BALLS_AND_BINS):  # fixed-size batches: never truncated
            truncation = {"dataset_size": None, "max_batch_size": None}
        base = dataclasses.replace(config, sampler=sampler, methods=(method,), orders=None, **truncation)
        tasks.append((base, method))
    return tasks
