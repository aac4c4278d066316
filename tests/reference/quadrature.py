"""Independent deterministic quadrature reference for Balls-and-Bins hockey-stick divergences.

This module depends only on numpy and scipy and shares no code with ``epscert``.
It uses no random numbers.

Setting
-------
Balls-and-Bins with ``T`` steps and noise multiplier ``sigma`` gives the pair of
distributions on ``R^T``

    P = (1/T) * sum_t N(e_t, sigma^2 I_T),        Q = N(0, sigma^2 I_T),

with privacy loss

    L(x) = log P(x)/Q(x) = logsumexp_t(x_t / sigma^2) - log T - 1/(2 sigma^2).

The hockey-stick divergences are

    delta_remove(eps) = E_{x~P}[(1 - exp(eps - L(x)))_+]     (x = e_1 + sigma z by symmetry),
    delta_add(eps)    = E_{x~Q}[(1 - exp(eps + L(x)))_+]     (x = sigma z),

with z ~ N(0, I_T).

Method: "loss coordinates"
--------------------------
Let u_t = x_t / sigma^2.  Then u has independent Gaussian coordinates
u_t ~ N(mu_t, 1/sigma^2), where mu = e_1/sigma^2 for REMOVE and mu = 0 for ADD,
and the integrand depends on u only through W = logsumexp_t(u_t):

    REMOVE: (1 - exp(w0 - W))_+,   w0 = eps + log T + 1/(2 sigma^2)   (nonzero iff W > w0),
    ADD:    (1 - exp(W - w1))_+,   w1 = -eps + log T + 1/(2 sigma^2)  (nonzero iff W < w1).

Change variables u -> (w, a) with a = (a_2, ..., a_T) in R^{T-1}:

    u_1 = w - lse(0, a),     u_t = w + a_t - lse(0, a)   (t >= 2),

where lse(0, a) = log(1 + sum_t exp(a_t)).  The inverse is w = lse(u), a_t = u_t - u_1,
so the map is a bijection of R^T, and its Jacobian determinant is exactly 1 (the columns
are (1,...,1) and e_t - softmax_t(0, a) * (1,...,1); subtracting multiples of the first
column leaves det[(1,...,1), e_2, ..., e_T] = 1).  Hence

    delta = int_{w in kink-free half-line} g(w) f_W(w) dw,
    f_W(w) = int_{R^{T-1}} prod_t sigma * phi(sigma (u_t(w, a) - mu_t)) da,

with g(w) = 1 - exp(w0 - w) on [w0, inf) (REMOVE) or g(w) = 1 - exp(w - w1) on
(-inf, w1] (ADD).  The kink of (.)_+ sits exactly on the boundary w = w0 (resp. w1), so
in these coordinates the integrand is real-analytic on the whole integration domain:

* the outer w-integral is done with Gauss-Legendre on the finite interval
  [max(w0, w_lo), w_hi] (REMOVE) or [w_lo, min(w1, w_hi)] (ADD);
* the inner a-integral over R^{T-1} is done with the tensor trapezoidal rule, which
  converges geometrically for analytic, rapidly decaying integrands (the nearest
  singularities, from log(1 + e^a), are at Im a = +-pi).

Truncation (all with Z = 9 standard deviations, Phi(-9) ~ 1.1e-19):

* w in [max_t mu_t - Z/sigma, max_t mu_t + Z/sigma + log T]: outside this interval some
  u_t lies more than Z/sigma from its mean (W >= u_t for all t, W <= max_t u_t + log T);
* a_t in [mu_t - w - Z/sigma, w - mu_1 + Z/sigma]: below the lower end
  u_t <= w + a_t < mu_t - Z/sigma, above the upper end u_1 = w - lse(0, a) < mu_1 - Z/sigma.

Since the integrand factor g lies in [0, 1], the total truncation error is at most
P(some u_t is more than Z/sigma from mu_t) <= 2 T Phi(-Z).

Error estimate: the value is computed at a fine and at a coarser resolution (trapezoid
step and number of Gauss-Legendre nodes); both rules converge geometrically here, so
|fine - coarse| is (a conservative estimate of) the discretisation error of the fine
result.  The reported error is |fine - coarse| + 2 T Phi(-Z) + a rounding allowance.
If it exceeds ``tol`` (default 1e-8) a :class:`QuadratureAccuracyError` is raised.

For T = 1, W = u_1 and the method reduces to a 1-D Gauss-Legendre integral, which is
checked against the closed form

    delta_D(eps) = Phi(-sigma eps + 1/(2 sigma)) - e^eps Phi(-sigma eps - 1/(2 sigma)).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import log_ndtr, ndtr

__all__ = [
    "QuadratureAccuracyError",
    "bnb_delta_quadrature",
    "gaussian_delta_closed_form",
]

#: Number of standard deviations kept in every coordinate.
_Z = 9.0
#: Allowed steps (the T = 3 case already uses a 2-D trapezoidal grid per w node).
_ALLOWED_STEPS = (1, 2, 3)
#: (trapezoid step at sigma <= 1, Gauss-Legendre nodes) for the fine and coarse passes.
#: The trapezoid step is divided by sigma for sigma > 1, where the Gaussian factors in the
#: a-variables become narrower (their width in a is 1/sigma).
_FINE = (0.35, 96)
_COARSE = (0.5, 64)
_LOG_2PI = math.log(2.0 * math.pi)


class QuadratureAccuracyError(ArithmeticError):
    """Raised when the quadrature's own error estimate exceeds the requested tolerance."""


