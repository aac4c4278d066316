"""Monotone envelopes of certified δ(ε) curves over an ε grid.

The true δ(ε) = D_{e^ε}(P‖Q) is non-increasing in ε (e^ε Q(S) grows with ε for every S).
Hence, over any grid ε_1 < ε_2 < …:

- if u_i >= δ(ε_i) for every i, then min_{j <= i} u_j >= min_{j <= i} δ(ε_j) = δ(ε_i): the
  running minimum from the left is still an upper bound at every point, and it is
  non-increasing;
- if l_i <= δ(ε_i) for every i, then max_{j >= i} l_j <= max_{j >= i} δ(ε_j) = δ(ε_i): the
  running maximum from the right is still a lower bound, and non-increasing.

Both only move a bound towards the truth, so no failure probability is spent. The grid may be
given in any order (and with repeats): values are matched to their ε, and ties share one value.
"""

from __future__ import annotations

import numpy as np


def _envelope(epsilons, values, upper: bool) -> np.ndarray:
    eps = np.asarray(epsilons, dtype=np.float64).ravel()
    vals = np.asarray(values, dtype=np.float64).ravel()
    if eps.shape != vals.shape:
        raise ValueError(f"epsilons and values must have the same length, got {eps.size} and {vals.size}")
    if np.isnan(eps).any():
        raise ValueError(f"epsilons must not be NaN, got epsilons={eps.tolist()}")
    if eps.size == 0:
        return vals.copy()
    order = np.argsort(eps, kind="stable")
    sorted_vals = vals[order]
    if upper:
        env = np.minimum.accumulate(sorted_vals)
    else:
        env = np.maximum.accumulate(sorted_vals[::-1])[::-1]
    # equal ε: one true δ, so the tightest valid value serves all of them
    sorted_eps = eps[order]
    _, start = np.unique(sorted_eps, return_index=True)
    reduce = np.minimum if upper else np.maximum
    tied = reduce.reduceat(env, start)
    env = np.repeat(tied, np.diff(np.append(start, env.size)))
    out = np.empty_like(env)
    out[order] = env
    return out


def monotone_upper(epsilons, values) -> np.ndarray:
    """Running minimum from the left of upper bounds on δ(ε_i): non-increasing, still upper bounds."""
    return _envelope(epsilons, values, upper=True)


def monotone_lower(epsilons, values) -> np.ndarray:
    """Running maximum from the right of lower bounds on δ(ε_i): non-increasing, still lower bounds."""
    return _envelope(epsilons, values, upper=False)
