"""Where a monotone reading of δ(ε) crosses a target δ: the ε(δ) searches of the Poisson bracket
(:meth:`epscert.analytic.poisson.Bracket.epsilon`), moved out of :mod:`epscert.analytic.poisson` unchanged.

``read`` is non-increasing in ε (a certified upper or lower value of δ(ε) read from one composition), so
bisection keeps one point on each side of the target; which side is reported decides whether the answer
is an upper (read <= target) or a lower (read > target) bound on ε(target).
"""

from __future__ import annotations

#: Bisection steps of ε(δ) (relative precision 2^-50 of the bracket).
EPSILON_STEPS = 60


def bisect_crossing(read, target: float, a: float, b: float, steps: int = EPSILON_STEPS) -> tuple[float, float]:
    """Keep read(a) > target >= read(b) while halving [a, b] ``steps`` times (also the allocation bracket's
    ε(δ), :meth:`epscert.allocation.AllocationBracket.epsilon_side`)."""
    for _ in range(steps):
        mid = 0.5 * (a + b)
        if read(mid) <= target:
            b = mid
        else:
            a = mid
    return a, b


def crossing_upper(read, target: float, lo: float, hi: float) -> float:
    """A point b in [lo, hi] with read(b) <= target (hi itself is the caller's Chernoff point)."""
    if read(hi) > target:
        return hi
    if read(lo) <= target:
        return lo
    return bisect_crossing(read, target, lo, hi)[1]


def crossing_lower(read, target: float, lo: float, guess: float, hi: float) -> float:
    """A point a in [lo, hi] with read(a) > target (0 if none is found): from ``guess`` down by
    doubling steps to the first such point, then bisection towards the crossing."""
    if read(guess) > target:
        a, b = guess, hi
    else:
        a, b = None, guess
        for k in range(-30, 1):
            cand = guess - (guess - lo) * 2.0**k
            if read(cand) > target:
                a = cand
                break
            b = cand
        if a is None:
            return 0.0
    return bisect_crossing(read, target, a, b)[0]
