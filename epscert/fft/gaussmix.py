"""Loss cells of the (subsampled) Gaussian pair: interval probabilities with error bounds.

The pair of one Poisson-subsampled Gaussian step (rate q, noise σ, sensitivity s; q = 1 is the
Gaussian mechanism), with z(x) = (2sx - s²)/(2σ²):

- REMOVE: P = (1-q)N(0, σ²) + qN(s, σ²), Q = N(0, σ²), loss ω(x) = log(1 - q + q e^{z(x)}) =
  log1p(q·expm1(z)), increasing in x, bounded below by log(1 - q);
- ADD: P = N(0, σ²), Q = the mixture, loss -ω(x), decreasing in x, bounded above by -log(1 - q).

The loss is monotone in x, so a cell {ω ∈ [a, b)} is an x-interval and its masses are normal CDF
differences: Φ on the lower half, the survival function on the upper half (no cancellation in
either tail). Error model (a stated model, as in ``grid.py``): ``scipy.special.ndtr`` is accurate
to ``NDTR_ULP`` units of u relative; the argument z = (x - m)/σ is rounded (|δz| <= 2u|z|), which
moves Φ by <= φ(z)|δz| <= (1 + |z|)Φ_tail(z)·2u|z| (Mills); so each CDF value carries
(NDTR_ULP + 4(1 + z²))·u relative error, and a difference adds 2u of its value.

Cell edges are x = x(g) from the inverse loss map, evaluated in floating point; the loss at the
computed edge is recomputed with a bound on its own error, and ``eta`` (the largest distance from
an edge's loss to its grid point, plus that bound) goes to :class:`~epscert.fft.pairs.Cells`.

Reservoir (the body of a subsampled step; :mod:`epscert.fft.pairs`). For q < 1 the support is
bounded on one side; the region next to that bound, B = {ω < b} (REMOVE) or {ω >= b} (ADD), has a
loss L_B = log(P(B)/Q(B)) that moves continuously with b. The edge b is found by bisection so that
L_B = b - Δ (REMOVE) or b + Δ (ADD) up to ``RESERVOIR_EXCESS`` (certified from the error bounds:
L_B is never on the wrong side of its grid point). The grid is offset so that b is a grid point,
and B becomes one atom on the grid point next to b. Tails of total P-mass <= Φ̄(``TAIL_Z``) are cut.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import optimize, special

from epscert.fft.pairs import UNIT_ROUNDOFF, Cells, Reservoir
from epscert.names import Direction

#: Assumed accuracy of scipy.special.ndtr (units of u, relative).
NDTR_ULP = 64.0
#: Tails beyond this many noise standard deviations are cut (P-mass <= Φ̄(12) ≈ 1.8e-33 per step).
TAIL_Z = 12.0
#: The reservoir's loss is certified within this (absolute) above its grid point.
RESERVOIR_EXCESS = 1e-13
#: Steps that move the reservoir edge down until its gap is certified >= 0.
RESERVOIR_STEPS = 60


def _phi_pair(z: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(Φ(z), Φ(-z), relative error bound of each) for an array z (±inf allowed)."""
    with np.errstate(invalid="ignore", over="ignore"):
        lower, upper = special.ndtr(z), special.ndtr(-z)
        rel = (NDTR_ULP + 4.0 * (1.0 + np.where(np.isfinite(z), z * z, 0.0))) * UNIT_ROUNDOFF
    return lower, upper, rel


def interval_mass(lo: np.ndarray, hi: np.ndarray, components, sd: float) -> tuple[np.ndarray, np.ndarray]:
    """Σ_i w_i Pr[lo < X_i <= hi], X_i ~ N(m_i, sd²), for ``components`` = ((w_i, m_i), ...), with errors."""
    total = np.zeros(np.broadcast(lo, hi).shape)
    err = np.zeros_like(total)
    for weight, mean in components:
        f_lo, s_lo, r_lo = _phi_pair((lo - mean) / sd)
        f_hi, s_hi, r_hi = _phi_pair((hi - mean) / sd)
        use_lower = f_hi <= 0.5
        val = np.where(use_lower, f_hi - f_lo, s_lo - s_hi)
        e = np.where(use_lower, r_hi * f_hi + r_lo * f_lo, r_lo * s_lo + r_hi * s_hi)
        val = np.maximum(np.nan_to_num(val, nan=0.0), 0.0)
        total += weight * val
        err += weight * (np.nan_to_num(e, nan=0.0) + 2.0 * UNIT_ROUNDOFF * val)
    return total, err + 2.0 * UNIT_ROUNDOFF * total


