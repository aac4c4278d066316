"""Deterministic batching: the exact Gaussian hockey-stick curve (SPEC §7).

    δ_D(ε) = Φ(-σε + 1/(2σ)) - e^ε Φ(-σε - 1/(2σ)),  E epochs: σ -> σ/√E.

The pair N(1, σ²) vs N(0, σ²) is symmetric, so REMOVE and ADD coincide. Computed in
log space as e^{a}(1 - e^{ε + b - a}) with a, b the log-CDF terms, so that large ε
does not cancel catastrophically.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special


def gaussian_delta(sigma: float, epsilons: np.ndarray | float) -> np.ndarray:
    """Exact δ(ε) of the Gaussian mechanism with sensitivity 1 and noise multiplier σ."""
    eps = np.asarray(epsilons, dtype=np.float64)
    a = special.log_ndtr(-sigma * eps + 0.5 / sigma)
    b = special.log_ndtr(-sigma * eps - 0.5 / sigma)
    return np.maximum(np.exp(a) * -np.expm1(np.minimum(eps + b - a, 0.0)), 0.0)


def deterministic_delta(sigma: float, epochs: int, epsilons: np.ndarray | float) -> np.ndarray:
    """δ_D(ε) for E epochs of deterministic batches: one Gaussian with σ/√E."""
    return gaussian_delta(sigma / math.sqrt(epochs), epsilons)
