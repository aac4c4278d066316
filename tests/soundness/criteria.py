"""Acceptance regions of the statistical tests, each at a stated false-failure probability.

Every statistical assertion in this suite uses a fixed seed (so it is deterministic), and its
acceptance region is chosen so that, over the random choice of that seed, a *correct*
implementation would fail it with probability at most ``FALSE_FAILURE`` (1e-4) per check.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

#: False-failure probability of each statistical check.
FALSE_FAILURE = 1e-4
#: Bound on |skewness| of the per-sample values Y at the coverage points (δ/s >= 0.05 there).
#: The studentised mean of m values has bias -γ/(2√m) + O(1/m) (Edgeworth expansion, Hall 1992),
#: which is not sampling noise and is added to the tolerance of the mean z-score.
MAX_SKEWNESS = 3.0


def allowed_misses(reps: int, beta: float, alpha: float = FALSE_FAILURE) -> int:
    """Largest miss count accepted when each of ``reps`` UCBs misses with probability <= β.

    Misses ~ Binomial(reps, β') with β' <= β, so Pr[misses > k] <= α for
    k = binom.ppf(1 - α, reps, β) (ppf gives the smallest k with CDF(k) >= 1 - α).
    """
    return int(stats.binom.ppf(1.0 - alpha, reps, beta))


def z_mean_bounds(z: np.ndarray, samples: int, alpha: float = FALSE_FAILURE) -> tuple[float, float]:
    """Two-sided acceptance interval for mean(z) when E z = 0 (up to the Edgeworth bias).

    Sampling noise: mean(z) / (sd(z)/√N) ~ t_{N-1}; two-sided at α. Plus the skewness allowance
    MAX_SKEWNESS / (2√m) on either side (a deterministic bias, not noise).
    """
    n = z.size
    noise = stats.t.isf(alpha / 2.0, n - 1) * float(np.std(z, ddof=1)) / math.sqrt(n)
    bias = MAX_SKEWNESS / (2.0 * math.sqrt(samples))
    return -(noise + bias), noise + bias


def z_sd_bounds(z: np.ndarray, alpha: float = FALSE_FAILURE) -> tuple[float, float]:
    """Two-sided acceptance interval for sd(z) when Var z = 1.

    For normal z, (N-1) s² ~ χ²_{N-1}. Studentised means of skewed values have slightly heavy
    tails, so the χ² is used with Satterthwaite's effective degrees of freedom
    ν = 2 / (2/(N-1) + κ/N), κ = max(sample excess kurtosis, 0): the variance of s² is
    σ⁴ (2/(N-1) + κ/N). Bounds are sqrt(χ²_ν quantiles at α/2 and 1-α/2 divided by ν).
    """
    n = z.size
    kappa = max(float(stats.kurtosis(z, fisher=True, bias=False)), 0.0)
    nu = 2.0 / (2.0 / (n - 1) + kappa / n)
    return (math.sqrt(stats.chi2.ppf(alpha / 2.0, nu) / nu),
            math.sqrt(stats.chi2.isf(alpha / 2.0, nu) / nu))


def two_sample_z_limit(alpha: float = FALSE_FAILURE) -> float:
    """|Δ| / sqrt(se1² + se2²) limit for two independent estimates of the same δ (two-sided α)."""
    return float(stats.norm.isf(alpha / 2.0))
