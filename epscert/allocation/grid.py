"""The main cells of one combine step: where the grid is fine (tightness only, never soundness).

Contraction and spread (:mod:`epscert.allocation.cells`) are valid for any cells, and the kernel
places every pair value in its cell exactly (checked against both edges), so nothing here enters
a bound: the shape only decides how wide the bracket is.

The main cells are uniform in a map g of u = (log z − c)/s, with c the log of the mean of the
step's output law and s = 1/16 of the significant range [lo, hi]:

    g(u) = u/(1 + α|u|) + β·u/(w + |u|),

a density (1 + α|u|)^-2 + β w/(w + |u|)^2 in log z. The first term (α = ``tail_focus``) spreads
the cells over the whole range, finer at the centre for α > 0 (α = 0 is uniform in log z). The
second, a *centre bump* of width w (in units of s) holding the share ``centre_share`` of the
cells, resolves the bulk of the law when it is much narrower than the range: the mean of many
heavy-tailed steps at small σ (a bulk of log-width ~ CV/√T inside a range set by the far tails).
w is the log-width of the output law, sqrt(log(1 + CV²)) with CV² its squared coefficient of
variation (exact from the inputs' means and variances for a mean with nonnegative weights or a
product of independent factors), clamped to [``_MIN_WIDTH``, ``_MAX_WIDTH``].
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

#: Clamp of the bump width w (units of s): never below the resolution of 2000 cells over 32
#: units, never much wider than the range itself.
_MIN_WIDTH = 1e-3
_MAX_WIDTH = 16.0
#: Bisection steps that invert g for the edges (g is increasing; the bracket [u_lo, u_hi] shrinks
#: below the float resolution).
_INVERT_STEPS = 80


@dataclass(frozen=True)
class GridShape:
    """``tail_focus`` α and ``centre_share`` (fraction of the main cells in the centre bump)."""

    tail_focus: float = 0.3
    centre_share: float = 0.0


def _cv2(law) -> tuple[float, float]:
    """(mean, squared coefficient of variation) of a cell law (as a normalised law)."""
    mass = max(law.mass, 1e-300)
    mean = law.first_moment / mass
    if mean <= 0.0:
        return mean, 0.0
    with np.errstate(over="ignore", invalid="ignore"):  # inf near the top cap: the widest bump
        var = float(np.dot(law.masses, (law.values - mean) ** 2)) / mass
        square = mean * mean
        # a mean below ~1e-154 squares to 0 (small σ over many epochs): the widest bump (tightness only)
        return (mean, var / square) if square > 0.0 else (mean, math.inf)


def _bump_width(x, y, op: str, weights) -> float:
    """sqrt(log(1 + CV²)) of op(X, Y) for independent X, Y (module docstring)."""
    mx, cx = _cv2(x)
    my, cy = _cv2(y)
    if op == "product":
        cv2 = (1.0 + cx) * (1.0 + cy) - 1.0
    else:
        wa, wb = weights
        mean = wa * mx + wb * my
        cv2 = ((wa * mx) ** 2 * cx + (wb * my) ** 2 * cy) / (mean * mean) if mean > 0.0 else 0.0
    return math.sqrt(math.log1p(cv2)) if cv2 < math.inf else math.inf  # inf (or nan): the widest


@dataclass(frozen=True)
class MainGrid:
    """The main cells (module docstring): ``log_edges`` and the map used to place log z."""

    c: float
    s: float
    alpha: float
    beta: float
    w: float
    g0: float
    scale: float
    log_edges: np.ndarray

    @staticmethod
    def build(x, y, op: str, weights, lo: float, hi: float, n: int, shape: GridShape) -> "MainGrid":
        wa, wb = weights
        mx, my = x.first_moment / max(x.mass, 1e-300), y.first_moment / max(y.mass, 1e-300)
        mean = wa * mx + wb * my if op == "mean" else mx * my
        c = min(max(math.log(mean), lo), hi) if mean > 0.0 else 0.5 * (lo + hi)
        s = (hi - lo) / 16.0
        alpha = shape.tail_focus
        u0, u1 = (lo - c) / s, (hi - c) / s
        beta, w = 0.0, 1.0
        if shape.centre_share > 0.0:
            w = min(max(_bump_width(x, y, op, weights) / s, _MIN_WIDTH), _MAX_WIDTH)
            tail_range = _squash(u1, alpha) - _squash(u0, alpha)
            bump_range = u1 / (w + abs(u1)) - u0 / (w + abs(u0))
            if bump_range > 0.0:
                beta = shape.centre_share / (1.0 - shape.centre_share) * tail_range / bump_range
        grid = MainGrid(c, s, alpha, beta, w, 0.0, 1.0, np.empty(0))
        g0, g1 = grid.g(u0), grid.g(u1)
        v = g0 + (g1 - g0) * np.arange(n + 1) / n
        if beta:
            log_edges = c + s * grid.invert(v, u0, u1)
        else:  # closed form
            log_edges = c + s * v / (1.0 - alpha * np.abs(v))
        log_edges[0], log_edges[-1] = lo, hi
        return MainGrid(c, s, alpha, beta, w, g0, n / (g1 - g0), np.maximum.accumulate(log_edges))

    def g(self, u):
        """The map g(u) (module docstring), for a scalar or an array."""
        out = u / (1.0 + self.alpha * np.abs(u))
        if self.beta:
            out = out + self.beta * u / (self.w + np.abs(u))
        return out

    def invert(self, v: np.ndarray, u0: float, u1: float) -> np.ndarray:
        """u with g(u) = v, by bisection on [u0, u1] (g is increasing)."""
        a, b = np.full(v.size, u0), np.full(v.size, u1)
        for _ in range(_INVERT_STEPS):
            m = 0.5 * (a + b)
            below = self.g(m) < v
            a = np.where(below, m, a)
            b = np.where(below, b, m)
        return 0.5 * (a + b)

    def position(self, lz):
        """1 + (continuous) index of the main cell of log z (a guess; the caller checks it).

        The map of the module docstring with the constants folded (u = v/s, v = log z − c):
        u/(1 + α|u|) = v/(s + α|v|) and u/(w + |u|) = v/(w·s + |v|); ``lz`` is overwritten.
        """
        v = lz
        v -= self.c
        a = np.abs(v)
        bump = None
        if self.beta:
            bump = a + self.w * self.s
            np.divide(v, bump, out=bump)
            bump *= self.beta * self.scale
        if self.alpha:
            a *= self.alpha
            a += self.s
            v /= a
            v *= self.scale
        else:
            v *= self.scale / self.s
        if bump is not None:
            v += bump
        v += 1.0 - self.g0 * self.scale
        return v


def _squash(u: float, alpha: float) -> float:
    return u / (1.0 + alpha * abs(u))
