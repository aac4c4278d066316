"""Resolution of a δ(ε) computed by dp_accounting's PLD composition (issue 12).

dp_accounting composes a PMF x (one step or one epoch, length m, ‖x‖₁ <= 1) with itself n times
by one FFT power: y = F⁻¹[(F x)^n] on a grid of N = next_fast_len(max(len(y), m)) points, cuts
the tails of y (mass <= ``tail_mass`` = 1e-15, moved to infinity), and reads
δ(ε) = m_∞ + Σ_{ℓ_j > ε} (1 - e^{ε-ℓ_j}) y_j. Far below 1e-12 that sum is float noise, so every
certified value carries this written error budget (u = 2^-53, the unit round-off):

1. Forward FFT, per coefficient: |X̃_k - X_k| <= η := C_FFT · u · log2 N · ‖x‖₁ (every one of the
   log2 N butterfly stages adds at most a few u times an intermediate modulus <= ‖x‖₁; C_FFT = 8
   covers Higham's η = μ + γ₄(√2 + μ) ≈ 6.7u of a radix-2 stage with accurate twiddles).
2. Power: |X̃_k^n - X_k^n| <= n·η·w_k + C_POW·n·u·(|X_k| + η)^n with w_k = (|X_k| + η)^{n-1}
   (mean value theorem, plus numpy's complex power exp(n log z), relative error <= (π + 4)·n·u for
   |z| <= 1; C_POW = 8). Call this bound v_k; w_k is computed from the exact-enough |F x|.
3. Inverse FFT with 1/N: the output error e has ‖e‖₂ <= ‖v‖₂/√N + C_FFT·u·log2 N·‖y‖₂ and
   ‖y‖₂ <= (‖ỹ‖₂ + ‖v‖₂/√N)/(1 - C_FFT·u·log2 N).
4. δ is a sum with weights in [0, 1], so its error is <= ‖e‖₁ <= √N‖e‖₂: the ABSOLUTE allowance.
5. Rounding of the single-step masses (relative, a few u each, compounded n times), of the
   summation (<= N·u relative to the summed terms) and of the final weights: the RELATIVE allowance
   (C_POW·n + N + 16)·u.

Truncation is not an error of the value (pessimistic: moved to infinity, counted in δ; optimistic:
subtracted, :func:`epscert.analytic.poisson.pmf_delta`), but below the truncated mass the value says
nothing, so the resolution is tail_mass + absolute allowance. A sparse composition (small supports,
direct convolution of non-negative terms) has no cancellation: only the relative allowance, and the
resolution is the truncated mass.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from scipy import fft as sp_fft

#: Unit round-off of float64.
UNIT_ROUNDOFF = 2.0**-53
#: Per-stage FFT error constant (see the module docstring, step 1).
C_FFT = 8.0
#: Complex power error constant (step 2).
C_POW = 8.0
#: dp_accounting's default tail_mass_truncation of self_compose (one truncation per composition).
TAIL_MASS_TRUNCATION = 1e-15
#: Smallest positive value an upper bound may report: below it, float underflow (never 0).
UNDERFLOW_FLOOR = np.finfo(np.float64).tiny


@dataclasses.dataclass(frozen=True)
class Resolution:
    """Outward allowances of one computed δ curve: value ∈ [v(1-rel) - abs, v(1+rel) + abs]."""

    absolute: float
    relative: float
    floor: float  # below this a value says nothing: uppers report it, lowers report 0

    def upper(self, values) -> np.ndarray:
        """Outward upper values, never below the floor (the truth may be anywhere in [0, floor])."""
        v = np.asarray(values, dtype=np.float64)
        return np.minimum(1.0, np.maximum(v * (1.0 + self.relative) + self.absolute, self.floor))

    def lower(self, values) -> np.ndarray:
        """Outward lower values; 0 wherever the value is below the floor or the margin."""
        v = np.asarray(values, dtype=np.float64)
        out = v * (1.0 - self.relative) - self.absolute
        return np.where((v < self.floor) | ~(out > 0.0), 0.0, np.minimum(out, 1.0))


def fft_power_error(single: np.ndarray, composed: np.ndarray, times: int) -> float:
    """Absolute bound on Σ_j |ỹ_j - y_j| for y = x^{*n} computed as one FFT power (steps 1–4)."""
    x = np.asarray(single, dtype=np.float64)
    y = np.asarray(composed, dtype=np.float64)
    n_fft = sp_fft.next_fast_len(max(y.size, x.size))
    log_n = max(1.0, math.log2(n_fft))
    eta = C_FFT * UNIT_ROUNDOFF * log_n * float(np.abs(x).sum())
    mod = np.abs(sp_fft.rfft(x, n_fft)) + eta
    mod = np.concatenate([mod, mod[1:n_fft - mod.size + 1]])  # the conjugate half (same moduli)
    with np.errstate(under="ignore"):
        log_w = (times - 1) * np.log(np.maximum(mod, 1e-300))
        w = np.exp(log_w)
        v = times * w * (eta + C_POW * UNIT_ROUNDOFF * mod)
    v_norm = float(np.sqrt(np.sum(v * v)))
    inv = C_FFT * UNIT_ROUNDOFF * log_n
    y_norm = (float(np.linalg.norm(y)) + v_norm / math.sqrt(n_fft)) / (1.0 - inv)
    e_norm = v_norm / math.sqrt(n_fft) + inv * y_norm
    return math.sqrt(n_fft) * e_norm


def composition_resolution(single_pmf, composed_pmf, times: int,
                           tail_mass: float = TAIL_MASS_TRUNCATION) -> Resolution:
    """Resolution of δ read from ``composed_pmf`` = ``single_pmf`` composed ``times`` times.

    Dense result: absolute = :func:`fft_power_error`, floor = tail_mass + absolute.
    Sparse result (direct convolution, no cancellation) or times = 1: absolute 0, floor = tail_mass
    (0 for times = 1: nothing was truncated).
    """
    composed_probs = composed_pmf.to_dense_pmf()._probs  # noqa: SLF001 (dp_accounting's PMF)
    size = int(composed_probs.size)
    relative = (C_POW * times + size + 16) * UNIT_ROUNDOFF
    if times <= 1:
        return Resolution(0.0, relative, 0.0)
    if type(composed_pmf).__name__ != "DensePLDPmf":
        return Resolution(0.0, relative, tail_mass)
    single_probs = single_pmf.to_dense_pmf()._probs  # noqa: SLF001
    absolute = fft_power_error(single_probs, composed_probs, times)
    return Resolution(absolute, relative, tail_mass + absolute)
