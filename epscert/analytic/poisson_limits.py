"""When the Poisson PLD bracket is not within 1%: the limit that stops it, named (issue 35 item 4).

The bracket (:mod:`epscert.analytic.poisson`) is certified everywhere; its width is what has limits.
The README's "Poisson at the extremes" states the supported range.
"""

from __future__ import annotations

import math

import numpy as np

from epscert.analytic.poisson import MAX_REFINE, MAX_WINDOW, MIN_SPREAD_CELLS, bracket, start_delta, tail_z_for
from epscert.analytic.poisson_rdp import poisson_rdp_delta
from epscert.fft import tilt
from epscert.names import Direction

#: A certified answer whose bracket is wider than this (relative) gets a note naming the limit
#: (:func:`looseness_note`): elsewhere the bracket holds within about 1%.
LOOSE_WIDTH = 1e-2


def looseness_note(sigma: float, steps: int, epochs: int, discretization: float, upper: float, lower: float,
                   quantity: str, target: float, answer: float) -> str | None:
    """Why a Poisson PLD bracket [lower, upper] (of ε at δ = target, or of δ at ε = target) is wider than
    LOOSE_WIDTH, naming the limit; None when it is not. The limits (README, "Poisson at the extremes"):

    - grid resolution: one step's privacy-loss standard deviation below MIN_SPREAD_CELLS cells of the
      finest grid (:func:`start_delta` halves Δ at most MAX_START_HALVINGS times, refinement MAX_REFINE);
    - composition window: the losses the answer needs (at ε = the answer, or the target) span more than
      MAX_WINDOW grid points (small σ with many steps: a loss range of hundreds of nats; ε(δ) then starts
      its window at WINDOW_FALLBACK of the guess), so the upper side falls back to the Chernoff bound
      and the lower side finds no composition.
    Both are limits of precision, not of validity: the bracket stays certified, only wide.
    """
    if quantity == "epsilon":
        width = (upper - lower) / upper if upper > 0.0 and math.isfinite(upper) else 0.0
    else:
        width = upper / lower - 1.0 if lower > 0.0 else (math.inf if upper > 0.0 else 0.0)
    if not width > LOOSE_WIDTH:
        return None
    eps = answer if quantity == "epsilon" else target
    n = steps * epochs
    z = tail_z_for(target if quantity == "epsilon" else float(poisson_rdp_delta(sigma, steps, epochs, [eps])[0]), n)
    finest = start_delta(sigma, steps, epochs, float(discretization), z) / 2.0**MAX_REFINE
    shown = f"[{lower:.4g}, {upper:.4g}]"
    head = (f"the Poisson PLD bracket {shown} is {width:.3g} wide (relative), not within {LOOSE_WIDTH:.0%}: "
            if math.isfinite(width) else f"the Poisson PLD bracket {shown} has no lower side: ")
    spreads, windows = [], []
    for d in (Direction.REMOVE, Direction.ADD):
        b = bracket(sigma, steps, epochs, float(discretization), d, z)
        g = b.masses.upper
        ell, m = g.losses(), g.masses
        mean = float(np.dot(m, ell)) / float(np.sum(m))
        spreads.append(math.sqrt(float(np.dot(m, (ell - mean) ** 2)) / float(np.sum(m))))
        if math.isfinite(eps):
            lam = b.tilt_for(eps)
            bottom, top = tilt.window_for(b.mgf[True], lam, eps)
            windows.append((top - bottom) / discretization if math.isfinite(top - bottom) else math.inf)
    spread = min(spreads)
    if spread < MIN_SPREAD_CELLS * finest:
        return head + (f"grid resolution: one step's privacy loss has standard deviation {spread:.2g}, "
                       f"{spread / finest:.2g} cells of the finest grid {finest:.2g} (after MAX_START_HALVINGS "
                       f"and MAX_REFINE halvings), "
                       f"below MIN_SPREAD_CELLS = {MIN_SPREAD_CELLS:g}, and T·E = {n} steps compound the rounding; "
                       "a smaller pld_discretization narrows it (supported range: README, Poisson at the extremes)")
    if windows and max(windows) > MAX_WINDOW:
        return head + (f"composition window: the losses near ε = {eps:.4g} span about {max(windows):.2g} grid points "
                       f"of {discretization:g}, above MAX_WINDOW = 2^23, so the upper side is the Chernoff bound "
                       "and the lower side has no composition there; a coarser pld_discretization widens the "
                       "window (supported range: README, Poisson at the extremes)")
    return head + "neither the grid resolution nor the composition window is the cause (a tilt far from its saddle)"
