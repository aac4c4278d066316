"""Public API: a certified bracket on δ_B(ε) of Balls-and-Bins sampling (random allocation).

For E epochs of T steps with noise multiplier σ (SPEC §1–2; S_e = (1/T) Σ_t W_{e,t} with
W = exp(Z/σ − 1/(2σ²)) under Q, E_Q[W] = 1, S_e = dP/dQ for one epoch):

    δ_remove(ε) = E_Q[(Π_e S_e − e^ε)_+],      δ_add(ε) = E_Q[(1 − e^ε Π_e S_e)_+].

Mid-epoch (``steps_done`` = E'·T + r steps of the run, 0 < r < T): the product of the E' whole
epochs' factors and the prefix factor S'_r = 1 − r/T + (1/T) Σ_{t<=r} W_t, derived in
:mod:`epscert.allocation.prefix`; everything below holds for it unchanged (the cap terms are the
prefix's, :func:`~epscert.allocation.tails.cap_terms`).

Construction (one computation per chain serves both directions):

1. *cap* (:mod:`~epscert.allocation.tails`): W restricted to [0, c]; the dropped part adds at most
   ``cap_terms`` to each upper bound (``cap_budget`` share); nothing for lower bounds. c is chosen
   for the longest run, ``LAW_EPOCHS`` = ``MAX_EPOCHS`` epochs (:func:`~epscert.allocation.tails.log_cap`),
   whatever E is: the cap terms of E epochs are then at most E/``MAX_EPOCHS`` of the budget, and every
   bracket of one (σ, T, accuracy settings) shares one set of laws (the doubling blocks, the epoch
   law, the products of whole epochs, the prefix means: :func:`~epscert.allocation.prefix.run_laws`),
   whatever its E and ``steps_done``. Measured, the widths change by less than 1e-4 relative against
   a cap for E itself (σ = 0.6–2, T = 10^3–10^5, E = 1 and 10).
2. *cells* (:mod:`~epscert.allocation.cells`): lower chain by contraction, upper chain by two-point
   spread, so lower ≤_cx Π S_e·1_G ≤_cx upper and E f(lower) <= E[f(Π S_e) 1_G] <= E f(upper) for
   both convex integrands. Exact evaluation of Σ m f(v) on the final atoms, for every ε.
3. *floating point*: ``mass_rel_error`` r (relative, multiplies the raw sums by 1 ± r) and
   ``value_rel_error`` Γ (relative, every computed atom within the factor 1 + Γ of its ideal
   one: e^ε is moved outward by 1 + Γ and the raw sums scaled by 1 + Γ); see
   :mod:`~epscert.allocation.cells`. No additive floating-point term is needed, so the
   bracket stays tight at small δ.

So, per direction d with raw sums D_up, D_lo over the final atoms (K = e^ε),

    upper_d(ε) = min(1, max(resolution, (1 + r_up)(1 + Γ_up) D_up(K/(1 + Γ_up)) + cap_d)),
    lower_d(ε) = max(0, (1 − r_lo − Γ_lo) D_lo(K(1 + Γ_lo))),  reported as 0 if < resolution,

where r also holds the rounding of the final sum over the atoms and K is moved outward by a few
ulp more (:func:`~epscert.allocation.cells.evaluation_rel_error`, ``K_SLACK``); the upper REMOVE
bound also adds the excess moment D over the top cap (recession slope 1 of (v − K)_+; the ADD
integrand has slope 0, so the mass sent to +∞ adds nothing there; :mod:`~epscert.allocation.cells`).

and BOTH takes the maximum of the two directions on each side (δ = max(δ_remove, δ_add)).
Clamping to [0, 1] is safe because δ ∈ [0, 1]. Raising the upper bound to ``resolution``
only loosens it; zeroing a lower bound only loosens it.

Monotonicity: D_up and D_lo are non-increasing in ε term by term ((v − e^ε)_+ and (1 − e^ε v)_+
are), and so are the clamps. :meth:`AllocationBracket.delta` also applies, in increasing ε,
a running minimum to the upper and a running maximum from the right to the lower values; this
is valid because the true δ(ε) is non-increasing: min_{ε' <= ε} upper(ε') >= δ(ε') >= δ(ε), and
max_{ε' >= ε} lower(ε') <= δ(ε') <= δ(ε).

ε(δ): eps_upper = min{ε >= 0 : upper(ε) <= δ} (then δ(eps_upper) <= δ, so ε(δ) <= eps_upper),
eps_lower = sup{ε >= 0 : lower(ε) > δ} (0 if none; δ(ε) > δ there, so ε(δ) >= eps_lower), both by
bisection on the monotone bound functions, returning the endpoint on the safe side.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property, lru_cache

import numpy as np

from epscert.allocation.cells import CellLaw, evaluation_rel_error, hockey_add, hockey_remove, rel_product
from epscert.allocation.epoch import EXCESS_ROUNDING, ChainLaw
from epscert.allocation.grid import GridShape
from epscert.allocation.prefix import run_laws
from epscert.allocation.tails import cap_terms, log_cap
from epscert.analytic.crossing import bisect_crossing
from epscert.names import BRACKET_MAX_EPOCHS as MAX_EPOCHS
from epscert.names import BRACKET_MAX_STEPS as MAX_STEPS
from epscert.names import BRACKET_MIN_SIGMA as MIN_SIGMA
from epscert.names import Direction

#: The epochs the cap is chosen for (module docstring, step 1): the longest run, so one set of laws
#: serves every E and every prefix.
LAW_EPOCHS = MAX_EPOCHS
#: Default cells per level (uniform in log over the significant range).
DEFAULT_CELLS = 2000
#: Default shape of the main cells (σ >= ``SMALL_SIGMA``): finer at the centre, no centre bump.
DEFAULT_SHAPE = GridShape(tail_focus=0.3, centre_share=0.0)
#: Below this σ the lognormal steps are heavy-tailed: the range is set by the far tails while the
#: bulk of the mean of T steps is narrow, so the default shape is ``SMALL_SIGMA_SHAPE`` (a centre
#: bump holding 30% of the cells, nearly uniform in log z elsewhere) with more cells.
SMALL_SIGMA = 1.0
SMALL_SIGMA_SHAPE = GridShape(tail_focus=0.05, centre_share=0.3)
#: Default cells per level for SMALL_SIGMA > σ >= ``TINY_SIGMA`` (the width at δ = 1e-10 falls
#: roughly as cells^-2; measured in README.md, Performance).
SMALL_SIGMA_CELLS = 2600
#: Below this σ (down to ``MIN_SIGMA``) more main cells and base cells (the base law's grid matters there).
TINY_SIGMA = 0.5
TINY_SIGMA_CELLS = 3000
TINY_SIGMA_BASE_CELLS = 4000
#: Default cells of the base law of W.
DEFAULT_BASE_CELLS = 2000
#: Default significance: mass below / first moment above the fine range, per level.
DEFAULT_TAU = 1e-18
#: Default total of the cap terms (the part of δ the grid cannot hold).
DEFAULT_CAP_BUDGET = 1e-14
#: Largest ε searched by :meth:`AllocationBracket.epsilon` (e^ε stays finite in float64).
MAX_EPSILON = 700.0
#: Bisection steps for ε(δ) (the bracket [0, 700] shrinks below 1e-13).
_BISECTION_STEPS = 64


def _as_direction(direction) -> Direction:
    if isinstance(direction, Direction):
        return direction
    try:
        return Direction(direction)
    except ValueError:
        raise ValueError(f"direction must be one of remove, add, both; got direction={direction!r}") from None


def _check_int(name: str, value, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an integer in [{lo}, {hi}], got {name}={value!r}")
    if not lo <= int(value) <= hi:
        raise ValueError(f"{name} must be in [{lo}, {hi}], got {name}={value!r}")
    return int(value)


@dataclass(frozen=True)
class _Final:
    """The final law of one chain with its allowances."""

    law: CellLaw
    mass_rel_error: float
    value_rel_error: float
    max_count: int
    excess_moment: float = 0.0


class AllocationBracket:
    """Certified upper and lower bounds on δ(ε) of Balls-and-Bins with T steps and E epochs.

    Parameters
    ----------
    sigma : noise multiplier, >= ``BRACKET_MIN_SIGMA`` (0.05; why: :mod:`epscert.support`).
    steps : T, steps (batches) per epoch, in [1, 10^6].
    epochs : E, in [1, 1000].
    cells : (keyword) cells per level, default :func:`default_cells` (2000 for σ >= 1, 2600 for
        0.5 <= σ < 1, 3000 below);
        more is tighter and slower (cost ~ cells² per level).
    base_cells : (keyword) cells of the law of W, default :func:`default_base_cells` (2000; 4000 for
        σ < 0.5).
    tau : (keyword) per-level significance for the fine range, default 1e-18 (tightness only).
    cap_budget : (keyword) bound on the cap terms, default 1e-14 (enters the upper bounds).
    shape : (keyword) :class:`~epscert.allocation.grid.GridShape` of the main cells, default
        :func:`default_shape` (σ-dependent; tightness only).
    steps_done : (keyword) the bracket for the first ``steps_done`` steps of the run, in
        [1, T·E] (default T·E, the whole run); mid-epoch values use the prefix factor
        (:mod:`epscert.allocation.prefix`). The laws are shared by every bracket of the same run
        and settings (:func:`~epscert.allocation.prefix.run_laws`).
    """

    def __init__(self, sigma: float, steps: int, epochs: int = 1, *, cells: int | None = None,
                 base_cells: int | None = None, tau: float = DEFAULT_TAU,
                 cap_budget: float = DEFAULT_CAP_BUDGET, shape: GridShape | None = None,
                 steps_done: int | None = None):
        if isinstance(sigma, bool) or not isinstance(sigma, (int, float, np.floating, np.integer)):
            raise ValueError(f"sigma must be a number >= {MIN_SIGMA}, got sigma={sigma!r}")
        sigma = float(sigma)
        if not (math.isfinite(sigma) and sigma >= MIN_SIGMA):
            raise ValueError(f"sigma must be >= {MIN_SIGMA} and finite, got sigma={sigma}")
        self.sigma = sigma
        self.steps = _check_int("steps", steps, 1, MAX_STEPS)
        self.epochs = _check_int("epochs", epochs, 1, MAX_EPOCHS)
        self._cells = _check_int("cells", default_cells(sigma) if cells is None else cells, 16, 20000)
        self._base_cells = _check_int("base_cells", default_base_cells(sigma) if base_cells is None
                                      else base_cells, 16, 100000)
        for name, value, lo, hi in (("tau", tau, 1e-300, 1e-6), ("cap_budget", cap_budget, 1e-300, 1e-3)):
            if isinstance(value, bool) or not isinstance(value, (int, float, np.floating)) \
                    or not (lo <= float(value) <= hi):
                raise ValueError(f"{name} must be a number in [{lo:g}, {hi:g}], got {name}={value!r}")
        self._tau = float(tau)
        if shape is not None and not isinstance(shape, GridShape):
            raise ValueError(f"shape must be a GridShape or None, got shape={shape!r}")
        self._shape = default_shape(sigma) if shape is None else shape
        self._cap_budget = float(cap_budget)
        total = self.steps * self.epochs
        self.steps_done = total if steps_done is None else _check_int("steps_done", steps_done, 1, total)
        self.full_epochs, self.prefix_steps = divmod(self.steps_done, self.steps)
        self._log_c = log_cap(self.sigma, self.steps, LAW_EPOCHS, self._cap_budget)
        #: additive upper-bound terms for W over the cap, per direction (:mod:`epscert.allocation.tails`)
        self.caps = cap_terms(self.sigma, self.steps, self.full_epochs, self._log_c, self.prefix_steps)

    def __repr__(self) -> str:
        done = "" if self.steps_done == self.steps * self.epochs else f", steps_done={self.steps_done}"
        return f"AllocationBracket(sigma={self.sigma}, steps={self.steps}, epochs={self.epochs}{done})"

    @property
    def settings(self) -> dict:
        """The accuracy settings actually used."""
        return {
            "cells": self._cells,
            "base_cells": self._base_cells,
            "tau": self._tau,
            "cap_budget": self._cap_budget,
            "shape": self._shape,
            "log_cap": self._log_c,
        }

    # ---- the laws (computed once, lazily) -------------------------------------------------
    def law(self, chain: str) -> ChainLaw:
        """The final law of ``chain`` ("lower" or "upper") with its allowances: Π_e S_e (and the
        prefix factor, mid-epoch) from the run's shared laws. Subclasses with another likelihood
        ratio override it and ``caps`` (:mod:`epscert.allocation.persistent`)."""
        laws = run_laws(self.sigma, self.steps, LAW_EPOCHS, self._cells, self._base_cells, self._tau,
                        self._cap_budget, self._shape)
        return laws.chain(chain).law(self.full_epochs, self.prefix_steps)

    def _chain(self, chain: str) -> _Final:
        many = self.law(chain)
        return _Final(many.law, many.mass_rel_error, many.value_rel_error, many.max_count, many.excess_moment)

    @cached_property
    def _lower(self) -> _Final:
        return self._chain("lower")

    @cached_property
    def _upper(self) -> _Final:
        return self._chain("upper")

    @property
    def resolution(self) -> float:
        """Additive allowance (the cap terms) below which δ values are not meaningful."""
        return max(self.caps.values())

    @property
    def diagnostics(self) -> dict:
        """Floating-point bookkeeping of both chains (for reports)."""
        return {
            "upper_mass_rel_error": self._upper.mass_rel_error,
            "lower_mass_rel_error": self._lower.mass_rel_error,
            "upper_value_rel_error": self._upper.value_rel_error,
            "lower_value_rel_error": self._lower.value_rel_error,
            "cap_remove": self.caps["remove"],
            "cap_add": self.caps["add"],
            "upper_excess_moment": self._upper.excess_moment,
            "upper_atoms": len(self._upper.law),
            "lower_atoms": len(self._lower.law),
        }

    # ---- bounds at arbitrary ε (monotone by construction) ---------------------------------
    def _side(self, eps: np.ndarray, part: Direction, side: str) -> np.ndarray:
        final = self._upper if side == "upper" else self._lower
        hockey = hockey_remove if part is Direction.REMOVE else hockey_add
        raw = hockey(final.law, eps, side, final.value_rel_error)
        # the laws' mass and value allowances and this sum's rounding (module docstring)
        rel = rel_product(final.mass_rel_error, final.value_rel_error, evaluation_rel_error(final.law))
        if side == "upper":
            key = "remove" if part is Direction.REMOVE else "add"
            val = (1.0 + rel) * raw + self.caps[key]
            if part is Direction.REMOVE:  # the moment over the top cap (slope 1; ADD: slope 0)
                val = val + final.excess_moment * (1.0 + EXCESS_ROUNDING)
            return np.clip(np.maximum(val, self.resolution), 0.0, 1.0)
        val = (1.0 - rel) * raw
        val = np.where(val < self.resolution, 0.0, val)
        return np.clip(val, 0.0, 1.0)

    def _bound(self, eps: np.ndarray, direction: Direction, side: str) -> np.ndarray:
        parts = direction.parts()
        out = self._side(eps, parts[0], side)
        for part in parts[1:]:
            out = np.maximum(out, self._side(eps, part, side))
        return out

    def delta(self, epsilons, direction="both") -> tuple[np.ndarray, np.ndarray]:
        """(upper, lower) bounds on δ(ε) at each ε (any finite reals <= 700), same shape as input."""
        return self.delta_side(epsilons, direction, "upper"), self.delta_side(epsilons, direction, "lower")

    def upper(self, epsilons, direction="both") -> np.ndarray:
        """The upper bounds of :meth:`delta` alone (only the upper chain is computed)."""
        return self.delta_side(epsilons, direction, "upper")

    def lower(self, epsilons, direction="both") -> np.ndarray:
        """The lower bounds of :meth:`delta` alone (only the lower chain is computed)."""
        return self.delta_side(epsilons, direction, "lower")

    def delta_side(self, epsilons, direction="both", side: str = "upper") -> np.ndarray:
        """One side of :meth:`delta` (``side`` 'upper' or 'lower'), with the running minimum (upper) or
        maximum from the right (lower); builds only that side's chain."""
        direction = _as_direction(direction)
        if side not in ("upper", "lower"):
            raise ValueError(f"side must be 'upper' or 'lower', got side={side!r}")
        eps = np.asarray(epsilons, dtype=np.float64)
        shape = eps.shape
        flat = eps.ravel()
        if not np.all(np.isfinite(flat)) or np.any(flat > MAX_EPSILON):
            raise ValueError(f"epsilons must be finite and <= {MAX_EPSILON}, got epsilons={epsilons!r}")
        order = np.argsort(flat, kind="stable")
        srt = flat[order]
        if side == "upper":
            env = np.minimum.accumulate(self._bound(srt, direction, "upper"))
        else:
            env = np.maximum.accumulate(self._bound(srt, direction, "lower")[::-1])[::-1]
        out = np.empty_like(flat)
        out[order] = env
        return out.reshape(shape)

    def epsilon(self, delta: float, direction="both") -> tuple[float, float]:
        """(eps_upper, eps_lower): certified bounds on ε(δ) = min{ε >= 0 : δ(ε) <= delta}."""
        return self.epsilon_side(delta, direction, "upper"), self.epsilon_side(delta, direction, "lower")

    def epsilon_side(self, delta: float, direction="both", side: str = "upper") -> float:
        """One side of :meth:`epsilon`: eps_upper = min{ε : upper(ε) <= δ} (inf if none <= 700), or eps_lower =
        sup{ε : lower(ε) > δ} (0 if none, 700 if lower(700) > δ); builds only that side's chain."""
        direction = _as_direction(direction)
        if isinstance(delta, bool) or not isinstance(delta, (int, float, np.floating)) \
                or not (0.0 < float(delta) < 1.0):
            raise ValueError(f"delta must be a number in (0, 1), got delta={delta!r}")
        if side not in ("upper", "lower"):
            raise ValueError(f"side must be 'upper' or 'lower', got side={side!r}")
        delta = float(delta)

        def at(e: float) -> float:
            return float(self._bound(np.array([e]), direction, side)[0])

        if side == "upper":  # smallest ε with up(ε) <= delta (returned from the safe side)
            if at(0.0) <= delta:
                return 0.0
            if at(MAX_EPSILON) > delta:
                return math.inf
            # up(0) > delta >= up(MAX_EPSILON)
            return bisect_crossing(at, delta, 0.0, MAX_EPSILON, _BISECTION_STEPS)[1]
        # largest ε with lo(ε) > delta (0 if none)
        if not at(0.0) > delta:
            return 0.0
        if at(MAX_EPSILON) > delta:  # lo(0) > delta; lo(700) is 0 or > delta
            return MAX_EPSILON
        return bisect_crossing(at, delta, 0.0, MAX_EPSILON, _BISECTION_STEPS)[0]


def default_cells(sigma: float) -> int:
    """The default cells per level at noise σ (tightness only)."""
    if sigma >= SMALL_SIGMA:
        return DEFAULT_CELLS
    return SMALL_SIGMA_CELLS if sigma >= TINY_SIGMA else TINY_SIGMA_CELLS


def default_base_cells(sigma: float) -> int:
    """The default cells of the base law of W at noise σ (tightness only)."""
    return DEFAULT_BASE_CELLS if sigma >= TINY_SIGMA else TINY_SIGMA_BASE_CELLS


def default_shape(sigma: float) -> GridShape:
    """The default :class:`~epscert.allocation.grid.GridShape` at noise σ (tightness only)."""
    return DEFAULT_SHAPE if sigma >= SMALL_SIGMA else SMALL_SIGMA_SHAPE


@lru_cache(maxsize=32)
def bracket_for(sigma: float, steps: int, epochs: int, steps_done: int | None = None) -> AllocationBracket:
    """The bracket at the default accuracy settings, built once per (σ, T, E, steps_done) in a process."""
    return AllocationBracket(float(sigma), int(steps), int(epochs),
                             steps_done=None if steps_done is None else int(steps_done))
