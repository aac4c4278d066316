"""Running δ(ε) of a schedule by Plancherel: O(n) per checkpoint, no inverse FFT per step.

Koskela et al., Section 5.5. With g = D f_ε (the half-swapped hockey-stick weights) and
A_t = Π_{j<=t} ŷ_j the spectrum after t steps, Parseval's identity for the DFT gives

    Σ_ℓ f_ε(x_ℓ) b_ℓ^{(t)} = (1/n) Σ_{ω=0}^{n-1} conj(ĝ(ω)) A_t(ω),

so ĝ is computed once per ε (O(n log n)) and each checkpoint costs one O(n) update of the
running product and one O(n) inner product per ε. The tails and the ∞ mass are running sums
as well, so the bracket at step t is the one :func:`~epscert.fft.compose.fft_bounds` gives
for the first t steps, up to floating point:

    fp_t = (1/n) Σ_ω [ |ĝ| E_t + τ_g (|Ã_t| + E_t) + (log2 n + 4) u |ĝ| |Ã_t| ] + Σ c_j cdf_error_j,

with E_t the round-off bound of the product (``spectrum.py``) and τ_g the FFT round-off of ĝ.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Iterable

import numpy as np

from epscert.fft.compose import check_epsilons, hockey_weights, parts_of
from epscert.fft.grid import UNIT_ROUNDOFF, Grid, Rounding
from epscert.fft.mechanisms import Schedule
from epscert.fft.spectrum import FFT_ROUNDOFF_UNITS, SpectrumProduct, full_sum, prepare
from epscert.params import Direction, check_int


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


def _side(schedule: Schedule, grid: Grid, direction: Direction, rounding: Rounding,
          epsilons: np.ndarray, steps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per checkpoint and ε: (δ̃_t + tail_t for UP or δ̃_t - tail_t for DOWN, fp_t)."""
    n, log2n = grid.size, math.log2(grid.size)
    prepared = {m: prepare(m.place(grid, rounding, direction), grid) for m, _ in schedule.distinct}
    g_hat, tau_g = [], []
    for eps in epsilons.tolist():
        f = hockey_weights(grid, eps)
        g_hat.append(np.fft.rfft(np.fft.ifftshift(f)))
        tau_g.append(FFT_ROUNDOFF_UNITS * UNIT_ROUNDOFF * log2n * float(np.sum(f)))
    abs_g = [np.abs(g) for g in g_hat]
    product = SpectrumProduct(grid)
    values = np.empty((steps.size, epsilons.size))
    allowances = np.empty_like(values)
    t = 0
    for mech, count, hit in _runs(schedule, steps):
        product.add(prepared[mech], count)
        if not hit:
            continue
        spectrum = product.spectrum()
        error = product.spectrum_error(spectrum)
        abs_a = np.abs(spectrum)
        tail = product.upper_tail() if rounding is Rounding.UP else -product.lower_tail()
        for e in range(epsilons.size):
            inner = full_sum(np.conj(g_hat[e]) * spectrum) / n
            values[t, e] = product.inf_mass + inner + tail
            allowances[t, e] = (full_sum(abs_g[e] * error) + tau_g[e] * full_sum(abs_a + error)
                                + (log2n + 4.0) * UNIT_ROUNDOFF * full_sum(abs_g[e] * abs_a)) / n \
                + product.cdf_error + (product.factors + 2) * UNIT_ROUNDOFF
        t += 1
    return values, allowances


def running_bounds(schedule: Schedule, epsilons, grid: Grid, direction: Direction | str = Direction.BOTH,
                   checkpoints: Iterable[int] | None = None) -> RunningBounds:
    """Certified bracket on δ(ε) after each checkpoint step of ``schedule`` (in its order).

    Cost: O(d·n log n) once, then O(n·(1 + |ε|)) per checkpoint and O(n) per run of equal
    mechanisms between checkpoints. ``checkpoints=None`` evaluates after every step.
    """
    start = time.perf_counter()
    direction = Direction(direction)
    eps = check_epsilons(epsilons, grid)
    steps = check_checkpoints(checkpoints, schedule.steps)
    lowers, uppers = [], []
    for part in parts_of(schedule, direction):
        up, fp_up = _side(schedule, grid, part, Rounding.UP, eps, steps)
        down, fp_down = _side(schedule, grid, part, Rounding.DOWN, eps, steps)
        uppers.append(np.minimum(up + fp_up, 1.0))
        lowers.append(np.maximum(down - fp_down, 0.0))
    return RunningBounds(direction, eps, steps, np.max(lowers, axis=0), np.max(uppers, axis=0),
                         time.perf_counter() - start)