def gaussian_delta_closed_form(sigma: float, epsilon: float) -> float:
    """Hockey-stick divergence of N(1, sigma^2) vs N(0, sigma^2) (equal in both directions).

        delta_D(eps) = Phi(-sigma*eps + 1/(2 sigma)) - e^eps * Phi(-sigma*eps - 1/(2 sigma)),

    evaluated as exp(log_ndtr(.)) - exp(eps + log_ndtr(.)) so that neither term overflows
    and tiny values keep full relative accuracy in each term.  The result is clipped at 0
    (it is mathematically nonnegative; cancellation can only produce a ~1e-16 negative).
    """
    sigma = float(sigma)
    epsilon = float(epsilon)
    if not (sigma > 0 and math.isfinite(sigma)):
        raise ValueError(f"sigma must be positive and finite, got {sigma!r}")
    if not math.isfinite(epsilon):
        raise ValueError(f"epsilon must be finite, got {epsilon!r}")
    a = -sigma * epsilon + 0.5 / sigma
    b = -sigma * epsilon - 0.5 / sigma
    value = math.exp(float(log_ndtr(a))) - math.exp(epsilon + float(log_ndtr(b)))
    return max(value, 0.0)


def _means(sigma: float, steps: int, direction: str) -> np.ndarray:
    """Means of u_t = x_t / sigma^2 (each with standard deviation 1/sigma)."""
    mu = np.zeros(steps)
    if direction == "remove":
        mu[0] = 1.0 / sigma**2
    return mu


