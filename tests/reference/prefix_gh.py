"""Independent reference for a Balls-and-Bins run cut mid-epoch, T in {2, 3} (numpy/scipy only).

After E whole epochs (E in {0, 1}) and r of the T steps of the next (1 <= r < T), the likelihood
ratio under Q is S_1^E · S' with S_1 = (1/T) Σ_{t<=T} W_t, S' = a + (1/T) Σ_{t<=r} W'_t, a = 1 − r/T,
and W = exp(Z/σ − 1/(2σ²)), Z ~ N(0, 1) i.i.d. (the marginal of the epoch's pair on its first r
coordinates). With K = e^ε,

    δ_remove(ε) = E[(S_1^E S' − K)_+],        δ_add(ε) = E[(1 − K S_1^E S')_+].

The lognormal's partial expectations give, for x > 0, call(x) = E[(W − x)_+] =
Φ̄(σ log x − 1/(2σ)) − x Φ̄(σ log x + 1/(2σ)) and put(x) = E[(x − W)_+] = x Φ(σ log x + 1/(2σ)) −
Φ(σ log x − 1/(2σ)); call(x) = 1 − x and put(x) = 0 for x <= 0. So for the prefix factor

    C(k) = E[(S' − k)_+]:  r = 1: call(T(k − a))/T;   r = 2: E_{W'_1}[call(T(k − a) − W'_1)]/T,
    P(k) = E[(k − S')_+]:  r = 1: put(T(k − a))/T;    r = 2: E_{W'_1}[put(T(k − a) − W'_1)]/T,

the r = 2 integral by Gauss–Legendre in z on each side of the kink (where W'_1 = T(k − a)), as in
epochs_gh.py; the whole epoch's E[(S_1 − k)_+] and E[(k − S_1)_+] likewise (T = 3: the first W by
Gauss–Legendre on [−Z, Z] outside, the inner value being smooth in it). One whole epoch and r = 1:
condition on the prefix's W', s = a + W'/T, then δ_remove = E_{W'}[s E[(S_1 − K/s)_+]] and
δ_add = E_{W'}[K s E[(1/(K s) − S_1)_+]], smooth in z', by Gauss–Legendre on [−Z, Z].
The error estimate is the difference to a coarser rule.
"""

from __future__ import annotations

import math

import numpy as np

from tests.reference.epochs_gh import lognormal_call, lognormal_put

_Z = 12.0


def _split_expect(x: np.ndarray, sigma: float, fn, nodes: int) -> np.ndarray:
    """E_W[fn(x − W)] for each x (a column vector), Gauss–Legendre in z on each side of the point
    W(z) = x, where fn(x − W) is not analytic (the whole line on one side when x <= 0). ``fn`` maps
    an array of arguments (shape (len(x), nodes)) to values."""
    zb = np.clip(sigma * np.log(np.where(x > 0, x, 1.0)) + 0.5 / sigma, -_Z, _Z)
    zb = np.where(x > 0, zb, _Z)
    g, gw = np.polynomial.legendre.leggauss(nodes)
    total = np.zeros(x.shape[0])
    for a, b in ((-_Z, zb), (zb, _Z)):
        a = np.broadcast_to(a, zb.shape)
        b = np.broadcast_to(b, zb.shape)
        half = 0.5 * (b - a)
        z = 0.5 * (a + b) + half * g[None, :]
        w = np.exp(z / sigma - 0.5 / sigma**2)
        dens = np.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi)
        total += half[:, 0] * ((fn(x - w) * dens) @ gw)
    return total


def _mean_of(count: int, shift: np.ndarray, sigma: float, kind: str, nodes: int) -> np.ndarray:
    """E[(Σ_{t<=count} W_t − shift)_+] ('call') or E[(shift − Σ W_t)_+] ('put'), count in {1, 2, 3}.

    count = 1 in closed form; otherwise W_1 by :func:`_split_expect` around the point W_1 = shift,
    where the value of the other W's (a function of shift − W_1, smooth but not analytic at 0:
    the sum's density vanishes there to every order) changes form.
    """
    shift = np.asarray(shift, dtype=np.float64)
    if count == 1:
        return (lognormal_call if kind == "call" else lognormal_put)(shift, sigma)

    def rest(y):
        return _mean_of(count - 1, y.ravel(), sigma, kind, nodes).reshape(y.shape)

    return _split_expect(shift[:, None], sigma, rest, nodes)


