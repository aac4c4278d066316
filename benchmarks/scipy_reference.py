"""The "before" baseline of issue 5: a straightforward scipy implementation of two estimators.

Balls-and-Bins losses (SPEC §2, §4) written the obvious way: ``scipy.stats.norm.rvs`` for the
draws, ``scipy.special.logsumexp`` for the loss, ``norm.ppf`` of scaled uniforms for the
conditioned draws (frozen-distribution calls inside the loop). Same law as epscert's
kernels; used only by :mod:`benchmarks.run` to show what the tuned kernels gain.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special, stats

from epscert.config import Direction
from epscert.dpsgd.balls_and_bins import threshold_add, threshold_remove


def naive_losses(rng: np.random.Generator, sigma: float, steps: int, n: int, direction: Direction) -> np.ndarray:
    """ℓ of n samples: REMOVE x = e_1 + σz, ADD x = σz, L = logsumexp(x/σ²) - log T - 1/(2σ²)."""
    x = stats.norm.rvs(loc=0.0, scale=sigma, size=(n, steps), random_state=rng)
    if direction is Direction.REMOVE:
        x[:, 0] += 1.0
    loss = special.logsumexp(x / sigma**2, axis=1) - math.log(steps) - 0.5 / sigma**2
    return loss if direction is Direction.REMOVE else -loss


def importance_losses(rng: np.random.Generator, sigma: float, steps: int, n: int, direction: Direction,
                      eps0: float) -> np.ndarray:
    """ℓ of n samples from P|E (REMOVE: max y >= C; ADD: max x <= C), by inverse CDFs."""
    norm = stats.norm(loc=0.0, scale=sigma)
    if direction is Direction.ADD:
        cdf_c = norm.cdf(threshold_add(sigma, steps, eps0))
        x = norm.ppf(stats.uniform.rvs(size=(n, steps), random_state=rng) * cdf_c)
        return -(special.logsumexp(x / sigma**2, axis=1) - math.log(steps) - 0.5 / sigma**2)
    c = threshold_remove(sigma, steps, eps0)
    s = -math.expm1(steps * norm.logcdf(c))
    u = stats.uniform.rvs(size=n, random_state=rng)
    m = np.maximum(norm.ppf(np.exp(np.log1p(-u * s) / steps)), c)  # max | max >= C
    y = norm.ppf(stats.uniform.rvs(size=(n, steps), random_state=rng) * norm.cdf(m)[:, None])
    j = stats.randint.rvs(0, steps, size=n, random_state=rng)
    y[np.arange(n), j] = m
    y[:, 0] += 1.0
    return special.logsumexp(y / sigma**2, axis=1) - math.log(steps) - 0.5 / sigma**2
