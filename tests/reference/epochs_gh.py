"""Independent reference for Balls-and-Bins with T = 2 over E = 1 or 2 epochs (numpy/scipy only).

Under Q the E-epoch likelihood ratio is Π_e S_e with S_e = (W_{e,1} + W_{e,2})/2 and
W = exp(Z/σ − 1/(2σ²)), Z ~ N(0, 1) i.i.d. (SPEC §1–2), and with K = e^ε

    δ_remove(ε) = E[(Π_e S_e − K)_+],     δ_add(ε) = E[(1 − K Π_e S_e)_+].

One epoch, by conditioning on W_1 = w (the lognormal's partial expectations
P(W <= x) = Φ(σ log x + 1/(2σ)) and E[W 1{W <= x}] = Φ(σ log x − 1/(2σ))):

    C(k) = E[(S − k)_+] = (1/2) E_w[ call(2k − w) ],  call(x) = 1 − x (x <= 0),
                                                       Φ̄(σ log x − 1/(2σ)) − x Φ̄(σ log x + 1/(2σ)) (x > 0)
    P(k) = E[(k − S)_+] = (1/2) E_w[ put(2k − w) ],   put(x) = x Φ(σ log x + 1/(2σ)) − Φ(σ log x − 1/(2σ)) (x > 0), 0 else.

The integrand in z (w = W(z)) is smooth on each side of z_b (where w = 2k), so each side gets its
own Gauss–Legendre rule on [−Z, z_b] and [z_b, Z] (Z = 12; the Gaussian mass beyond is < 4e-33).
Two epochs: δ_remove = E_{S_1}[S_1 C(K/S_1)] and δ_add = E_{S_1}[K S_1 P(1/(K S_1))], smooth in
(Z_11, Z_12), by tensor Gauss–Hermite. The error estimate is the difference to a coarser rule.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import ndtr

_Z = 12.0


def lognormal_call(x, sigma):
    """E[(L − x)_+] for the mean-one lognormal L = exp(Z/σ − 1/(2σ²)), Z ~ N(0, 1); 1 − x at x <= 0."""
    half = 0.5 / sigma
    lx = np.log(np.where(x > 0, x, 1.0))
    return np.where(x > 0, ndtr(-(sigma * lx - half)) - x * ndtr(-(sigma * lx + half)), 1.0 - x)


def lognormal_put(x, sigma):
    """E[(x − L)_+] for the same L; 0 at x <= 0."""
    half = 0.5 / sigma
    lx = np.log(np.where(x > 0, x, 1.0))
    return np.where(x > 0, x * ndtr(sigma * lx + half) - ndtr(sigma * lx - half), 0.0)


def _one_epoch(k: np.ndarray, sigma: float, kind: str, nodes: int) -> np.ndarray:
    """C(k) (kind 'call') or P(k) ('put') for a vector of k > 0."""
    k = np.asarray(k, dtype=np.float64)[:, None]
    zb = np.clip(sigma * np.log(2.0 * k) + 0.5 / sigma, -_Z, _Z)  # w(z_b) = 2k
    g, gw = np.polynomial.legendre.leggauss(nodes)
    total = np.zeros(k.shape[0])
    for a, b in ((-_Z, zb), (zb, _Z)):
        a = np.broadcast_to(a, zb.shape)
        b = np.broadcast_to(b, zb.shape)
        half = 0.5 * (b - a)
        z = 0.5 * (a + b) + half * g[None, :]
        w = np.exp(z / sigma - 0.5 / sigma**2)
        f = lognormal_call(2.0 * k - w, sigma) if kind == "call" else lognormal_put(2.0 * k - w, sigma)
        dens = np.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi)
        total += (half[:, 0] * ((f * dens) @ gw))
    return 0.5 * total


def _delta(sigma: float, epochs: int, epsilon: float, direction: str, nodes: int) -> float:
    kk = math.exp(epsilon)
    if epochs == 1:
        kind, arg = ("call", kk) if direction == "remove" else ("put", 1.0 / kk)
        val = float(_one_epoch(np.array([arg]), sigma, kind, nodes)[0])
        return val if direction == "remove" else kk * val
    z, w = np.polynomial.hermite_e.hermegauss(nodes)
    w = w / math.sqrt(2.0 * math.pi)
    z1, z2 = np.meshgrid(z, z, indexing="ij")
    weights = np.outer(w, w).ravel()
    s1 = (0.5 * (np.exp(z1 / sigma - 0.5 / sigma**2) + np.exp(z2 / sigma - 0.5 / sigma**2))).ravel()
    if direction == "remove":
        inner = s1 * _one_epoch(kk / s1, sigma, "call", nodes)
    else:
        inner = kk * s1 * _one_epoch(1.0 / (kk * s1), sigma, "put", nodes)
    return float(np.dot(weights, inner))


def bnb_delta_t2(sigma: float, epochs: int, epsilon: float, direction: str) -> tuple[float, float]:
    """(δ, error estimate) of Balls-and-Bins with T = 2 steps and ``epochs`` in {1, 2}."""
    if epochs not in (1, 2):
        raise ValueError(f"epochs must be 1 or 2, got {epochs!r}")
    if direction not in ("remove", "add"):
        raise ValueError(f"direction must be 'remove' or 'add', got {direction!r}")
    fine = _delta(sigma, epochs, epsilon, direction, 160)
    coarse = _delta(sigma, epochs, epsilon, direction, 120)
    return fine, abs(fine - coarse) + 1e-14
