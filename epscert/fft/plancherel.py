"""Running δ(ε) of a schedule by Plancherel: O(n) per checkpoint, no inverse FFT per step.

Koskela et al., Section 5.5, on the tilted composition of ``tilt.py``. With w_ε(ℓ) =
f_ε(ℓ) e^{-λ(ℓ-ε)} on the window (placed circularly as the composition is), A_t = Π_{j<=t} x̂_j
the tilted spectrum after t steps and S_t = Π_{j<=t} M̃_j, Parseval's identity for the DFT gives

    Σ_ℓ f_ε(ℓ) y_t(ℓ) = S_t e^{-λε} (1/n) Σ_{ω=0}^{n-1} conj(ŵ(ω)) A_t(ω)   (over the window, wrapped),

so ŵ is computed once per ε (O(n log n)) and each checkpoint costs one O(n) update of the
running product and one O(n) inner product per ε. The ∞ mass, the Chernoff tails and the
wrap-around terms are running sums of the placed PMFs' log-MGFs, so the bracket at step t is the
one :func:`~epscert.fft.compose.fft_bounds` gives for the first t steps, up to floating point:

    fp_t = S_t e^{-λε} (1/n) Σ_ω [ |ŵ| E_t + τ_w (|Ã_t| + E_t) + (log2 n + 4) u |ŵ| |Ã_t| ],

with E_t the round-off bound of the product (``tilt.Product``) and τ_w the FFT round-off of ŵ
(w <= 1, so τ_w = FFT_ROUNDOFF_UNITS·u·log2(n)·Σw); the relative allowance (1 + r_x)^{Σc} of the
tilting multiplies the inner product. The tilt of each ε is the one the whole schedule's composition
uses (its Chernoff saddle point): a valid choice at every checkpoint, tight at the last.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Iterable

import numpy as np
from scipy import fft as sp_fft

from epscert.fft import tilt
from epscert.fft.compose import check_epsilons, parts_of, placed_factors, tilts_for, window_of
from epscert.fft.grid import Grid, Rounding
from epscert.fft.mechanisms import Schedule
from epscert.fft.pairs import UNIT_ROUNDOFF
from epscert.names import Direction
from epscert.checks import check_int


@dataclass(frozen=True, eq=False)
class RunningBounds:
    """lower[t, e] <= δ_{steps[t]}(ε_e) <= upper[t, e] after each checkpoint ``steps[t]``."""

    direction: Direction
    epsilons: np.ndarray
    steps: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    wall_seconds: float = 0.0


def check_checkpoints(checkpoints: Iterable[int] | None, total: int) -> np.ndarray:
    """Sorted unique steps in [1, total]; None means every step."""
    if checkpoints is None:
        return np.arange(1, total + 1)
    steps = sorted({check_int("checkpoints", c, 1) for c in checkpoints})
    if not steps:
        raise ValueError("checkpoints must hold at least one step, got checkpoints=()")
    if steps[-1] > total:
        raise ValueError(f"checkpoints must be <= the number of steps {total}, got checkpoints={steps[-1]}")
    return np.asarray(steps)


def _runs(schedule: Schedule, steps: np.ndarray):
    """Yield (mechanism, count, checkpoint_reached) walking the schedule in order."""
    done, k = 0, 0
    for mech, count in schedule.entries:
        left = count
        while left:
            target = int(steps[k]) if k < steps.size else done + left
            take = min(left, target - done)
            done += take
            left -= take
            hit = k < steps.size and done == int(steps[k])
            yield mech, take, hit
            if hit:
                k += 1


class _PartialMgf:
    """Σ_j c_j(t) log M_j(s) of the placed PMFs composed so far, at the s values the bounds use."""

    def __init__(self, factors: list[tilt.Factor], lam: float) -> None:
        self.points = np.concatenate([tilt.TAIL_S, lam + tilt.TAIL_S, lam - tilt.TAIL_S])
        self.per = []
        for f in factors:
            v, e = tilt.log_mgf(f.masses, self.points)
            inf = f.masses.inf_mass
            self.per.append((v + e, math.log1p(-inf) if inf < 1.0 else -math.inf))
        self.lam = lam

    def sums(self, counts: list[int]) -> tuple[np.ndarray, float]:
        total = np.zeros(self.points.size)
        log_finite = 0.0
        for (v, lf), c in zip(self.per, counts):
            if c:
                total += c * v
                log_finite += c * lf
        return total, log_finite


def _weights(grid: Grid, eps: float, lam: float, offset: float, m_lo: int) -> np.ndarray:
    """w_ε on the window, placed circularly: w[(m_lo + j) mod n] = f_ε(ℓ_j) e^{-λ(ℓ_j - ε)}."""
    n = grid.size
    ell = offset + grid.dx * (m_lo + np.arange(n, dtype=np.float64))
    with np.errstate(over="ignore", under="ignore"):
        w = np.where(ell > eps, -np.expm1(np.minimum(eps - ell, 0.0)) * np.exp(-lam * np.maximum(ell - eps, 0.0)), 0.0)
    return np.roll(w, m_lo % n)


def _side(schedule: Schedule, grid: Grid, direction: Direction, rounding: Rounding,
          epsilons: np.ndarray, lams: np.ndarray, steps: np.ndarray) -> np.ndarray:
    """Per checkpoint and ε: the upper (UP) or lower (DOWN) value, allowances included."""
    u = UNIT_ROUNDOFF
    n, log2n = grid.size, math.log2(grid.size)
    upper = rounding is Rounding.UP
    factors = placed_factors(schedule, grid, direction, rounding)
    index = {mech: j for j, (mech, _) in enumerate(schedule.distinct)}
    delta, offset_full, _ = tilt.lattice(factors)
    out = np.empty((steps.size, epsilons.size))
    bottom, top = window_of(grid)
    for lam in sorted(set(lams.tolist())):
        cols = np.flatnonzero(lams == lam)
        prepared = [tilt.prepare(f.masses, lam, n) for f in factors]
        partial = _PartialMgf(factors, lam)
        k_tail = tilt.TAIL_S.size
        counts = [0] * len(factors)
        product = tilt.Product(n)
        t = 0
        for mech, count, hit in _runs(schedule, steps):
            j = index[mech]
            counts[j] += count
            product.add(prepared[j], count)
            if not hit:
                continue
            offset = float(sum(c * f.masses.offset for c, f in zip(counts, factors)))
            m_lo = math.floor((bottom - offset) / delta) - 1
            win_bottom, win_top = offset + delta * m_lo, offset + delta * (m_lo + n - 1)
            spectrum, error = product.spectrum()
            mag = np.abs(spectrum)
            sums, log_finite = partial.sums(counts)
            inf_part = -math.expm1(log_finite) if log_finite > -math.inf else 1.0
            tail_up = float(np.min(sums[:k_tail] - tilt.TAIL_S * (win_top + delta)))
            up_tilted = sums[k_tail:2 * k_tail] - tilt.TAIL_S * (win_top + delta)
            down_tilted = sums[2 * k_tail:] + tilt.TAIL_S * win_bottom
            log_alias = float(np.logaddexp(np.nanmin(up_tilted), np.nanmin(down_tilted)))
            for e in cols.tolist():
                eps = float(epsilons[e])
                w = _weights(grid, eps, lam, offset, m_lo)
                w_hat = sp_fft.rfft(w)
                tau_w = tilt.FFT_ROUNDOFF_UNITS * u * log2n * float(np.sum(w))
                inner = tilt.full_sum(np.conj(w_hat) * spectrum, n) / n
                abs_w = np.abs(w_hat)
                fp = (tilt.full_sum(abs_w * error, n) + tau_w * tilt.full_sum(mag + error, n)
                      + (log2n + 4.0) * u * tilt.full_sum(abs_w * mag, n)) / n
                scale = product.log_scale - lam * eps
                if upper:
                    val = (inner + fp) * (1.0 + product.rel)
                    out[t, e] = min(1.0, inf_part + math.exp(min(scale, 700.0)) * max(val, 0.0)
                                    + math.exp(min(tail_up, 0.0)))
                else:
                    val = (inner - fp) / (1.0 + product.rel)
                    low = math.exp(min(scale, 700.0)) * val - math.exp(min(log_alias - lam * eps, 0.0))
                    out[t, e] = max(0.0, min(1.0, low)) if val > 0.0 else 0.0
            t += 1
    return out


def running_bounds(schedule: Schedule, epsilons, grid: Grid, direction: Direction | str = Direction.BOTH,
                   checkpoints: Iterable[int] | None = None) -> RunningBounds:
    """Certified bracket on δ(ε) after each checkpoint step of ``schedule`` (in its order).

    Cost: O(d·n log n) per distinct tilt, then O(n·(1 + |ε|)) per checkpoint and O(n) per run of
    equal mechanisms between checkpoints. ``checkpoints=None`` evaluates after every step.
    """
    start = time.perf_counter()
    direction = Direction(direction)
    eps = check_epsilons(epsilons, grid)
    steps = check_checkpoints(checkpoints, schedule.steps)
    lowers, uppers = [], []
    for part in parts_of(schedule, direction):
        mgf = tilt.Mgf(placed_factors(schedule, grid, part, Rounding.UP))
        lams = tilts_for(mgf, eps, grid)
        uppers.append(_side(schedule, grid, part, Rounding.UP, eps, lams, steps))
        lowers.append(_side(schedule, grid, part, Rounding.DOWN, eps, lams, steps))
    return RunningBounds(direction, eps, steps, np.max(lowers, axis=0), np.max(uppers, axis=0),
                         time.perf_counter() - start)
