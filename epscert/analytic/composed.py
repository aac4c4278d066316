"""Multi-epoch lower bounds through the one-epoch statistic M = max_t w_t (SPEC §7).

Slicing M into intervals is a post-processing of one epoch, so the pair of interval
probabilities (p_k, q_k) is dominated by the true one-epoch pair, and its E-fold
composition lower-bounds the E-epoch δ (dynamic shuffling, Balls-and-Bins). Rounding
each interval's privacy loss DOWN onto the grid keeps the bound a lower bound (δ is
monotone in the losses), and so does dropping atoms (all contributions are >= 0).
The E-fold composition and δ(ε) are computed by dp_accounting's PLD machinery in its
optimistic mode (``pessimistic_estimate=False``), which also only drops or lowers mass.

Resolution (issue 12): the E-fold composition is one FFT power when dense, so the value carries
the floating-point allowance of :mod:`epscert.analytic.resolution` (tail mass 1e-15 plus the FFT
error, about 2e-12 for E = 20 and two steps). :func:`composed_lower_bounds` reports
value(1 - rel) - abs, and 0 below the resolution: the FFT round-off floor (1e-16 to 1e-15) is
never taken as a lower bound.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from dp_accounting.pld import privacy_loss_distribution as pld_lib

from epscert.analytic.cube import PAIR_MEANS, c_search_range, log1mexp, log_cdf_max
from epscert.analytic.resolution import Resolution, composition_resolution
from epscert.params import Direction

#: Breakpoints of the slicing of M.
SLICES = 600
#: Atoms lighter than this are dropped (lowers δ: still a lower bound).
MIN_LOG_MASS = -700.0


def _log_interval_masses(edges: np.ndarray, mean: float, sigma: float, steps: int) -> np.ndarray:
    """log Pr[M in [e_k, e_{k+1})] with e_0 = -inf, e_{K+1} = +inf, tail-accurate."""
    log_f = np.concatenate([[-np.inf], log_cdf_max(edges, mean, sigma, steps), [0.0]])
    log_s = log1mexp(log_f)
    lo_f, hi_f = log_f[:-1], log_f[1:]
    lo_s, hi_s = log_s[:-1], log_s[1:]
    with np.errstate(invalid="ignore", divide="ignore"):
        from_cdf = hi_f + log1mexp(lo_f - hi_f)
        from_sf = lo_s + log1mexp(hi_s - lo_s)
    out = np.where(hi_f < math.log(0.5), from_cdf, from_sf)
    return np.where(np.isnan(out), -np.inf, out)  # both edges underflowed: mass < 1e-308, dropped


def sliced_pair(sigma: float, steps: int, pair: str, eps_hint: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """log masses (log p_k, log q_k) of the sliced statistic under P and Q."""
    lo, hi = c_search_range(eps_hint, sigma, steps)
    edges = np.linspace(lo, hi, SLICES)
    mu_p, mu_q = PAIR_MEANS[pair]
    return (_log_interval_masses(edges, mu_p, sigma, steps),
            _log_interval_masses(edges, mu_q, sigma, steps))


def _rounded_pmf(log_mass: np.ndarray, log_other: np.ndarray, interval: float) -> tuple[dict[int, float], float]:
    """Losses log(mass/other) rounded DOWN to the grid; mass where other == 0 goes to infinity."""
    pmf: dict[int, float] = {}
    inf_mass = 0.0
    for lm, lo in zip(log_mass.tolist(), log_other.tolist()):
        if lm < MIN_LOG_MASS or not math.isfinite(lm):
            continue
        if lo == -math.inf:
            # Gaussian interval masses are never 0: the other side underflowed. Dropping the atom
            # lowers δ (a lower bound stays one); an infinite loss could overstate it.
            continue
        k = math.floor((lm - lo) / interval)
        pmf[k] = pmf.get(k, 0.0) + math.exp(lm)
    return pmf, inf_mass


@functools.lru_cache(maxsize=16)
def sliced_pld(sigma: float, steps: int, pair: str, direction: Direction,
               discretization: float, eps_hint: float) -> pld_lib.PrivacyLossDistribution:
    """The PLD of the sliced one-epoch pair, for one direction (a lower bound)."""
    if direction is Direction.BOTH:
        raise ValueError("composed_lower_pld needs direction remove or add, got direction='both'")
    log_p, log_q = sliced_pair(sigma, steps, pair, eps_hint)
    if direction is Direction.REMOVE:
        pmf, inf_mass = _rounded_pmf(log_p, log_q, discretization)
    else:
        pmf, inf_mass = _rounded_pmf(log_q, log_p, discretization)
    return pld_lib.PrivacyLossDistribution.create_from_rounded_probability(
        pmf, inf_mass, discretization, pessimistic_estimate=False)


@functools.lru_cache(maxsize=16)
def composed_lower_pld(sigma: float, steps: int, epochs: int, pair: str, direction: Direction,
                       discretization: float, eps_hint: float) -> pld_lib.PrivacyLossDistribution:
    """The E-fold composed PLD of the sliced one-epoch pair, for one direction (a lower bound)."""
    pld = sliced_pld(sigma, steps, pair, direction, discretization, eps_hint)
    return pld.self_compose(epochs) if epochs > 1 else pld


@functools.lru_cache(maxsize=16)
def composed_resolution(sigma: float, steps: int, epochs: int, pair: str, direction: Direction,
                        discretization: float, eps_hint: float) -> Resolution:
    """Resolution of :func:`composed_lower_pld` (:mod:`epscert.analytic.resolution`)."""
    single = sliced_pld(sigma, steps, pair, direction, discretization, eps_hint)
    composed = composed_lower_pld(sigma, steps, epochs, pair, direction, discretization, eps_hint)
    return composition_resolution(single._pmf_remove, composed._pmf_remove, epochs)  # noqa: SLF001


def sliced_delta(pld: pld_lib.PrivacyLossDistribution, epsilon: float) -> float:
    """δ(ε) of a composed sliced PLD without dp_accounting's truncated-tail mass at infinity.

    The sliced pair is built with no mass at infinity, so after composing, all of it is the tail
    dp_accounting truncated (and moved up, pessimistically); subtracting it keeps a lower bound.
    """
    pmf = pld._pmf_remove  # noqa: SLF001 (the PLD is built symmetric: one PMF)
    return max(0.0, float(pmf.get_delta_for_epsilon(epsilon)) - float(pmf._infinity_mass))  # noqa: SLF001


def composed_lower_bound(sigma: float, steps: int, epochs: int, epsilons, pair: str,
                         direction: Direction, discretization: float) -> np.ndarray:
    """Lower bound on δ(ε) of E epochs (E-fold product of the one-epoch pair)."""
    eps = np.atleast_1d(np.asarray(epsilons, dtype=np.float64))
    if direction is Direction.BOTH:
        return np.maximum(
            composed_lower_bound(sigma, steps, epochs, eps, pair, Direction.REMOVE, discretization),
            composed_lower_bound(sigma, steps, epochs, eps, pair, Direction.ADD, discretization))
    pld = composed_lower_pld(float(sigma), int(steps), int(epochs), pair, direction, float(discretization),
                             float(eps.max()) / epochs)
    return np.asarray([sliced_delta(pld, float(e)) for e in eps])


def snapped_hint(hint: float) -> float:
    """The slicing hint rounded up to a power of 2 (at least 1/16).

    The hint only chooses where the one-epoch pair is sliced, so any value gives a valid lower
    bound; snapping it lets an ε(δ) search, which asks at many ε, reuse a few cached compositions
    instead of composing E-fold at every step.
    """
    return 2.0 ** max(-4, math.ceil(math.log2(hint))) if hint > 0 else 2.0 ** -4


def composed_lower_bounds(sigma: float, steps: int, epochs: int, epsilons, pair: str,
                          direction: Direction, discretization: float) -> tuple[np.ndarray, float]:
    """(outward lower bounds on δ(ε) of E epochs, resolution): 0 below the resolution."""
    eps = np.atleast_1d(np.asarray(epsilons, dtype=np.float64))
    out, res = [], 0.0
    for part in direction.parts():
        key = (float(sigma), int(steps), int(epochs), pair, part, float(discretization),
               snapped_hint(float(eps.max()) / epochs))
        pld = composed_lower_pld(*key)
        r = composed_resolution(*key)
        res = max(res, r.floor)
        out.append(r.lower([sliced_delta(pld, float(e)) for e in eps]))
    return np.max(out, axis=0), res
