"""A mode-tilted mixture estimate of the matrix mechanism's δ_remove: an independent check, not a certificate.

(The certified method ``tilted`` is another proposal, e^{θL} Q, whose weight depends on L alone:
:mod:`epscert.matrix.loss_tilt`. This module tilts each REMOVE component along its own mode.)

Notation of :mod:`epscert.matrix.values`: under Q, g ~ N(0, G) in R^b, v_k = G_kk,
x_k = g_k - v_k/2, L = log((1/b) Σ_k e^{x_k}) and δ_remove(ε) = E_Q[(e^L - e^ε)_+].

The proposal. For θ >= 1 let R_θ = (1/b) Σ_i N(θ G e_i, G): the REMOVE components P_i = N(G e_i, G)
pushed θ times as far along their own mean. A Gaussian with covariance G shifted by G u has density
exp(uᵀg - uᵀGu/2) against N(0, G), so

    W(g) = dR_θ/dQ(g) = (1/b) Σ_k exp(θ g_k - θ² v_k/2) = (1/b) Σ_k exp(θ x_k - θ(θ - 1) v_k/2) > 0,

Q is absolutely continuous with respect to R_θ, and

    δ_remove(ε) = E_{R_θ}[Y],   Y = (e^L - e^ε)_+ / W(g)      (unbiased for every θ >= 1).

θ = 1 is P itself, and Y is then the naive P-form value (1 - e^{ε - L})_+ in [0, 1]. Larger θ
samples the region {L > ε}, where one mode (and its correlated neighbours) is about ε + log b
above its mean, far more often: at n = 2000, b = 100, 16 bands, σ = 4.61 the relative variance per
sample was 74 at δ ≈ 10⁻⁸ and 49 at 10⁻⁶ (0.9% and 0.7% relative standard error from 10⁶ samples in
5 CPU s), where naive sampling needs about 10¹⁰ samples for 1% at 10⁻⁸; about as efficient per CPU
second as the conditional estimator (``benchmarks/matrix_tilted.py``, its log in
``benchmarks/results/matrix_tilted.log``).

Why it certifies nothing. A KL or Bernstein upper bound needs a bound on Y. With
c = θ(θ - 1) max_k v_k / 2, W >= e^{θ x_max - c}/b (keep the largest term), and e^L = e^{x_max} ρ/b
with ρ = Σ_k e^{x_k - x_max} in [1, b]. For θ > 1, maximising (u ρ/b - e^ε) b u^{-θ} over u = e^{x_max}
(at u = θ b e^ε/((θ - 1) ρ)) gives

    Y <= e^c (θ - 1)^{θ-1} θ^{-θ} (b e^ε)^{1-θ} ρ^θ,                                     (bound 1)

and, free of ρ, the power-mean inequality (W >= e^{-c} mean_k a_k^θ >= e^{-c} (mean_k a_k)^θ for
a_k = e^{x_k}) and the same maximisation over mean_k a_k give

    Y <= e^c (θ - 1)^{θ-1} θ^{-θ} e^{(1-θ) ε}          (attained near equal modes; bound 1 at ρ = b^{1/θ}).

Both are proven and :func:`tilted_value_bound` evaluates them; the test suite checks every sample
against them. On the region {L > ε} that carries δ, ρ stays small at the setting above (draws with
ρ > 6 carried 0.16% of the estimate, none had ρ > 8), and bound 1 at ρ0 is within 1–6% of the largest
draw with ρ <= ρ0 for ρ0 <= 3. But ρ reaches b on the sample space, and the power-mean bound is
about 2·10⁷ δ at δ ≈ 10⁻⁸: a certificate from that range alone would need 10⁹–10¹⁰ samples.
Truncating to {ρ <= ρ0} (range 1.8·10⁴ δ at ρ0 = 8) needs a certified bound on the P-mass of
{L > ε, ρ > ρ0} (h <= e^L, so E_Q[h 1_A] <= P(A)) of a few percent of δ. The bound we tried (Gaussian
concentration of every top-K sum of the modes, part 3 of the benchmark) does not exclude many modes
being equally high, and leaves a range of 8·10⁶ δ, a third of the untruncated one. So this module returns an estimate with its
standard error only, which the tests compare with the conditional estimator where no other method
resolves δ (``docs/matrix_mechanism.md``).

Numerics: L and log W by :func:`epscert.matrix.kernels.log_mean_exp`, and
Y = exp(L - log W) (-expm1(ε - L)), evaluated only where L > ε, where e^L/W <= e^{c + (1-θ) ε} (the
power-mean step above): no exponential overflows unless that constant does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from epscert.matrix import kernels as mk
from epscert.matrix.loss_tilt import log_peak
from epscert.rng import check_seed, stream_generator

#: Rows drawn per block (a b = 100 block is 1.6 MB per array).
BLOCK_ROWS = 2048

#: Spawn-key word of this estimator's stream (separate from the shards' streams).
STREAM_KEY = 0x7117ED


@dataclass(frozen=True)
class TiltedEstimate:
    """Mean and standard error of Y per ε, with the θ used and the largest value seen."""

    epsilons: tuple[float, ...]
    delta: np.ndarray
    std_error: np.ndarray
    samples: int
    theta: float
    max_value: np.ndarray


def default_theta(pair, epsilon: float) -> float:
    """A tilt that puts the tilted mode near where {L > ε} lives: θ v̄ - v̄/2 ≈ ε + log b - 1.

    Under component i of R_θ the tilted mode's x_i has mean θ v_i - v_i/2, and L > ε needs x_max near ε + log b less
    the log of a few near-maximal modes (about 1). A heuristic: θ changes the variance only, never the
    mean. Clamped to θ >= 1 (θ = 1 is naive sampling under P)."""
    vbar = float(np.mean(pair.diag))
    return max(1.0, (float(epsilon) + pair.log_bins + 0.5 * vbar - 1.0) / vbar)


def tilted_value_bound(pair, theta: float, epsilon: float, rho: np.ndarray | float | None = None) -> np.ndarray:
    """The proven upper bounds on Y (module docstring): bound 1 at the given ρ, capped by the
    power-mean bound (ρ = None: the power-mean bound alone). θ = 1: Y <= 1."""
    theta, epsilon = float(theta), float(epsilon)
    if theta == 1.0:
        return np.ones_like(np.asarray(1.0 if rho is None else rho, dtype=float))
    c = theta * (theta - 1.0) * float(np.max(pair.diag)) / 2.0
    log_k = c + log_peak(theta)
    with np.errstate(over="ignore"):  # an overflow gives inf, a true (useless) upper bound
        flat = np.exp(log_k + (1.0 - theta) * epsilon)
    if rho is None:
        return np.asarray(flat)
    log_b = pair.log_bins
    with np.errstate(over="ignore"):
        by_rho = np.exp(log_k + (1.0 - theta) * (log_b + epsilon) + theta * np.log(np.asarray(rho, dtype=float)))
    return np.minimum(by_rho, flat)


def tilted_values(pair, epsilons: np.ndarray, theta: float, rng: np.random.Generator, rows: int
                  ) -> tuple[np.ndarray, np.ndarray]:
    """``rows`` draws of Y (rows x len(epsilons)) from R_θ, and ρ = Σ_k e^{x_k - x_max} per row."""
    b = pair.bins
    z = rng.standard_normal((rows, b))
    g = mk.apply_factor(np, z, pair.factor_tuple())
    g += theta * pair.g[rng.integers(0, b, size=rows)]
    x = g - pair.half_diag
    loss = mk.log_mean_exp(np, x)
    log_w = mk.log_mean_exp(np, theta * x - theta * (theta - 1.0) * pair.half_diag)
    rho = np.exp(x - x.max(axis=1, keepdims=True)).sum(axis=1)
    gap = epsilons[None, :] - loss[:, None]  # ε - L
    inside = gap < 0.0
    values = np.zeros(gap.shape)
    rows, cols = np.nonzero(inside)
    values[rows, cols] = np.exp((loss - log_w)[rows]) * -np.expm1(gap[rows, cols])
    return values, rho


def tilted_remove_estimate(pair, epsilons, samples: int, seed: int = 0, theta: float | None = None
                           ) -> TiltedEstimate:
    """Mean and standard error of δ_remove(ε) from ``samples`` draws of R_θ (θ: :func:`default_theta`
    at the middle ε unless given). ``pair``: a :class:`~epscert.matrix.pair.MatrixPair`."""
    try:
        eps = np.atleast_1d(np.asarray(epsilons, dtype=float))
    except (TypeError, ValueError):
        raise ValueError(f"epsilons must be a list of finite numbers >= 0, got epsilons={epsilons!r}") from None
    if eps.ndim != 1 or eps.size == 0 or not np.all(np.isfinite(eps)) or np.any(eps < 0):
        raise ValueError(f"epsilons must be finite and >= 0, got epsilons={list(np.ravel(eps))!r}")
    if isinstance(samples, bool) or not isinstance(samples, (int, np.integer)) or samples < 2:
        raise ValueError(f"samples must be an integer >= 2, got samples={samples!r}")
    seed = check_seed(seed)
    if theta is None:
        theta = default_theta(pair, float(np.median(eps)))
    elif isinstance(theta, bool) or not isinstance(theta, (int, float, np.integer, np.floating)):
        raise ValueError(f"theta must be a finite number >= 1, got theta={theta!r}")
    theta = float(theta)
    if not (math.isfinite(theta) and theta >= 1.0):
        raise ValueError(f"theta must be a finite number >= 1, got theta={theta!r}")
    rng = stream_generator(seed, STREAM_KEY)
    count, mean, m2 = 0, np.zeros(eps.size), np.zeros(eps.size)
    largest = np.zeros(eps.size)
    while count < samples:
        rows = min(BLOCK_ROWS, samples - count)
        values, _ = tilted_values(pair, eps, theta, rng, rows)
        # Chan et al.'s merge of (count, mean, sum of squared deviations): no E[Y²] - mean² cancellation
        block_mean = values.mean(axis=0)
        block_m2 = np.square(values - block_mean).sum(axis=0)
        step = block_mean - mean
        total = count + rows
        mean = mean + step * (rows / total)
        m2 = m2 + block_m2 + np.square(step) * (count * rows / total)
        count = total
        largest = np.maximum(largest, values.max(axis=0))
    std_error = np.sqrt(m2 / (samples - 1) / samples)
    return TiltedEstimate(tuple(float(e) for e in eps), mean, std_error, int(samples), theta, largest)
