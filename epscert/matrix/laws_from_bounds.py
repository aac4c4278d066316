"""Laws of one block's mean from bounds on its survival function (steps 4, 4', 5* and 5'* of
:mod:`epscert.matrix.block_law`, whose notation this module keeps): S_F >= 0 the block mean, E[S_F] = 1 exactly, P_j
UCBs and L_j LCBs of P(S_F > s_j) on the grid s_1 < .. < s_K = c, all holding at once on one event.

- :func:`plain_upper`, :func:`plain_lower`: the KL bounds from sorted plain computed means.
- :func:`mean_one_remove_law`: a law Y* with S_F ⪯_icx Y*, whose stop-loss is the greatest convex minorant of the
  smaller of two bounds on E(S_F - t)_+ (one from the UCBs, one from the LCBs and the mean).
- :func:`mean_one_add_law`: a law Y*_add with S_F ⪯_dcx Y*_add, from the same bounds on E(t - S_F)_+.

Each law is checked in floating point at the vertices it rests on; where a check fails the function returns None and
the caller keeps the UCB law Y (REMOVE) or the LCB law Y_low (ADD) of :mod:`epscert.matrix.block_law`.
"""

from __future__ import annotations

import numpy as np

from epscert.bounds.kl import kl_lcbs, kl_ucbs
from epscert.matrix.add_decoupled import UNIT_ROUNDOFF, gamma_n

#: Relative raise of the hull's points in steps 5* and 5'* (:func:`mean_one_remove_law`, :func:`mean_one_add_law`):
#: room for the roundings of the law's cumulative sums (γ_{K+4}, about 10^-12), so that its check passes at the
#: hull's own vertices
HULL_SLACK = 1e-9


def plain_upper(means: np.ndarray, rel: float, grid: np.ndarray, share: float) -> np.ndarray:
    """KL–Chernoff UCBs of P(S_F > s) at the grid points from sorted plain computed means, at ``share`` each: the
    count of computed means above s/(1 + r) (the quotient lowered past its rounding), so every exact mean above s
    is counted (step 4, plain)."""
    count = means.size
    above = count - np.searchsorted(means, grid / (1.0 + rel) * (1.0 - 4.0 * UNIT_ROUNDOFF), side="right")
    # the computed fraction raised past its rounding (the KL UCB increases in it)
    return kl_ucbs(np.minimum(1.0, above / count * (1.0 + 2.0 * UNIT_ROUNDOFF)), count, share)


def plain_lower(means: np.ndarray, rel: float, grid: np.ndarray, share: float) -> np.ndarray:
    """L_j of step 4': KL lower confidence bounds on P(S_F > s_j) at ``share`` each, from the count of computed means
    above s_j (1 + r)(1 + 8u) (each such mean is an exact one above s_j, so the count is at most the exact
    indicators' count, and the LCB increases in it), made non-increasing by the running maximum from the right (a
    survival function is non-increasing, so each still lies below P(S_F > s_j)), at most 1."""
    count = means.size
    above = count - np.searchsorted(means, grid * (1.0 + rel) * (1.0 + 8.0 * UNIT_ROUNDOFF), side="right")
    lcb = kl_lcbs(above / count * (1.0 - 2.0 * UNIT_ROUNDOFF), count, share)
    return np.minimum(np.maximum.accumulate(lcb[::-1])[::-1], 1.0)


def survival_upper(ucbs: np.ndarray, markov: np.ndarray) -> np.ndarray:
    """P_j of step 4: the smallest of the UCBs, the Markov bounds and 1 at each grid point, made non-increasing from
    the left (a survival function is: each P_j still bounds P(S_F > s_j) from above)."""
    return np.minimum.accumulate(np.minimum(np.minimum(ucbs, markov), 1.0))


