"""From δ(ε) to ε(δ) for monotone analytic curves (SPEC §8).

For a curve δ(ε) that is non-increasing in ε, ε(δ) = inf{ε >= 0 : δ(ε) <= target}.
Applied to an upper bound on δ this gives an upper bound on ε; applied to a lower bound,
a lower bound. The bisection returns the side of the bracket that keeps that direction:
``side='upper'`` returns a point where δ(ε) <= target, ``side='lower'`` one where
δ(ε) >= target (within ``tol`` of the crossing).
"""

from __future__ import annotations

import math
from typing import Callable

#: Bracket width at which the bisection stops.
EPSILON_TOL = 1e-6
MAX_EPSILON = 200.0


def epsilon_for_delta(delta_fn: Callable[[float], float], target: float, side: str,
                      tol: float = EPSILON_TOL, hi: float = MAX_EPSILON) -> float:
    """ε with δ(ε) crossing ``target`` for a non-increasing ``delta_fn``.

    If δ(hi) is still above the target, the upper side returns inf and the lower side hi.
    """
    if not 0.0 < target < 1.0:
        raise ValueError(f"delta must be in (0, 1), got delta={target}")
    if side not in ("upper", "lower"):
        raise ValueError(f"side must be 'upper' or 'lower', got side={side!r}")
    lo = 0.0
    if delta_fn(lo) <= target:
        return lo
    if delta_fn(hi) > target:  # never below the target up to hi: ε > hi (upper: unknown, inf)
        return math.inf if side == "upper" else hi
    while hi - lo > tol:
        mid = 0.5 * (lo + hi)
        if delta_fn(mid) <= target:
            hi = mid
        else:
            lo = mid
    return hi if side == "upper" else lo