def _prefix(k: np.ndarray, sigma: float, steps: int, r: int, kind: str, nodes: int) -> np.ndarray:
    """C(k) (kind 'call') or P(k) ('put') of the prefix factor S' = a + (1/T) Σ_{t<=r} W'_t."""
    k = np.asarray(k, dtype=np.float64)
    return _mean_of(r, steps * (k - (1.0 - r / steps)), sigma, kind, nodes) / steps


def _whole(k: np.ndarray, sigma: float, steps: int, kind: str, nodes: int) -> np.ndarray:
    """E[(S_1 − k)_+] ('call') or E[(k − S_1)_+] ('put') of one whole epoch S_1 = (1/T) Σ_{t<=T} W_t."""
    return _mean_of(steps, steps * np.asarray(k, dtype=np.float64), sigma, kind, nodes) / steps


def _delta(sigma, steps, full, r, epsilon, direction, nodes) -> float:
    kk = math.exp(epsilon)
    if full == 0:
        if direction == "remove":
            return float(_prefix(np.array([kk]), sigma, steps, r, "call", nodes)[0])
        return kk * float(_prefix(np.array([1.0 / kk]), sigma, steps, r, "put", nodes)[0])
    # one whole epoch and r = 1: condition on the prefix's W', then the epoch's value in k
    g, gw = np.polynomial.legendre.leggauss(nodes)
    z = _Z * g
    s = (1.0 - 1.0 / steps) + np.exp(z / sigma - 0.5 / sigma**2) / steps
    dens = np.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi) * _Z * gw
    if direction == "remove":
        inner = s * _whole(kk / s, sigma, steps, "call", nodes)
    else:
        inner = kk * s * _whole(1.0 / (kk * s), sigma, steps, "put", nodes)
    return float(np.dot(dens, inner))


def prefix_delta(sigma: float, steps: int, full_epochs: int, prefix_steps: int, epsilon: float,
                 direction: str) -> tuple[float, float]:
    """(δ, error estimate) after ``full_epochs`` in {0, 1} epochs and ``prefix_steps`` of the next.

    T = ``steps`` in {2, 3}; ``prefix_steps`` r in [1, T − 1] (r = 2 needs full_epochs = 0, T = 3).
    """
    if steps not in (2, 3) or full_epochs not in (0, 1) or not 1 <= prefix_steps < steps:
        raise ValueError(f"need steps in {{2, 3}}, full_epochs in {{0, 1}}, 1 <= prefix_steps < steps, got "
                         f"steps={steps}, full_epochs={full_epochs}, prefix_steps={prefix_steps}")
    if prefix_steps == 2 and full_epochs:
        raise ValueError("prefix_steps=2 after a whole epoch is not covered")
    if direction not in ("remove", "add"):
        raise ValueError(f"direction must be 'remove' or 'add', got {direction!r}")
    fine_nodes, coarse_nodes = (160, 120) if full_epochs == 0 or steps == 2 else (96, 72)
    fine = _delta(sigma, steps, full_epochs, prefix_steps, epsilon, direction, fine_nodes)
    coarse = _delta(sigma, steps, full_epochs, prefix_steps, epsilon, direction, coarse_nodes)
    return fine, abs(fine - coarse) + 1e-14


def persistent_delta_t2(sigma: float, cycles: int, epsilon: float, direction: str) -> tuple[float, float]:
    """(δ, error estimate) of persistent Balls-and-Bins with T = 2 after ``cycles`` >= 1 whole cycles and
    one more step: S = (W_a + W_b)/2 with W_a at σ/√(cycles + 1) (the bin seen once more) and W_b at
    σ/√cycles. δ_remove = E_{W_a}[call_b(2K − W_a)]/2 and δ_add = K E_{W_a}[put_b(2/K − W_a)]/2, the
    outer integral split at its kink as in :func:`_split_expect`."""
    if direction not in ("remove", "add"):
        raise ValueError(f"direction must be 'remove' or 'add', got {direction!r}")
    sa, sb = sigma / math.sqrt(cycles + 1), sigma / math.sqrt(cycles)
    kk = math.exp(epsilon)

    def value(nodes: int) -> float:
        if direction == "remove":
            return 0.5 * float(_split_expect(np.array([[2.0 * kk]]), sa, lambda y: lognormal_call(y, sb), nodes)[0])
        return 0.5 * kk * float(_split_expect(np.array([[2.0 / kk]]), sa, lambda y: lognormal_put(y, sb), nodes)[0])

    fine, coarse = value(160), value(120)
    return fine, abs(fine - coarse) + 1e-14