@dataclass(frozen=True)
class SubsampledPair:
    """One subsampled Gaussian step for one direction (module docstring); q = 1: the Gaussian."""

    q: float
    sigma: float
    sensitivity: float
    direction: Direction

    @property
    def mixture(self) -> tuple[tuple[float, float], ...]:
        if self.q >= 1.0:
            return ((1.0, self.sensitivity),)
        return ((1.0 - self.q, 0.0), (self.q, self.sensitivity))

    @property
    def p_components(self):
        return self.mixture if self.direction is Direction.REMOVE else ((1.0, 0.0),)

    @property
    def q_components(self):
        return ((1.0, 0.0),) if self.direction is Direction.REMOVE else self.mixture

    @property
    def increasing(self) -> bool:
        return self.direction is Direction.REMOVE

    def _z(self, x):
        s, s2 = self.sensitivity, self.sigma**2
        return (2.0 * s * x - s * s) / (2.0 * s2)

    def remove_loss(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """ω(x) of the REMOVE pair and a bound on its evaluation error."""
        u = UNIT_ROUNDOFF
        z = self._z(np.asarray(x, dtype=np.float64))
        if self.q >= 1.0:
            return z, 4.0 * u * (1.0 + np.abs(z))
        with np.errstate(over="ignore", invalid="ignore"):
            y = self.q * np.expm1(z)
            w = np.log1p(y)
            amp = np.abs(y) / np.maximum(1.0 + y, 1e-300)  # |y/(1+y)|: log1p's sensitivity to y
        err = u * (8.0 * (1.0 + np.abs(z)) * np.minimum(amp, 1e300) + 2.0 * np.abs(w) + 2.0)
        return w, err

    def x_of_remove_loss(self, t: np.ndarray) -> np.ndarray:
        """x with ω(x) = t (REMOVE), -inf below the support."""
        s, s2 = self.sensitivity, self.sigma**2
        t = np.asarray(t, dtype=np.float64)
        if self.q >= 1.0:
            return s2 * t / s + 0.5 * s
        with np.errstate(divide="ignore", invalid="ignore"):
            inner = np.expm1(t) + self.q
            z = np.log(inner) - math.log(self.q)
        x = s2 * z / s + 0.5 * s
        return np.where(inner > 0.0, x, -np.inf)

    def loss_range(self, tail_z: float = TAIL_Z) -> tuple[float, float]:
        """[lowest, highest] loss kept: the support cut where each P-tail is <= Φ̄(tail_z)."""
        sd, s = self.sigma, self.sensitivity
        hi_x = s + tail_z * sd  # P's heaviest upper tail (REMOVE)
        lo_x = -tail_z * sd
        top = float(self.remove_loss(np.asarray(hi_x))[0])
        bottom = float(self.remove_loss(np.asarray(lo_x))[0])
        if self.direction is Direction.REMOVE:
            low = math.log1p(-self.q) if self.q < 1.0 else bottom
            return low, top
        # ADD: P = N(0, σ²): its loss -ω(x) is low where x is high
        high = -math.log1p(-self.q) if self.q < 1.0 else -float(self.remove_loss(np.asarray(-tail_z * sd))[0])
        return -float(self.remove_loss(np.asarray(tail_z * sd))[0]), high

    def _x_edges(self, losses: np.ndarray) -> np.ndarray:
        return self.x_of_remove_loss(losses if self.increasing else -losses)

    def _eta(self, losses: np.ndarray, xs: np.ndarray) -> float:
        fin = np.isfinite(xs)
        if not fin.any():
            return 0.0
        w, err = self.remove_loss(xs[fin])
        target = losses[fin] if self.increasing else -losses[fin]
        return float(np.max(np.abs(w - target) + err + 2.0 * UNIT_ROUNDOFF * np.abs(target)))

    def cells(self, delta: float, offset: float, start: int, count: int) -> Cells:
        """Cells [offset + (start + k)Δ, offset + (start + k + 1)Δ), k < count, with tail masses."""
        losses = offset + delta * (start + np.arange(count + 1, dtype=np.float64))
        xs = self._x_edges(losses)
        if self.increasing:  # [below, cells, above] <-> (-inf, x_0], (x_k, x_{k+1}], (x_K, inf)
            lo = np.concatenate([[-np.inf], xs])
            hi = np.concatenate([xs, [np.inf]])
        else:  # decreasing: (x_0, inf), (x_{k+1}, x_k], (-inf, x_K]
            lo = np.concatenate([xs, [-np.inf]])
            hi = np.concatenate([[np.inf], xs])
        means = sorted({m for _, m in self.mixture} | {0.0})
        comps = {m: interval_mass(lo, hi, ((1.0, m),), self.sigma) for m in means}
        weight = lambda parts: tuple(sum(w for w, mm in parts if mm == m) for m in means)  # noqa: E731
        a, b = weight(self.p_components), weight(self.q_components)
        p = sum(w * comps[m][0] for w, m in zip(a, means))
        q = sum(w * comps[m][0] for w, m in zip(b, means))
        ep = sum(w * comps[m][1] for w, m in zip(a, means)) + 2.0 * UNIT_ROUNDOFF * p
        eq = sum(w * comps[m][1] for w, m in zip(b, means)) + 2.0 * UNIT_ROUNDOFF * q
        inner = tuple((comps[m][0][1:-1], comps[m][1][1:-1]) for m in means)
        return Cells(delta, offset, start, p[1:-1], q[1:-1], ep[1:-1], eq[1:-1],
                     below_p=float(p[0]), below_err=float(ep[0]), above_p=float(p[-1]),
                     above_err=float(ep[-1]), eta=self._eta(losses, xs),
                     components=inner, p_weights=a, q_weights=b)

    # -- the reservoir ------------------------------------------------------------------------------
    def _region(self, b: float) -> tuple[float, float, float, float]:
        """(P(B), err, Q(B), err) for B = {ω < b} (REMOVE) or {ω >= b} (ADD): CDFs at the x-edge.

        REMOVE: ω < b <-> x < x(b); ADD: -ω >= b <-> x <= x(-b). Scalar arithmetic (cheap).
        """
        x = float(self._x_edges(np.asarray([b]))[0])
        out = []
        for comps in (self.p_components, self.q_components):
            total = err = 0.0
            for weight, mean in comps:
                z = (x - mean) / self.sigma
                f = float(special.ndtr(z))
                total += weight * f
                err += weight * f * (NDTR_ULP + 4.0 * (1.0 + z * z) + 2.0) * UNIT_ROUNDOFF
            out += [total, err + 2.0 * UNIT_ROUNDOFF * total]
        return out[0], out[1], out[2], out[3]

    def _gap(self, b: float, delta: float) -> tuple[float, float]:
        """(certified lower, upper) bounds on L_B(b) - (b ∓ Δ) (REMOVE: b - Δ, ADD: b + Δ)."""
        p, ep, q, eq = self._region(b)
        if not (p > ep and q > eq):
            return -math.inf, math.inf
        target = b - delta if self.increasing else b + delta
        slack = 4.0 * UNIT_ROUNDOFF * (1.0 + abs(target) + abs(b))
        return (math.log((p - ep) / (q + eq)) - target - slack, math.log((p + ep) / (q - eq)) - target + slack)

    def reservoir_edge(self, delta: float) -> float | None:
        """b with L_B ∈ [b ∓ Δ, b ∓ Δ + RESERVOIR_EXCESS] (certified), or None (q = 1, or not found).

        REMOVE: the gap L_B(b) - (b - Δ) is Δ > 0 at the bottom of the support and negative far above
        it; ADD: L_B(b) - (b + Δ) is -Δ < 0 at the top of the support and positive far below it.
        Brent's method finds a root of the computed gap; b is then moved down (which raises the gap)
        until its certified lower bound is >= 0.
        """
        if self.q >= 1.0:
            return None
        low, high = self.loss_range()
        mid = lambda b: 0.5 * sum(self._gap(b, delta))  # noqa: E731
        try:
            if self.increasing:
                a, b = low + 1e-9 * delta, low + delta
                while mid(b) >= 0.0:
                    b = low + 2.0 * (b - low)
                    if b > high:
                        return None
            else:
                a, b = high - delta, high - 1e-9 * delta
                while mid(a) <= 0.0:
                    a = high - 2.0 * (high - a)
                    if a < low:
                        return None
            root = optimize.brentq(mid, a, b, xtol=1e-18, rtol=1e-15, maxiter=200)
        except (ValueError, RuntimeError):
            return None
        step = 4.0 * UNIT_ROUNDOFF * max(abs(root), delta)
        for _ in range(RESERVOIR_STEPS):
            lo_gap, hi_gap = self._gap(root, delta)
            if lo_gap >= 0.0:
                return root if hi_gap <= RESERVOIR_EXCESS else None
            root -= step
            step *= 2.0
        return None

    def reservoir(self, edge: float, delta: float) -> Reservoir:
        """The atom B at grid index -1 (REMOVE) or +1 (ADD) of the grid offset = edge."""
        p, ep, _, _ = self._region(edge)
        excess = max(self._gap(edge, delta)[1], 0.0)
        return Reservoir(-1 if self.increasing else 1, p, ep, excess)
