"""The lognormal factor W and the cap terms of the Balls-and-Bins bracket.

Under Q, W = exp(Z/σ − 1/(2σ²)) with Z ~ N(0, 1), so E_Q[W] = 1 and (with β_± = σ log w ± 1/(2σ))

    P(W <= w)         = Φ(σ log w + 1/(2σ)),
    E_Q[W·1{W <= w}]  = Φ(σ log w − 1/(2σ))      (the tilted law of W is lognormal with +1/σ²).

**Cap.** The grid laws are built from W restricted to [0, c] (a sub-probability). Let G be the
event that every W_{e,t} (e <= E epochs, t <= T steps) is <= c. For any f >= 0,
E_Q[f(Π S_e)] = E_Q[f 1_G] + E_Q[f 1_{G^c}], and the grid brackets the first term. The second:

* remove, f = (Π S_e − e^ε)_+ <= Π S_e, and 1_{G^c} <= Σ_{e,t} 1{W_{e,t} > c}, so by
  independence of the epochs and E_Q[S_e'] = 1,

      E_Q[f 1_{G^c}] <= Σ_e E_Q[S_e Σ_t 1{W_{e,t} > c}]
                     = E · (1/T) Σ_{s,t} E_Q[W_s 1{W_t > c}]
                     = E · (E_Q[W 1{W > c}] + (T − 1) P(W > c));

* add, f = (1 − e^ε Π S_e)_+ <= 1, so E_Q[f 1_{G^c}] <= P(G^c) <= E·T·P(W > c).

Lower bounds drop the (nonnegative) second term. Both tail probabilities are evaluated as
survival functions Φ̄(x) = ndtr(−x) (never 1 − Φ), and the cap is chosen with ndtri of the
target, so each term is at most its share of ``cap_budget`` (half to each summand for remove).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

from epscert.allocation.cells import (FP_SAFETY, LOG_NORMAL_GUARD, LOG_TOP_LIMIT, NORMAL_GUARD, UNIT_ROUNDOFF, CellLaw,
                                     gamma_n)

#: Relative error allowed for one scipy ndtr evaluation (a generous multiple of the roundoff).
NDTR_REL_ERROR = 16.0 * UNIT_ROUNDOFF
#: Most base cells of a mixture's grid (:func:`mixture_cells`).
MAX_MIXTURE_CELLS = 200_000
#: Gauss-Legendre nodes per base cell, and the widest cell (in units of Z) the rule accepts.
_GL_NODES = 8
_GL_MAX_WIDTH = 0.1


#: Largest log c of the base law (:func:`log_cap`): its atoms and their means stay inside the cells'
#: float range (every edge below ``TOP_LIMIT`` = 2^1000, :mod:`epscert.allocation.cells`), with room.
LOG_CAP_LIMIT = 0.95 * LOG_TOP_LIMIT
#: Smallest log of the base law's first main edge (:func:`base_laws`): its atoms are normal floats with
#: room (the relative rounding model of :mod:`epscert.allocation.cells` holds above ``NORMAL_GUARD``).
LOG_FLOOR_LIMIT = 0.95 * LOG_NORMAL_GUARD


def log_cap(sigma: float, steps: int, epochs: int, cap_budget: float) -> float:
    """log c such that both cap terms below are <= cap_budget (remove: half per summand), at most
    ``LOG_CAP_LIMIT``.

    The cap terms (:func:`cap_terms`) are computed from the c returned, so a c lowered to the limit only
    makes them larger (sound for any c: the cap argument holds for every c > 0); it happens only at
    σ below about 0.035 (log c ≈ (8.6 + 1/(2σ))/σ at the default budget), below the bracket's range.
    """
    half = 0.5 / sigma
    # Φ̄(σ log c − 1/(2σ)) <= budget/(2E) and Φ̄(σ log c + 1/(2σ)) <= budget/(2ET)
    x1 = -float(special.ndtri(cap_budget / (2.0 * epochs)))
    x2 = -float(special.ndtri(cap_budget / (2.0 * epochs * steps)))
    return min(max((x1 + half) / sigma, (x2 - half) / sigma), LOG_CAP_LIMIT)


def cap_terms(sigma: float, steps: int, epochs: int, log_c: float, prefix_steps: int = 0) -> dict[str, float]:
    """Additive upper-bound terms for W > c (module docstring), per direction, rounded up.

    ``epochs`` whole epochs and, with ``prefix_steps`` r in [1, T), the first r steps of one more
    epoch, whose factor S' = 1 − r/T + (1/T) Σ_{t<=r} W_t (:mod:`epscert.allocation.prefix`) also
    has E_Q[S'] = 1, so the whole epochs' terms stay as above and the prefix adds, for remove,

        Σ_{t<=r} E_Q[S' 1{W_t > c}] = Σ_{t<=r} [(1 − r/T) P(W > c) + (E_Q[W 1{W > c}] + (r − 1) P(W > c))/T]
                                    = (r/T) E_Q[W 1{W > c}] + r(T − 1)/T · P(W > c),

    and for add r·P(W > c) (P(G^c) <= the number of W's times P(W > c)). At r = T the prefix terms
    are one whole epoch's, so a prefix never needs a larger cap than its run. The factor
    ``up`` = 1 + 64u covers the two ndtr errors (16u each) and the <= 10 roundings of nonnegative
    terms in each formula.
    """
    half = 0.5 / sigma
    p_over = float(special.ndtr(-(sigma * log_c + half)))  # P(W > c)
    m_over = float(special.ndtr(-(sigma * log_c - half)))  # E_Q[W 1{W > c}]
    up = 1.0 + 4.0 * NDTR_REL_ERROR
    out = {
        "remove": up * epochs * (m_over + (steps - 1) * p_over),
        "add": up * epochs * steps * p_over,
    }
    if prefix_steps:
        r = prefix_steps
        out["remove"] += up * (r / steps * m_over + r * (steps - 1) / steps * p_over)
        out["add"] += up * r * p_over
    return out


def _gauss_integral(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """∫_lo^hi φ(x) dx by _GL_NODES-point Gauss-Legendre on each (finite, narrow) interval.

    All terms are positive, so the rounding is at most (_GL_NODES + 4)·u relative; the rule's
    remainder for φ on an interval of width h <= 0.1 (at most |x| <= 40) is below 1e-30
    relative (h^{2n} f^{(2n)}/(2n)! with n = 8), far below the rounding.
    """
    nodes, wts = np.polynomial.legendre.leggauss(_GL_NODES)
    half = 0.5 * (hi - lo)
    mid = 0.5 * (hi + lo)
    x = mid[:, None] + half[:, None] * nodes[None, :]
    return half * (np.exp(-0.5 * x * x) @ wts) / math.sqrt(2.0 * math.pi)


def _interval_prob(arg_lo: np.ndarray, arg_hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Φ(arg_hi) − Φ(arg_lo) and a bound on its relative error.

    Narrow finite intervals by Gauss-Legendre (no cancellation); the first interval
    (arg_lo = −∞) by ndtr, which has no cancellation either.
    """
    out = np.empty(arg_lo.size)
    rel = np.full(arg_lo.size, (_GL_NODES + 8) * UNIT_ROUNDOFF)
    finite = np.isfinite(arg_lo)
    out[~finite] = special.ndtr(arg_hi[~finite])
    rel[~finite] = NDTR_REL_ERROR
    out[finite] = _gauss_integral(arg_lo[finite], arg_hi[finite])
    if np.any(arg_hi[finite] - arg_lo[finite] > _GL_MAX_WIDTH):
        raise ValueError("base cells too wide for the Gauss-Legendre rule; raise base_cells")
    return out, rel


def base_laws(sigma: float, log_c: float, cells: int, tau: float) -> tuple[CellLaw, CellLaw, float, float]:
    """(lower, upper, relative mass error r, relative value error Γ of the lower law) of W on [0, c].

    Cells: [0, w_lo) with P(W < w_lo) = tau, then ``cells`` log-uniform cells up to c. The
    lower law puts each cell's mass at its conditional mean (contraction), the upper law
    spreads it to the cell's endpoints (spread); see :mod:`epscert.allocation.cells` for the
    meaning of r and Γ. Lower: the computed mean μ̂ = F̂/M̂ (F, M the cell's first moment and
    mass, relative errors ρ_F, ρ_M) is within ρ_F + ρ_M + a few u of μ, clipped into the cell
    (where μ lies, so clipping never moves it away): that is Γ. Upper: the exact spread has
    masses M(b − μ)/(b − a) at a and M(μ − a)/(b − a) at b; the computed ones use M̂ and μ̂
    moved outward by 2Γ_cell (so (b − μ̂_lo) >= (b − μ) and (μ̂_hi − a) >= (μ − a)) and one
    more outward factor for the 4 roundings, so only r = max ρ_M remains (adding mass to the
    upper chain is safe): its Γ is 0, the atoms being the exact edges.
    """
    return mixture_base_laws((sigma,), (1.0,), log_c, cells, tau)


def mixture_floor(sigmas, log_c: float, tau: float) -> float:
    """log w_lo of :func:`mixture_base_laws`: the lowest of the components' first edges, each with P(W < w_lo) =
    tau. A first edge raised to ``LOG_FLOOR_LIMIT`` only widens the bottom cell [0, w_lo) (any cells are sound,
    :mod:`epscert.allocation.cells`); it keeps every atom a normal float (small σ or a tiny tau)."""
    return min(min(max((float(special.ndtri(tau)) - 0.5 / s) / s, LOG_FLOOR_LIMIT), log_c - 1.0) for s in sigmas)


def mixture_cells(sigmas, log_c: float, cells: int, tau: float) -> int:
    """The base cells of :func:`mixture_base_laws`: ``cells``, raised where the largest σ would make a cell wider
    than the Gauss-Legendre rule accepts (a cell of width Δ in log w is σ·Δ wide in Z); one component at the
    default settings is never raised. Raises ValueError above ``MAX_MIXTURE_CELLS`` (σ's too far apart)."""
    need = math.ceil(max(sigmas) * (log_c - mixture_floor(sigmas, log_c, tau)) / (0.95 * _GL_MAX_WIDTH))
    out = max(int(cells), need)
    if out > MAX_MIXTURE_CELLS:
        raise ValueError(f"the mixture's noise levels are too far apart for one grid: sigmas from {min(sigmas):g} "
                         f"to {max(sigmas):g} need {out} base cells (at most {MAX_MIXTURE_CELLS})")
    return out


def mixture_base_laws(sigmas, weights, log_c: float, cells: int,
                      tau: float) -> tuple[CellLaw, CellLaw, float, float]:
    """:func:`base_laws` of the mixture Σ_k w_k·Law(W at σ_k) (weights >= 0 summing to 1; every component has
    E_Q[W] = 1, so the mixture does too): one grid for all components, each cell's mass and first moment the
    weighted sums of the components' (:mod:`epscert.allocation.mixture`).

    The first edge is the lowest of the components' (P(W_k < w_lo) <= tau for each). A weighted sum of K
    nonnegative terms, each a computed weight (one rounding) times a computed value (one more), is within
    γ_{K+1} relative of Σ_k w_k (value_k), on top of the values' own relative errors; with one component of
    weight 1 nothing is rounded, and the law is the single lognormal's exactly.
    """
    sigmas = [float(s) for s in sigmas]
    weights = [float(w) for w in weights]
    exact = len(sigmas) == 1 and weights[0] == 1.0
    log_lo = mixture_floor(sigmas, log_c, tau)
    cells = mixture_cells(sigmas, log_c, cells, tau)
    edges = np.concatenate([[0.0], np.exp(np.linspace(log_lo, log_c, cells + 1))])
    le = np.concatenate([[-np.inf], np.linspace(log_lo, log_c, cells + 1)])
    mass = np.zeros(cells + 1)
    moment = np.zeros(cells + 1)
    rel_m = np.zeros(cells + 1)
    rel_f = np.zeros(cells + 1)
    for sigma, weight in zip(sigmas, weights):  # one component of weight 1: 0 + 1·x and max(0, ρ) are exact
        half = 0.5 / sigma
        beta = sigma * le + half  # -inf at the 0 edge
        alpha = sigma * le - half
        mass_k, rel_mk = _interval_prob(beta[:-1], beta[1:])
        moment_k, rel_fk = _interval_prob(alpha[:-1], alpha[1:])
        mass += weight * mass_k
        moment += weight * moment_k
        rel_m = np.maximum(rel_m, rel_mk)
        rel_f = np.maximum(rel_f, rel_fk)
    if not exact:
        # (1 + ρ)(1 + γ) − 1 <= (ρ + γ)(1 + γ), its three roundings covered by the factor 1 + 4u
        mixing = float(gamma_n(len(sigmas) + 1))
        rel_m = (rel_m + mixing) * (1.0 + mixing) * (1.0 + 4.0 * UNIT_ROUNDOFF)
        rel_f = (rel_f + mixing) * (1.0 + mixing) * (1.0 + 4.0 * UNIT_ROUNDOFF)
    lo_e, hi_e = edges[:-1], edges[1:]
    occupied = mass > 0.0
    # a cell whose mass or first moment is near the subnormal range has no relative error bound: the lower
    # law drops it (dropping mass is safe) and the upper law puts its whole mass at both edges (adding mass
    # is safe). With the default tau this never happens for σ >= 0.05 (the bottom cell's moment is ~1e-182
    # there); it keeps a tiny tau or a σ below the range sound.
    reliable = occupied & (mass >= NORMAL_GUARD) & (moment >= NORMAL_GUARD)
    mean = np.where(reliable, moment / np.where(reliable, mass, 1.0), lo_e)
    mean = np.clip(mean, lo_e, hi_e)
    lower = CellLaw(mean[reliable], mass[reliable])
    # the division adds one rounding; FP_SAFETY covers the second-order terms
    gamma = FP_SAFETY * (rel_m + rel_f + 2.0 * UNIT_ROUNDOFF)
    mu_lo = np.where(reliable, np.maximum(mean * (1.0 - 2.0 * gamma), lo_e), lo_e)
    mu_hi = np.where(reliable, np.minimum(mean * (1.0 + 2.0 * gamma), hi_e), hi_e)
    width = hi_e - lo_e
    out = mass / width * (1.0 + 8.0 * UNIT_ROUNDOFF)
    node = np.zeros(edges.size)
    node[:-1] += out * (hi_e - mu_lo)
    node[1:] += out * (mu_hi - lo_e)
    nz = node > 0.0
    upper = CellLaw(edges[nz], node[nz])
    rel_mass = float(np.max(rel_m[occupied]))
    value_rel = float(np.max(gamma[reliable])) if reliable.any() else 0.0
    return lower, upper, rel_mass, value_rel
