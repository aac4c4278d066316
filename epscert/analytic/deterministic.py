"""Deterministic batching: the exact Gaussian hockey-stick curve (SPEC §7).

    δ_D(ε) = Φ(-σε + 1/(2σ)) - e^ε Φ(-σε - 1/(2σ)),  E epochs: σ -> σ/√E.

The pair N(1, σ²) vs N(0, σ²) is symmetric, so REMOVE and ADD coincide. Computed in
log space as e^{a}(1 - e^{z}), z = ε + b - a, with a, b the log-CDF terms, so that large ε
does not cancel catastrophically.

Error analysis of :func:`gaussian_bracket` (issue 17: an exact row must contain the truth).
u = 2^-53. The arguments x_± = -s·ε ± 1/(2s), s = σ/√E, are computed with absolute error
<= Δx = 4u(|s·ε| + 1/(2s)) (s carries <= 2u relative error, then one product, one quotient
and one sum). scipy's log_ndtr is taken to be accurate to K = 64 ulp relative (a few ulp is
what it achieves; the property tests against mpmath at 50 digits check the whole chain), and
|d log Φ(x)/dx| = φ(x)/Φ(x) <= max(-x, 0) + 1. So each of a, b has absolute error
<= ζ(x) = K·u·|log Φ(x)| + (max(-x, 0) + 1)·Δx, and z has <= ζ_z = ζ(x_+) + ζ(x_-) + 2u(|ε| + |a| + |b|).
Then δ ∈ [e^{a - ζ_a}(1 - e^{z + ζ_z})_+, e^{a + ζ_a}(1 - e^{z - ζ_z})] up to the final exp/expm1
roundings (16u relative, applied outward). The cancellation in 1 - e^z (z near 0: large σ, small ε)
is where the naive value lost 2.6e-10 relative; the bracket is that wide there and ~1e-13 elsewhere.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

#: Unit round-off of float64.
UNIT_ROUNDOFF = 2.0**-53
#: Assumed accuracy of scipy.special.log_ndtr, in ulp (relative).
LOG_NDTR_ULP = 64.0
#: Relative allowance of the final exp and expm1 evaluations.
FINAL_RELATIVE = 16.0 * UNIT_ROUNDOFF


def _parts(sigma: float, epsilons):
    eps = np.asarray(epsilons, dtype=np.float64)
    x_hi, x_lo = -sigma * eps + 0.5 / sigma, -sigma * eps - 0.5 / sigma
    a, b = special.log_ndtr(x_hi), special.log_ndtr(x_lo)
    return eps, x_hi, x_lo, a, b


def gaussian_delta(sigma: float, epsilons: np.ndarray | float) -> np.ndarray:
    """δ(ε) of the Gaussian mechanism with sensitivity 1 and noise multiplier σ (nearest value)."""
    eps, _, _, a, b = _parts(sigma, epsilons)
    return np.maximum(np.exp(a) * -np.expm1(np.minimum(eps + b - a, 0.0)), 0.0)


def gaussian_bracket(sigma: float, epsilons: np.ndarray | float) -> tuple[np.ndarray, np.ndarray]:
    """(lower, upper) with lower <= δ(ε) <= upper by the module's error analysis."""
    eps, x_hi, x_lo, a, b = _parts(sigma, epsilons)
    dx = 4.0 * UNIT_ROUNDOFF * (np.abs(sigma * eps) + 0.5 / sigma)

    def zeta(x, log_phi):
        return LOG_NDTR_ULP * UNIT_ROUNDOFF * np.abs(log_phi) + (np.maximum(-x, 0.0) + 1.0) * dx

    za = zeta(x_hi, a)
    zz = za + zeta(x_lo, b) + 2.0 * UNIT_ROUNDOFF * (np.abs(eps) + np.abs(a) + np.abs(b))
    z = eps + b - a
    with np.errstate(over="ignore", under="ignore"):
        upper = np.exp(a + za) * -np.expm1(np.minimum(z - zz, 0.0)) * (1.0 + FINAL_RELATIVE)
        lower = np.exp(a - za) * -np.expm1(np.minimum(z + zz, 0.0)) * (1.0 - FINAL_RELATIVE)
    upper = np.clip(upper, np.finfo(np.float64).tiny, 1.0)
    return np.clip(lower, 0.0, 1.0), upper


def deterministic_delta(sigma: float, epochs: int, epsilons: np.ndarray | float) -> np.ndarray:
    """δ_D(ε) for E epochs of deterministic batches: one Gaussian with σ/√E."""
    return gaussian_delta(sigma / math.sqrt(epochs), epsilons)


def deterministic_bracket(sigma: float, epochs: int, epsilons) -> tuple[np.ndarray, np.ndarray]:
    """(lower, upper) bracket of δ_D(ε) for E epochs (module docstring).

    Every sampler epscert certifies (Poisson, shuffle, Balls-and-Bins, E epochs) is dominated by E
    Gaussian participations, i.e. this pair at σ/√E, so ``upper`` also caps every lower bound.
    """
    return gaussian_bracket(sigma / math.sqrt(epochs), epsilons)