def _delta_loss_coordinates(
    sigma: float, steps: int, epsilon: float, direction: str, h: float, n_w: int
) -> float:
    """One quadrature pass in (w, a) coordinates (see module docstring).

    ``h`` is the trapezoid step in each a_t, ``n_w`` the number of Gauss-Legendre nodes in w.
    """
    T = steps
    mu = _means(sigma, T, direction)
    sd = 1.0 / sigma  # standard deviation of each u_t
    log_T = math.log(T)
    w_lo = float(mu.max()) - _Z * sd
    w_hi = float(mu.max()) + _Z * sd + log_T
    if direction == "remove":
        w_kink = epsilon + log_T + 0.5 / sigma**2  # g(w) = 1 - exp(w_kink - w), w >= w_kink
        lo, hi = max(w_kink, w_lo), w_hi
    else:
        w_kink = -epsilon + log_T + 0.5 / sigma**2  # g(w) = 1 - exp(w - w_kink), w <= w_kink
        lo, hi = w_lo, min(w_kink, w_hi)
    if lo >= hi:
        return 0.0  # the whole kink-free region lies in the truncated tail

    x, wts = np.polynomial.legendre.leggauss(n_w)
    w_nodes = 0.5 * (hi - lo) * x + 0.5 * (hi + lo)
    w_weights = 0.5 * (hi - lo) * wts
    if direction == "remove":
        g = -np.expm1(w_kink - w_nodes)
    else:
        g = -np.expm1(w_nodes - w_kink)

    # log of the product of the T Gaussian normalising constants sigma / sqrt(2 pi).
    log_norm = T * math.log(sigma) - 0.5 * T * _LOG_2PI
    half_s2 = 0.5 * sigma**2

    if T == 1:
        f_w = np.exp(log_norm - half_s2 * (w_nodes - mu[0]) ** 2)
        return float(np.sum(w_weights * g * f_w))

    total = 0.0
    for w, ww, gw in zip(w_nodes, w_weights, g):
        grids = []
        for t in range(1, T):
            a_lo = mu[t] - w - _Z * sd
            a_hi = w - mu[0] + _Z * sd
            if a_hi <= a_lo:
                grids = None
                break
            k = int(math.ceil((a_hi - a_lo) / h))
            grids.append(a_lo + h * np.arange(k + 1))
        if grids is None:
            continue
        A = np.meshgrid(*grids, indexing="ij", sparse=False) if T > 2 else [grids[0]]
        lse = np.zeros_like(A[0])
        for a_t in A:
            lse = np.logaddexp(lse, a_t)
        quad_form = (w - lse - mu[0]) ** 2
        for t, a_t in enumerate(A, start=1):
            quad_form = quad_form + (w + a_t - lse - mu[t]) ** 2
        f_w = float(np.exp(log_norm - half_s2 * quad_form).sum()) * h ** (T - 1)
        total += ww * gw * f_w
    return float(total)


def bnb_delta_quadrature(
    sigma: float, steps: int, epsilon: float, direction: str, *, tol: float = 1e-8
) -> tuple[float, float]:
    """Balls-and-Bins hockey-stick divergence by deterministic quadrature.

    Parameters
    ----------
    sigma : noise multiplier (> 0).
    steps : T in {1, 2, 3}.
    epsilon : the hockey-stick parameter (any finite real).
    direction : "remove" (delta_{P||Q}) or "add" (delta_{Q||P}).
    tol : the call raises :class:`QuadratureAccuracyError` if the error estimate exceeds it.

    Returns
    -------
    (value, error_estimate) with value = delta(epsilon) for the pair described in the
    module docstring and error_estimate = |fine - coarse| + 2 T Phi(-9) + rounding allowance.
    The value is clipped to [0, 1] (clipping can only reduce the error).
    """
    sigma = float(sigma)
    epsilon = float(epsilon)
    if not (sigma > 0 and math.isfinite(sigma)):
        raise ValueError(f"sigma must be positive and finite, got {sigma!r}")
    if not math.isfinite(epsilon):
        raise ValueError(f"epsilon must be finite, got {epsilon!r}")
    if isinstance(steps, bool) or int(steps) != steps or int(steps) not in _ALLOWED_STEPS:
        raise ValueError(f"steps must be one of {_ALLOWED_STEPS}, got {steps!r}")
    steps = int(steps)
    if direction not in ("remove", "add"):
        raise ValueError(f"direction must be 'remove' or 'add', got {direction!r}")

    scale = 1.0 / max(1.0, sigma)
    fine = _delta_loss_coordinates(
        sigma, steps, epsilon, direction, _FINE[0] * scale, _FINE[1]
    )
    coarse = _delta_loss_coordinates(
        sigma, steps, epsilon, direction, _COARSE[0] * scale, _COARSE[1]
    )
    truncation = 2.0 * steps * float(ndtr(-_Z))
    rounding = 1e-14
    error = abs(fine - coarse) + truncation + rounding
    if not (error <= tol):
        raise QuadratureAccuracyError(
            f"quadrature error estimate {error:.3e} exceeds tol {tol:.1e} "
            f"(sigma={sigma}, steps={steps}, epsilon={epsilon}, direction={direction}; "
            f"fine={fine!r}, coarse={coarse!r})"
        )
    return min(max(fine, 0.0), 1.0), error
