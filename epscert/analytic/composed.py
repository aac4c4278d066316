"""Multi-epoch lower bounds through the one-epoch statistic M = max_t w_t (SPEC §7).

Slicing M into intervals is a post-processing of one epoch, so the pair of interval
probabilities (p_k, q_k) is dominated by the true one-epoch pair, and its E-fold
composition lower-bounds the E-epoch δ (dynamic shuffling, Balls-and-Bins). Rounding
each interval's privacy loss DOWN onto the grid kΔ keeps the bound a lower bound (δ is
monotone in the losses; at most EΔ in all), and so does lowering or dropping masses (all
contributions are >= 0).

Floating point (the inequalities that keep every mass and loss on the safe side):

- log Pr[M < c] carries the error bound of :func:`epscert.analytic.cube.log_cdf_error`; the
  survival log(1 - e^x) amplifies an error e in x by at most e^x/(1 - e^x), and so does the
  interval difference log(e^a - e^b) = a + log(1 - e^{b-a}) (amplification e^{b-a}/(1 - e^{b-a}) on
  the errors of a and b); each logarithm adds 2u of its value.
- An atom's mass is taken as exp(log p - err_p) (below the exact one) and its loss as
  (log p - err_p) - (log q + err_q), lowered by 2u(|log p| + |log q|), then rounded down.

Composition: the E-fold tilted FFT of :mod:`epscert.fft.tilt` (its error bound is relative to the
tilted mass near ε), read as a lower bound (the wrap-around term subtracted, points with
z̃ < E_pt dropped). The resolution is the absolute part of that allowance, far below the 1e-12
that issue 12's worst-case budget left here.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from epscert.analytic.cube import PAIR_MEANS, c_search_range, log1mexp, log_cdf_error, log_cdf_max
from epscert.fft import tilt
from epscert.fft.pairs import UNIT_ROUNDOFF, GridMasses
from epscert.names import Direction

#: Breakpoints of the slicing of M.
SLICES = 600
#: Atoms lighter than this are dropped (lowers δ: still a lower bound).
MIN_LOG_MASS = -700.0
#: Atoms whose log-mass error bound exceeds this are dropped (their value is not known).
MAX_LOG_ERROR = 1.0
#: A loss is rounded down this fraction of Δ further (the float division's own rounding).
ROUND_SLACK = 1e-9


def _amplification(x: np.ndarray) -> np.ndarray:
    """e^x/(1 - e^x) for x < 0: how log(1 - e^x) amplifies an error in x (inf at x >= 0)."""
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        return np.where(x < 0.0, np.exp(x) / -np.expm1(x), np.inf)


def log_interval_masses(edges: np.ndarray, mean: float, sigma: float, steps: int) -> tuple[np.ndarray, np.ndarray]:
    """(log Pr[M in [e_k, e_{k+1})], absolute error bound), e_0 = -inf, e_{K+1} = +inf, tail-accurate."""
    u = UNIT_ROUNDOFF
    log_f_in = log_cdf_max(edges, mean, sigma, steps)
    err_f_in = log_cdf_error(edges, mean, sigma, steps, log_f_in)
    log_f = np.concatenate([[-np.inf], log_f_in, [0.0]])
    err_f = np.concatenate([[0.0], err_f_in, [0.0]])
    log_s = log1mexp(log_f)
    with np.errstate(invalid="ignore"):
        err_s = _amplification(log_f) * err_f + 2.0 * u * np.abs(np.where(np.isfinite(log_s), log_s, 0.0))
    err_s[0], err_s[-1] = 0.0, 0.0  # S(-inf) = 1, S(+inf) = 0: exact
    lo_f, hi_f, lo_s, hi_s = log_f[:-1], log_f[1:], log_s[:-1], log_s[1:]
    with np.errstate(invalid="ignore", divide="ignore"):
        from_cdf = hi_f + log1mexp(lo_f - hi_f)
        err_cdf = err_f[1:] + _amplification(lo_f - hi_f) * (err_f[:-1] + err_f[1:])
        from_sf = lo_s + log1mexp(hi_s - lo_s)
        err_sf = err_s[:-1] + _amplification(hi_s - lo_s) * (err_s[:-1] + err_s[1:])
    use_cdf = hi_f < math.log(0.5)
    out = np.where(use_cdf, from_cdf, from_sf)
    err = np.where(use_cdf, err_cdf, err_sf)
    err = np.nan_to_num(err, nan=np.inf) + 2.0 * u * np.abs(np.nan_to_num(out, nan=0.0, neginf=0.0))
    bad = np.isnan(out)
    return np.where(bad, -np.inf, out), np.where(bad, 0.0, err)  # both edges underflowed: mass < 1e-308


def sliced_pair(sigma: float, steps: int, pair: str, eps_hint: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """log masses (log p_k, log q_k) of the sliced statistic under P and Q."""
    return sliced_pair_with_errors(sigma, steps, pair, eps_hint)[0]


@functools.lru_cache(maxsize=16)
def sliced_pair_with_errors(sigma: float, steps: int, pair: str, eps_hint: float = 0.0):
    """((log p, log q), (err p, err q)) of the sliced statistic (module docstring)."""
    lo, hi = c_search_range(eps_hint, sigma, steps)
    edges = np.linspace(lo, hi, SLICES)
    mu_p, mu_q = PAIR_MEANS[pair]
    log_p, err_p = log_interval_masses(edges, mu_p, sigma, steps)
    log_q, err_q = log_interval_masses(edges, mu_q, sigma, steps)
    return (log_p, log_q), (err_p, err_q)


def rounded_masses(log_mass: np.ndarray, err_mass: np.ndarray, log_other: np.ndarray, err_other: np.ndarray,
                   delta: float) -> GridMasses:
    """Atoms at their loss lower bounds rounded down to the grid kΔ, masses at their lower bounds.

    An atom whose other side is 0 (an underflow: Gaussian interval masses are never 0) or whose
    mass is below e^MIN_LOG_MASS, or whose error bound is not finite, is dropped.
    """
    with np.errstate(invalid="ignore"):
        keep = (np.isfinite(log_mass) & np.isfinite(log_other) & (err_mass < MAX_LOG_ERROR)
                & (err_other < MAX_LOG_ERROR) & (log_mass - err_mass > MIN_LOG_MASS))
    lm, em, lo, eo = log_mass[keep], err_mass[keep], log_other[keep], err_other[keep]
    loss = (lm - em) - (lo + eo) - 2.0 * UNIT_ROUNDOFF * (np.abs(lm) + np.abs(lo))
    index = np.floor(loss / delta - ROUND_SLACK).astype(np.int64)
    if index.size == 0:
        return GridMasses(delta, 0.0, 0, np.zeros(1))
    start = int(index.min())
    masses = np.bincount(index - start, weights=np.exp(lm - em))
    return GridMasses(delta, 0.0, start, masses)


def snapped_hint(hint: float) -> float:
    """The slicing hint rounded up to a power of 2 (at least 1/16).

    The hint only chooses where the one-epoch pair is sliced, so any value gives a valid lower
    bound; snapping it lets an ε(δ) search, which asks at many ε, reuse a few cached compositions
    instead of composing E-fold at every step.
    """
    return 2.0 ** max(-4, math.ceil(math.log2(hint))) if hint > 0 else 2.0 ** -4


class SlicedLower:
    """The E-fold tilted composition of one direction's sliced pair, read as a lower bound."""

    def __init__(self, sigma: float, steps: int, epochs: int, pair: str, direction: Direction,
                 discretization: float, eps_hint: float) -> None:
        if direction is Direction.BOTH:
            raise ValueError("SlicedLower needs direction remove or add, got direction='both'")
        (log_p, log_q), (err_p, err_q) = sliced_pair_with_errors(sigma, steps, pair, eps_hint)
        if direction is Direction.REMOVE:
            masses = rounded_masses(log_p, err_p, log_q, err_q, discretization)
        else:
            masses = rounded_masses(log_q, err_q, log_p, err_p, discretization)
        self.factors = [tilt.Factor(masses, epochs)]
        self.mgf = tilt.Mgf(self.factors)
        self._compositions: dict[float, tilt.Composition] = {}

    def composition(self, eps: float) -> tilt.Composition | None:
        lam = tilt.lam_grid(self.mgf.saddle(eps))
        comp = self._compositions.get(lam)
        if comp is None or comp.bottom > eps:
            bottom, top = tilt.window_for(self.mgf, lam, eps)
            if not (math.isfinite(bottom) and math.isfinite(top)):
                return None
            if (top - bottom) / self.factors[0].masses.delta > tilt.MAX_FFT:
                return None
            comp = tilt.compose(self.factors, lam, eps, self.mgf, window=(bottom, top))
            self._compositions[lam] = comp
        return comp

    def lower(self, eps: float) -> tuple[float, float]:
        """(lower bound on δ(ε), its absolute allowance); (0, 0) where no composition fits."""
        comp = self.composition(eps)
        if comp is None:
            return 0.0, 0.0
        return comp.lower(eps), comp.absolute(eps, False)


