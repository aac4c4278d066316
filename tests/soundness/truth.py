"""Independent ground truth for the soundness tests (numpy/scipy only, no epscert code).

Balls-and-Bins with T = 2 and E epochs, by deterministic quadrature
====================================================================

Per epoch write u = x_1/σ², v = x_2/σ² (independent, variance 1/σ² each) and
s = u + v, d = u - v. Because u and v have equal variances, s and d are independent
Gaussians with variance 2/σ². The one-epoch loss splits into a Gaussian part and a
one-dimensional part:

    logsumexp(u, v) = s/2 + h(d),   h(d) = log(2 cosh(d/2)),
    L = logsumexp(u, v) - c,        c = log 2 + 1/(2σ²).

REMOVE (x ~ P_B, by symmetry x = e_1 + σz): s, d ~ N(1/σ², 2/σ²) and ℓ = L.
ADD    (x ~ Q_B = N(0, σ²I)):               s, d ~ N(0, 2/σ²)    and ℓ = -L.

Summing E independent epochs, ℓ_total = G + Σ_e a(d_e), where G is Gaussian:

    REMOVE: G = Σ s_e/2 - E c ~ N(E/(2σ²) - E c, E/(2σ²)),  a(d) = h(d);
    ADD:    G = E c - Σ s_e/2 ~ N(E c,            E/(2σ²)),  a(d) = -h(d).

Given the d's, the Gaussian expectation has a closed form: for G ~ N(μ, v) and k = ε - Σ a(d_e),

    K(k) = E[(1 - e^{k - G})_+] = Φ̄((k - μ)/√v) - e^{k - μ + v/2} Φ̄((k - μ + v)/√v),

which is smooth in k, so δ(ε) = E_d[K(ε - Σ_e a(d_e))] is an E-dimensional integral of a
smooth (piecewise analytic) function: a tensor composite Gauss-Legendre rule over
d ∈ μ_d ± 9 sd converges fast. The error estimate is |fine - coarse| plus the truncated
Gaussian mass.

The same decomposition gives the exact mean of the *order-statistic* ADD estimator at
T = 2 with ranks {1} (the only ranks epscert allows there, k_R <= T - 1): it bounds the
sum of exponentials by its largest term only, i.e. replaces logsumexp(u, v) by
max(u, v) = s/2 + |d|/2. That estimator's per-sample value is unbiased for

    δ̃_add(ε) = E[(1 - e^{ε - ℓ̃})_+],  ℓ̃ = c - max(u, v)  (summed over epochs),

which is >= δ_add(ε) (the bound is pessimistic). ``kind="top1"`` computes it (a(d) = -|d|/2,
with a panel break at d = 0 where |d| has its kink).

Validation lives in ``test_truth.py``: E = 1 against ``tests/reference/quadrature.py``
(an unrelated change of variables) and against scipy ``quad`` in the variable max(u, v).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import log_ndtr, ndtr

__all__ = ["TruthAccuracyError", "bnb2_delta", "gaussian_delta", "log_gaussian_delta"]

#: Standard deviations of each d kept (mass outside: 2 Φ̄(9) ≈ 2.3e-19 per epoch).
_Z = 9.0
#: (panels, Gauss-Legendre nodes per panel) of the fine and the coarse rule.
_FINE = (48, 12)
_COARSE = (32, 8)
#: Epochs supported (the rule is a tensor product: cost grows as (panels * nodes)^E).
_MAX_EPOCHS = 2


class TruthAccuracyError(ArithmeticError):
    """The quadrature's own error estimate exceeds the requested tolerance."""


def gaussian_delta(sigma: float, epsilon: float) -> float:
    """δ(ε) of N(1, σ²) vs N(0, σ²): Φ(-σε + 1/(2σ)) - e^ε Φ(-σε - 1/(2σ)) (log-space)."""
    a = float(log_ndtr(-sigma * epsilon + 0.5 / sigma))
    b = float(log_ndtr(-sigma * epsilon - 0.5 / sigma))
    return max(math.exp(a) * -math.expm1(min(epsilon + b - a, 0.0)), 0.0)


def log_gaussian_delta(sigma: float, epsilon: float) -> float:
    """log δ(ε) of N(1, σ²) vs N(0, σ²), for tails far below the float range (δ = 1e-10000).

    log δ = log Φ(a) + log(1 - e^{ε + log Φ(b) - log Φ(a)}), a = -σε + 1/(2σ), b = a - 1/σ.
    The second term is computed with expm1/log1p; its relative accuracy degrades like
    1e-16 |log Φ(a)| / |ε + log Φ(b) - log Φ(a)|, fine for order-of-magnitude comparisons.
    """
    la = float(log_ndtr(-sigma * epsilon + 0.5 / sigma))
    lb = float(log_ndtr(-sigma * epsilon - 0.5 / sigma))
    x = min(epsilon + lb - la, 0.0)
    if x == 0.0:
        return -math.inf
    return la + (math.log(-math.expm1(x)) if x > -math.log(2.0) else math.log1p(-math.exp(x)))


