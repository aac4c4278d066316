"""Confidence bounds for the mean of i.i.d. values in [0, s] (SPEC §3, Algorithm 4).

Chernoff–Hoeffding in KL form: for m i.i.d. values in [0, 1] with mean p and
empirical mean p̂, Pr[p̂ <= p - t] <= exp(-m kl(p - t || p)). Hence

    UCB_β(p̂, m) = the smallest p in [p̂, 1] with m kl(p̂ || p) >= log(1/β)  (1 if none)

satisfies Pr[p > UCB_β] <= β. With values in [0, s] (importance sampling) the bound
is s · UCB_β(p̂ / s). We solve the equation by bisection and return the upper end of
the final bracket, and inflate it by ``UCB_SAFETY`` (relative), so numerical error can only make
the bound larger.
"""

from __future__ import annotations

import math

import numpy as np

#: Bisection stops when the bracket is this small relative to the bound.
UCB_REL_TOL = 1e-12
#: kl(p̂||p) suffers cancellation (~1e-11 relative) near the root; the returned bound is
#: inflated by this factor so that evaluation error can only loosen it.
UCB_SAFETY = 1e-9
_MAX_ITER = 200


def bernoulli_kl(a: float, b: float) -> float:
    """kl(a || b) = a log(a/b) + (1-a) log((1-a)/(1-b)) for a, b in [0, 1], with 0 log 0 = 0."""
    if b <= 0.0:
        return 0.0 if a <= 0.0 else math.inf
    if b >= 1.0:
        return 0.0 if a >= 1.0 else math.inf
    out = 0.0
    if a > 0.0:
        out += a * math.log(a / b)
    if a < 1.0:
        out += (1.0 - a) * (math.log1p(-a) - math.log1p(-b))
    return max(out, 0.0)


def _kl_setup(mean: float, count: int, error_prob: float, scale: float) -> tuple[float, float] | None:
    """(p̂ in [0, 1], log(1/β)/m) of a KL–Chernoff bound, or None when the range is empty (scale <= 0)."""
    if count < 1:
        raise ValueError(f"count must be >= 1, got count={count}")
    if not 0.0 < error_prob < 1.0:
        raise ValueError(f"error_prob must be in (0, 1), got error_prob={error_prob}")
    if not scale > 0.0:
        return None
    return min(max(mean / scale, 0.0), 1.0), math.log(1.0 / error_prob) / count


def _kl_crossing(p_hat: float, target: float, far: float) -> float:
    """Bisection between p̂ and ``far`` (1 for the UCB, 0 for the LCB) for kl(p̂ ‖ p) = target.

    kl(p̂ ‖ ·) grows away from p̂, so the end kept on the ``far`` side always has kl >= target:
    the returned point is on the safe side of the crossing (above it for the UCB, below for the LCB).
    """
    near = p_hat
    for _ in range(_MAX_ITER):
        mid = 0.5 * (near + far)
        if bernoulli_kl(p_hat, mid) >= target:
            far = mid
        else:
            near = mid
        if abs(far - near) <= UCB_REL_TOL * max(near, far):
            break
    return far


def kl_ucb(mean: float, count: int, error_prob: float, scale: float = 1.0) -> float:
    """KL–Chernoff upper confidence bound at failure probability ``error_prob``.

    ``mean`` is the empirical mean of ``count`` i.i.d. values in [0, scale].
    Returns u with Pr[true mean > u] <= error_prob.
    """
    setup = _kl_setup(mean, count, error_prob, scale)
    if setup is None:
        return 0.0
    p_hat, target = setup
    if p_hat >= 1.0:
        return scale
    if p_hat == 0.0:  # kl(0 || p) = -log(1 - p): closed form
        return scale * min(1.0, -math.expm1(-target) * (1.0 + UCB_SAFETY))
    if bernoulli_kl(p_hat, 1.0) < target:
        return scale
    return scale * min(1.0, _kl_crossing(p_hat, target, 1.0) * (1.0 + UCB_SAFETY))


def standard_error(mean: float, mean_sq: float, count: int, scale: float = 1.0) -> float:
    """Standard error of the mean, s · sqrt(var / m), from the means of Y and Y² (unbiased variance)."""
    if count < 2:
        return math.inf
    var = max(mean_sq - mean * mean, 0.0) * count / (count - 1)
    return scale * math.sqrt(var / count)