@functools.lru_cache(maxsize=16)
def sliced_lower(sigma: float, steps: int, epochs: int, pair: str, direction: Direction,
                 discretization: float, eps_hint: float) -> SlicedLower:
    """The cached :class:`SlicedLower` of one direction."""
    return SlicedLower(sigma, steps, epochs, pair, direction, discretization, eps_hint)


def composed_lower_bounds(sigma: float, steps: int, epochs: int, epsilons, pair: str,
                          direction: Direction, discretization: float) -> tuple[np.ndarray, np.ndarray]:
    """(lower bounds on δ(ε) of E epochs, their absolute allowances); BOTH: the max over directions."""
    eps = np.atleast_1d(np.asarray(epsilons, dtype=np.float64))
    hint = snapped_hint(float(eps.max()) / epochs)
    vals, res = [], []
    for e in eps.tolist():
        parts = [sliced_lower(float(sigma), int(steps), int(epochs), pair, d, float(discretization), hint).lower(e)
                 for d in direction.parts()]
        best = max(parts)
        vals.append(best[0])
        res.append(max(r for _, r in parts))
    return np.asarray(vals), np.asarray(res)


def composed_lower_bound(sigma: float, steps: int, epochs: int, epsilons, pair: str,
                         direction: Direction, discretization: float) -> np.ndarray:
    """Lower bound on δ(ε) of E epochs (E-fold product of the one-epoch pair)."""
    return composed_lower_bounds(sigma, steps, epochs, epsilons, pair, direction, discretization)[0]
