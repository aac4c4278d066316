"""Roots of S_j(s) = B along the REMOVE conditional estimator's lines (:mod:`epscert.matrix.values`).

Along line j (kriging on mode j, :mod:`epscert.matrix.values` docstring) S_j(s) = Σ_k e^{a_k + s d_k}
+ e^{s - v_j/2} + F with slopes d_k > 0 for the neighbours, 1 for the own mode and 0 for the far constant
F, so log S_j is convex (a log-sum-exp of affine functions) and increasing; Newton started above the root
stays above it and decreases to it (monotone; quadratic near the root). The integrals of the values are
stationary at the root (d/dc ∫_c^h (S - B) φ = -(S(c) - B) φ(c) = 0 there), so a root within
NEWTON_TOL moves a value by rounding only.
"""

from __future__ import annotations

import numpy as np

#: Newton iterations on log S (monotone from above, quadratic near the root).
NEWTON_STEPS = 40
NEWTON_TOL = 1e-13


def remove_root(xp, sp, a, dk, own, log_far, v, log_big, above=None):
    """Root of log S_j(s) = log B along every line (N, b), by Newton from above; -inf when the far
    constant alone reaches B (S > B for every s).

    S(s) >= e^{s - v/2} + F, so s_0 = log(B - F) + v/2 has log S(s_0) >= log B: the start is above
    the root, and Newton on the convex increasing log S stays above it and decreases to it. numpy: from s_0,
    per-lane test (:func:`newton_active`). JAX: also below every neighbour's crossing s_k = (log B - a_k)/d_k
    (S(s_k) >= e^{a_k + s_k d_k} = B, so s_k is above the root too) and below ``above``, the roots at a larger
    B (S increasing; a lane where ``above`` is -inf, the far constant reached the larger B, keeps its start).
    At that start every term of S is at most B (the own term e^{s - v/2} <= B - F by s <= s_0, the far one
    F < B, each neighbour's by s <= s_k), and every iterate s lies in [root, start] with slopes >= 0, so every
    term stays <= B while S(s) >= B: the terms are scaled by B itself, w_k = e^{term_k - log B} in (0, 1] with
    Σ w_k in [1, W + 2], so no maximum per step (the same relative precision as scaling by the largest term:
    no term overflows, the sum is a normal number). Where rounding left ``above`` an ulp below the new root
    (B equal to the last ulp), f <= 0 there and it is kept: within the root's own rounding. JAX stops once no
    step exceeds NEWTON_TOL (1 + |s|)."""
    far_ok = log_far < log_big
    gap = xp.where(far_ok, log_far - log_big, -1.0)  # finite everywhere: no log(0) on the masked lanes
    start = xp.where(far_ok, log_big + xp.log(-xp.expm1(gap)), 0.0) + 0.5 * v
    if xp is np:
        return np.where(far_ok, newton_active(a, dk, log_far, v, log_big, start, far_ok), -np.inf)
    near = dk > 0  # the neighbours (a padded entry has d = 0 and a = -inf)
    crossing = xp.min(xp.where(near, (log_big - a) / xp.where(near, dk, 1.0), xp.inf), axis=-1)
    start = xp.minimum(start, crossing)
    if above is not None:
        start = xp.where(far_ok & xp.isfinite(above), xp.minimum(start, above), start)
    ones = xp.ones_like(a[:, :, :1])
    slopes = xp.concatenate([dk * xp.ones_like(a), ones, 0.0 * ones], axis=2)
    scaled = xp.concatenate([a, (-0.5 * v)[..., None], log_far[..., None]], axis=2) - log_big  # terms at s = 0, / B

    def step(_, s):
        w = xp.exp(scaled + s[..., None] * slopes)  # e^{term_k(s)} / B, each <= 1
        total = xp.sum(w, axis=-1)
        f = xp.log(total)
        move = xp.where(far_ok & (f > 0), f * total / xp.sum(w * slopes, axis=-1), 0.0)
        return s - move, xp.any(move > NEWTON_TOL * (1.0 + xp.abs(s)))

    return xp.where(far_ok, sp.newton_loop(NEWTON_STEPS, step, start), -xp.inf)


def log_s_minus(xp, a, dk, slopes, log_far, v, log_big, s):
    """(log S(s) - log B, d log S/ds) for arrays of lines (leading axes) at points s."""
    terms = xp.concatenate([a + s[..., None] * dk, (s - 0.5 * v)[..., None], log_far[..., None]], axis=-1)
    top = xp.max(terms, axis=-1)
    w = xp.exp(terms - top[..., None])
    total = xp.sum(w, axis=-1)
    return top + xp.log(total) - log_big, xp.sum(w * slopes, axis=-1) / total


def newton_active(a, dk, log_far, v, log_big, start, live):
    """numpy Newton on the (sample, line) pairs still moving: each pass works on those only."""
    n, b, w = a.shape
    s = start.copy()
    vv = np.broadcast_to(v, (n, b))
    dkk = np.broadcast_to(dk, a.shape)
    active = np.flatnonzero(live.ravel())
    a2, d2, f2, v2 = a.reshape(-1, w), dkk.reshape(-1, w), log_far.ravel(), vv.ravel()
    flat = s.ravel()
    for _ in range(NEWTON_STEPS):
        if active.size == 0:
            break
        da = d2[active]
        slopes = np.concatenate([da, np.ones((active.size, 2))], axis=1)
        slopes[:, -1] = 0.0
        f, fp = log_s_minus(np, a2[active], da, slopes, f2[active], v2[active], log_big, flat[active])
        step = np.where(f > 0, f / fp, 0.0)
        flat[active] -= step
        active = active[step > NEWTON_TOL * (1.0 + np.abs(flat[active]))]
    return flat.reshape(n, b)