def _gaussian_part(k: np.ndarray, mu: float, var: float) -> np.ndarray:
    """K(k) = E[(1 - e^{k - G})_+] for G ~ N(mu, var), evaluated in log space."""
    sd = math.sqrt(var)
    log_a = log_ndtr((mu - k) / sd)  # log Pr[G > k]
    log_b = k - mu + 0.5 * var + log_ndtr((mu - k - var) / sd)  # log e^k E[e^{-G}; G > k]
    return np.maximum(np.exp(log_a) * -np.expm1(np.minimum(log_b - log_a, 0.0)), 0.0)


def _rule(lo: float, hi: float, breaks: tuple[float, ...], panels: int, nodes: int):
    """Composite Gauss-Legendre nodes/weights on [lo, hi], with panel edges at ``breaks``."""
    edges = np.linspace(lo, hi, panels + 1)
    inner = [b for b in breaks if lo < b < hi]
    edges = np.unique(np.concatenate([edges, inner]))
    x, w = np.polynomial.legendre.leggauss(nodes)
    half = 0.5 * np.diff(edges)
    mid = 0.5 * (edges[1:] + edges[:-1])
    pts = (mid[:, None] + half[:, None] * x[None, :]).ravel()
    wts = (half[:, None] * w[None, :]).ravel()
    return pts, wts


def _delta_once(sigma: float, epochs: int, epsilon: float, direction: str, kind: str,
                panels: int, nodes: int) -> float:
    inv_var = 1.0 / sigma**2
    c = math.log(2.0) + 0.5 * inv_var
    var_g = epochs * 0.5 * inv_var
    sd_d = math.sqrt(2.0 * inv_var)
    if direction == "remove":
        mu_g, mu_d = epochs * (0.5 * inv_var - c), inv_var
        sign = 1.0
    else:
        mu_g, mu_d = epochs * c, 0.0
        sign = -1.0
    if kind == "exact":
        def a_of(d):
            return sign * np.logaddexp(0.5 * d, -0.5 * d)
    else:  # "top1": largest term only (ADD order statistics with ranks {1} at T = 2)
        def a_of(d):
            return sign * 0.5 * np.abs(d)
    pts, wts = _rule(mu_d - _Z * sd_d, mu_d + _Z * sd_d, (0.0,), panels, nodes)
    dens = wts * np.exp(-0.5 * ((pts - mu_d) / sd_d) ** 2) / (sd_d * math.sqrt(2.0 * math.pi))
    a1 = a_of(pts)
    if epochs == 1:
        return float(np.sum(dens * _gaussian_part(epsilon - a1, mu_g, var_g)))
    total = 0.0
    for a_first, w_first in zip(a1, dens):  # epochs == 2: outer loop keeps memory small
        total += w_first * float(np.sum(dens * _gaussian_part(epsilon - a_first - a1, mu_g, var_g)))
    return total


def bnb2_delta(sigma: float, epochs: int, epsilon: float, direction: str, *,
               kind: str = "exact", tol: float = 1e-9) -> tuple[float, float]:
    """(δ, error estimate) for Balls-and-Bins with T = 2 over ``epochs`` epochs (see module doc).

    ``kind="exact"`` is the true hockey-stick divergence; ``kind="top1"`` (ADD only) is the
    expectation of the order-statistic ADD estimator with ranks {1}.
    """
    if direction not in ("remove", "add"):
        raise ValueError(f"direction must be 'remove' or 'add', got direction={direction!r}")
    if kind not in ("exact", "top1") or (kind == "top1" and direction != "add"):
        raise ValueError(f"kind must be 'exact', or 'top1' with direction='add', got kind={kind!r}")
    if not 1 <= epochs <= _MAX_EPOCHS:
        raise ValueError(f"epochs must be in 1..{_MAX_EPOCHS}, got epochs={epochs!r}")
    fine = _delta_once(sigma, epochs, epsilon, direction, kind, *_FINE)
    coarse = _delta_once(sigma, epochs, epsilon, direction, kind, *_COARSE)
    err = abs(fine - coarse) + 2.0 * epochs * float(ndtr(-_Z)) + 1e-14
    if not err <= tol:
        raise TruthAccuracyError(f"error estimate {err:.2e} > tol {tol:.0e} (sigma={sigma}, "
                                 f"epochs={epochs}, epsilon={epsilon}, direction={direction}, kind={kind})")
    return min(max(fine, 0.0), 1.0), err