def lower_hull(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The indices of the vertices of the lower convex hull of the points (x_k, y_k), x ascending (the first and the
    last point included). Floating-point comparisons: only a choice of vertices; what rests on it is checked
    (:func:`mean_one_remove_law`, :func:`mean_one_add_law`)."""
    hull: list[int] = []
    xs, ys = x.tolist(), y.tolist()
    for k in range(len(xs)):
        while len(hull) >= 2 and ((ys[hull[-1]] - ys[hull[-2]]) * (xs[k] - xs[hull[-2]])
                                  >= (ys[k] - ys[hull[-2]]) * (xs[hull[-1]] - xs[hull[-2]])):
            hull.pop()
        hull.append(k)
    return np.array(hull)


def _knots(grid: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """(x, w, γ): the knots x_0 = 0 < s_1 < .. < s_K = c, the segment widths w_i = x_{i+1} - x_i (computed; the
    rounding of each is covered by γ with the products' and the sums') and γ = γ_{K+4}, the relative allowance of a
    cumulative sum of K products of a computed width and a non-negative float."""
    x = np.concatenate([[0.0], grid])
    return x, np.diff(x), gamma_n(grid.size + 4)


def _upper_stop_loss(upper: np.ndarray, w: np.ndarray, gam: float) -> np.ndarray:
    """A_k = ∫_{x_k}^c of Y's survival (1 on [0, s_1), P_j on [s_j, s_{j+1})) at every knot, rounded up."""
    seg_u = np.concatenate([[1.0], upper[:-1]])
    return np.concatenate([np.cumsum((seg_u * w)[::-1])[::-1], [0.0]]) * (1.0 + gam)


def _hull_slopes(x: np.ndarray, raised: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the vertices of :func:`lower_hull` of the points, the slope of each hull piece raised in magnitude by 4 ulps
    for its quotient and differences)."""
    vertices = lower_hull(x, raised)
    return vertices, np.diff(raised[vertices]) / np.diff(x[vertices]) * (1.0 + 4.0 * UNIT_ROUNDOFF)


def mean_one_remove_law(grid: np.ndarray, upper: np.ndarray, lower: np.ndarray, tail: float
                        ) -> tuple[np.ndarray, np.ndarray] | None:
    """The atoms and masses (values <= c, rounded up) of a law Y* below Y in the increasing convex order with
    S_F ⪯_icx Y* (step 5*), or None where its check fails (the caller keeps Y). ``upper`` P_j and ``lower`` L_j hold
    for every j at once (step 4, 4'); ``tail`` = P_K, Y*'s survival just past c (its law beyond c is Y's).

    π(t) = E(S_F - t)_+ is convex, and at each knot x_k (0 and the grid) it is at most A_k + T, A_k = ∫_{x_k}^c of
    Y's survival (1 on [0, s_1), P_j on [s_j, s_{j+1})) and T = ∫_c^∞ min(P_K, M̄), and at most π_L,k =
    1 - ∫_0^{x_k} L(s) ds (L: L_1 on [0, s_1), L_{j+1} on [s_j, s_{j+1}); as E[S_F] = 1 exactly (each W_k has mean 1
    under N(0, F Fᵀ)), π(t) = 1 - ∫_0^t P(S_F > s) ds). Y* has survival q on each hull piece of the points
    (x_k, min(A_k, π_L,k) (1 + ``HULL_SLACK``)) (:func:`lower_hull`), each q raised by 4 ulps for its quotient,
    made non-increasing and at least P_K from the right, at most 1: its kinks are hull vertices only, and
    D(x) = ∫_x^c q is what the check bounds from below at every vertex v: D(v) >= min(A_v, π_L,v) (A and π_L
    computed upward: products and sums of non-negative terms, γ; the subtraction 1 - B rounds by u of its result).
    Then at each vertex E(Y* - v)_+ = D(v) + T >= min(A_v + T, π_L,v) >= π(v), and between two vertices
    E(Y* - t)_+ is linear and π convex, so E(Y* - t)_+ >= π(t) on [0, c]; beyond c Y*'s survival is Y's. With
    E[Y*] = E(Y* - 0)_+ >= π(0) = 1, S_F ⪯_icx Y* (stop-loss order). Y*'s stop-loss is at most Y's at every knot
    (up to the slack), so it is the tighter law wherever the LCBs cut below Y's (near and below the mean)."""
    x, w, gam = _knots(grid)
    b = np.concatenate([[0.0], np.cumsum(lower * w)]) * (1.0 - gam)
    pi_l = np.maximum(1.0 - b, 0.0) * (1.0 + 2.0 * UNIT_ROUNDOFF)
    target = np.minimum(_upper_stop_loss(upper, w, gam), pi_l)
    vertices, slopes = _hull_slopes(x, target * (1.0 + HULL_SLACK))
    q = np.minimum(np.maximum.accumulate(np.maximum(-slopes, tail)[::-1])[::-1], 1.0)
    seg_q = np.repeat(q, np.diff(vertices))
    d = np.concatenate([np.cumsum((seg_q * w)[::-1])[::-1], [0.0]]) * (1.0 - gam)
    if not np.all(d[vertices] >= target[vertices]):
        return None
    survival = np.concatenate([[1.0], q, [tail]])  # just left of each vertex, and past c
    masses = -np.diff(survival) * (1.0 + 2.0 * UNIT_ROUNDOFF)
    return x[vertices], masses


def mean_one_add_law(grid: np.ndarray, upper: np.ndarray, lower: np.ndarray, tail_int: float
                     ) -> tuple[np.ndarray, np.ndarray] | None:
    """The atoms and masses (all mass in [0, c], rounded up) of a law Y*_add with S_F ⪯_dcx Y*_add (step 5'*), or
    None where its check fails (the caller keeps Y_low). ψ(t) = E(t - S_F)_+ = ∫_0^t P(S_F <= s) ds is convex and
    increasing; at each knot x_k it is at most ψ_L,k = ∫_0^{x_k} (1 - L(s)) ds (L as in
    :func:`mean_one_remove_law`) and at most x_k - 1 + A_k + T (= x_k - E[S_F] + π(x_k), π <= Y's stop-loss A + T;
    ``tail_int`` >= T). Y*_add has the CDF p on each hull piece of those bounds' minimum (raised by ``HULL_SLACK``
    of its magnitude), each raised by 4 ulps, made non-decreasing from the left, at most 1, and 1 from c on: its
    kinks are hull vertices only, and the check bounds Ψ(v) = ∫_0^v p from below at every vertex by the bound.
    Between vertices Ψ is linear and ψ convex, and beyond c Ψ grows with slope 1, ψ with at most 1: Ψ >= ψ
    everywhere, which is S_F ⪯_dcx Y*_add (for a decreasing convex f, E f(S_F) <= E f(Y*_add)); no equality of means
    is needed (the second bound uses E[S_F] = 1)."""
    x, w, gam = _knots(grid)
    psi_l = np.concatenate([[0.0], np.cumsum((1.0 - lower) * (1.0 + 2.0 * UNIT_ROUNDOFF) * w)]) * (1.0 + gam)
    stop = _upper_stop_loss(upper, w, gam) + tail_int * (1.0 + gam)
    psi_u = (x - 1.0) + stop
    psi_u = psi_u + 4.0 * UNIT_ROUNDOFF * (x + 1.0 + stop)  # two sums: u of their operands' magnitude each
    target = np.minimum(psi_l, psi_u)
    vertices, slopes = _hull_slopes(x, target + HULL_SLACK * np.abs(target))
    p = np.minimum(np.maximum.accumulate(np.maximum(slopes, 0.0)), 1.0)
    seg_p = np.repeat(p, np.diff(vertices))
    psi = np.concatenate([[0.0], np.cumsum(seg_p * w)]) * (1.0 - gam)
    if not np.all(psi[vertices] >= target[vertices]):
        return None
    cdf = np.concatenate([[0.0], p, [1.0]])  # just left of each vertex, and at c
    masses = np.diff(cdf) * (1.0 + 2.0 * UNIT_ROUNDOFF)
    return x[vertices], masses