def kl_lcb(mean: float, count: int, error_prob: float, scale: float = 1.0) -> float:
    """KL–Chernoff lower confidence bound at failure probability ``error_prob``.

    ``mean`` is the empirical mean of ``count`` i.i.d. values in [0, scale]. Chernoff–Hoeffding
    for the upper tail, Pr[p̂ >= p + t] <= exp(-m kl(p + t || p)), gives: the largest p in
    [0, p̂] with m kl(p̂ || p) >= log(1/β) (0 if none) is below the true mean except with
    probability <= β. Bisection keeps the lower end of the bracket, which is then deflated by
    ``UCB_SAFETY`` (relative), so numerical error can only lower the bound.
    """
    setup = _kl_setup(mean, count, error_prob, scale)
    if setup is None:
        return 0.0
    p_hat, target = setup
    if p_hat <= 0.0:
        return 0.0
    if p_hat >= 1.0:  # kl(1 || p) = -log p: closed form
        return scale * math.exp(-target) * (1.0 - UCB_SAFETY)
    if bernoulli_kl(p_hat, 0.0) < target:
        return 0.0
    return scale * _kl_crossing(p_hat, target, 0.0) * (1.0 - UCB_SAFETY)


def bernoulli_kl_array(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """:func:`bernoulli_kl` elementwise (the same conventions: 0 log 0 = 0, inf where b is 0 or 1 and a is not)."""
    a, b = np.broadcast_arrays(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64))
    inner = (b > 0.0) & (b < 1.0)
    bi = np.where(inner, b, 0.5)
    with np.errstate(divide="ignore", invalid="ignore"):
        first = np.where(a > 0.0, a * np.log(a / bi), 0.0)
        second = np.where(a < 1.0, (1.0 - a) * (np.log1p(-a) - np.log1p(-bi)), 0.0)
    out = np.maximum(first + second, 0.0)
    edge = np.where(b <= 0.0, np.where(a <= 0.0, 0.0, np.inf), np.where(a >= 1.0, 0.0, np.inf))
    return np.where(inner, out, edge)


def _kl_crossings(p_hat: np.ndarray, target: np.ndarray, far: float) -> np.ndarray:
    """:func:`_kl_crossing` for many (p̂, target) at once, the same bisection step for step (each element stops on
    its own), so each far end kept has a computed kl >= its target: the safe side, as there."""
    near, ends = p_hat.astype(np.float64), np.full(p_hat.shape, float(far))
    live = np.arange(p_hat.size)
    for _ in range(_MAX_ITER):
        if not live.size:
            break
        mid = 0.5 * (near[live] + ends[live])
        up = bernoulli_kl_array(p_hat[live], mid) >= target[live]
        ends[live[up]], near[live[~up]] = mid[up], mid[~up]
        live = live[~(np.abs(ends[live] - near[live]) <= UCB_REL_TOL * np.maximum(near[live], ends[live]))]
    return ends


def _kl_arrays(means, count: int, error_prob: float, scale) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple]:
    """(p̂, s, log(1/β)/m, shape) of :func:`kl_ucbs` and :func:`kl_lcbs`, flat (the checks of :func:`_kl_setup`)."""
    _, target = _kl_setup(0.0, count, error_prob, 1.0)
    means, scale = np.broadcast_arrays(np.asarray(means, dtype=np.float64), np.asarray(scale, dtype=np.float64))
    with np.errstate(divide="ignore", invalid="ignore"):
        p_hat = np.where(scale > 0.0, np.clip(means / np.where(scale > 0.0, scale, 1.0), 0.0, 1.0), 0.0)
    return p_hat.ravel(), scale.ravel(), np.full(p_hat.size, target), means.shape


def kl_ucbs(means, count: int, error_prob: float, scale=1.0) -> np.ndarray:
    """:func:`kl_ucb` of each mean (and scale), all from one vectorized bisection: the same branches and the same
    steps, numpy's logarithms in place of the math module's (within an ulp or two: inside ``UCB_SAFETY``)."""
    p_hat, s, target, shape = _kl_arrays(means, count, error_prob, scale)
    # p̂ >= 1, or not a number (the scalar bisection then keeps its far end, 1): the whole range
    out = np.where((p_hat >= 1.0) | np.isnan(p_hat), s, s * np.minimum(1.0, -np.expm1(-target) * (1.0 + UCB_SAFETY)))
    solve = np.flatnonzero((p_hat > 0.0) & (p_hat < 1.0))
    out[solve] = s[solve] * np.minimum(1.0, _kl_crossings(p_hat[solve], target[solve], 1.0) * (1.0 + UCB_SAFETY))
    out[~(s > 0.0)] = 0.0
    return out.reshape(shape)


def kl_lcbs(means, count: int, error_prob: float, scale=1.0) -> np.ndarray:
    """:func:`kl_lcb` of each mean (and scale), vectorized as :func:`kl_ucbs`."""
    p_hat, s, target, shape = _kl_arrays(means, count, error_prob, scale)
    out = np.where(p_hat >= 1.0, s * np.exp(-target) * (1.0 - UCB_SAFETY), 0.0)
    solve = np.flatnonzero((p_hat > 0.0) & (p_hat < 1.0))
    out[solve] = s[solve] * _kl_crossings(p_hat[solve], target[solve], 0.0) * (1.0 - UCB_SAFETY)
    out[~(s > 0.0)] = 0.0
    return out.reshape(shape)
