"""Deterministic bounds for the matrix mechanism with Balls-and-Bins batches (no sampling).

Notation of :mod:`epscert.matrix.pair`: under Q, g ~ N(0, G) in R^b, and

    δ_remove = E_Q[F_R(g)],  F_R(g) = ((1/b) Σ_k e^{g_k - v_k/2} - e^ε)_+,
    δ_add    = E_Q[F_A(g)],  F_A(g) = (1 - e^ε (1/b) Σ_k e^{g_k - v_k/2})_+,

with v_k = G_kk. Both F are convex in g and supermodular (∂²F/∂g_k∂g_l >= 0 for k ≠ l: a convex
function of a sum of increasing functions of single coordinates). Two classical comparisons
of Gaussian vectors then bracket δ without sampling:

- Supermodular order (Slepian-type): for centred Gaussian vectors with the same variances, raising
  any off-diagonal covariance raises E[F] (d/dθ E_{Σ_θ}[F] = ½ Σ_{k≠l} (Σ' - Σ)_kl E[∂²F/∂g_k∂g_l] >= 0
  along Σ_θ = Σ + θ(Σ' - Σ); the kink of (·)_+ is handled by smoothing, the limit keeps the sign).
  Since C >= 0, G >= 0 entrywise: G sits between diag(G) (all covariances 0) and the comonotone
  matrix (√v_k √v_l) (all correlations 1), whence

      δ(diag(G)) <= δ(G) <= δ(comonotone).

- Convex order of the factors: with independent coordinates, W_k = e^{g_k - v_k/2} is lognormal with
  mean 1, increasing in the convex order with v_k; F is convex in each W_k, so lowering every
  v_k to v_min lowers δ. In the comonotone vector all g_k = √v_k ζ (one ζ ~ N(0, 1)); raising every
  v_k to v_max raises the (1/b) Σ_k W_k in the convex order (it becomes a single W with log-variance
  v_max, which dominates any mixture of lognormals with smaller log-variances and the same mean:
  each W_k(ζ) is a conditional expectation of the v_max factor), so δ rises.

Hence (``independent_lower_bound`` / ``comonotone_upper_bound``):

    lower: δ of b independent modes with variance v_min = the one-epoch Balls-and-Bins pair with
           T = b steps at σ_eff = 1/√v_min: the lower side of the PLD bracket (:mod:`epscert.allocation`);
    upper: the Gaussian mechanism with sensitivity √v_max (no amplification by sampling at all):
           the upper side of the certified Gaussian bracket (SPEC §7 at σ = 1/√v_max).

The upper bound ignores the sampling entirely and is loose; it is the honest ceiling. At one participation
(G banded in the natural order) ``comonotone_upper_bound`` also takes, ε by ε, the smaller of it and the
same comparison made inside J independent blocks (:mod:`epscert.matrix.block_bound`: a block-diagonal G'' ⪰ G,
each block at most one mode, i.e. Balls-and-Bins with T = J steps), which keeps some of the amplification. The lower
bound is tight when the modes barely overlap (C close to diagonal) and exact in law for C = c·I when
b divides n, where the pair *is* Balls-and-Bins and ``bracket_upper``/``bracket_lower`` give both sides of
its bracket. One bin (b = 1) is the Gaussian mechanism itself (``exact``).
"""

from __future__ import annotations

import math

import numpy as np

from epscert.allocation.bracket import bracket_for
from epscert.analytic.deterministic import gaussian_bracket
from epscert.matrix.block_bound import block_upper
from epscert.names import Direction, Method


def matrix_bounds(gram, sigma: float, method: Method, direction: Direction, eps: np.ndarray):
    """(lower, upper, guarantee, bound name, resolution) of an analytic method of the matrix mechanism.

    ``gram`` is the :class:`~epscert.matrix.strategies.gram.ModeGram`; v = diag(G0)/σ².
    """
    v = np.diag(gram.g0) / sigma**2
    v_min, v_max = float(v.min()), float(v.max())
    b = gram.bins
    if method is Method.EXACT:  # b = 1: the Gaussian mechanism with sensitivity √v (σ_eff = 1/√v)
        lo, hi = gaussian_bracket(1.0 / math.sqrt(v_max), eps)
        return lo, hi, "exact", "gaussian_closed_form", 0.0
    if method is Method.COMONOTONE_UPPER_BOUND:
        upper = gaussian_bracket(1.0 / math.sqrt(v_max), eps)[1]
        blocks = block_upper(gram, sigma, direction.value, eps)  # one participation: comonotone inside blocks
        if blocks is None:
            return None, upper, "upper_bound", "comonotone_gaussian", 0.0
        return None, np.minimum(upper, blocks), "upper_bound", "comonotone_gaussian+blocks_allocation", 0.0
    if method in (Method.INDEPENDENT_LOWER_BOUND, Method.BRACKET_LOWER, Method.BRACKET_UPPER):
        if b == 1:
            lo, hi = gaussian_bracket(1.0 / math.sqrt(v_max), eps)
            if method is Method.BRACKET_UPPER:
                return None, hi, "upper_bound", "gaussian_closed_form", 0.0
            return lo, None, "lower_bound", "gaussian_closed_form", 0.0
        bracket = bracket_for(1.0 / math.sqrt(v_min), b, 1)
        if method is Method.BRACKET_UPPER:  # validated: C = c·I and b | n, so every v_k = v_min
            return (None, bracket.delta_side(eps, direction.value, "upper"), "upper_bound", "allocation_bracket_upper",
                    bracket.resolution)
        name = "allocation_bracket_lower" if method is Method.BRACKET_LOWER else "independent_modes_bracket_lower"
        return bracket.delta_side(eps, direction.value, "lower"), None, "lower_bound", name, bracket.resolution
    raise ValueError(f"method={method.value!r} is not an analytic method of the matrix mechanism")
