"""Balls-and-Bins whose step is a Gaussian with a random public sensitivity: a mixture of lognormal factors.

**The pair.** One epoch of T steps; the record's bin t is uniform on [T] and, independently for every step,
a public index K_t ~ w (weights w_1..w_K on noise levels σ_1..σ_K) says at which noise that step's output is
drawn. Given the indices, the pair is Balls-and-Bins with per-step noise σ_{K_t}, and

    dP/dQ = (1/T) Σ_t Y_t,      Y_t = exp(Z_t/σ_{K_t} − 1/(2σ_{K_t}²)),

with the Y_t i.i.d. under Q, each a mixture of the lognormal factors W of :mod:`epscert.allocation.tails`
with E_Q[Y] = 1. So δ_remove(ε) = E_Q[(S − e^ε)_+] and δ_add(ε) = E_Q[(1 − e^ε S)_+] for S the mean of T
i.i.d. copies of Y. It is what :mod:`epscert.matrix.block_bound` needs (each block of one-participation modes
is below such a Y in the convex order), not a sampling scheme of its own.

**The bracket.** Everything of :class:`~epscert.allocation.bracket.AllocationBracket` holds with Y for W:

1. *base law* (:func:`~epscert.allocation.tails.mixture_base_laws`): Y on [0, c] on one grid, each cell's
   mass and first moment the weighted sums of the components' (exact integrals, the mixing roundings in the
   relative mass error). The spread and the contraction act on a cell's mass and mean only, so the upper
   and lower laws are ⪰_cx and ⪯_cx Y·1{Y <= c} as for one component.
2. *chains* (:func:`~epscert.allocation.epoch.mean_of_steps`): the mean of T independent copies by doubling,
   valid for any base law.
3. *cap* (:mod:`epscert.allocation.tails`): with G the event that every Y_t <= c, the argument there uses only
   that the Y_t are i.i.d. with E_Q[Y] = 1, so the cap terms are E_Q[Y 1{Y > c}] + (T − 1) P(Y > c) (remove)
   and T·P(Y > c) (add), each linear in the law of Y: the weighted sums of the components' terms
   (:func:`~epscert.allocation.tails.cap_terms` at σ_k with the one c), rounded up by 1 + (K + 2)·2u for the
   products and the sum of nonnegative terms. c is the cap of the smallest σ (the heaviest tail); any c is
   sound, c only decides how much of δ the grid holds.

Only whole single epochs are supported (no mid-epoch prefix, no epochs > 1).
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from epscert.allocation.bracket import AllocationBracket
from epscert.allocation.cells import UNIT_ROUNDOFF
from epscert.allocation.epoch import ChainLaw, mean_of_steps
from epscert.allocation.tails import cap_terms, mixture_base_laws, mixture_cells

#: Most components (each costs one pass of the base law's integrals; the chains do not grow with it).
MAX_COMPONENTS = 256


def _check_mixture(sigmas, weights) -> tuple[tuple[float, ...], tuple[float, ...]]:
    try:
        s = np.asarray(sigmas, dtype=np.float64).ravel()
        w = np.asarray(weights, dtype=np.float64).ravel()
    except (TypeError, ValueError):
        raise ValueError(f"sigmas and weights must be sequences of numbers, got sigmas={sigmas!r}, "
                         f"weights={weights!r}") from None
    for k, sigma in enumerate(s):
        if not (math.isfinite(sigma) and sigma > 0.0):
            raise ValueError(f"sigmas[{k}] must be positive and finite, got {sigma}")
    if s.size == 0 or s.size != w.size or s.size > MAX_COMPONENTS:
        raise ValueError(f"sigmas and weights must have the same length in [1, {MAX_COMPONENTS}], got "
                         f"{s.size} and {w.size}")
    # the mixing allowance covers weights that are roundings of probabilities summing to 1 (one rounding each),
    # whose computed sum is within (2K + 2)u of 1; anything further off is not such a rounding
    if not np.all(np.isfinite(w)) or np.any(w <= 0.0) or abs(math.fsum(w) - 1.0) > (2 * w.size + 2) * UNIT_ROUNDOFF:
        raise ValueError(f"weights must be positive and sum to 1 (each the rounding of a probability), got "
                         f"weights={weights!r}")
    return tuple(float(x) for x in s), tuple(float(x) for x in w)


class MixtureBracket(AllocationBracket):
    """Certified bounds on δ(ε) of one epoch of T steps whose factor is the mixture Σ_k w_k·W(σ_k) (module
    docstring). Accuracy settings are the defaults of the smallest σ_k; each σ_k must be >= ``BRACKET_MIN_SIGMA``.
    """

    def __init__(self, sigmas, weights, steps: int):
        sigmas, weights = _check_mixture(sigmas, weights)
        super().__init__(min(sigmas), steps, 1)  # validates the smallest σ and T; its settings and cap c
        self.sigmas, self.weights = sigmas, weights
        mixture_cells(sigmas, self._log_c, self.settings["base_cells"], self.settings["tau"])  # too wide: refused now
        terms = [cap_terms(s, self.steps, 1, self._log_c) for s in sigmas]
        up = 1.0 + 2.0 * (len(sigmas) + 2) * UNIT_ROUNDOFF
        self.caps = {key: up * math.fsum(w * t[key] for w, t in zip(weights, terms)) for key in ("remove", "add")}

    def __repr__(self) -> str:
        return f"MixtureBracket(sigmas={self.sigmas}, weights={self.weights}, steps={self.steps})"

    def law(self, chain: str) -> ChainLaw:
        """The mean of T independent copies of Y·1{Y <= c} in ``chain`` (module docstring, steps 1–2)."""
        if chain not in ("lower", "upper"):
            raise ValueError(f"chain must be 'lower' or 'upper', got chain={chain!r}")
        st = self.settings
        lower, upper, rel_mass, value_rel = mixture_base_laws(self.sigmas, self.weights, self._log_c,
                                                              st["base_cells"], st["tau"])
        base = ChainLaw(lower, rel_mass, value_rel) if chain == "lower" else ChainLaw(upper, rel_mass, 0.0)
        return mean_of_steps(base, self.steps, chain, cells=st["cells"], tau=st["tau"], shape=st["shape"])


@lru_cache(maxsize=8)
def mixture_bracket_for(sigmas: tuple[float, ...], weights: tuple[float, ...], steps: int) -> MixtureBracket:
    """The mixture bracket at the default settings, built once per (σ's, weights, T) in a process."""
    return MixtureBracket(sigmas, weights, int(steps))
